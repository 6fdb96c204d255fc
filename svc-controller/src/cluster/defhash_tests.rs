//! The definition hash: stable for the same definition wherever it was read from, blind
//! to secrets and to what does not change a run, and changed by what does.

use super::*;

/// The Jobs and JobHttps of `job` (in `job.d`) and `http` (in `job_http.d`), loaded from
/// a fresh temporary directory (so each load reads them from another file).
fn load(job: &str, http: &str) -> crate::config::Config {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let etc = dir.path().join("etc/svc");
    for sub in ["job.d", "job_http.d"] {
        std::fs::create_dir_all(etc.join(sub)).expect("mkdir");
    }
    let main = etc.join("svc.conf");
    std::fs::write(
        &main,
        format!("[svc]\ndir_base = {}\n", dir.path().display()),
    )
    .expect("main");
    std::fs::write(etc.join("job.d/j.conf"), job).expect("job");
    std::fs::write(etc.join("job_http.d/h.conf"), http).expect("http job");
    crate::config::load(&main).expect("loads")
}

fn job(text: &str) -> String {
    job_hash(&load(text, "").jobs[0])
}

fn http_job(text: &str) -> String {
    http_job_hash(&load("", text).http_jobs[0])
}

const JOB: &str = "[job \"build\"]\ndescription = Builds\npath = /build\n\
                   secret = s3cret-one\ninterval = 1h\ncommand = make\ncommand = make test\n\
                   env = MODE=fast\nenv = API_TOKEN=tok-one\n";

const HTTP: &str = "[job.http \"ping\"]\nhttp_url = https://example.org/hook?token=tok-one\n\
                    secret = s3cret-one\nhttp_header = Authorization: Bearer one\n\
                    http_header = Accept: text/plain\nschedule = daily@03:00\n";

#[test]
fn the_same_definition_hashes_the_same_from_any_file_and_release() {
    let hash = job(JOB);
    assert_eq!(hash.len(), 64);
    assert_eq!(hash, job(JOB), "read from another file");
    // Pinned: a change of the canonical text must be deliberate (it makes nodes of the
    // old and the new release report each other's definitions as different), and then
    // comes with a new `FORMAT` line.
    assert_eq!(hash, PINNED_JOB);
    assert_eq!(http_job(HTTP), http_job(HTTP));
    assert_eq!(http_job(HTTP), PINNED_HTTP);
}

const PINNED_JOB: &str = "30715c55f7336fdc4fa338ea26e3e8eb596f92140772cca000aff784859b81ac";
const PINNED_HTTP: &str = "f1a745d7c1e2383637c545a2c99cfe87d7dc3463e4952649a1f78f16f869ed97";

#[test]
fn secrets_and_what_does_not_change_a_run_are_left_out() {
    let hash = job(JOB);
    for (from, to) in [
        ("secret = s3cret-one", "secret = s3cret-two"),
        ("API_TOKEN=tok-one", "API_TOKEN=tok-two"),
        ("description = Builds", "description = Makes"),
        ("[job \"build\"]", "[job \"Build\"]\nlog_retention = 3"),
    ] {
        assert_eq!(job(&JOB.replace(from, to)), hash, "{from} -> {to}");
    }
    let hash = http_job(HTTP);
    for (from, to) in [
        ("secret = s3cret-one", "secret = s3cret-two"),
        ("token=tok-one", "token=tok-two"),
        ("Bearer one", "Bearer two"),
    ] {
        assert_eq!(http_job(&HTTP.replace(from, to)), hash, "{from} -> {to}");
    }
    // Neither secret is in the text hashed.
    let texts = [
        job_text(&load(JOB, "").jobs[0]).0,
        http_job_text(&load("", HTTP).http_jobs[0]).0,
    ];
    for text in texts {
        for secret in ["s3cret-one", "tok-one", "Bearer one"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}

#[test]
fn what_changes_a_run_changes_the_hash() {
    let hash = job(JOB);
    for (from, to) in [
        ("command = make test", "command = make check"),
        (
            "command = make\ncommand = make test",
            "command = make test\ncommand = make",
        ),
        ("interval = 1h", "interval = 2h"),
        ("interval = 1h", "schedule = hourly@0"),
        ("MODE=fast", "MODE=slow"),
        ("path = /build", "path = /make"),
        ("command = make\n", "command = make\non_busy = skip\n"),
        ("command = make\n", "command = make\ntimeout = 5m\n"),
        ("command = make\n", "command = make\nsandbox = false\n"),
        (
            "command = make\n",
            "command = make\nfilter_ref = refs/heads/main\n",
        ),
    ] {
        assert_ne!(job(&JOB.replace(from, to)), hash, "{from} -> {to}");
    }
    let hash = http_job(HTTP);
    for (from, to) in [
        ("https://example.org/hook", "https://example.net/hook"),
        ("daily@03:00", "daily@04:00"),
        ("Accept: text/plain", "Accept: text/html"),
        ("secret = s3cret-one\n", ""),
    ] {
        assert_ne!(http_job(&HTTP.replace(from, to)), hash, "{from} -> {to}");
    }
}

#[test]
fn a_value_cannot_pass_for_another_field() {
    let text = |values: &[&str]| {
        let mut c = Canonical::new("job");
        c.list("command", values);
        c.finish()
    };
    assert_ne!(text(&["a\ncommand \"b\""]), text(&["a", "b"]));
    assert_ne!(text(&["a b"]), text(&["a", "b"]));
    let option = |value: Option<&str>| {
        let mut c = Canonical::new("job");
        c.option("user", value);
        c.finish()
    };
    assert_ne!(option(None), option(Some("-")));
}
