//! What confines a run, with the real controller and runner: its own temporary
//! directory (`TMPDIR`), removed when the run ends and, after a crash, at the next start.
//!
//! The tests that need root (a job of `nobody`, the controller with the packaged unit's
//! capabilities only) print a notice and run a reduced check elsewhere; CI runs as root.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use svc_tests::{TestService, TestServiceBuilder, WAIT, job_section, unit_like_wrapper};

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
        svc.trigger("/tmp-job", b"", &[]).await.assert_status(200);
        let log = svc.wait_run_finished("tmp-job", counter, WAIT).await;
        let texts = log.texts();
        assert_eq!(log.status, "success", "{}", log.content());
        let tmpdir = PathBuf::from(value(&texts, "tmpdir").expect("TMPDIR shown"));
        assert_eq!(
            tmpdir,
            parent.join(format!("tmp-job.{counter}")),
            "{texts:?}"
        );
        let expected = format!("{} mode=700", uid.unwrap_or(own_uid));
        assert_eq!(value(&texts, "owner"), Some(expected.as_str()), "{texts:?}");
        let made = value(&texts, "made").expect("mktemp's file shown");
        assert!(Path::new(made).starts_with(&tmpdir), "{made} in {tmpdir:?}");
        // Removed before the run's end is recorded, whatever the job left in it.
        assert!(
            std::fs::symlink_metadata(&tmpdir).is_err(),
            "{} still exists after run {counter}",
            tmpdir.display()
        );
        seen.push(tmpdir);
    }
    assert_ne!(seen[0], seen[1]);
    let meta = std::fs::symlink_metadata(&parent).expect("the parent stays");
    assert!(meta.is_dir());
    assert_eq!(meta.uid(), own_uid);
    assert_eq!(mode_of(&parent), 0o711);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmpdirs_left_by_a_crash_are_removed_at_start() {
    let (builder, user, uid) = unit_like("tmpdirs_left_by_a_crash_are_removed_at_start");
    let parent = builder.dir_base().join("var/lib/svc/tmp");
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
