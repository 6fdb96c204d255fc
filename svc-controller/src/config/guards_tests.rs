//! Tests of the values the configuration refuses for the service's safety (`guards.rs`):
//! blank secrets wherever a secret is configured, and a `dir_public` that would serve
//! the service's own files.

use std::path::Path;

use crate::config::test_tree::{Tree, issue_about};

/// A secret of only white space, quoted so that the parser keeps it.
const BLANK: &str = "\" \t \"";

#[test]
fn blank_secrets_are_refused_without_being_shown() {
    let tree = Tree::new(&format!("secret = {BLANK}\n"));
    tree.job(
        "a.conf",
        &format!("[job \"a\"]\npath = /a\ncommand = true\nsecret = {BLANK}\n"),
    );
    tree.http_job(
        "p.conf",
        &format!(
            "[job.http \"p\"]\ninterval = 1h\nhttp_url = http://127.0.0.1:9/\nsecret = {BLANK}\n"
        ),
    );
    tree.write(
        "etc/svc/job.d/n.conf",
        &format!("[notif \"n\"]\nkind = webhook\nurl = https://h.example.org/\nsecret = {BLANK}\n"),
    );
    let issues = tree.issues();
    let job_d = tree.path("etc/svc/job.d");
    for (file, section) in [
        (tree.main_file(), "svc"),
        (job_d.join("a.conf"), "job \"a\""),
        (tree.path("etc/svc/job_http.d/p.conf"), "job.http \"p\""),
        (job_d.join("n.conf"), "notif \"n\""),
    ] {
        let issue = issue_about(
            &issues,
            &file,
            section,
            "secret",
            Some("[redacted]"),
            "only of white space",
        );
        assert!(!issue.to_string().contains(" \t "), "{issue}");
    }
}

#[test]
fn a_secret_with_spaces_inside_is_kept() {
    let tree = Tree::new("secret = \" long random words \"\n");
    let config = tree.load();
    let secret = config.main.secret.expect("a secret");
    assert_eq!(secret.expose(), " long random words ");
}

/// The issue of a `dir_public = value` written in the main file of `tree`.
fn dir_public_issue(tree: &Tree, value: &str, fragment: &str) {
    tree.write(
        "etc/svc/svc.conf",
        &format!(
            "[svc]\ndir_base = {}\ndir_public = {value}\n",
            tree.base().display()
        ),
    );
    let issues = tree.issues();
    issue_about(
        &issues,
        &tree.main_file(),
        "svc",
        "dir_public",
        Some(value),
        fragment,
    );
}

#[test]
fn dir_public_must_not_serve_the_services_own_files() {
    let tree = Tree::new("");
    let base = tree.base().display().to_string();
    for (value, fragment) in [
        ("/".to_string(), "must not be /"),
        ("/.".to_string(), "must not be /"),
        (".".to_string(), "configuration directory"),
        ("etc".to_string(), "configuration directory"),
        ("etc/svc/job.d".to_string(), "configuration directory"),
        (format!("{base}/etc"), "configuration directory"),
        ("var/run/svc".to_string(), "state directory"),
        ("var".to_string(), "state directory"),
        ("var/log/svc/job".to_string(), "log directory"),
        ("var/lib/svc/tmp".to_string(), "temporary directories"),
        ("var/lib/svc/run/x".to_string(), "request bodies"),
        ("public/../etc".to_string(), "configuration directory"),
    ] {
        dir_public_issue(&tree, &value, fragment);
    }
}

#[test]
fn dir_public_is_checked_against_a_dir_state_elsewhere_and_through_links() {
    let tree = Tree::new("");
    let state = tree.path("state");
    std::fs::create_dir_all(&state).expect("create state");
    std::fs::create_dir_all(tree.path("etc/svc")).expect("create etc/svc");
    std::os::unix::fs::symlink(tree.path("etc"), tree.path("www")).expect("symlink");
    tree.write(
        "etc/svc/svc.conf",
        &format!(
            "[svc]\ndir_base = {}\ndir_state = state\ndir_public = state/public\n",
            tree.base().display()
        ),
    );
    issue_about(
        &tree.issues(),
        &tree.main_file(),
        "svc",
        "dir_public",
        Some("state/public"),
        "holds the secret",
    );
    // A link to the configuration is the configuration.
    dir_public_issue(&tree, "www", "configuration directory");
}

#[test]
fn a_directory_of_its_own_is_served() {
    for value in ["public", "/srv/www", "var/lib/svc/job/site/public"] {
        let tree = Tree::new(&format!("dir_public = {value}\n"));
        let config = tree.load();
        let expected = if Path::new(value).is_absolute() {
            value.into()
        } else {
            tree.path(value)
        };
        assert_eq!(config.main.dir_public, Some(expected), "{value}");
    }
}
