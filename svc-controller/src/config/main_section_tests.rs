//! Tests of the `[svc]` section, loaded from configuration trees in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::loader::*;
use crate::config::test_tree::*;

// ---------------------------------------------------------------------------------------
// Main section.

#[test]
fn main_defaults() {
    let tree = Tree::new("");
    let config = tree.load();
    let main = &config.main;
    assert_eq!(main.file, tree.main_file());
    assert_eq!(main.name, "svc");
    assert_eq!(main.listen_address, "127.0.0.1:31937");
    assert_eq!(main.dir_base, tree.base());
    assert_eq!(main.dir_public, None);
    assert_eq!(main.secret, None);
    assert_eq!(main.http_timeout, Duration::from_secs(300));
    assert_eq!(main.max_job_running, 1);
    assert!(!main.is_development);
    assert_eq!(main.user, None);
    assert_eq!(main.group, None);
    assert_eq!(main.runner_path, None);
    assert_eq!(main.log_level, None);
    assert_eq!(main.dir_state(), tree.path("var/run/svc"));
    assert_eq!(main.dir_job_state(), tree.path("var/run/svc/job"));
    assert_eq!(main.dir_replay(), tree.path("var/run/svc/replay"));
    assert!(config.jobs.is_empty());
    assert!(config.http_jobs.is_empty());
    assert!(config.warnings.is_empty());
}

#[test]
fn main_without_svc_section_uses_defaults() {
    let tree = Tree::new("");
    // A main file holding only a job; dir_base defaults to `/`, so no job.d is read here
    // unless /etc/svc/job.d exists; only check the main values.
    tree.write(
        "etc/svc/svc.conf",
        "# nothing but a job\n[job \"solo\"]\ninterval = 1m\ncommand = true\n",
    );
    if Path::new("/etc/svc").exists() {
        return;
    }
    let config = tree.load();
    assert_eq!(config.main.dir_base, Path::new("/"));
    assert_eq!(config.jobs.len(), 1);
    assert_eq!(config.jobs[0].file, tree.main_file());
}

#[test]
fn main_values() {
    let user = current_user();
    let group = current_group();
    let tree = Tree::new(&format!(
        "NAME = prod box\nlisten_address = 0.0.0.0:8080\ndir_public = public\n\
         secret = \"s3cr3t # kept\" # a comment\nhttp_timeout = 1m30s\nmax_job_running = 4\n\
         is_development = Yes\nuser = {user}\ngroup = {group}\nrunner_path = bin/svc-runner\n\
         log_level = info,svc_controller=debug\ndir_state = state\n\
         allow_root_jobs = yes\n"
    ));
    let main = tree.load().main;
    assert_eq!(main.name, "prod box");
    assert_eq!(main.listen_address, "0.0.0.0:8080");
    assert_eq!(main.dir_public, Some(tree.path("public")));
    assert_eq!(
        main.secret.as_ref().map(|s| s.expose()),
        Some("s3cr3t # kept")
    );
    // A configuration printed for debugging never shows the secret.
    assert!(!format!("{main:?}").contains("s3cr3t"), "{main:?}");
    assert_eq!(main.http_timeout, Duration::from_secs(90));
    assert_eq!(main.max_job_running, 4);
    assert!(main.is_development);
    assert_eq!(main.user, Some(user));
    assert_eq!(main.group, Some(group));
    assert_eq!(main.runner_path, Some(tree.path("bin/svc-runner")));
    assert_eq!(main.log_level.as_deref(), Some("info,svc_controller=debug"));
    assert_eq!(main.dir_state(), tree.path("state"));
    assert!(main.allow_root_jobs);
    assert_eq!(main.dir_job_http_state(), tree.path("state/job_http"));
}

#[test]
fn main_absolute_paths_and_ipv6() {
    let tree = Tree::new(
        "dir_public = /srv/www\nrunner_path = /usr/lib/svc/svc-runner\ndir_state = /var/lib/svc/state\n\
         listen_address = [::1]:31937\nsecret =\n",
    );
    let main = tree.load().main;
    assert_eq!(main.dir_public, Some(PathBuf::from("/srv/www")));
    assert_eq!(
        main.runner_path,
        Some(PathBuf::from("/usr/lib/svc/svc-runner"))
    );
    assert_eq!(main.listen_address, "[::1]:31937");
    assert_eq!(main.secret, None);
    assert_eq!(main.dir_state(), Path::new("/var/lib/svc/state"));
}

#[test]
fn relative_dir_base_is_below_the_main_file_directory() {
    let tree = Tree::new("");
    tree.write("etc/svc/svc.conf", "[svc]\ndir_base = ../..\n");
    tree.job("a.conf", "[job \"a\"]\npath = a\ncommand = true\n");
    let config = tree.load();
    assert_eq!(
        fs::canonicalize(&config.main.dir_base).expect("canonical"),
        fs::canonicalize(tree.base()).expect("canonical")
    );
    assert!(config.main.dir_base.is_absolute());
    assert_eq!(config.jobs.len(), 1);
}

#[test]
fn main_bool_forms() {
    for (text, expected) in [
        ("is_development", true),
        ("is_development = true", true),
        ("is_development = ON", true),
        ("is_development = 1", true),
        ("is_development = yes", true),
        ("is_development = False", false),
        ("is_development = off", false),
        ("is_development = NO", false),
        ("is_development = 0", false),
        ("is_development =", false),
        ("is_development = \"\"", false),
        ("is_development = \"yes\" # quoted", true),
    ] {
        let tree = Tree::new(&format!("{text}\n"));
        assert_eq!(tree.load().main.is_development, expected, "{text}");
    }
}

#[test]
fn main_invalid_values() {
    for (key, value, fragment) in [
        ("name", "", "empty value"),
        ("listen_address", "localhost", "missing port"),
        ("listen_address", "localhost:http", "not a number"),
        ("listen_address", "localhost:70000", "not a number"),
        ("listen_address", ":8080", "host"),
        ("listen_address", "::1:8080", "brackets"),
        ("listen_address", "", "empty value"),
        ("dir_base", "does/not/exist", "not an existing directory"),
        ("dir_base", "", "empty value"),
        ("dir_public", "", "empty value"),
        ("http_timeout", "5", "at least 1ms"),
        ("http_timeout", "0", "at least 1ms"),
        ("http_timeout", "5 minutes", "unknown unit"),
        ("http_timeout", "-5m", "negative"),
        ("http_timeout", "", "empty value"),
        ("max_job_running", "0", "at least 1"),
        ("max_job_running", "two", "whole number"),
        ("max_job_running", "-1", "whole number"),
        ("max_job_running", "", "empty value"),
        ("is_development", "maybe", "not a boolean"),
        ("user", NO_SUCH_USER, "no such user"),
        ("group", NO_SUCH_GROUP, "no such group"),
        ("user", "", "empty value"),
        ("runner_path", "", "empty value"),
        ("log_level", "", "empty value"),
        ("log_level", "svc=[", "log filter"),
    ] {
        let tree = Tree::new("");
        let base = if key == "dir_base" {
            String::new()
        } else {
            format!("dir_base = {}\n", tree.base().display())
        };
        tree.write(
            "etc/svc/svc.conf",
            &format!("[svc]\n{base}{key} = {value}\n"),
        );
        let issues = load(&tree.main_file())
            .expect_err("invalid value must fail")
            .issues;
        let issue = only_issue(&issues, &tree.main_file(), "svc", key, Some(value));
        assert!(
            issue.message.contains(fragment),
            "{key} = {value:?}: {issue}"
        );
        let line = if key == "dir_base" {
            "line 2: "
        } else {
            "line 3: "
        };
        assert!(issue.message.starts_with(line), "{issue}");
    }
}

#[test]
fn max_hook_running_is_deprecated() {
    let tree = Tree::new("max_hook_running = 3\n");
    let config = tree.load();
    assert_eq!(config.main.max_job_running, 3);
    assert_eq!(config.warnings.len(), 1);
    let warning = &config.warnings[0];
    assert_eq!(warning.key.as_deref(), Some("max_hook_running"));
    assert!(warning.message.contains("deprecated"), "{warning}");

    let both = Tree::new("max_hook_running = 3\nmax_job_running = 2\n");
    let issues = both.issues();
    only_issue(
        &issues,
        &both.main_file(),
        "svc",
        "max_hook_running",
        Some("3"),
    );
}

#[test]
fn main_file_missing() {
    let dir = tempfile::tempdir().expect("tmp");
    let missing = dir.path().join("nope.conf");
    let issues = load(&missing).expect_err("missing file").issues;
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].file, missing);
    assert!(issues[0].message.contains("cannot read"), "{}", issues[0]);
}

#[test]
fn duplicate_svc_section_and_svc_in_job_file() {
    let tree = Tree::new("[svc]\nname = again\n");
    tree.job("a.conf", "[svc]\nname = x\n");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert!(issues[0].message.contains("duplicate section [svc]"));
    assert_eq!(issues[0].file, tree.main_file());
    assert!(issues[1].message.contains("belongs in the main file"));
    assert_eq!(issues[1].file, tree.path("etc/svc/job.d/a.conf"));
}
