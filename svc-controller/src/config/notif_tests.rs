//! Tests of `[notif "NAME"]` sections and the job keys `notif_on_success` and
//! `notif_on_failed`: every key, every bad input with the issue it gives (file, section,
//! key, value), upstream's example sections as they are, and no password or secret in
//! any problem shown.

use std::sync::Arc;

use base64::Engine as _;

use super::*;
use crate::config::test_tree::{Tree, issue_about};
use crate::config::{Config, ConfigIssue};

const EMAIL: &str = "[notif \"mail\"]\nkind = email\nsmtp_server = smtps://mail.example.org\n\
                     from = svc@example.org\nto = ops@example.org\n";

/// The notif `name` of `config`, which must be there.
fn notif_kind(config: &Config, name: &str) -> NotifKind {
    let notif = config.notifs.iter().find(|n| n.name == name);
    notif.expect("the notif").kind.clone()
}

fn email(config: &Config, name: &str) -> EmailNotif {
    match notif_kind(config, name) {
        NotifKind::Email(email) => email,
        other => panic!("not an email notif: {other:?}"),
    }
}

fn webhook(config: &Config, name: &str) -> Arc<WebhookNotif> {
    match notif_kind(config, name) {
        NotifKind::Webhook(webhook) => webhook,
        other => panic!("not a webhook notif: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Values.

#[test]
fn email_keys() {
    let tree = Tree::new(
        "[notif \"Mail Ops\"]\nKind = EMAIL\nsmtp_server = smtp+starttls://Mail.Example.org\n\
         smtp_user = $SVC_TEST_USER\nsmtp_password = $SVC_TEST_PASS\n\
         from = \"svc <svc@example.org>\"\nto = a@example.org\n\
         to = b@example.org, \\\"Doe, Jane\\\" <jane@example.org>\nsmtp_insecure\n",
    )
    .with_env("SVC_TEST_USER", "mailer")
    .with_env("SVC_TEST_PASS", "pa55-from-env");
    let config = tree.load();
    assert_eq!(config.notifs.len(), 1);
    assert_eq!(config.notifs[0].file, tree.main_file());
    let email = email(&config, "Mail Ops");
    assert_eq!(
        email.server,
        SmtpServer {
            security: SmtpSecurity::StartTls,
            host: "mail.example.org".into(),
            port: 587
        }
    );
    assert_eq!(
        email.credentials,
        Some(SmtpCredentials {
            user: "mailer".into(),
            password: "pa55-from-env".into()
        })
    );
    assert_eq!(email.from.to_string(), "svc <svc@example.org>");
    assert_eq!(email.to.len(), 3, "{:?}", email.to);
    assert_eq!(email.to[0].to_string(), "a@example.org");
    assert_eq!(email.to[2].to_string(), "\"Doe, Jane\" <jane@example.org>");
    assert!(email.insecure);
}

#[test]
fn smtp_server_forms() {
    let cases = [
        (
            "smtps://mail.example.org",
            SmtpSecurity::Tls,
            "mail.example.org",
            465,
        ),
        (
            "SMTPS://127.0.0.1:2465/",
            SmtpSecurity::Tls,
            "127.0.0.1",
            2465,
        ),
        (
            "smtp+starttls://mail:25",
            SmtpSecurity::StartTls,
            "mail",
            25,
        ),
        ("smtp+starttls://[::1]", SmtpSecurity::StartTls, "::1", 587),
        ("smtps://[::1]:1465", SmtpSecurity::Tls, "::1", 1465),
    ];
    for (url, security, host, port) in cases {
        let server = parse_smtp_server(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(
            server,
            SmtpServer {
                security,
                host: host.into(),
                port
            },
            "{url}"
        );
    }
    let shown = parse_smtp_server("smtps://[::1]:1465").expect("valid");
    assert_eq!(shown.to_string(), "smtps://[::1]:1465");
    let shown = parse_smtp_server("smtp+starttls://h").expect("valid");
    assert_eq!(shown.to_string(), "smtp+starttls://h:587");
}

#[test]
fn plain_credentials_and_none() {
    let tree = Tree::new(&format!(
        "{EMAIL}\n[notif \"auth\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_user = u\n\
         smtp_password = literal\nfrom = a@example.org\nto = b@example.org\n\
         [notif \"empty\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_user =\n\
         smtp_password =\nfrom = a@example.org\nto = b@example.org\nsmtp_insecure = false\n"
    ));
    let config = tree.load();
    let plain = email(&config, "mail");
    assert_eq!(plain.credentials, None);
    assert!(!plain.insecure);
    let auth = email(&config, "auth");
    assert_eq!(
        auth.credentials,
        Some(SmtpCredentials {
            user: "u".into(),
            password: "literal".into()
        })
    );
    assert_eq!(email(&config, "empty").credentials, None, "empty is unset");
}

#[test]
fn webhook_keys_and_standard_webhooks_secrets() {
    let tree = Tree::new(
        "[notif \"std\"]\nkind = webhook\nurl = https://hooks.example.org/svc\n\
         secret = whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n\
         [notif \"raw\"]\nkind = Webhook\nurl = http://127.0.0.1:9/x?a=1\nsecret = plain text\n",
    );
    let config = tree.load();
    let std = webhook(&config, "std");
    assert_eq!(std.url, "https://hooks.example.org/svc");
    assert_eq!(
        std.key.bytes(),
        base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .expect("base64"),
        "the bytes after whsec_, decoded"
    );
    let raw = webhook(&config, "raw");
    assert_eq!(raw.url, "http://127.0.0.1:9/x?a=1");
    assert_eq!(raw.key.bytes(), b"plain text", "any other value as it is");
}

/// A webhook's URL may carry a token: `Debug` (of the notif, and of the configuration
/// that holds it) shows it redacted, and never the key.
#[test]
fn a_webhook_notif_is_shown_without_its_token_or_key() {
    let tree = Tree::new(
        "[notif \"hook\"]\nkind = webhook\n\
         url = https://hooks.example.org/services/T0AB12CD/B3EF45GH/Xy9zAbCdEfGhIjKlMnOpQrSt?token=tok-4e1d&page=1\n\
         secret = key-9b2c\n",
    );
    let config = tree.load();
    for shown in [
        format!("{:?}", webhook(&config, "hook")),
        format!("{:?}", config.notifs),
    ] {
        for hidden in ["Xy9zAbCdEfGhIjKlMnOpQrSt", "tok-4e1d", "key-9b2c"] {
            assert!(!shown.contains(hidden), "{hidden} in {shown}");
        }
        assert!(shown.contains("hooks.example.org"), "{shown}");
        assert!(shown.contains("page=1"), "{shown}");
    }
}

#[test]
fn job_keys_take_repeated_and_comma_separated_names() {
    let tree = Tree::new(&format!(
        "{EMAIL}\n[job \"j\"]\npath = /j\ncommand = true\nnotif_on_success = mail\n\
         notif_on_success = hook , mail,\nnotif_on_failed = mail,hook\n"
    ));
    // Defined in a later file than the job that names it.
    tree.job(
        "z.conf",
        "[notif \"hook\"]\nkind = webhook\nurl = https://h.example.org/\nsecret = s\n\
         [job \"quiet\"]\npath = /q\ncommand = true\n",
    );
    tree.write(
        "etc/svc/job_http.d/h.conf",
        "[job.http \"h\"]\nhttp_url = https://h.example.org/\nnotif_on_failed = hook\n",
    );
    let config = tree.load();
    let job = config.jobs.iter().find(|j| j.id == "j").expect("job j");
    assert_eq!(job.notif_on_success, vec!["mail", "hook"]);
    assert_eq!(job.notif_on_failed, vec!["mail", "hook"]);
    let quiet = config.jobs.iter().find(|j| j.id == "quiet").expect("quiet");
    assert!(quiet.notif_on_success.is_empty() && quiet.notif_on_failed.is_empty());
    assert_eq!(config.http_jobs[0].notif_on_failed, vec!["hook"]);
    assert!(config.http_jobs[0].notif_on_success.is_empty());
    assert_eq!(config.notifs.len(), 2);
}

/// Upstream's example configuration (its `[notif]` section, and the job files of its
/// example and test trees), as they are; only upstream's main section word is svc's.
#[test]
fn upstream_example_sections_load_unchanged() {
    let tree = Tree::new(
        "\n[notif \"email-to-shulhan\"]\nkind = email\n\
         smtp_server = smtps://mail.kilabit.info\nsmtp_user = $SMTP_USER\n\
         smtp_password = $SMTP_PASS\nfrom = ops@kilabit.info\nto = m.shulhan@gmail.com\n",
    )
    .with_env("SMTP_USER", "ops")
    .with_env("SMTP_PASS", "upstream-pass");
    tree.job(
        "notif-email-success.conf",
        "[job \"notif-email-success\"]\ndescription = Send notification when job success.\n\
         path = /notif-email-success\nsecret = s3cret\ncommand = echo \"Test notification\"\n\
         notif_on_success = email-to-shulhan\n",
    );
    tree.job(
        "notif.conf",
        "[job \"notif-email-both\"]\ndescription = Send notification when job success.\n\
         path = /notif-email-both\ncommand = echo \"Test email notification\"\n\
         notif_on_failed = email-to-shulhan\nnotif_on_success = email-to-shulhan\n\
         notif_on_success = email-to-ops\n",
    );
    // The test tree names a second notif, which its main file does not define.
    tree.job(
        "ops.conf",
        "[notif \"email-to-ops\"]\nkind = email\nsmtp_server = smtps://mail.kilabit.info\n\
         from = ops@kilabit.info\nto = ops@kilabit.info\n",
    );
    let config = tree.load();
    let email = email(&config, "email-to-shulhan");
    assert_eq!(
        email.server,
        SmtpServer {
            security: SmtpSecurity::Tls,
            host: "mail.kilabit.info".into(),
            port: 465
        }
    );
    assert_eq!(
        email.credentials,
        Some(SmtpCredentials {
            user: "ops".into(),
            password: "upstream-pass".into()
        })
    );
    assert_eq!(email.from.to_string(), "ops@kilabit.info");
    assert_eq!(email.to.len(), 1);
    assert_eq!(email.to[0].to_string(), "m.shulhan@gmail.com");
    let both = config
        .jobs
        .iter()
        .find(|j| j.id == "notif-email-both")
        .expect("the job");
    assert_eq!(
        both.notif_on_success,
        vec!["email-to-shulhan", "email-to-ops"]
    );
    assert_eq!(both.notif_on_failed, vec!["email-to-shulhan"]);
}

// ---------------------------------------------------------------------------------------
// Problems.

#[test]
fn kind_is_required_and_known() {
    let tree = Tree::new("[notif \"a\"]\nurl = https://x/\n[notif \"b\"]\nkind = sms\n");
    let issues = tree.issues();
    let main = tree.main_file();
    let missing: Vec<_> = issues
        .iter()
        .filter(|i| i.section.as_deref() == Some("notif \"a\"") && i.key.as_deref() == Some("kind"))
        .collect();
    assert_eq!(missing.len(), 1, "{issues:#?}");
    assert!(missing[0].message.contains("needs kind"), "{}", missing[0]);
    let unknown: Vec<_> = issues
        .iter()
        .filter(|i| i.section.as_deref() == Some("notif \"b\""))
        .collect();
    assert_eq!(unknown.len(), 1, "{issues:#?}");
    assert_eq!(unknown[0].file, main);
    assert_eq!(unknown[0].value.as_deref(), Some("sms"));
    assert!(unknown[0].message.contains("expected email or webhook"));
}

#[test]
fn email_needs_server_from_and_to() {
    let tree = Tree::new("[notif \"m\"]\nkind = email\n");
    let issues = tree.issues();
    let main = tree.main_file();
    let section = "notif \"m\"";
    issue_about(
        &issues,
        &main,
        section,
        "smtp_server",
        None,
        "needs smtp_server",
    );
    issue_about(&issues, &main, section, "from", None, "needs from");
    issue_about(&issues, &main, section, "to", None, "needs to");
    assert_eq!(issues.len(), 3, "{issues:#?}");
}

#[test]
fn webhook_needs_url_and_secret() {
    let tree = Tree::new("[notif \"w\"]\nkind = webhook\n");
    let issues = tree.issues();
    let main = tree.main_file();
    issue_about(&issues, &main, "notif \"w\"", "url", None, "needs url");
    issue_about(
        &issues,
        &main,
        "notif \"w\"",
        "secret",
        None,
        "needs secret",
    );
    assert_eq!(issues.len(), 2, "{issues:#?}");
}

/// (value of smtp_server, start of its message); the issue shows the value as it is.
const BAD_SERVERS: &[(&str, &str)] = &[
    ("mail.example.org", "not a URL"),
    ("smtp://mail.example.org", "smtp:// would send"),
    ("http://mail.example.org", "scheme \"http\""),
    ("smtps://", "missing or invalid host"),
    ("smtps://:465", "missing or invalid host"),
    ("smtps://m:0", "port \"0\""),
    ("smtps://m:99999", "port \"99999\""),
    ("smtps://m:+25", "port \"+25\""),
    ("smtps://m/path", "a path, query or fragment"),
    ("smtps://m?x=1", "a path, query or fragment"),
    ("smtps://m_x", "missing or invalid host"),
    ("smtps://[fe80::1", "unbalanced '['"),
    ("smtps://[nope]:1", "not an IPv6 address"),
];

/// The one issue of a notif whose `smtp_server` is `value`: on its line, showing `shown`
/// and saying `message`.
#[track_caller]
fn bad_server_issue(value: &str, shown: &str, message: &str) -> ConfigIssue {
    let tree = Tree::new(&format!(
        "[notif \"m\"]\nkind = email\nsmtp_server = {value}\nfrom = a@example.org\n\
         to = b@example.org\n"
    ));
    let issues = tree.issues();
    let issue = issue_about(
        &issues,
        &tree.main_file(),
        "notif \"m\"",
        "smtp_server",
        Some(shown),
        message,
    );
    assert!(issue.message.starts_with("line 5: "), "{issue}");
    assert_eq!(issues.len(), 1, "{value}: {issues:#?}");
    issue
}

#[test]
fn bad_smtp_servers() {
    for (value, message) in BAD_SERVERS {
        bad_server_issue(value, value, message);
    }
    // A password in the URL is not shown.
    let issue = bad_server_issue(
        "smtps://me:hunter2@m",
        "smtps://me:[redacted]@m",
        "no user or password in the URL",
    );
    assert!(!issue.to_string().contains("hunter2"), "{issue}");
}

#[test]
fn bad_addresses_and_flags() {
    let tree = Tree::new(
        "[notif \"m\"]\nkind = email\nsmtp_server = smtps://m\nfrom = not an address\n\
         to = ok@example.org\nto = also@bad@example\nto = ,\nsmtp_insecure = maybe\n",
    );
    let issues = tree.issues();
    let main = tree.main_file();
    let section = "notif \"m\"";
    issue_about(
        &issues,
        &main,
        section,
        "from",
        Some("not an address"),
        "not an e-mail address",
    );
    issue_about(
        &issues,
        &main,
        section,
        "smtp_insecure",
        Some("maybe"),
        "not a boolean",
    );
    let to: Vec<_> = issues
        .iter()
        .filter(|i| i.key.as_deref() == Some("to"))
        .collect();
    assert_eq!(to.len(), 2, "{issues:#?}");
    assert_eq!(to[0].value.as_deref(), Some("also@bad@example"));
    assert!(to[0].message.starts_with("line 8: "), "{}", to[0]);
    assert_eq!(to[1].value.as_deref(), Some(","));
}

#[test]
fn credentials_come_in_pairs() {
    let tree = Tree::new(
        "[notif \"u\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_user = me\n\
         from = a@example.org\nto = b@example.org\n\
         [notif \"p\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_password = pw-only-x1\n\
         from = a@example.org\nto = b@example.org\n",
    );
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert_eq!(issues[0].section.as_deref(), Some("notif \"u\""));
    assert_eq!(issues[0].key.as_deref(), Some("smtp_password"));
    assert!(
        issues[0].message.contains("smtp_user is set"),
        "{}",
        issues[0]
    );
    assert_eq!(issues[1].section.as_deref(), Some("notif \"p\""));
    assert_eq!(issues[1].key.as_deref(), Some("smtp_user"));
}

#[test]
fn a_missing_environment_variable_is_named_and_no_value_shown() {
    let tree = Tree::new(
        "[notif \"m\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_user = $SVC_NO_SUCH_USER\n\
         smtp_password = $SVC_EMPTY_PASS\nfrom = a@example.org\nto = b@example.org\n\
         [notif \"n\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_user = $1bad\n\
         smtp_password = x\nfrom = a@example.org\nto = b@example.org\n",
    )
    .with_env("SVC_EMPTY_PASS", "");
    let issues = tree.issues();
    let main = tree.main_file();
    issue_about(
        &issues,
        &main,
        "notif \"m\"",
        "smtp_user",
        Some("$SVC_NO_SUCH_USER"),
        "the environment variable SVC_NO_SUCH_USER is not set",
    );
    issue_about(
        &issues,
        &main,
        "notif \"m\"",
        "smtp_password",
        Some("[redacted]"),
        "the environment variable SVC_EMPTY_PASS is empty",
    );
    issue_about(
        &issues,
        &main,
        "notif \"n\"",
        "smtp_user",
        Some("$1bad"),
        "names an environment variable",
    );
}

#[test]
fn keys_of_the_other_kind_and_unknown_keys_are_errors() {
    let tree = Tree::new(
        "[notif \"m\"]\nkind = email\nsmtp_server = smtps://m\nfrom = a@example.org\n\
         to = b@example.org\nurl = https://x/\nsecret = email-secret-x9\n\
         [notif \"w\"]\nkind = webhook\nurl = https://x/\nsecret = s\nsmtp_server = smtps://m\n\
         to = b@example.org\nfrobnicate = 1\n",
    );
    let issues = tree.issues();
    let main = tree.main_file();
    issue_about(
        &issues,
        &main,
        "notif \"m\"",
        "url",
        Some("https://x/"),
        "belongs to kind = webhook",
    );
    issue_about(
        &issues,
        &main,
        "notif \"m\"",
        "secret",
        Some("[redacted]"),
        "belongs to kind = webhook",
    );
    issue_about(
        &issues,
        &main,
        "notif \"w\"",
        "smtp_server",
        Some("smtps://m"),
        "belongs to kind = email",
    );
    issue_about(
        &issues,
        &main,
        "notif \"w\"",
        "to",
        Some("b@example.org"),
        "belongs to kind = email",
    );
    issue_about(
        &issues,
        &main,
        "notif \"w\"",
        "frobnicate",
        Some("1"),
        "unknown key",
    );
    assert_eq!(issues.len(), 5, "{issues:#?}");
}

#[test]
fn bad_webhook_values() {
    let tree = Tree::new(
        "[notif \"a\"]\nkind = webhook\nurl = ftp://x/\nsecret = whsec_not*base64\n\
         [notif \"b\"]\nkind = webhook\nurl = https://h/\nsecret = whsec_\n\
         [notif \"c\"]\nkind = webhook\nurl =\nsecret =\n",
    );
    let issues = tree.issues();
    let main = tree.main_file();
    issue_about(
        &issues,
        &main,
        "notif \"a\"",
        "url",
        Some("ftp://x/"),
        "scheme \"ftp\"",
    );
    let secret = issue_about(
        &issues,
        &main,
        "notif \"a\"",
        "secret",
        Some("[redacted]"),
        "base64",
    );
    assert!(!secret.message.contains("not*base64"), "{secret}");
    issue_about(
        &issues,
        &main,
        "notif \"b\"",
        "secret",
        Some("[redacted]"),
        "the key is empty",
    );
    issue_about(
        &issues,
        &main,
        "notif \"c\"",
        "url",
        Some(""),
        "empty value",
    );
    issue_about(
        &issues,
        &main,
        "notif \"c\"",
        "secret",
        Some(""),
        "empty value",
    );
}

#[test]
fn duplicate_notif_names_across_files() {
    let tree = Tree::new(EMAIL);
    let file = tree.job("dup.conf", EMAIL);
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].file, file);
    assert_eq!(issues[0].section.as_deref(), Some("notif \"mail\""));
    assert!(
        issues[0].message.contains("duplicate notif \"mail\""),
        "{}",
        issues[0]
    );
    assert!(
        issues[0].message.contains("svc.conf"),
        "names the first: {}",
        issues[0]
    );
}

#[test]
fn a_job_naming_an_unknown_notif() {
    let tree = Tree::new(EMAIL);
    let file = tree.job(
        "j.conf",
        "[job \"j\"]\npath = /j\ncommand = true\nnotif_on_success = mail\n\
         notif_on_failed = mail, nope\n\
         [job.http \"h\"]\nhttp_url = https://h/\nnotif_on_success = ghost\n",
    );
    let issues = tree.issues();
    assert_eq!(issues.len(), 2, "{issues:#?}");
    let issue = issue_about(
        &issues,
        &file,
        "job \"j\"",
        "notif_on_failed",
        Some("mail, nope"),
        "line 5: no [notif \"nope\"] section (known: mail)",
    );
    assert!(issue.to_string().contains("j.conf"), "{issue}");
    issue_about(
        &issues,
        &file,
        "job.http \"h\"",
        "notif_on_success",
        Some("ghost"),
        "no [notif \"ghost\"] section",
    );
}

#[test]
fn with_no_notif_at_all_the_message_says_so() {
    let tree = Tree::new("[job \"j\"]\npath = /j\ncommand = true\nnotif_on_success = x\n");
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert!(
        issues[0].message.contains("there is no [notif] section"),
        "{}",
        issues[0]
    );
}

#[test]
fn empty_notif_lists_are_errors() {
    let tree = Tree::new(&format!(
        "{EMAIL}[job \"j\"]\npath = /j\ncommand = true\nnotif_on_success =\n\
         notif_on_failed = \" , \"\n"
    ));
    let issues = tree.issues();
    let main = tree.main_file();
    issue_about(
        &issues,
        &main,
        "job \"j\"",
        "notif_on_success",
        Some(""),
        "no notif name",
    );
    issue_about(
        &issues,
        &main,
        "job \"j\"",
        "notif_on_failed",
        Some(" , "),
        "no notif name",
    );
}

#[test]
fn notif_sections_do_not_belong_in_user_conf() {
    let tree = Tree::new("");
    tree.write("etc/svc/user.conf", EMAIL);
    let issues = tree.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert!(issues[0].message.contains("only [user"), "{}", issues[0]);
}

/// Every way a password or a secret can end up in a problem: repeated, of the wrong
/// kind, under an unknown key, in a URL, alongside other errors. None shows it, neither
/// does a loaded configuration's `Debug`.
#[test]
fn no_problem_and_no_debug_output_shows_a_password_or_secret() {
    const SECRETS: &[&str] = &[
        "smtp-pass-1a2b",
        "smtp-pass-3c4d",
        "hook-secret-5e6f",
        "hook-secret-7a8b",
        "url-pass-9c0d",
        "whsec_bad*secret-1e2f",
        "odd-password-3a4b",
    ];
    let tree = Tree::new(&format!(
        "[notif \"m\"]\nkind = email\nsmtp_server = smtps://me:{}@m\nsmtp_user = u\n\
         smtp_password = {}\nsmtp_password = {}\nfrom = a@example.org\nto = b@example.org\n\
         secret = {}\npassword = {}\n\
         [notif \"w\"]\nkind = webhook\nurl = https://h/\nsecret = {}\nsecret = {}\n\
         smtp_password = {}\n",
        SECRETS[4],
        SECRETS[0],
        SECRETS[1],
        SECRETS[2],
        SECRETS[6],
        SECRETS[5],
        SECRETS[3],
        SECRETS[0]
    ));
    let error = tree.result().expect_err("invalid");
    let shown = format!("{error}\n{error:?}");
    for secret in SECRETS {
        assert!(!shown.contains(secret), "{secret} shown in:\n{shown}");
    }
    assert!(error.issues.len() >= 6, "{shown}");

    let tree = Tree::new(
        "[notif \"m\"]\nkind = email\nsmtp_server = smtps://m\nsmtp_user = u\n\
         smtp_password = smtp-pass-1a2b\nfrom = a@example.org\nto = b@example.org\n\
         [notif \"w\"]\nkind = webhook\nurl = https://h/\nsecret = hook-secret-5e6f\n",
    );
    let debug = format!("{:?}", tree.load());
    assert!(!debug.contains("smtp-pass-1a2b"), "{debug}");
    assert!(!debug.contains("hook-secret-5e6f"), "{debug}");
    assert!(
        !debug.contains("104, 111, 111, 107"),
        "the key's bytes: {debug}"
    );
}
