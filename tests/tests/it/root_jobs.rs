//! Root jobs are explicit and keep only the capabilities they list: `user = root` needs
//! `allow_root_jobs = true`; every job that runs as root (named or, with no user at all,
//! as the controller's own) runs with no capability but those in `capabilities`.
//!
//! These tests need root (CI runs as root); elsewhere they print a notice and pass.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command};

use svc_tests::{EX_CONFIG, TestService, WAIT, job_section, output_text, running_as_root};

/// A file only `nobody` may read (mode 0600), below the service's `dir_base`.
fn nobodys_secret(dir_base: &std::path::Path) -> std::path::PathBuf {
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("look up nobody")
        .expect("user nobody exists");
    let path = dir_base.join("nobodys-secret");
    std::fs::write(&path, "only-for-nobody\n").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    nix::unistd::chown(&path, Some(nobody.uid), Some(nobody.gid)).expect("chown");
    path
}

/// A `sleep` running as nobody, for the "cannot signal other users" check.
struct NobodysSleep(Child);

impl NobodysSleep {
    fn start() -> NobodysSleep {
        let child = Command::new("setpriv")
            .args([
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "sleep",
                "120",
            ])
            .spawn()
            .expect("start a sleep as nobody with setpriv (util-linux)");
        NobodysSleep(child)
    }
}

impl Drop for NobodysSleep {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `Cap*` lines a command of the job printed, as `name -> hex mask`.
fn capability_lines(texts: &[String]) -> Vec<(String, u64)> {
    texts
        .iter()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            let name = name.strip_prefix("Cap")?;
            Some((
                name.to_string(),
                u64::from_str_radix(value.trim(), 16).ok()?,
            ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_job_without_capabilities_keeps_none() {
    if !running_as_root("a_root_job_without_capabilities_keeps_none") {
        return;
    }
    let sleeper = NobodysSleep::start();
    let builder = TestService::builder();
    let secret = nobodys_secret(builder.dir_base());
    // No user anywhere: the job runs as the controller, root.
    let svc = builder
        .job_file(
            "plain",
            job_section(
                "plain",
                &[
                    "path = /plain",
                    "command = id -u",
                    "command = grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status",
                    &format!(
                        "command = if kill -0 {} 2>/dev/null; then echo signal-sent; else echo signal-refused; fi",
                        sleeper.0.id()
                    ),
                    &format!(
                        "command = if cat {} 2>/dev/null; then echo read-done; else echo read-refused; fi",
                        secret.display()
                    ),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/plain", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("plain", 1, WAIT).await;
    let texts = log.texts();
    let content = log.content();
    assert!(
        texts.contains(&"0".to_string()),
        "runs as uid 0:\n{content}"
    );
    let caps = capability_lines(&texts);
    assert_eq!(caps.len(), 4, "four Cap lines:\n{content}");
    for (name, mask) in &caps {
        assert_eq!(*mask, 0, "Cap{name} is empty:\n{content}");
    }
    assert!(
        texts.contains(&"signal-refused".to_string()),
        "cannot signal another user's process:\n{content}"
    );
    assert!(
        texts.contains(&"read-refused".to_string()) && !content.contains("only-for-nobody"),
        "cannot read another user's 0600 file:\n{content}"
    );
    log.assert_status("success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_job_keeps_exactly_the_capabilities_it_lists() {
    if !running_as_root("a_root_job_keeps_exactly_the_capabilities_it_lists") {
        return;
    }
    let builder = TestService::builder();
    let secret = nobodys_secret(builder.dir_base());
    let svc = builder
        .svc("user = nobody")
        .svc("allow_root_jobs = true")
        .job_file(
            "reader",
            job_section(
                "reader",
                &[
                    "path = /reader",
                    "user = root",
                    "capabilities = dac_read_search",
                    "command = id -gn",
                    "command = grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status",
                    &format!("command = cat {}", secret.display()),
                ],
            ),
        )
        .start()
        .await;
    svc.trigger("/reader", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("reader", 1, WAIT).await;
    let content = log.content();
    log.assert_status("success");
    let texts = log.texts();
    assert!(
        texts.contains(&"root".to_string()),
        "user = root without group runs with root's group, not the main one:\n{content}"
    );
    // CAP_DAC_READ_SEARCH is capability 2.
    let caps = capability_lines(&texts);
    assert_eq!(caps.len(), 3, "{content}");
    for (name, mask) in &caps {
        assert_eq!(
            *mask,
            1 << 2,
            "Cap{name} holds only CAP_DAC_READ_SEARCH:\n{content}"
        );
    }
    assert!(texts.contains(&"only-for-nobody".to_string()), "{content}");
}

/// Whether one line of `text` contains every one of `parts`.
fn line_with(text: &str, parts: &[&str]) -> bool {
    text.lines()
        .any(|line| parts.iter().all(|part| line.contains(part)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_root_jobs_unless_allowed_and_warns_about_implicit_ones() {
    if !running_as_root("check_refuses_root_jobs_unless_allowed_and_warns_about_implicit_ones") {
        return;
    }
    let svc = TestService::builder()
        .job_file(
            "as_root",
            job_section("as_root", &["path = /r", "user = root", "command = true"]),
        )
        .job_file(
            "caps_for_nobody",
            job_section(
                "caps_for_nobody",
                &[
                    "path = /n",
                    "user = nobody",
                    "capabilities = CAP_KILL",
                    "command = true",
                ],
            ),
        )
        .job_file(
            "bad_cap",
            job_section(
                "bad_cap",
                &[
                    "path = /b",
                    "user = root",
                    "capabilities = cap_fly",
                    "command = true",
                ],
            ),
        )
        .build();
    let output = svc.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(EX_CONFIG), "{text}");
    assert!(
        line_with(
            &text,
            &[
                "as_root.conf",
                "[job \"as_root\"]",
                "user",
                "allow_root_jobs"
            ]
        ),
        "{text}"
    );
    assert!(
        line_with(
            &text,
            &[
                "caps_for_nobody.conf",
                "capabilities",
                "only a job that runs as root"
            ]
        ),
        "{text}"
    );
    assert!(
        line_with(&text, &["bad_cap.conf", "capabilities", "cap_fly"]),
        "{text}"
    );

    // Allowed, valid, and one job with no user at all: valid, with a warning naming it.
    let svc = TestService::builder()
        .job_file(
            "implicit",
            job_section("implicit", &["path = /i", "command = true"]),
        )
        .build();
    let output = svc.check().await;
    let text = output_text(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        line_with(
            &text,
            &["warning", "runs as root", "implicit", "allow_root_jobs"]
        ),
        "{text}"
    );
}
