//! Working directories under the packaged unit's privileges: the controller runs as root
//! with only CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_CHOWN and, for the namespaces of each
//! run, CAP_SYS_ADMIN and CAP_SYS_CHROOT, and a job that runs as
//! another user must work on every run, not only the first.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use svc_tests::can_run_unit_like as can_run;
use svc_tests::{TestService, WAIT, job_section, unit_like_wrapper};

/// Grep-able summary of the unit file's bounding set, so a change there shows up here.
#[test]
fn the_wrapper_matches_the_units_bounding_set() {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/svc.service"),
    )
    .expect("read packaging/svc.service");
    let line = unit
        .lines()
        .find(|line| line.starts_with("CapabilityBoundingSet="))
        .expect("the unit sets CapabilityBoundingSet=");
    let mut caps: Vec<String> = line["CapabilityBoundingSet=".len()..]
        .split_whitespace()
        .map(|cap| cap.trim_start_matches("CAP_").to_ascii_lowercase())
        .collect();
    caps.sort();
    assert_eq!(
        caps,
        [
            "chown",
            "kill",
            "setgid",
            "setuid",
            "sys_admin",
            "sys_chroot"
        ],
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_work_dir_serves_every_run_without_cap_fowner() {
    if !can_run("the_default_work_dir_serves_every_run_without_cap_fowner") {
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("look up nobody")
        .expect("user nobody exists");
    let svc = TestService::builder()
        .wrapper(&unit_like_wrapper())
        .job_file(
            "deploy",
            job_section(
                "deploy",
                &[
                    "path = /deploy",
                    "user = nobody",
                    "command = touch run-$SVC_JOB_COUNTER && pwd && ls",
                ],
            ),
        )
        .start()
        .await;
    for counter in 1..=3 {
        svc.trigger("/deploy", b"", &[]).await.assert_status(200);
        let log = svc.wait_run_finished("deploy", counter, WAIT).await;
        assert_eq!(log.status, "success", "run {counter}:\n{}", log.content());
        assert!(
            log.texts().contains(&format!("run-{counter}")),
            "run {counter} wrote into its directory:\n{}",
            log.content()
        );
    }
    let meta = std::fs::metadata(svc.dir_work("deploy")).expect("the work dir exists");
    assert_eq!(meta.uid(), nobody.uid.as_raw(), "handed to the job's user");
    assert_eq!(meta.permissions().mode() & 0o777, 0o750);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_work_dir_of_another_user_is_refused_with_the_reason() {
    if !can_run("a_default_work_dir_of_another_user_is_refused_with_the_reason") {
        return;
    }
    let builder = TestService::builder().wrapper(&unit_like_wrapper());
    let dir = builder.dir_base().join("var/lib/svc/job/taken");
    std::fs::create_dir_all(&dir).expect("mkdir");
    // Owned by `daemon` (uid 1 on Debian), not by the job's user.
    nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(1)), None).expect("chown");
    let svc = builder
        .job_file(
            "taken",
            job_section(
                "taken",
                &["path = /taken", "user = nobody", "command = true"],
            ),
        )
        .start()
        .await;
    svc.trigger("/taken", b"", &[]).await.assert_status(200);
    let log = svc.wait_run_finished("taken", 1, WAIT).await;
    let content = log.content();
    log.assert_status("fail");
    assert!(
        content.contains("belongs to uid 1") && content.contains("chown -R nobody"),
        "the log says why and what to do:\n{content}"
    );
    assert_eq!(
        std::fs::metadata(&dir).expect("stat").uid(),
        1,
        "the directory is left as it was"
    );
}
