//! Tests of [`super::load`] on configuration trees written to temporary directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;

use super::*;
use crate::config::main_section::shared_main_dir;
use crate::config::test_tree::{Tree, issue_about, only_issue};
use crate::config::{
    AuthKind, ConfigIssue, DEFAULT_PATCHHOST_PUBLIC_KEY, HttpMethod, HttpRequestType,
    ResourceLimits, WebhookKey,
};
use crate::time::schedule::{Schedule, Timer};
use crate::time::timezone::Zone;

fn current_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .expect("user lookup")
        .expect("current user has a name")
        .name
}

fn current_group() -> String {
    nix::unistd::Group::from_gid(nix::unistd::getgid())
        .expect("group lookup")
        .expect("current group has a name")
        .name
}

const NO_SUCH_USER: &str = "svc-test-no-such-user-x";
const NO_SUCH_GROUP: &str = "svc-test-no-such-group-x";

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

// ---------------------------------------------------------------------------------------
// Jobs.

#[test]
fn job_values() {
    let user = current_user();
    let group = current_group();
    // The current user may be root (as in CI): allowed here, the subject is elsewhere.
    let tree = Tree::new("allow_root_jobs = true\n");
    tree.job(
        "deploy.conf",
        &format!(
            "[job \"Deploy Site\"]\nDescription = <b>deploy</b>\nsecret = abc\n\
             schedule = daily@08:00\ninterval = 5m\npath = deploy/site\nauth_kind = GitHub\n\
             header_sign = X-My-Sign\ncommand = \"cd /srv && make; make install # not a comment\"\n\
             command = echo \\\"two\\\" 'quoted' \\\\n\nlog_retention = 10\ntimeout = 0\n\
             user = {user}\ngroup = {group}\ndir_work = work/deploy\nenv = A=1\n\
             env = _B_2 = x=y\npublic_key = AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
        ),
    );
    let config = tree.load();
    assert_eq!(config.jobs.len(), 1);
    let job = &config.jobs[0];
    assert_eq!(job.id, "Deploy_Site");
    assert_eq!(job.name, "Deploy Site");
    assert_eq!(job.file, tree.path("etc/svc/job.d/deploy.conf"));
    assert_eq!(job.description, "<b>deploy</b>");
    assert_eq!(job.secrets, [WebhookKey::new(b"abc".to_vec())]);
    assert_eq!(
        job.timer,
        Some(Timer::Schedule(
            "daily@08:00".parse::<Schedule>().expect("schedule"),
            Zone::utc()
        ))
    );
    assert_eq!(job.path.as_deref(), Some("/deploy/site"));
    assert_eq!(job.auth_kind, AuthKind::Github);
    assert_eq!(job.header_sign, "x-my-sign");
    assert_eq!(
        job.commands,
        vec![
            "cd /srv && make; make install # not a comment".to_string(),
            "echo \"two\" 'quoted' \\n".to_string(),
        ]
    );
    assert_eq!(job.log_retention, 10);
    assert_eq!(job.timeout, None);
    assert_eq!(job.user, Some(user));
    assert_eq!(job.group, Some(group));
    assert_eq!(job.dir_work, Some(tree.path("work/deploy")));
    assert_eq!(
        job.env,
        vec![
            ("A".to_string(), "1".to_string()),
            ("_B_2".to_string(), "x=y".to_string())
        ]
    );
    assert_eq!(
        job.public_key,
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    );
}

#[test]
fn job_defaults() {
    let tree = Tree::new("");
    tree.job("a.conf", "[job \"a\"]\ninterval = 90s\ncommand = true\n");
    let job = &tree.load().jobs[0];
    assert_eq!(job.description, "");
    assert!(job.secrets.is_empty());
    assert!(job.filter_event.is_empty() && job.filter_ref.is_empty());
    assert_eq!(job.timer, Some(Timer::Interval(Duration::from_secs(90))));
    assert_eq!(job.path, None);
    assert_eq!(job.auth_kind, AuthKind::HmacSha256);
    assert_eq!(job.header_sign, "x-svc-sign");
    assert_eq!(job.public_key, DEFAULT_PATCHHOST_PUBLIC_KEY);
    assert_eq!(job.log_retention, 5);
    assert_eq!(job.timeout, Some(Duration::from_secs(3600)));
    assert_eq!(job.user, None);
    assert_eq!(job.group, None);
    assert_eq!(job.dir_work, None);
    assert!(job.env.is_empty());
}

#[test]
fn job_user_and_group_defaults() {
    let user = current_user();
    let group = current_group();
    // The current user may be root (as in CI): allowed here, the subject is elsewhere.
    let tree = Tree::new(&format!(
        "user = {user}\ngroup = {group}\nallow_root_jobs = true\n"
    ));
    tree.job(
        "a.conf",
        &format!(
            "[job \"inherit\"]\npath = a\ncommand = true\n\
             [job \"own-user\"]\npath = b\ncommand = true\nuser = {user}\n\
             [job \"own-group\"]\npath = c\ncommand = true\ngroup = {group}\n"
        ),
    );
    let jobs = tree.load().jobs;
    assert_eq!(jobs[0].user.as_deref(), Some(user.as_str()));
    assert_eq!(jobs[0].group.as_deref(), Some(group.as_str()));
    assert_eq!(jobs[1].user.as_deref(), Some(user.as_str()));
    assert_eq!(jobs[1].group, None);
    assert_eq!(jobs[2].user.as_deref(), Some(user.as_str()));
    assert_eq!(jobs[2].group.as_deref(), Some(group.as_str()));
}

#[test]
fn job_auth_kinds_and_timeouts() {
    for (value, kind, name) in [
        ("hmac-sha256", AuthKind::HmacSha256, "hmac-sha256"),
        ("HMAC-SHA256", AuthKind::HmacSha256, "hmac-sha256"),
        ("codehost", AuthKind::Github, "codehost"),
        ("github", AuthKind::Github, "github"),
        ("GitLab", AuthKind::Gitlab, "gitlab"),
        ("gitea", AuthKind::Gitea, "gitea"),
        ("forgejo", AuthKind::Gitea, "forgejo"),
        ("bitbucket", AuthKind::Bitbucket, "bitbucket"),
        ("standard", AuthKind::Standard, "standard"),
        ("patchhost", AuthKind::Sourcehut, "patchhost"),
        ("sourcehut", AuthKind::Sourcehut, "sourcehut"),
    ] {
        let tree = Tree::new("");
        tree.job(
            "a.conf",
            &format!("[job \"a\"]\npath = /a\ncommand = true\nauth_kind = {value}\nsecret = s\n"),
        );
        let job = &tree.load().jobs[0];
        assert_eq!(job.auth_kind, kind, "{value}");
        assert_eq!(job.auth_kind_name, name, "as configured: {value}");
    }
    for (value, timeout) in [
        ("0", None),
        ("0s", None),
        ("30m", Some(Duration::from_secs(1800))),
        ("1500000000", Some(Duration::from_millis(1500))),
    ] {
        let tree = Tree::new("");
        tree.job(
            "a.conf",
            &format!("[job \"a\"]\npath = /a\ncommand = true\ntimeout = {value}\n"),
        );
        assert_eq!(tree.load().jobs[0].timeout, timeout, "{value}");
    }
}

#[test]
fn job_invalid_values() {
    for (key, value, fragment) in [
        ("interval", "0", "at least 1s"),
        ("interval", "999ms", "at least 1s"),
        ("interval", "5", "at least 1s"),
        ("interval", "often", "invalid duration"),
        ("interval", "", "empty value"),
        ("schedule", "daily@25:00", "hour 25 out of range 0-23"),
        ("schedule", "sometimes", "unknown schedule"),
        ("path", "/", "just '/'"),
        ("path", "a b", "white space"),
        ("path", "a?b=1", "'?'"),
        ("path", "a/../b", "'..'"),
        ("path", "a//b", "empty segment"),
        ("path", "", "empty value"),
        ("auth_kind", "basic", "unknown auth_kind"),
        ("filter_ref", "refs/heads/[", "not a glob"),
        ("filter_event", "", "empty value"),
        ("header_sign", "x sign", "not a valid HTTP header name"),
        ("header_sign", "x:sign", "not a valid HTTP header name"),
        ("log_retention", "0", "at least 1"),
        ("log_retention", "many", "whole number"),
        ("timeout", "forever", "invalid duration"),
        ("timeout", "-1h", "negative"),
        ("timeout", "30", "at least 1ms"),
        ("user", NO_SUCH_USER, "no such user"),
        ("group", NO_SUCH_GROUP, "no such group"),
        ("dir_work", "", "empty value"),
        ("env", "NOEQUALS", "NAME=VALUE"),
        ("env", "1A=x", "invalid variable name"),
        ("env", "A-B=x", "invalid variable name"),
        ("env", "", "empty value"),
        ("public_key", "not base64!", "not base64"),
        ("public_key", "AAAA", "32 bytes"),
        ("command", "", "empty value"),
        ("limit_nproc", "0", "at least 1"),
        ("limit_nofile", "lots", "whole number"),
        ("limit_as", "512X", "unknown size unit"),
        ("limit_as", "100K", "at least 1M"),
        ("limit_as", "99999999999T", "too large"),
        ("limit_as", "big", "not a size"),
        ("limit_memory", "100K", "at least 1M"),
        ("limit_memory", "lots", "not a size"),
    ] {
        let tree = Tree::new("");
        let line = if key == "command" {
            format!("path = /p\ncommand = {value}\n")
        } else if key == "path" {
            format!("command = true\n{key} = {value}\ninterval = 1m\n")
        } else {
            format!("path = /p\ncommand = true\n{key} = {value}\n")
        };
        tree.job("x.conf", &format!("[job \"x\"]\n{line}"));
        let file = tree.path("etc/svc/job.d/x.conf");
        let issues = tree.issues();
        let issue = only_issue(&issues, &file, "job \"x\"", key, Some(value));
        assert!(
            issue.message.contains(fragment),
            "{key} = {value:?}: {issue}"
        );
    }
}

#[test]
fn job_resource_limits() {
    let tree = Tree::new("");
    tree.job(
        "x.conf",
        "[job \"x\"]\npath = /p\ncommand = true\nlimit_nproc = 50\nlimit_nofile = 128\nlimit_as = 512M\n\n\
         [job \"y\"]\npath = /q\ncommand = true\nlimit_as = 2GiB\n\n\
         [job \"z\"]\npath = /r\ncommand = true\n",
    );
    let jobs = tree.load().jobs;
    let limits: Vec<_> = jobs.iter().map(|j| j.limits).collect();
    assert_eq!(
        limits[0],
        ResourceLimits {
            nproc: Some(50),
            nofile: Some(128),
            address_space: Some(512 << 20),
            ..ResourceLimits::default()
        }
    );
    assert_eq!(limits[1].address_space, Some(2 << 30));
    assert_eq!(limits[2], ResourceLimits::default());
}

#[test]
fn limit_memory_is_rlimit_data_and_excludes_limit_as() {
    let tree = Tree::new("");
    tree.job(
        "x.conf",
        "[job \"x\"]\npath = /p\ncommand = true\nlimit_memory = 256M\n",
    );
    let jobs = tree.load().jobs;
    assert_eq!(jobs[0].limits.memory, Some(256 << 20));
    assert_eq!(jobs[0].limits.address_space, None);

    let tree = Tree::new("");
    tree.job(
        "x.conf",
        "[job \"x\"]\npath = /p\ncommand = true\nlimit_as = 1G\nlimit_memory = 256M\n",
    );
    let file = tree.path("etc/svc/job.d/x.conf");
    let issues = tree.issues();
    let issue = only_issue(&issues, &file, "job \"x\"", "limit_memory", Some("256M"));
    assert!(issue.message.contains("set only one"), "{issue}");
}

#[test]
fn job_needs_commands_and_a_trigger() {
    let tree = Tree::new("");
    tree.job("a.conf", "[job \"a\"]\ndescription = nothing\n");
    let file = tree.path("etc/svc/job.d/a.conf");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    let cmd = only_issue(&issues, &file, "job \"a\"", "command", None);
    assert!(cmd.message.contains("at least one command"), "{cmd}");
    let never = only_issue(&issues, &file, "job \"a\"", "path", None);
    assert!(never.message.contains("could never run"), "{never}");
}

#[test]
fn schedule_wins_over_interval() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a\"]\ninterval = 1m\nschedule = hourly@30\ncommand = true\n",
    );
    let job = &tree.load().jobs[0];
    let timer = job.timer.as_ref().expect("a timer");
    assert_eq!(timer.describe(), "hourly@30");
}

#[test]
fn job_path_normalised() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a\"]\npath = hooks/deploy\ncommand = true\n\
         [job \"b\"]\npath = /already/slash/\ncommand = true\n",
    );
    let jobs = tree.load().jobs;
    assert_eq!(jobs[0].path.as_deref(), Some("/hooks/deploy"));
    assert_eq!(jobs[1].path.as_deref(), Some("/already/slash/"));
}

#[test]
fn job_id_rule() {
    assert_eq!(job_id_from_name("backup"), "backup");
    assert_eq!(job_id_from_name("Backup DB"), "Backup_DB");
    assert_eq!(job_id_from_name("a-b_c.d/e\tf"), "a-b_c_d_e_f");
    assert_eq!(job_id_from_name("café"), "caf_");
    assert_eq!(job_id_from_name("My  Job"), "My__Job");
}

#[test]
fn names_keep_case_and_spaces_keys_do_not() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[JOB \"My Job\"]\nPATH = /a\nCommand = true\n[job \"my other job\"]\npath = /b\n\
         command = true\n",
    );
    let jobs = tree.load().jobs;
    assert_eq!(jobs[0].name, "My Job");
    assert_eq!(jobs[0].id, "My_Job");
    assert_eq!(jobs[1].name, "my other job");
    assert_eq!(jobs[1].id, "my_other_job");
}

#[test]
fn hook_sections_are_deprecated_jobs() {
    let tree = Tree::new("");
    tree.job("old.conf", "[hook \"old\"]\npath = /old\ncommand = true\n");
    let config = tree.load();
    assert_eq!(config.jobs.len(), 1);
    assert_eq!(config.jobs[0].id, "old");
    let deprecated: Vec<_> = config
        .warnings
        .iter()
        .filter(|w| w.message.contains("deprecated"))
        .collect();
    assert_eq!(deprecated.len(), 1, "{:?}", config.warnings);
    let warning = deprecated[0];
    assert_eq!(warning.section.as_deref(), Some("hook \"old\""));
    assert!(
        warning.message.contains("deprecated: use [job \"old\"]"),
        "{warning}"
    );
}

#[test]
fn jobs_in_the_main_file_come_first() {
    let tree = Tree::new("[job \"main\"]\npath = /m\ncommand = true\n");
    tree.job("b.conf", "[job \"b\"]\npath = /b\ncommand = true\n");
    tree.job("a.conf", "[job \"a\"]\npath = /a\ncommand = true\n");
    tree.job(
        "c.conf",
        "[job.http \"h\"]\ninterval = 1m\nhttp_url = http://x\n",
    );
    let config = tree.load();
    let ids: Vec<&str> = config.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["main", "a", "b"]);
    assert_eq!(config.http_jobs.len(), 1);
}

// ---------------------------------------------------------------------------------------
// JobHttp.

#[test]
fn http_job_values() {
    let tree = Tree::new("http_timeout = 2m\n");
    tree.http_job(
        "ping.conf",
        "[job.http \"Ping Site\"]\ndescription = ping\nsecret = k\ninterval = 10s\n\
         http_method = post\nhttp_url = \"https://user@example.com:8443/ping?a=1#f\"\n\
         http_request_type = JSON\nhttp_header = Authorization: Bearer a:b\n\
         http_header = X-Empty:\nhttp_timeout = 30s\nhttp_insecure\nhttp_follow_redirects = yes\n\
         log_retention = 2\n",
    );
    let config = tree.load();
    let job = &config.http_jobs[0];
    assert_eq!(job.id, "Ping_Site");
    assert_eq!(job.name, "Ping Site");
    assert_eq!(job.file, tree.path("etc/svc/job_http.d/ping.conf"));
    assert_eq!(job.description, "ping");
    assert_eq!(job.secret.as_ref().map(|s| s.expose()), Some("k"));
    assert_eq!(job.timer, Some(Timer::Interval(Duration::from_secs(10))));
    assert_eq!(job.http_method, HttpMethod::Post);
    assert_eq!(job.http_url, "https://user@example.com:8443/ping?a=1#f");
    assert_eq!(job.http_request_type, HttpRequestType::Json);
    assert_eq!(
        job.http_headers,
        vec![
            ("Authorization".to_string(), "Bearer a:b".to_string()),
            ("X-Empty".to_string(), String::new())
        ]
    );
    assert_eq!(job.http_timeout, Duration::from_secs(30));
    assert!(job.http_insecure);
    assert!(job.http_follow_redirects);
    assert_eq!(job.log_retention, 2);
}

#[test]
fn http_job_defaults() {
    let tree = Tree::new("http_timeout = 2m\n");
    tree.http_job(
        "a.conf",
        "[job.http \"a\"]\nschedule = minutely\nhttp_url = HTTP://[::1]/x\n",
    );
    let job = &tree.load().http_jobs[0];
    assert_eq!(
        job.timer,
        Some(Timer::Schedule(Schedule::Minutely, Zone::utc()))
    );
    assert_eq!(job.http_method, HttpMethod::Get);
    assert_eq!(job.http_request_type, HttpRequestType::Query);
    assert!(job.http_headers.is_empty());
    assert_eq!(job.http_timeout, Duration::from_secs(120));
    assert!(!job.http_insecure);
    assert!(!job.http_follow_redirects);
    assert_eq!(job.secret, None);
    assert_eq!(job.log_retention, 5);
    assert_eq!(job.user, None);
    assert_eq!(job.group, None);
}

#[test]
fn http_job_invalid_values() {
    for (key, value, fragment) in [
        ("http_method", "PATCH", "unknown http_method"),
        ("http_url", "ftp://example.com", "not http or https"),
        ("http_url", "example.com/ping", "not an absolute URL"),
        ("http_url", "//example.com/ping", "not an absolute URL"),
        ("http_url", "http:///ping", "no host"),
        ("http_url", "http://:80/", "no host"),
        ("http_url", "http://host:port/", "not a number"),
        ("http_url", "http://exa mple.com", "white space"),
        ("http_url", "http://[::1/", "unbalanced"),
        ("http_request_type", "xml", "unknown http_request_type"),
        ("http_header", "NoColon", "Name: value"),
        ("http_header", "Bad Name: v", "not a valid HTTP header name"),
        ("http_timeout", "30", "at least 1ms"),
        ("http_timeout", "-soon", "invalid duration"),
        ("header_sign", "x sign", "not a valid HTTP header name"),
        ("http_insecure", "sure", "not a boolean"),
        ("log_retention", "0", "at least 1"),
        ("interval", "0.5s", "at least 1s"),
        ("user", NO_SUCH_USER, "no such user"),
    ] {
        let tree = Tree::new("");
        let body = if key == "http_url" || key == "interval" {
            let other = if key == "http_url" {
                "interval = 1m"
            } else {
                "http_url = http://x"
            };
            format!("{other}\n{key} = {value}\n")
        } else {
            format!("interval = 1m\nhttp_url = http://x\n{key} = {value}\n")
        };
        tree.http_job("h.conf", &format!("[job.http \"h\"]\n{body}"));
        let file = tree.path("etc/svc/job_http.d/h.conf");
        let issues = tree.issues();
        let issue = only_issue(&issues, &file, "job.http \"h\"", key, Some(value));
        assert!(
            issue.message.contains(fragment),
            "{key} = {value:?}: {issue}"
        );
    }
}

#[test]
fn http_job_requires_a_url() {
    let tree = Tree::new("");
    tree.http_job("h.conf", "[job.http \"h\"]\ndescription = d\n");
    let file = tree.path("etc/svc/job_http.d/h.conf");
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    only_issue(&issues, &file, "job.http \"h\"", "http_url", None);
}

/// What upstream accepts and svc once refused: a JobHttp with no timer (run by hand
/// only), a path as `http_url` (the service itself), `header_sign`, an `http_timeout` of
/// 0 or below and an empty `http_request_type` (both the default).
#[test]
fn http_job_takes_upstream_forms() {
    for (main, url, resolved) in [
        (
            "",
            "/svc/api/environment",
            "http://127.0.0.1:31937/svc/api/environment",
        ),
        (
            "listen_address = 0.0.0.0:8080\n",
            "/x?a=1",
            "http://127.0.0.1:8080/x?a=1",
        ),
        ("listen_address = [::]:8080\n", "/x", "http://[::1]:8080/x"),
        (
            "listen_address = 10.0.0.5:81\n",
            "/x",
            "http://10.0.0.5:81/x",
        ),
        ("listen_address = [::1]:81\n", "/", "http://[::1]:81/"),
    ] {
        let tree = Tree::new(&format!("{main}http_timeout = 2m\n"));
        tree.http_job(
            "h.conf",
            &format!(
                "[job.http \"h\"]\nhttp_url = {url}\nheader_sign = X-Hub-Signature\n\
                 http_request_type =\nhttp_timeout = 0\n\
                 [job.http \"n\"]\nhttp_url = http://x\nhttp_timeout = -5s\n\
                 http_request_type = \"\"\n"
            ),
        );
        let config = tree.load();
        let job = &config.http_jobs[0];
        assert_eq!(job.http_url, resolved, "{main}{url}");
        assert_eq!(job.timer, None, "runs only when started by hand");
        assert_eq!(job.header_sign, "x-hub-signature");
        assert_eq!(job.http_request_type, HttpRequestType::Query);
        assert_eq!(job.http_timeout, Duration::from_secs(120));
        let negative = &config.http_jobs[1];
        assert_eq!(negative.http_timeout, Duration::from_secs(120));
        assert_eq!(negative.header_sign, "x-svc-sign");
    }
}

#[test]
fn http_job_rejects_job_keys() {
    let tree = Tree::new("");
    tree.http_job(
        "h.conf",
        "[job.http \"h\"]\ninterval = 1m\nhttp_url = http://x\ncommand = true\n",
    );
    let file = tree.path("etc/svc/job_http.d/h.conf");
    let issues = tree.issues();
    let issue = only_issue(&issues, &file, "job.http \"h\"", "command", Some("true"));
    assert!(issue.message.contains("unknown key"));
}

// ---------------------------------------------------------------------------------------
// Duplicates, syntax and directories.

#[test]
fn duplicate_ids_and_paths_across_files() {
    let tree = Tree::new("");
    tree.job("a.conf", "[job \"deploy\"]\npath = /hook\ncommand = true\n");
    tree.job(
        "b.conf",
        "[job \"deploy\"]\npath = /other\ncommand = true\n\
         [job \"second\"]\npath = hook\ncommand = true\n",
    );
    let a = tree.path("etc/svc/job.d/a.conf");
    let b = tree.path("etc/svc/job.d/b.conf");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert_eq!(issues[0].file, b);
    assert_eq!(issues[0].section.as_deref(), Some("job \"deploy\""));
    assert!(issues[0].message.contains("duplicate job ID \"deploy\""));
    assert!(issues[0].message.contains(&a.display().to_string()));
    assert_eq!(issues[1].file, b);
    assert_eq!(issues[1].key.as_deref(), Some("path"));
    assert_eq!(issues[1].value.as_deref(), Some("/hook"));
    assert!(issues[1].message.contains("duplicate path"));
    assert!(issues[1].message.contains(&a.display().to_string()));
}

#[test]
fn duplicate_ids_from_different_names_and_sections() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a b\"]\npath = /1\ncommand = true\n[job \"a_b\"]\npath = /2\ncommand = true\n\
         [job \"x\"]\npath = /3\ncommand = true\n[hook \"x\"]\npath = /4\ncommand = true\n",
    );
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert!(issues[0].message.contains("duplicate job ID \"a_b\""));
    assert_eq!(issues[1].section.as_deref(), Some("hook \"x\""));
}

#[test]
fn chains_name_jobs_in_any_case_and_form_no_cycle() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"Build\"]\npath = /b\ncommand = true\non_success = DEPLOY, notify\n\
         on_failure = notify\n[job \"deploy\"]\npath = /d\ncommand = true\n\
         on_success = notify\n[job \"notify\"]\npath = /n\ncommand = true\n",
    );
    let jobs = tree.load().jobs;
    assert_eq!(jobs[0].on_success, ["deploy", "notify"]);
    assert_eq!(jobs[0].on_failure, ["notify"]);
    assert_eq!(jobs[1].on_success, ["notify"]);
    assert!(jobs[2].on_success.is_empty());

    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a\"]\npath = /a\ncommand = true\non_success = b\n\
         [job \"b\"]\npath = /b\ncommand = true\non_failure = c\n\
         [job \"c\"]\npath = /c\ncommand = true\non_success = A\n\
         [job \"self\"]\npath = /s\ncommand = true\non_failure = self\n\
         [job \"x\"]\npath = /x\ncommand = true\non_success = nobody\n",
    );
    let file = tree.path("etc/svc/job.d/a.conf");
    let issues = tree.issues();
    assert_eq!(issues.len(), 3, "{issues:#?}");
    issue_about(
        &issues,
        &file,
        "job \"c\"",
        "on_success",
        Some("A"),
        "the chain a -> b -> c -> a leads back",
    );
    let own = only_issue(&issues, &file, "job \"self\"", "on_failure", Some("self"));
    assert!(own.message.contains("self -> self"), "{own}");
    issue_about(
        &issues,
        &file,
        "job \"x\"",
        "on_success",
        Some("nobody"),
        "no job has the ID \"nobody\"",
    );
}

#[test]
fn secrets_rotate_and_filters_are_lists() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a\"]\npath = /a\ncommand = true\nauth_kind = standard\n\
         secret = whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\nsecret = raw-old\nsecret =\n\
         filter_event = Push\nfilter_event = tag_push\nfilter_ref = refs/heads/*\n",
    );
    let job = &tree.load().jobs[0];
    // A standard job's whsec_ secret is decoded at load; another is its own bytes.
    let decoded = base64::engine::general_purpose::STANDARD
        .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .expect("base64");
    assert_eq!(
        job.secrets,
        [
            WebhookKey::new(decoded),
            WebhookKey::new(b"raw-old".to_vec())
        ]
    );
    assert_eq!(job.filter_event, ["push", "tag_push"]);
    let globs: Vec<&str> = job.filter_ref.iter().map(glob::Pattern::as_str).collect();
    assert_eq!(globs, ["refs/heads/*"]);

    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a\"]\npath = /a\ncommand = true\nauth_kind = standard\nsecret = whsec_!!\n",
    );
    let file = tree.path("etc/svc/job.d/a.conf");
    let issues = tree.issues();
    // The problem names the key, never the secret.
    let issue = only_issue(&issues, &file, "job \"a\"", "secret", Some("[redacted]"));
    assert!(issue.message.contains("base64"), "{issue}");
    assert!(!issue.to_string().contains("whsec_!!"), "{issue}");
    // Another scheme takes such a secret as it is.
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"a\"]\npath = /a\ncommand = true\nauth_kind = gitea\nsecret = whsec_!!\n",
    );
    assert_eq!(
        tree.load().jobs[0].secrets,
        [WebhookKey::new(b"whsec_!!".to_vec())]
    );
}

/// A `standard` webhook job without a secret of its own is checked with the main
/// secret: one that starts with `whsec_` must then decode, or no delivery could ever
/// match. Refused at load, naming the job; jobs that do not use it load.
#[test]
fn a_standard_job_on_the_main_secret_needs_it_to_decode() {
    let job = "[job \"std\"]\npath = /std\nauth_kind = standard\ncommand = true\n";
    let tree = Tree::new("secret = whsec_!!\n");
    let file = tree.job("a.conf", job);
    let issues = tree.issues();
    let issue = only_issue(&issues, &file, "job \"std\"", "secret", None);
    assert!(issue.message.contains("main secret"), "{issue}");
    assert!(issue.message.contains("base64"), "{issue}");
    assert!(
        issue
            .message
            .contains(&tree.main_file().display().to_string()),
        "{issue}"
    );
    assert!(!issue.to_string().contains("whsec_!!"), "{issue}");

    // Its own secret, or another scheme, or no path: the main secret is not its key.
    let tree = Tree::new("secret = whsec_!!\n");
    tree.job(
        "a.conf",
        "[job \"std\"]\npath = /std\nauth_kind = standard\nsecret = own\ncommand = true\n\
         [job \"mac\"]\npath = /mac\ncommand = true\n\
         [job \"timer\"]\ninterval = 1h\nauth_kind = standard\ncommand = true\n",
    );
    assert_eq!(tree.load().jobs.len(), 3);

    // A main secret that decodes is the key.
    let tree = Tree::new("secret = whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n");
    tree.job("a.conf", job);
    assert!(tree.load().jobs[0].secrets.is_empty(), "the main secret's");
}

#[test]
fn ids_that_differ_only_by_case_are_duplicates() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "[job \"Backup\"]\npath = /1\ncommand = true\n[job \"backup\"]\npath = /2\ncommand = true\n",
    );
    tree.http_job(
        "h.conf",
        "[job.http \"Ping\"]\nhttp_url = http://x\n[job.http \"PING\"]\nhttp_url = http://y\n",
    );
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert!(
        issues[0]
            .message
            .contains("duplicate job ID \"backup\": [job \"Backup\"] in")
            && issues[0]
                .message
                .ends_with("has the ID \"Backup\", the same but for case"),
        "{}",
        issues[0].message
    );
    assert_eq!(issues[0].section.as_deref(), Some("job \"backup\""));
    assert!(issues[1].message.contains("duplicate JobHttp ID \"PING\""));
}

#[test]
fn jobs_and_http_jobs_have_separate_ids() {
    let tree = Tree::new("");
    tree.job("a.conf", "[job \"same\"]\npath = /a\ncommand = true\n");
    tree.http_job(
        "a.conf",
        "[job.http \"same\"]\ninterval = 1m\nhttp_url = http://x\n\
         [job.http \"same\"]\ninterval = 1m\nhttp_url = http://y\n",
    );
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert!(issues[0].message.contains("duplicate JobHttp ID \"same\""));
}

#[test]
fn unknown_key_section_and_repeated_scalar() {
    let tree = Tree::new("colour = blue\n");
    tree.job(
        "a.conf",
        "[cron \"x\"]\nwhatever = 1\n[job \"a\"]\npath = /a\npath = /b\ncommand = true\nquiet\n",
    );
    let main = tree.main_file();
    let a = tree.path("etc/svc/job.d/a.conf");
    let issues = tree.issues();
    assert_eq!(issues.len(), 4, "{issues:#?}");
    let colour = only_issue(&issues, &main, "svc", "colour", Some("blue"));
    assert!(colour.message.contains("unknown key"));
    assert_eq!(issues[1].file, a);
    assert_eq!(issues[1].section.as_deref(), Some("cron \"x\""));
    assert!(issues[1].message.contains("unknown section"));
    let repeated = only_issue(&issues, &a, "job \"a\"", "path", Some("/b"));
    assert!(
        repeated
            .message
            .contains("repeated key (first set on line 4)")
    );
    let bare = only_issue(&issues, &a, "job \"a\"", "quiet", None);
    assert!(bare.message.contains("unknown key"), "{bare}");
}

#[test]
fn bare_key_needs_a_boolean() {
    let tree = Tree::new("name\n");
    let issues = tree.issues();
    let issue = only_issue(&issues, &tree.main_file(), "svc", "name", None);
    assert!(issue.message.contains("missing '='"), "{issue}");
}

#[test]
fn hidden_and_other_files_are_ignored() {
    let tree = Tree::new("");
    let broken = "this is not valid\n";
    tree.job(".hidden.conf", broken);
    tree.job("notes.txt", broken);
    tree.job("a.conf.disabled", broken);
    tree.job("a.conf~", broken);
    fs::create_dir_all(tree.path("etc/svc/job.d/dir.conf")).expect("mkdir");
    tree.job("z.conf", "[job \"z\"]\npath = /z\ncommand = true\n");
    tree.job("m.conf", "[job \"m\"]\npath = /m\ncommand = true\n");
    tree.http_job(".x.conf", broken);
    tree.http_job("README", broken);
    let config = tree.load();
    let ids: Vec<&str> = config.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["m", "z"]);
}

#[test]
fn job_dir_that_is_a_file() {
    let tree = Tree::new("");
    tree.write("etc/svc/job.d", "oops\n");
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].file, tree.path("etc/svc/job.d"));
    assert!(issues[0].message.contains("not a directory"));
}

#[test]
fn unreadable_job_file() {
    let tree = Tree::new("");
    tree.write("etc/svc/job.d/bad.conf", "");
    fs::write(tree.path("etc/svc/job.d/bad.conf"), [0xff, 0xfe, b'\n']).expect("write");
    std::os::unix::fs::symlink(
        tree.path("missing-target"),
        tree.path("etc/svc/job.d/dangling.conf"),
    )
    .expect("symlink");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert_eq!(issues[0].file, tree.path("etc/svc/job.d/bad.conf"));
    assert!(issues[0].message.contains("UTF-8"));
    assert_eq!(issues[1].file, tree.path("etc/svc/job.d/dangling.conf"));
}

#[test]
fn syntax_errors_name_file_and_line() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        "stray = 1\n[job \"a\"]\npath = /a\ncommand = true\n[job \"b\"\ncommand = x\n",
    );
    let a = tree.path("etc/svc/job.d/a.conf");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert_eq!(issues[0].file, a);
    assert!(
        issues[0]
            .message
            .starts_with("line 1: key outside a section")
    );
    assert!(issues[1].message.starts_with("line 5: "));
}

#[test]
fn every_problem_at_once() {
    let tree = Tree::new("max_job_running = 0\nbogus = 1\n");
    tree.job(
        "a.conf",
        "[job \"a\"]\ninterval = 0\ncommand = true\n[job \"b\"]\npath = /b\n",
    );
    tree.job("b.conf", "[job \"a\"]\npath = /b\ncommand = true\n");
    tree.http_job(
        "h.conf",
        "[job.http \"h\"]\nhttp_url = gopher://x\ninterval = 0.5s\n",
    );
    let issues = tree.issues();
    let summary: Vec<(String, Option<String>)> = issues
        .iter()
        .map(|i| {
            (
                i.file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                i.key.clone(),
            )
        })
        .collect();
    let expected = [
        ("svc.conf", Some("bogus")),
        ("svc.conf", Some("max_job_running")),
        ("a.conf", Some("interval")),
        ("a.conf", Some("command")),
        ("b.conf", None),
        ("b.conf", Some("path")),
        ("h.conf", Some("interval")),
        ("h.conf", Some("http_url")),
    ];
    let expected: Vec<(String, Option<String>)> = expected
        .iter()
        .map(|(f, k)| (f.to_string(), k.map(str::to_string)))
        .collect();
    assert_eq!(summary, expected, "{issues:#?}");
    let error = ConfigError {
        issues,
        warnings: Vec::new(),
    };
    assert!(error.to_string().starts_with("8 configuration problems"));
}

// ---------------------------------------------------------------------------------------
// user.conf.

/// A bcrypt hash of `pw` (cost 4, so the tests stay fast).
fn bcrypt_hash() -> String {
    bcrypt::hash("pw", 4).expect("bcrypt hash")
}

/// An argon2id hash of `pw` with small parameters.
fn argon2_hash() -> String {
    use argon2::PasswordHasher as _;
    let params = argon2::Params::new(1024, 1, 1, None).expect("parameters");
    let salt = argon2::password_hash::SaltString::encode_b64(b"saltsaltsaltsalt").expect("salt");
    argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
        .hash_password(b"pw", &salt)
        .expect("hash")
        .to_string()
}

impl Tree {
    /// Writes `etc/svc/user.conf` with `mode`.
    fn users(&self, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        self.write("etc/svc/user.conf", text);
        fs::set_permissions(
            self.path("etc/svc/user.conf"),
            fs::Permissions::from_mode(mode),
        )
        .expect("chmod user.conf");
    }
}

#[test]
fn without_user_conf_there_are_no_users() {
    let tree = Tree::new("");
    let config = tree.load();
    assert!(config.users.is_empty());
    assert!(config.warnings.is_empty());
}

#[test]
fn users_are_loaded_in_file_order() {
    let tree = Tree::new("");
    let (argon2, bcrypt) = (argon2_hash(), bcrypt_hash());
    tree.users(
        &format!(
            "# who may log in\n[user \"ann\"]\npassword = {argon2}\n\n[User \"bob.smith@example\"]\n\
             PASSWORD = {bcrypt}\n"
        ),
        0o600,
    );
    let config = tree.load();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let names: Vec<&str> = config.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["ann", "bob.smith@example"]);
    assert_eq!(config.users[0].password_hash, argon2);
    assert_eq!(config.users[1].password_hash, bcrypt);
    assert_eq!(config.users[0].file, tree.path("etc/svc/user.conf"));
    let shown = format!("{:?}", config.users);
    assert!(
        !shown.contains(&argon2) && !shown.contains(&bcrypt),
        "{shown}"
    );
}

#[test]
fn a_user_conf_readable_by_all_is_a_warning() {
    let tree = Tree::new("");
    tree.users(
        &format!("[user \"ann\"]\npassword = {}\n", bcrypt_hash()),
        0o644,
    );
    let config = tree.load();
    assert_eq!(config.users.len(), 1);
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    let warning = &config.warnings[0];
    assert_eq!(warning.file, tree.path("etc/svc/user.conf"));
    assert!(warning.message.contains("0644"), "{warning}");
    assert!(warning.message.contains("chmod 600"), "{warning}");
    tree.users(
        &format!("[user \"ann\"]\npassword = {}\n", bcrypt_hash()),
        0o640,
    );
    assert!(tree.load().warnings.is_empty());
}

#[test]
fn user_conf_problems_name_file_section_and_key_but_never_the_hash() {
    let tree = Tree::new("");
    let hash = bcrypt_hash();
    let broken = format!("{}X", &hash[..59]);
    let text = format!(
        "[user \"ann\"]\npassword = {hash}\n\
         [user \"ann\"]\npassword = {hash}\n\
         [user \"bad name\"]\npassword = {hash}\n\
         [user \"cy\"]\npassword = hunter2\n\
         [user \"dee\"]\npasswd = {hash}\n\
         [user \"eve\"]\npassword = {broken}\n\
         [user \"fay\"]\npassword = {hash}\npassword = {hash}\n\
         [job \"j\"]\ncommand = true\n\
         {hash}\n"
    );
    tree.users(&text, 0o600);
    let file = tree.path("etc/svc/user.conf");
    let issues = tree.issues();
    for issue in &issues {
        let shown = issue.to_string();
        assert!(!shown.contains(&hash[7..]), "the hash is shown: {shown}");
        assert!(!shown.contains("hunter2"), "the value is shown: {shown}");
        assert_eq!(issue.file, file, "{issue}");
    }
    let of_section = |section: &str| -> Vec<&ConfigIssue> {
        issues
            .iter()
            .filter(|i| i.section.as_deref() == Some(section))
            .collect()
    };
    let ann = of_section("user \"ann\"");
    assert_eq!(ann.len(), 1, "{issues:#?}");
    assert!(
        ann[0]
            .message
            .contains("duplicate user \"ann\" (first on line 1)")
    );
    let bad = of_section("user \"bad name\"");
    assert!(bad[0].message.contains("invalid user name"), "{issues:#?}");
    let cy = of_section("user \"cy\"");
    assert_eq!(cy[0].key.as_deref(), Some("password"));
    assert_eq!(cy[0].value.as_deref(), Some("<hash>"));
    assert!(cy[0].message.contains("hash-password"), "{}", cy[0]);
    let dee = of_section("user \"dee\"");
    assert_eq!(dee.len(), 2, "{dee:#?}");
    assert_eq!(dee[0].key.as_deref(), Some("passwd"));
    assert_eq!(dee[0].value.as_deref(), Some("<redacted>"));
    assert!(dee[0].message.contains("unknown key"));
    assert_eq!(dee[1].key.as_deref(), Some("password"));
    assert!(dee[1].message.contains("a user needs password"));
    let eve = of_section("user \"eve\"");
    assert_eq!(eve[0].value.as_deref(), Some("<hash>"));
    assert!(eve[0].message.contains("bcrypt"), "{}", eve[0]);
    let fay = of_section("user \"fay\"");
    assert!(fay[0].message.contains("repeated key"), "{}", fay[0]);
    let job = of_section("job \"j\"");
    assert!(
        job.iter()
            .any(|i| i.message.contains("only [user \"NAME\"] sections")),
        "{job:#?}"
    );
    // The pasted hash without a key: named by its line only.
    let pasted = issues
        .iter()
        .find(|i| i.message.starts_with("line 18:"))
        .expect("an issue for line 18");
    assert_eq!(pasted.key, None);
    assert!(
        pasted.message.contains("not a 'key = value' line"),
        "{pasted}"
    );
    assert_eq!(issues.len(), 9, "{issues:#?}");
}

#[test]
fn user_sections_elsewhere_are_errors() {
    let tree = Tree::new(&format!("[user \"ann\"]\npassword = {}\n", bcrypt_hash()));
    tree.job("a.conf", "[user \"bob\"]\npassword = x\n");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert_eq!(issues[0].file, tree.main_file());
    assert!(issues[0].message.contains("belong in"), "{}", issues[0]);
    assert!(issues[0].message.contains("user.conf"), "{}", issues[0]);
    assert_eq!(issues[1].file, tree.path("etc/svc/job.d/a.conf"));
}

#[test]
fn an_empty_user_conf_enables_nothing() {
    let tree = Tree::new("");
    tree.users("# nobody yet\n", 0o600);
    assert!(tree.load().users.is_empty());
}

#[test]
fn user_conf_that_is_a_directory() {
    let tree = Tree::new("");
    fs::create_dir_all(tree.path("etc/svc/user.conf")).expect("mkdir");
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert!(issues[0].message.contains("not a regular file"));
}

#[test]
fn webhook_jobs_without_their_own_secret_are_warned_about() {
    let tree = Tree::new(
        "secret = main\nrequire_epoch = true\nallowed_hosts = SVC.Example.org.\n\
         allowed_hosts = b\nmax_body_in_flight = 2M\n",
    );
    tree.job(
        "a.conf",
        "[job \"shared\"]\npath = /a\ncommand = true\n\
         [job \"own\"]\npath = /b\nsecret = s\ncommand = true\n\
         [job \"timer\"]\ninterval = 1m\ncommand = true\n\
         [job \"ed\"]\npath = /c\nauth_kind = patchhost\ncommand = true\n",
    );
    let config = tree.load();
    assert!(config.main.require_epoch);
    assert_eq!(config.main.allowed_hosts, ["svc.example.org", "b"]);
    assert_eq!(config.main.max_body_in_flight, 2 << 20);
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    let warning = &config.warnings[0];
    assert_eq!(warning.section.as_deref(), Some("job \"shared\""));
    assert_eq!(warning.key.as_deref(), Some("secret"));
    assert!(warning.message.contains("main secret"), "{warning}");
}

/// GitLab sends the secret itself: a `gitlab` webhook job without a secret of its own
/// would hand out the main secret, which signs the control requests. An error, not a
/// warning; an empty `secret =` (the main secret) counts as none.
#[test]
fn a_gitlab_webhook_job_needs_its_own_secret() {
    for own in ["", "secret =\n"] {
        let tree = Tree::new("secret = main-secret\n");
        let file = tree.job(
            "a.conf",
            &format!("[job \"lab\"]\npath = /lab\nauth_kind = gitlab\n{own}command = true\n"),
        );
        let issues = tree.issues();
        let issue = only_issue(&issues, &file, "job \"lab\"", "secret", None);
        assert!(issue.message.contains("X-Gitlab-Token"), "{issue}");
        assert!(issue.message.contains("main secret"), "{issue}");
        assert!(!issue.to_string().contains("main-secret"), "{issue}");
    }
    // With its own secret it loads, without a warning; without a path it receives no
    // deliveries, and loads too.
    let tree = Tree::new("secret = main-secret\n");
    tree.job(
        "a.conf",
        "[job \"lab\"]\npath = /lab\nauth_kind = gitlab\nsecret = own\ncommand = true\n\
         [job \"timer\"]\ninterval = 1h\nauth_kind = gitlab\ncommand = true\n",
    );
    let config = tree.load();
    assert_eq!(config.jobs.len(), 2);
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn write_paths_are_absolute_and_kept_apart_from_what_the_sandbox_protects() {
    let tree = Tree::new("");
    tree.job(
        "x.conf",
        "[job \"x\"]\npath = /p\ncommand = true\nwrite_paths = /srv/www\nwrite_paths = /var/cache/x/\n",
    );
    let job = &tree.load().jobs[0];
    assert_eq!(
        job.write_paths,
        [PathBuf::from("/srv/www"), PathBuf::from("/var/cache/x")]
    );
    assert!(job.sandbox, "on by default");

    for (value, fragment) in [
        ("srv/www", "not an absolute path"),
        ("/srv/../etc", "'..'"),
        ("{base}/var/run/svc/job", "state directory"),
        ("{base}/var/lib/svc/run", "request bodies"),
        ("{base}/var/log", "log directory"),
        ("{base}/etc/svc/job.d", "configuration"),
        ("{base}", "state directory"),
        ("/", "state directory"),
    ] {
        let tree = Tree::new("");
        let value = value.replace("{base}", &tree.base().display().to_string());
        tree.job(
            "x.conf",
            &format!("[job \"x\"]\npath = /p\ncommand = true\nwrite_paths = {value}\n"),
        );
        let file = tree.path("etc/svc/job.d/x.conf");
        let issues = tree.issues();
        let issue = only_issue(&issues, &file, "job \"x\"", "write_paths", Some(&value));
        assert!(issue.message.contains(fragment), "{value}: {issue}");
    }
}

#[test]
fn a_dir_work_the_sandbox_protects_is_refused_unless_the_sandbox_is_off() {
    let tree = Tree::new("");
    let dir = tree.path("var/log/svc/job");
    fs::create_dir_all(&dir).expect("mkdir");
    tree.job(
        "x.conf",
        &format!(
            "[job \"x\"]\npath = /p\ncommand = true\ndir_work = {}\n",
            dir.display()
        ),
    );
    let file = tree.path("etc/svc/job.d/x.conf");
    let issues = tree.issues();
    let value = dir.display().to_string();
    let issue = only_issue(&issues, &file, "job \"x\"", "dir_work", Some(&value));
    assert!(issue.message.contains("log directory"), "{issue}");

    tree.job(
        "x.conf",
        &format!(
            "[job \"x\"]\npath = /p\ncommand = true\ndir_work = {}\nsandbox = false\n",
            dir.display()
        ),
    );
    let job = &tree.load().jobs[0];
    assert!(!job.sandbox);
}

#[test]
fn a_main_file_beside_what_jobs_read_is_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("svc.conf");
    fs::write(&file, "[svc]\n").expect("write");
    let mut main = load(&file).expect("load").main;
    assert!(shared_main_dir(&main).is_none());
    main.file = PathBuf::from("/etc/svc.conf");
    let warning = shared_main_dir(&main).expect("a warning");
    assert!(
        warning.contains("(/etc)") && warning.contains("/etc/svc"),
        "{warning}"
    );
    main.file = PathBuf::from("/etc/svc/svc.conf");
    assert!(shared_main_dir(&main).is_none());
    main.file = PathBuf::from("/svc.conf");
    assert!(shared_main_dir(&main).is_some());
    let protected: Vec<PathBuf> = main
        .sandbox_protected_paths()
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert!(
        protected.contains(&PathBuf::from("/svc.conf")),
        "{protected:?}"
    );
    assert!(!protected.contains(&PathBuf::from("/")), "{protected:?}");
}

#[test]
fn roles_default_to_viewer_and_an_unknown_one_is_named_with_its_key() {
    use crate::security::rights::Role;
    let tree = Tree::new("");
    let hash = bcrypt_hash();
    tree.users(
        &format!(
            "[user \"ann\"]\npassword = {hash}\n\
             [user \"bob\"]\npassword = {hash}\nrole = operator\n\
             [user \"cy\"]\npassword = {hash}\nrole = admin\n"
        ),
        0o600,
    );
    let roles: Vec<(String, Role)> = tree
        .load()
        .users
        .iter()
        .map(|u| (u.name.clone(), u.role))
        .collect();
    assert_eq!(
        roles,
        [
            ("ann".to_string(), Role::Viewer),
            ("bob".to_string(), Role::Operator),
            ("cy".to_string(), Role::Admin)
        ]
    );
    tree.users(
        &format!("[user \"ann\"]\npassword = {hash}\nrole = root\n"),
        0o600,
    );
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    let issue = &issues[0];
    assert_eq!(issue.file, tree.path("etc/svc/user.conf"));
    assert_eq!(issue.section.as_deref(), Some("user \"ann\""));
    assert_eq!(issue.key.as_deref(), Some("role"));
    // Not a secret: shown, so the operator sees the typo.
    assert_eq!(issue.value.as_deref(), Some("root"));
    assert!(issue.message.contains("viewer, operator, admin"), "{issue}");
}

#[test]
fn public_read_trusted_proxies_and_the_audit_size_are_read() {
    let config = Tree::new("").load();
    assert!(!config.main.public_read);
    assert!(config.main.trusted_proxies.is_empty());
    assert_eq!(
        config.main.audit_max_size,
        crate::config::DEFAULT_AUDIT_MAX_SIZE
    );
    let tree = Tree::new(
        "public_read = true\ntrusted_proxies = 127.0.0.1\ntrusted_proxies = 10.0.0.0/8\n\
         audit_max_size = 64K\n",
    );
    let config = tree.load();
    assert!(config.main.public_read);
    let shown: Vec<String> = config
        .main
        .trusted_proxies
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["127.0.0.1/32", "10.0.0.0/8"]);
    assert_eq!(config.main.audit_max_size, 64 * 1024);
    let tree = Tree::new("trusted_proxies = proxy.example\ntrusted_proxies = 10.1.0.0/8\n");
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert!(
        issues
            .iter()
            .all(|i| i.key.as_deref() == Some("trusted_proxies"))
    );
    assert!(
        issues[0].message.contains("not an IP address"),
        "{}",
        issues[0]
    );
    assert!(issues[1].message.contains("10.0.0.0/8"), "{}", issues[1]);
}
