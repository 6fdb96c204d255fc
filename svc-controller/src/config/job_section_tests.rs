//! Tests of `[job]` sections, loaded from configuration trees in temporary directories.

use std::time::Duration;

use crate::config::loader::*;
use crate::config::test_tree::*;
use crate::config::{AuthKind, DEFAULT_PATCHHOST_PUBLIC_KEY, ResourceLimits, WebhookKey};
use crate::time::schedule::{Schedule, Timer};
use crate::time::timezone::Zone;

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
