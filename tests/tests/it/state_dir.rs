//! The state directory (`dir_state`): a generated secret kept across restarts, one
//! controller per state directory, and state taken over when `dir_state` moves.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use svc_tests::{TestService, WAIT, binaries, job_section, wait_until};

/// Inserts `line` into the `[svc]` section of the main file at `path`.
fn add_main_line(path: &Path, line: &str) {
    let text = std::fs::read_to_string(path).expect("read the main file");
    let text = text.replacen("[svc]\n", &format!("[svc]\n{line}\n"), 1);
    std::fs::write(path, text).expect("write the main file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_secret_is_stored_once_and_kept_across_restarts() {
    let mut svc = TestService::builder()
        .svc("secret =")
        .job_file(
            "quiet",
            job_section("quiet", &["path = /quiet", "command = true"]),
        )
        .start()
        .await;
    let secret = svc.secret();
    let file = svc.dir_base().join("var/run/svc/secret");
    let stored = std::fs::read_to_string(&file).expect("the secret is stored in dir_state");
    assert_eq!(
        stored.trim_end(),
        secret,
        "the stored secret is the printed one"
    );
    let mode = std::fs::metadata(&file).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the secret file is 0600");
    svc.pause("quiet").await.assert_status(200);

    svc.restart().await;
    let (stdout, stderr) = (svc.stdout(), svc.stderr());
    assert!(
        !stdout.contains(&secret) && !stderr.contains(&secret),
        "a later start never shows the secret:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains(&file.display().to_string()),
        "a later start names the secret's file:\n{stderr}"
    );
    // Signed with the secret of the first start: still accepted.
    let response = svc.resume("quiet").await;
    response.assert_status(200);
    svc.trigger("/quiet", b"", &[]).await.assert_status(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_secret_file_stops_the_start_naming_the_file() {
    let mut svc = TestService::builder().svc("secret =").build();
    let file = svc.dir_base().join("var/run/svc/secret");
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&file, "\n").expect("write");
    svc.spawn();
    let status = svc
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the controller exits");
    assert_eq!(status.code(), Some(1), "{}", svc.stderr());
    let stderr = svc.stderr();
    assert!(
        stderr.contains(&file.display().to_string()),
        "the error names the file:\n{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "\n",
        "no new secret replaces the file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_controller_on_the_same_state_exits_1_and_touches_nothing() {
    let builder = TestService::builder();
    let go = builder.dir_base().join("go");
    let svc = builder
        .job_file(
            "hold",
            job_section(
                "hold",
                &[
                    "path = /hold",
                    "timeout = 60s",
                    &format!(
                        "command = while [ ! -e {} ]; do sleep 0.05; done; echo released",
                        go.display()
                    ),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/hold", b"", &[]).await.assert_status(200);
    svc.wait_run_started("hold", 1, WAIT).await;
    let lock = svc.dir_base().join("var/run/svc/lock");
    let socket = svc.dir_base().join("var/run/svc/controller/runner.sock");
    let socket_inode = std::os::unix::fs::MetadataExt::ino(
        &std::fs::metadata(&socket).expect("the runner socket exists"),
    );
    let state_before = std::fs::read(svc.state_path("hold")).expect("state file");

    // The same configuration on another port.
    let second_config = svc.dir_base().join("etc/svc/second.conf");
    let text = std::fs::read_to_string(svc.config_path()).expect("read");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let text = text.replace(svc.listen_address(), &format!("127.0.0.1:{port}"));
    std::fs::write(&second_config, text).expect("write");
    let mut second = Command::new(&binaries().controller)
        .arg("--config")
        .arg(&second_config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a second controller");
    let mut status = None;
    wait_until(WAIT, "the second controller exits", async || {
        status = second.try_wait().expect("wait");
        status.is_some()
    })
    .await;
    let output = second.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{stderr}");
    let holder = format!("PID {}", svc.pid().expect("first controller's pid"));
    assert!(
        stderr.contains(&lock.display().to_string()) && stderr.contains(&holder),
        "the message names the lock file and the holder ({holder}):\n{stderr}"
    );

    // The first controller's files are as they were, and it goes on working.
    assert_eq!(
        std::fs::read(svc.state_path("hold")).expect("state file"),
        state_before
    );
    let inode_after = std::os::unix::fs::MetadataExt::ino(
        &std::fs::metadata(&socket).expect("the runner socket is still there"),
    );
    assert_eq!(
        inode_after, socket_inode,
        "the runner socket was not replaced"
    );
    assert!(
        svc.job_log("hold", 1)
            .is_some_and(|log| log.status == "started")
    );
    std::fs::write(&go, b"").expect("release the run");
    svc.wait_run_finished("hold", 1, WAIT)
        .await
        .assert_status("success");
    svc.trigger("/hold", b"", &[]).await.assert_status(200);
    svc.wait_run_finished("hold", 2, WAIT)
        .await
        .assert_status("success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_taken_over_when_dir_state_moves() {
    let mut svc = TestService::builder()
        .job_file(
            "keep",
            job_section("keep", &["path = /keep", "command = true"]),
        )
        .start()
        .await;
    for counter in 1..=2 {
        svc.trigger("/keep", b"", &[]).await.assert_status(200);
        svc.wait_run_finished("keep", counter, WAIT)
            .await
            .assert_status("success");
    }
    svc.wait_job_status("keep", "success", WAIT).await;
    svc.pause("keep").await.assert_status(200);
    let status = svc.stop().await;
    assert_eq!(status.code(), Some(0));

    let dir_state = svc.dir_base().join("var/lib/svc/state");
    add_main_line(
        svc.config_path(),
        &format!("dir_state = {}", dir_state.display()),
    );
    // The logs must not be what carries the state over: the pause lives only in the
    // state file.
    svc.start().await;
    assert_eq!(
        svc.job_status("keep").await,
        "paused",
        "the pause was taken over"
    );
    assert!(
        dir_state.join("job/keep").is_file(),
        "state now in dir_state"
    );
    assert!(!svc.state_path("keep").exists(), "the old copy was removed");
    assert!(dir_state.join("lock").is_file(), "the lock is in dir_state");
    svc.trigger("/keep", b"", &[]).await.assert_status(412);
    svc.resume("keep").await.assert_status(200);
    svc.trigger("/keep", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("keep", 3, WAIT).await;
    log.assert_status("success");
}
