//! Tests of the `ping_url` key of Jobs and JobHttps: what loads, what is refused, and
//! that neither a problem nor `Debug` shows the check's secret.

use super::test_tree::{Tree, issue_about};

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
    for (value, message) in [
        ("ftp://hc-ping.com/{UUID}", "not http or https"),
        ("hc-ping.com/{UUID}", "not an absolute URL"),
        ("https:///{UUID}", "no host"),
        ("https://hc-ping.com:port/{UUID}", "not a number"),
        ("\"https://hc-ping.com/ {UUID}\"", "white space"),
        ("\"\"", "empty value"),
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
            let unquoted = value.trim_matches('"');
            let shown = proto::redact::redact_url(unquoted);
            let issue = issue_about(&issues, &file, section, "ping_url", Some(&shown), message);
            assert!(!issue.to_string().contains(UUID), "{issue}");
        }
    }
}
