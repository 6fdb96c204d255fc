//! Tests of `[job.http]` sections, loaded from configuration trees in temporary directories.

use std::time::Duration;

use crate::config::test_tree::*;
use crate::config::{HttpMethod, HttpRequestType};
use crate::time::schedule::{Schedule, Timer};
use crate::time::timezone::Zone;

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
