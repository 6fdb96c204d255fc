//! `svc-controller migrate --from DIR`, end to end: a sample upstream installation
//! (its `[karajo]` main file, lower-cased log directories, logs of every status suffix,
//! its two-line state file, a working directory) is taken into a fresh base directory,
//! DIR is left exactly as it was, a second run changes nothing, and the service then
//! starts on the result, serves the migrated logs and runs the jobs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use svc_tests::{TestService, WAIT, binaries, hmac_sha256_hex};

const HOOK_SECRET: &str = "hook-secret-1";

fn write(path: &Path, contents: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    }
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// An upstream installation below `old`, listening where the test service will.
fn upstream_tree(old: &Path, listen_address: &str, secret: &str) {
    write(
        &old.join("etc/karajo/karajo.conf"),
        &format!(
            "## Upstream's main file, as it writes them.\n[karajo]\nname = Old box\n\
             listen_address = {listen_address}\ndir_base = {}\nsecret = {secret}\n\
             max_job_running = 2\n",
            old.display()
        ),
    );
    write(
        &old.join("etc/karajo/job.d/hello.conf"),
        "[job \"Hello World\"]\ndescription = Says hello, hourly.\ninterval = 1h\n\
         log_retention = 10\ncommand = echo \"hello from the migrated job\"\n",
    );
    write(
        &old.join("etc/karajo/job.d/deploy.conf"),
        &format!(
            "[job \"Deploy\"]\npath = /deploy\nauth_kind = github\nsecret = {HOOK_SECRET}\n\
             command = echo deployed\n"
        ),
    );
    write(
        &old.join("etc/karajo/job_http.d/ping.conf"),
        "[job.http \"Ping\"]\nhttp_url = /svc/api/environment\nheader_sign = X-Karajo-Sign\n",
    );
    let logs = old.join("var/log/karajo/job/hello_world");
    for (name, last) in [
        ("hello_world.1.success", "job finished"),
        ("hello_world.2.failed", "exit status 1"),
        ("hello_world.3.canceled", "canceled"),
        ("hello_world.4", "no status in its name"),
        ("hello_world.5.started", "was running"),
    ] {
        write(
            &logs.join(name),
            &format!("2023-05-01 10:00:00 UTC job: hello_world: {last}\n"),
        );
    }
    write(
        &old.join("var/log/karajo/job/gone_job/gone_job.1.success"),
        "a job no longer configured\n",
    );
    write(
        &old.join("var/run/karajo/job/hello_world"),
        "2023-05-01T10:00:00Z\nfailed\n",
    );
    write(
        &old.join("var/lib/karajo/job/hello_world/data.txt"),
        "work\n",
    );
}

/// Every file below `dir` with its contents and mode, for telling it was not touched.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).expect("read a directory of the tree") {
            let path = entry.expect("an entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            let mode = meta.permissions().mode();
            if meta.is_dir() {
                out.insert(path.clone(), (Vec::new(), mode));
                pending.push(path);
            } else {
                out.insert(path.clone(), (std::fs::read(&path).expect("read"), mode));
            }
        }
    }
    out
}

fn migrate(config: &Path, from: &Path) -> (bool, String, String) {
    let output = Command::new(&binaries().controller)
        .arg("--config")
        .arg(config)
        .args(["migrate", "--from"])
        .arg(from)
        .output()
        .expect("run svc-controller migrate");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_installation_is_taken_over_and_runs() {
    let mut svc = TestService::builder().build();
    let old_dir = tempfile::tempdir().expect("a temporary directory");
    let old = old_dir.path();
    upstream_tree(old, svc.listen_address(), &svc.secret());
    // The harness wrote a configuration of its own: the migration writes this one.
    let config = svc.config_path().to_path_buf();
    std::fs::remove_dir_all(svc.dir_base().join("etc/svc")).expect("remove etc/svc");

    let before = snapshot(old);
    let (ok, out, err) = migrate(&config, old);
    assert!(ok, "migrate failed:\n{out}\n{err}");
    assert_eq!(snapshot(old), before, "the upstream tree is untouched");
    for expected in [
        "renamed: ",
        "hello_world.1.success -> ",
        "Hello_World/Hello_World.1.success",
        "Hello_World/Hello_World.2.fail",
        "Hello_World/Hello_World.3.fail",
        "Hello_World/Hello_World.4.fail",
        "Hello_World/Hello_World.5.started",
        "converted: ",
        "(section [karajo] as [svc], dir_base = ",
    ] {
        assert!(out.contains(expected), "{expected:?} in:\n{out}");
    }
    assert!(
        out.lines().any(|l| l.starts_with("not taken: ")
            && l.contains("gone_job")
            && l.contains("no job")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("not taken: ") && l.contains("var/lib/karajo/job/hello_world")),
        "{out}"
    );
    let text = std::fs::read_to_string(&config).expect("the migrated main file");
    assert!(text.contains("[svc]\n"), "{text}");
    assert!(!text.contains("[karajo]"), "{text}");
    assert!(
        text.contains(&format!("\ndir_base = {}\n", svc.dir_base().display())),
        "{text}"
    );

    // Again: everything is there already, nothing is written, DIR still untouched.
    let migrated = snapshot(svc.dir_base());
    let (ok, again, err) = migrate(&config, old);
    assert!(ok, "second migrate failed:\n{again}\n{err}");
    assert!(
        !again.contains("renamed: ") && again.contains("kept: "),
        "{again}"
    );
    assert_eq!(
        snapshot(svc.dir_base()),
        migrated,
        "a second run changes nothing"
    );
    assert_eq!(snapshot(old), before);

    let check = svc.check().await;
    assert!(check.status.success(), "{check:?}");

    svc.start().await;
    // The migrated logs, by the lower-cased ID an upstream client sends.
    let first = svc
        .get("/svc/api/job_exec/log?id=hello_world&counter=1")
        .await;
    first.assert_status(200);
    assert_eq!(first.data()["name"], "Hello_World.1.success");
    let statuses: Vec<String> = (1..=5)
        .map(|n| {
            svc.job_log("Hello_World", n)
                .map(|l| l.status)
                .unwrap_or_default()
        })
        .collect();
    // The run that was going on is recorded as interrupted at the first start.
    assert_eq!(statuses, ["success", "fail", "fail", "fail", "fail"]);
    let interrupted = svc.job_log("Hello_World", 5).expect("run 5").content();
    assert!(interrupted.contains("interrupted"), "{interrupted}");
    // Overdue since 2023: it runs at once, after the migrated counters.
    let run = svc.wait_run_finished("Hello_World", 6, WAIT).await;
    run.assert_status("success");
    assert!(run.content().contains("hello from the migrated job"));
    // The webhook job runs on its code host's delivery.
    let body = br#"{"ref":"refs/heads/main"}"#;
    let signature = format!("sha256={}", hmac_sha256_hex(HOOK_SECRET, body));
    svc.trigger_unsigned(
        "/deploy",
        body,
        &[
            ("X-Hub-Signature-256", signature.as_str()),
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", "migrated-1"),
        ],
    )
    .await
    .assert_status(200);
    svc.wait_run_finished("Deploy", 1, WAIT)
        .await
        .assert_status("success");
    // The JobHttp with a relative URL and no timer loaded as upstream has it.
    let ping = svc.get("/svc/api/job_http?id=ping").await;
    ping.assert_status(200);
    assert_eq!(
        ping.data()["http_url"],
        format!("http://{}/svc/api/environment", svc.listen_address())
    );
}

#[test]
fn a_destination_inside_the_source_or_no_installation_is_refused() {
    let old_dir = tempfile::tempdir().expect("a temporary directory");
    let old = old_dir.path();
    let (ok, _, err) = migrate(&old.join("new/etc/svc/svc.conf"), old);
    assert!(!ok);
    assert!(err.contains("no upstream installation"), "{err}");
    upstream_tree(old, "127.0.0.1:1", "s");
    let before = snapshot(old);
    let (ok, _, err) = migrate(&old.join("new/etc/svc/svc.conf"), old);
    assert!(!ok);
    assert!(err.contains("inside"), "{err}");
    assert_eq!(snapshot(old), before);
}
