//! Tests of the `ping_url` key of Jobs and JobHttps: what loads, what is refused, and
//! that neither a problem nor `Debug` shows the check's secret.

use crate::config::test_tree::{Tree, issue_about};

/// A check's URL as healthchecks.io hands it out: the UUID is its secret.
const UUID: &str = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278";

#[test]
fn jobs_and_job_https_take_a_ping_url() {
    let tree = Tree::new("");
    tree.job(
        "a.conf",
        &format!(
            "[job \"a\"]\npath = /a\ncommand = true\nping_url = https://hc-ping.com/{UUID}\n\
             [job \"b\"]\npath = /b\ncommand = true\n"
        ),
    );
    tree.http_job(
        "h.conf",
        "[job.http \"h\"]\nhttp_url = http://x\nping_url = http://[::1]:8000/ping/key/slug?create=1\n",
    );
    let config = tree.load();
    let url = config.jobs[0].ping_url.as_ref().expect("a's ping_url");
    assert_eq!(url.expose(), format!("https://hc-ping.com/{UUID}"));
    assert_eq!(config.jobs[1].ping_url, None, "none by default");
    let http = config.http_jobs[0].ping_url.as_ref().expect("h's ping_url");
    assert_eq!(
        http.expose(),
        "http://[::1]:8000/ping/key/slug?create=1",
        "a query is kept"
    );
    // The configuration's Debug (which `--check` and error paths may print) hides it.
    let shown = format!("{:?}", config.jobs[0]);
    assert!(shown.contains("hc-ping.com"), "{shown}");
    assert!(!shown.contains(UUID), "{shown}");
}

#[test]
fn a_bad_ping_url_is_refused_without_showing_its_secret() {
    // What the problem shows of the value: the scheme and host at most, as a log line.
    for (value, shown, message) in [
        (
            "ftp://hc-ping.com/{UUID}",
            "ftp://hc-ping.com/[redacted]",
            "not http or https",
        ),
        ("hc-ping.com/{UUID}", "[redacted]", "not an absolute URL"),
        ("https:///{UUID}", "https:///[redacted]", "no host"),
        (
            "https://hc-ping.com:port/{UUID}",
            "https://hc-ping.com:port/[redacted]",
            "not a number",
        ),
        (
            "\"https://hc-ping.com/ {UUID}\"",
            "https://hc-ping.com/[redacted]",
            "white space",
        ),
        ("\"\"", "", "empty value"),
    ] {
        let value = value.replace("{UUID}", UUID);
        for http in [false, true] {
            let tree = Tree::new("");
            let (file, section) = if http {
                tree.http_job(
                    "h.conf",
                    &format!("[job.http \"h\"]\nhttp_url = http://x\nping_url = {value}\n"),
                );
                (tree.path("etc/svc/job_http.d/h.conf"), "job.http \"h\"")
            } else {
                tree.job(
                    "a.conf",
                    &format!("[job \"a\"]\npath = /a\ncommand = true\nping_url = {value}\n"),
                );
                (tree.path("etc/svc/job.d/a.conf"), "job \"a\"")
            };
            let issues = tree.issues();
            let issue = issue_about(&issues, &file, section, "ping_url", Some(shown), message);
            assert!(!issue.to_string().contains(UUID), "{issue}");
        }
    }
}

/// Check URLs whose secret is no long token: a Dead Man's Snitch URL (a 10-character
/// path segment), an Uptime Kuma push URL (a short token after `/api/push/`, and a
/// query), a healthchecks.io ping key of letters only (and a slug), and a URL with user
/// info. The whole URL is the credential: `Debug`, the log lines (`redacted`) and a
/// configuration problem show the scheme and host only, never the path, query or user.
#[test]
fn a_ping_url_shows_its_host_only_whatever_its_secret_looks_like() {
    for (url, secrets, shown) in [
        (
            "https://nosnch.in/c2354d53d2",
            &["c2354d53d2"][..],
            "https://nosnch.in/[redacted]",
        ),
        (
            "https://kuma.example.org:3001/api/push/Xq7pT2wLk9?status=up&msg=OK&ping=",
            &["Xq7pT2wLk9", "api/push", "status=up"][..],
            "https://kuma.example.org:3001/[redacted]",
        ),
        (
            "https://hc-ping.com/KeyOfLettersOnlyAbcdefg/db-backup?create=1",
            &["KeyOfLettersOnlyAbcdefg", "db-backup"][..],
            "https://hc-ping.com/[redacted]",
        ),
        (
            "http://svc:hunter2@[::1]:8000/ping/k",
            &["hunter2", "svc:", "/ping"][..],
            "http://[::1]:8000/[redacted]",
        ),
    ] {
        let tree = Tree::new("");
        tree.job(
            "a.conf",
            &format!("[job \"a\"]\npath = /a\ncommand = true\nping_url = {url}\n"),
        );
        let config = tree.load();
        let ping = config.jobs[0].ping_url.as_ref().expect("a's ping_url");
        assert_eq!(ping.expose(), url, "the request gets the URL as written");
        assert_eq!(ping.redacted(), shown, "{url}");
        let debug = format!("{:?}", config.jobs[0]);
        assert!(debug.contains(shown), "{debug}");
        for secret in secrets {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }

        // The same URL, refused for its scheme: the problem shows it by the same rule.
        let refused = url.replacen("http", "ftp", 1).replacen("ftps", "ftp", 1);
        let tree = Tree::new("");
        let file = tree.job(
            "a.conf",
            &format!("[job \"a\"]\npath = /a\ncommand = true\nping_url = {refused}\n"),
        );
        let issues = tree.issues();
        let shown = shown.replacen("http", "ftp", 1).replacen("ftps", "ftp", 1);
        let issue = issue_about(
            &issues,
            &file,
            "job \"a\"",
            "ping_url",
            Some(&shown),
            "not http or https",
        );
        for secret in secrets {
            assert!(!issue.to_string().contains(secret), "{secret} in {issue}");
        }
    }
}

/// The rule itself, on what a configuration may hold that is not a URL at all.
#[test]
fn what_is_not_a_url_shows_nothing_of_itself() {
    use crate::config::job_model::redact_ping_url;
    for (value, shown) in [
        ("", ""),
        ("c2354d53d2", "[redacted]"),
        ("nosnch.in/c2354d53d2", "[redacted]"),
        ("no/scheme://nosnch.in/c2354d53d2", "[redacted]"),
        ("https://nosnch.in", "https://nosnch.in/[redacted]"),
        (
            "https://nosnch.in?c2354d53d2",
            "https://nosnch.in/[redacted]",
        ),
        (
            "https://nosnch.in#c2354d53d2",
            "https://nosnch.in/[redacted]",
        ),
        (
            "https://nosnch.in\\c2354d53d2",
            "https://nosnch.in/[redacted]",
        ),
        (
            "https://nosnch.in c2354d53d2",
            "https://nosnch.in/[redacted]",
        ),
    ] {
        assert_eq!(redact_ping_url(value), shown, "{value:?}");
    }
}
