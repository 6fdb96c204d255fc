//! What confines a run, with the real controller and runner: its own temporary
//! directory (`TMPDIR`), removed when the run ends and, after a crash, at the next start;
//! the Landlock sandbox (writes only below `dir_work`, `TMPDIR` and `write_paths`; the
//! service's state, secret, configuration, logs and other runs' request bodies
//! unreadable, the run's own body readable), its log line and `sandbox = false`;
//! `no_new_privs`; the `write_paths` checks of `--check`.
//!
//! The tests that need root (a job of `nobody`, the controller with the packaged unit's
//! capabilities only) print a notice and run a reduced check elsewhere; CI runs as root.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use svc_tests::{
    LogFile, TestService, TestServiceBuilder, WAIT, job_section, send_until_queued,
    unit_like_wrapper,
};

/// A builder whose controller runs as the packaged unit would (root with CAP_SETUID,
/// CAP_SETGID, CAP_KILL and CAP_CHOWN only) when the test runs as root, plus the
/// `user = nobody` line for the jobs; elsewhere a plain builder and no user line.
fn unit_like(test: &str) -> (TestServiceBuilder, Option<&'static str>, Option<u32>) {
    if svc_tests::can_run_unit_like(test) {
        let nobody = nix::unistd::User::from_name("nobody")
            .expect("look up nobody")
            .expect("user nobody exists");
        (
            TestService::builder().wrapper(&unit_like_wrapper()),
            Some("user = nobody"),
            Some(nobody.uid.as_raw()),
        )
    } else {
        (TestService::builder(), None, None)
    }
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|err| panic!("stat {}: {err}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// The value of the first line `key=value` of `texts`.
fn value<'a>(texts: &'a [String], key: &str) -> Option<&'a str> {
    let prefix = format!("{key}=");
    texts.iter().find_map(|t| t.strip_prefix(&prefix))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_gets_its_own_tmpdir_removed_when_it_ends() {
    let (builder, user, uid) = unit_like("each_run_gets_its_own_tmpdir_removed_when_it_ends");
    let mut lines = vec![
        "path = /tmp-job",
        "command = echo tmpdir=$TMPDIR",
        "command = echo owner=$(stat -c %u \"$TMPDIR\") mode=$(stat -c %a \"$TMPDIR\")",
        "command = f=$(mktemp) && echo made=$f",
        "command = echo body=$(cat \"$SVC_REQUEST_BODY\")",
        // What a job may leave behind: a tree it closed to everyone, a link out.
        "command = mkdir -p \"$TMPDIR/a/b\" && echo data > \"$TMPDIR/a/b/f\" && \
         ln -s / \"$TMPDIR/a/root\" && chmod 000 \"$TMPDIR/a/b\" && chmod 500 \"$TMPDIR/a\"",
    ];
    lines.extend(user);
    let svc = builder
        .job_file("tmp", job_section("tmp-job", &lines))
        .start()
        .await;
    let parent = svc.dir_base().join("var/lib/svc/tmp");
    let own_uid = nix::unistd::geteuid().as_raw();
    let mut seen: Vec<PathBuf> = Vec::new();
    for counter in 1..=2u64 {
        let body = format!("body-{counter}");
        svc.trigger("/tmp-job", body.as_bytes(), &[])
            .await
            .assert_status(200);
        let log = svc.wait_run_finished("tmp-job", counter, WAIT).await;
        let texts = log.texts();
        assert_eq!(log.status, "success", "{}", log.content());
        let tmpdir = PathBuf::from(value(&texts, "tmpdir").expect("TMPDIR shown"));
        assert_eq!(
            tmpdir,
            parent.join("tmp-job").join(counter.to_string()),
            "{texts:?}"
        );
        let expected = format!("{} mode=700", uid.unwrap_or(own_uid));
        assert_eq!(value(&texts, "owner"), Some(expected.as_str()), "{texts:?}");
        // The job's user reads its body through the directories the controller made
        // under the unit's umask.
        assert_eq!(value(&texts, "body"), Some(body.as_str()), "{texts:?}");
        let made = value(&texts, "made").expect("mktemp's file shown");
        assert!(Path::new(made).starts_with(&tmpdir), "{made} in {tmpdir:?}");
        // Cleared once the run ended, whatever the job left in it (kept, emptied and
        // renamed, for the next run).
        svc_tests::wait_until(WAIT, "the run's TMPDIR is cleared", async || {
            std::fs::symlink_metadata(&tmpdir).is_err()
        })
        .await;
        let spare = parent.join("tmp-job/spare");
        let meta = std::fs::symlink_metadata(&spare).expect("the emptied directory is kept");
        assert_eq!((meta.uid(), mode_of(&spare)), (own_uid, 0o700));
        assert_eq!(std::fs::read_dir(&spare).expect("list").count(), 0);
        seen.push(tmpdir);
    }
    assert_ne!(seen[0], seen[1]);
    // The parent and the job's directory stay (the job's sandbox grants writing below
    // the latter), the service's own, closed to listing.
    for dir in [parent.clone(), parent.join("tmp-job")] {
        let meta = std::fs::symlink_metadata(&dir).expect("it stays");
        assert!(meta.is_dir());
        assert_eq!(meta.uid(), own_uid);
        assert_eq!(mode_of(&dir), 0o711, "{}", dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmpdirs_left_by_a_crash_are_removed_at_start() {
    let (builder, user, uid) = unit_like("tmpdirs_left_by_a_crash_are_removed_at_start");
    let parent = builder.dir_base().join("var/lib/svc/tmp");
    // One as runs are laid out (in their job's directory), one as an earlier release
    // laid them out (beside the jobs' directories).
    let job_dir = parent.join("crashed");
    std::fs::create_dir_all(&job_dir).expect("mkdir");
    std::fs::set_permissions(&job_dir, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let left_in_job = job_dir.join("7");
    std::fs::create_dir(&left_in_job).expect("mkdir");
    std::fs::write(left_in_job.join("f"), "data").expect("write");
    let left = parent.join("crashed.3");
    std::fs::create_dir_all(left.join("x/y")).expect("mkdir");
    std::fs::write(left.join("x/y/f"), "data").expect("write");
    // A link to a directory outside, which must not be emptied through it.
    let outside = builder.dir_base().join("outside");
    std::fs::create_dir(&outside).expect("mkdir outside");
    std::fs::write(outside.join("keep"), "kept").expect("write keep");
    std::os::unix::fs::symlink(&outside, left.join("x/out")).expect("symlink");
    std::os::unix::fs::symlink(&outside, parent.join("link.4")).expect("symlink");
    if let Some(uid) = uid {
        for path in [&left, &left.join("x"), &left.join("x/y")] {
            nix::unistd::chown(path, Some(nix::unistd::Uid::from_raw(uid)), None).expect("chown");
        }
    }
    for (path, mode) in [
        (left.join("x/y"), 0o000),
        (left.join("x"), 0o500),
        (left.clone(), 0o700),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let mut lines = vec!["path = /p", "command = true"];
    lines.extend(user);
    let svc = builder
        .job_file("p", job_section("p", &lines))
        .start()
        .await;
    // Removed before the controller listens.
    assert!(
        std::fs::symlink_metadata(&left).is_err(),
        "{} is left",
        left.display()
    );
    assert!(std::fs::symlink_metadata(parent.join("link.4")).is_err());
    assert!(
        std::fs::symlink_metadata(&job_dir).is_err(),
        "the job's directory went too"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("keep")).expect("read"),
        "kept"
    );
    assert!(
        svc.stderr()
            .contains("removed the temporary directory of an interrupted run"),
        "{}",
        svc.stderr()
    );
}

/// Runs until the file `flag` exists (at most 30 s): a job that keeps its run, and so its
/// request body, alive while another job looks for it.
fn wait_for_flag(flag: &Path) -> String {
    format!(
        "command = i=0; while [ ! -e {} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done",
        flag.display()
    )
}

/// The paths of [`a_job_writes_only_its_own_paths_and_reads_none_of_the_services_files`]
/// below the service's `base`.
struct ProbePaths {
    base: PathBuf,
    /// A `write_paths` directory of the probe.
    extra: PathBuf,
    /// A directory anyone may write, but outside the probe's paths (it holds `readme`).
    outside: PathBuf,
    /// The file that lets the other job's run end.
    flag: PathBuf,
    state: PathBuf,
    config: PathBuf,
    logs: PathBuf,
    bodies: PathBuf,
    /// The request body of the other job's run.
    other_body: PathBuf,
}

impl ProbePaths {
    /// The paths below `base`, with `extra` and `outside` made (writable by anyone) and
    /// a readable file in `outside`.
    fn make(base: &Path) -> Self {
        let extra = base.join("extra");
        let outside = base.join("outside");
        for dir in [&extra, &outside] {
            std::fs::create_dir(dir).expect("mkdir");
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        }
        std::fs::write(outside.join("readme"), "readable-outside\n").expect("write");
        let bodies = base.join("var/lib/svc/run");
        Self {
            base: base.to_path_buf(),
            extra,
            outside,
            flag: base.join("other-may-end"),
            state: base.join("var/run/svc"),
            config: base.join("etc/svc"),
            logs: base.join("var/log/svc"),
            other_body: bodies.join("other/1.body"),
            bodies,
        }
    }
}

/// A path as a job's command line shows it.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// The probe: writes to its work directory, `TMPDIR`, its `write_paths` and elsewhere,
/// reads outside, the service's secret, state, configuration and logs, the other run's
/// body and its own, and shows `NoNewPrivs`; each refusal echoes a marker.
fn probe_job(paths: &ProbePaths) -> String {
    let d = shown;
    let ProbePaths {
        extra,
        outside,
        state,
        config,
        logs,
        other_body,
        ..
    } = paths;
    job_section(
        "probe",
        &[
            "path = /probe",
            "secret = probe-secret",
            &format!("write_paths = {}", d(extra)),
            "command = echo w > in-work && echo wrote-work",
            "command = echo t > \"$TMPDIR/f\" && echo wrote-tmp",
            &format!("command = echo e > {}/f && echo wrote-extra", d(extra)),
            &format!(
                "command = echo o > {}/f || echo refused-outside",
                d(outside)
            ),
            &format!("command = cat {}/readme", d(outside)),
            &format!("command = cat {}/secret || echo refused-secret", d(state)),
            &format!("command = cat {}/job/probe || echo refused-state", d(state)),
            &format!(
                "command = cat {}/svc.conf || echo refused-config",
                d(config)
            ),
            &format!(
                "command = ls {}/job.d || echo refused-config-listing",
                d(config)
            ),
            &format!("command = ls {} || echo refused-log-listing", d(logs)),
            &format!(
                "command = cat {}/job/other/other.1.started || echo refused-log",
                d(logs)
            ),
            &format!(
                "command = if [ -e {0} ]; then echo other-body-exists; else echo other-body-hidden; fi; \
                 cat {0} || echo refused-other-body",
                d(other_body)
            ),
            "command = echo own-body=$(cat \"$SVC_REQUEST_BODY\")",
            "command = grep NoNewPrivs /proc/self/status",
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_writes_only_its_own_paths_and_reads_none_of_the_services_files() {
    let test = "a_job_writes_only_its_own_paths_and_reads_none_of_the_services_files";
    if !svc_tests::has_landlock(test) {
        return;
    }
    // No user anywhere: when the tests run as root (as CI does) the job runs as root,
    // which file modes do not stop; only the sandbox does.
    let builder = TestService::builder()
        .svc("secret =")
        .svc("max_job_running = 2");
    let paths = ProbePaths::make(builder.dir_base());
    let other = job_section(
        "other",
        &[
            "path = /other",
            "secret = other-secret",
            &wait_for_flag(&paths.flag),
        ],
    );
    let svc = builder
        .job_file("probe", probe_job(&paths))
        .job_file("other", other)
        .start()
        .await;
    // The other job's run, and so its body file, lasts until the flag exists.
    svc.trigger_with_secret("/other", b"other-body-b4d", "other-secret")
        .await
        .assert_status(200);
    svc.wait_run_started("other", 1, WAIT).await;
    svc_tests::wait_until(WAIT, "the other job's body file exists", async || {
        paths.other_body.exists()
    })
    .await;
    svc.trigger_with_secret("/probe", b"probe-body-7e1", "probe-secret")
        .await
        .assert_status(200);
    let log = svc.wait_run_finished("probe", 1, WAIT).await;
    std::fs::write(&paths.flag, "").expect("write flag");
    svc.wait_run_finished("other", 1, WAIT)
        .await
        .assert_status("success");
    assert_the_probe_was_confined(&svc, &log, &paths);
    assert_the_sandbox_line_says_what_was_enforced(&svc, &log, &paths);
}

/// The probe succeeded, wrote only its own paths, read outside but none of the
/// service's files nor the other run's body (which in the run's own mount namespace is
/// not even there), read its own body, had `NoNewPrivs`, and leaked nothing.
fn assert_the_probe_was_confined(svc: &TestService, log: &LogFile, paths: &ProbePaths) {
    let content = log.content();
    let texts = log.texts();
    assert_eq!(log.status, "success", "{content}");
    for marker in [
        "wrote-work",
        "wrote-tmp",
        "wrote-extra",
        "refused-outside",
        "readable-outside",
        "refused-secret",
        "refused-state",
        "refused-config",
        "refused-config-listing",
        "refused-log-listing",
        "refused-log",
        // In the run's own mount namespace another job's bodies are not even there;
        // where the runner cannot make one, the sandbox still refuses to read them.
        if content.contains("--- contained: ") {
            "other-body-hidden"
        } else {
            "other-body-exists"
        },
        "refused-other-body",
        "own-body=probe-body-7e1",
    ] {
        assert!(texts.iter().any(|t| t == marker), "{marker} in:\n{content}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t.split_whitespace().eq(["NoNewPrivs:", "1"])),
        "{content}"
    );
    assert!(content.contains("Permission denied"), "{content}");
    let secret = svc.secret();
    for leaked in [
        secret.as_str(),
        "other-body-b4d",
        "[svc]",
        "=== run 1 of job other",
    ] {
        assert!(
            !content.contains(leaked),
            "{leaked:?} leaked into:\n{content}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(paths.extra.join("f")).expect("read"),
        "e\n"
    );
    assert!(!paths.outside.join("f").exists());
}

/// The run's log says what was enforced and where the job could write (its work
/// directory, its `TMPDIR`, its `write_paths`), and names what it could not read.
fn assert_the_sandbox_line_says_what_was_enforced(
    svc: &TestService,
    log: &LogFile,
    paths: &ProbePaths,
) {
    let d = shown;
    let content = log.content();
    let texts = log.texts();
    let line = texts
        .iter()
        .find(|t| t.starts_with("--- sandbox: "))
        .unwrap_or_else(|| panic!("a sandbox line in:\n{content}"));
    let writable = format!(
        "writable: {}, {}, {};",
        d(&svc.dir_work("probe")),
        d(&paths.base.join("var/lib/svc/tmp/probe")),
        d(&paths.extra)
    );
    assert!(
        line.starts_with("--- sandbox: landlock ABI ")
            && line.contains(" enforced")
            && line.contains(&writable),
        "{line}"
    );
    for unreadable in [&paths.state, &paths.config, &paths.logs, &paths.bodies] {
        assert!(
            line.contains(&d(unreadable)),
            "{} in {line}",
            unreadable.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_of_nobody_under_the_units_capabilities_is_confined_too() {
    let test = "a_job_of_nobody_under_the_units_capabilities_is_confined_too";
    if !svc_tests::has_landlock(test) {
        return;
    }
    let (builder, user, _) = unit_like(test);
    let outside = builder.dir_base().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let mut lines = vec![
        "path = /p".to_string(),
        "command = echo w > in-work && echo wrote-work".to_string(),
        "command = echo t > \"$TMPDIR/f\" && echo wrote-tmp".to_string(),
        format!(
            "command = echo o > {}/f || echo refused-outside",
            outside.display()
        ),
        "command = grep NoNewPrivs /proc/self/status".to_string(),
    ];
    lines.extend(user.map(str::to_string));
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let svc = builder
        .job_file("p", job_section("p", &lines))
        .start()
        .await;
    svc.trigger("/p", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("p", 1, WAIT).await;
    let texts = log.texts();
    assert_eq!(log.status, "success", "{}", log.content());
    for marker in ["wrote-work", "wrote-tmp", "refused-outside"] {
        assert!(texts.iter().any(|t| t == marker), "{marker} in {texts:?}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("--- sandbox: landlock ABI ")),
        "{texts:?}"
    );
    assert!(!outside.join("f").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_false_lets_a_job_out_and_says_so() {
    let builder = TestService::builder();
    let outside = builder.dir_base().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let svc = builder
        .job_file(
            "free",
            job_section(
                "free",
                &[
                    "path = /free",
                    "sandbox = false",
                    &format!(
                        "command = echo o > {}/f && echo wrote-outside",
                        outside.display()
                    ),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/free", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("free", 1, WAIT).await;
    let texts = log.texts();
    assert_eq!(log.status, "success", "{}", log.content());
    assert!(texts.iter().any(|t| t == "wrote-outside"), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("--- sandbox: off (the job sets sandbox = false)")),
        "{texts:?}"
    );
    assert_eq!(svc.job("free").await["sandbox"], false);
}

/// A job writing where its sandbox does not let it (the most common deploy job: `echo …
/// > /srv/www/…`): `--check` warns naming the key to add, and the failed run's log ends
/// with the path refused and that key; with the key, neither says anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_is_explained_by_check_and_in_the_log() {
    let builder = TestService::builder();
    let outside = builder.dir_base().join("www");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let command = format!("command = echo page > {}/index.html", outside.display());
    let job = |extra: &[&str]| {
        let mut lines = vec!["path = /deploy", command.as_str()];
        lines.extend_from_slice(extra);
        job_section("deploy", &lines)
    };
    let mut svc = builder.job_file("deploy", job(&[])).build();
    let key = format!("`write_paths = {}`", outside.display());
    let output = svc.check().await;
    let text = svc_tests::output_text(&output);
    assert!(
        text.lines().any(|line| line.starts_with("warning:")
            && line.contains("deploy.conf")
            && line.contains("[job \"deploy\"]")
            && line.contains("command")
            && line.contains(&key)),
        "--check names the file, section, key and the write_paths to add:\n{text}"
    );

    svc.start().await;
    svc.trigger("/deploy", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("deploy", 1, WAIT).await;
    assert_eq!(log.status, "fail", "{}", log.content());
    let texts = log.texts();
    let advice = &texts[texts.len() - 2];
    assert!(
        advice.starts_with(&format!(
            "--- sandbox: {}/index.html is outside what this run may write",
            outside.display()
        )) && advice.contains(&format!("{key} to [job \"deploy\"]"))
            && advice.contains("`sandbox = false`"),
        "{}",
        log.content()
    );
    svc.stop().await;

    let allowed = format!("write_paths = {}", outside.display());
    std::fs::write(svc.job_d().join("deploy.conf"), job(&[&allowed])).expect("write");
    let output = svc.check().await;
    let text = svc_tests::output_text(&output);
    assert!(
        !text.contains("write_paths ="),
        "no warning once allowed:\n{text}"
    );
    svc.start().await;
    svc.trigger("/deploy", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("deploy", 2, WAIT).await;
    assert_eq!(log.status, "success", "{}", log.content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_bad_write_paths_with_file_section_key_and_value() {
    let builder = TestService::builder();
    let state = builder.dir_base().join("var/run/svc");
    let svc = builder
        .job_file(
            "bad",
            [
                job_section(
                    "a",
                    &["path = /a", "command = true", "write_paths = srv/www"],
                ),
                job_section(
                    "b",
                    &[
                        "path = /b",
                        "command = true",
                        &format!("write_paths = {}", state.display()),
                    ],
                ),
            ]
            .join("\n"),
        )
        .build();
    let output = svc.check().await;
    let text = svc_tests::output_text(&output);
    assert_eq!(output.status.code(), Some(svc_tests::EX_CONFIG), "{text}");
    let state = state.display().to_string();
    for (section, value, why) in [
        ("job \"a\"", "srv/www", "not an absolute path"),
        ("job \"b\"", state.as_str(), "state directory"),
    ] {
        assert!(
            text.lines().any(|line| line.contains("bad.conf")
                && line.contains(section)
                && line.contains("write_paths")
                && line.contains(value)
                && line.contains(why)),
            "a problem naming [{section}] write_paths = {value} ({why}):\n{text}"
        );
    }

    // Valid ones load, and the Environment lists them.
    std::fs::write(
        svc.job_d().join("bad.conf"),
        job_section(
            "good",
            &[
                "path = /good",
                "command = true",
                "write_paths = /srv/www",
                "write_paths = /var/cache/x",
            ],
        ),
    )
    .expect("write");
    let output = svc.check().await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        svc_tests::output_text(&output)
    );
    let mut svc = svc;
    svc.start().await;
    let job = svc.job("good").await;
    assert_eq!(
        job["write_paths"],
        serde_json::json!(["/srv/www", "/var/cache/x"]),
        "{job}"
    );
    assert!(job.get("sandbox").is_none(), "shown only when off: {job}");
}

/// Runs that follow one another at once (a trigger waited in the queue) are confined the
/// same as any: by the ruleset the controller builds for a busy job and sends with each
/// request, or, while a directory on the way to the protected paths has just changed (as
/// a test's fresh tree has), by the one each runner builds. The controller's own path is
/// checked deterministically in `runner_hub.rs` and in `sandboxes.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_a_busy_job_are_confined_one_after_another() {
    let test = "runs_of_a_busy_job_are_confined_one_after_another";
    if !svc_tests::has_landlock(test) {
        return;
    }
    let builder = TestService::builder().svc("secret =");
    let base = builder.dir_base().to_path_buf();
    let outside = base.join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // Each run waits for a flag of its own, so that the next trigger is queued while
    // it lasts however fast the runs are (a run that found its flag at once could end
    // before the test saw it start).
    let flag = |counter: u64| base.join(format!("may-end-{counter}"));
    let state = base.join("var/run/svc");
    let d = |path: &Path| path.display().to_string();
    let busy = job_section(
        "busy",
        &[
            "path = /busy",
            "secret = busy-secret",
            &wait_for_flag(&base.join("may-end-$SVC_JOB_COUNTER")),
            "command = echo t > \"$TMPDIR/f\" && echo wrote-tmp",
            "command = echo w > in-work && echo wrote-work",
            &format!(
                "command = echo o > {}/f-$SVC_JOB_COUNTER || echo refused-outside",
                d(&outside)
            ),
            &format!("command = cat {}/secret || echo refused-secret", d(&state)),
            "command = echo own-body=$(cat \"$SVC_REQUEST_BODY\")",
        ],
    );
    let svc = builder.job_file("busy", busy).start().await;
    svc.trigger_with_secret("/busy", b"body-1", "busy-secret")
        .await
        .assert_status(200);
    svc.wait_run_started("busy", 1, WAIT).await;
    // Queued while run 1 lasts: run 2 follows it at once, and run 3 follows run 2.
    svc.trigger_with_secret("/busy", b"body-2", "busy-secret")
        .await
        .assert_status(200);
    std::fs::write(flag(1), "").expect("write flag");
    svc.wait_run_started("busy", 2, WAIT).await;
    send_until_queued(WAIT, "body-3 queued behind run 2", async || {
        svc.trigger_with_secret("/busy", b"body-3", "busy-secret")
            .await
    })
    .await;
    std::fs::write(flag(2), "").expect("write flag");
    std::fs::write(flag(3), "").expect("write flag");
    for counter in 1..=3u64 {
        let log = svc.wait_run_finished("busy", counter, WAIT).await;
        let content = log.content();
        let texts = log.texts();
        assert_eq!(log.status, "success", "{content}");
        let own_body = format!("own-body=body-{counter}");
        for marker in [
            "wrote-tmp",
            "wrote-work",
            "refused-outside",
            "refused-secret",
            own_body.as_str(),
        ] {
            assert!(
                texts.iter().any(|t| t == marker),
                "{marker} in run {counter}:\n{content}"
            );
        }
        let line = texts
            .iter()
            .find(|t| t.starts_with("--- sandbox: landlock ABI "))
            .unwrap_or_else(|| panic!("a sandbox line in run {counter}:\n{content}"));
        assert!(
            line.contains(&d(&base.join("var/lib/svc/tmp/busy"))) && line.contains(" enforced"),
            "{line}"
        );
    }
    for counter in 1..=3 {
        assert!(!outside.join(format!("f-{counter}")).exists());
    }
}
