//! Tests of [`super::load`] on configuration trees written to temporary directories.

use std::fs;
use std::path::PathBuf;

use base64::Engine as _;

use super::*;
use crate::config::WebhookKey;
use crate::config::main_section::shared_main_dir;
use crate::config::test_tree::*;

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
