//! The route table's marks: which routes need a login, which are webhooks left to their
//! signatures by the Origin check.

use super::*;

#[test]
fn webhooks_alone_are_left_out_of_the_origin_check() {
    let (_, open) = routes();
    for path in [
        "/svc/api/job/run/a",
        "/svc/api/job_exec/run/a/b",
        "/svc/job/a",
    ] {
        assert!(!open.origin_checked(path), "{path}");
    }
    for path in [
        "/svc/api/login",
        "/svc/api/auth/login",
        "/svc/api/logout",
        "/svc/api/job_exec/pause",
        "/svc/api/reload",
        "/svc",
    ] {
        assert!(open.origin_checked(path), "{path}");
    }
    assert!(!open.origin_checked("/index.html"), "the public directory");
}

#[test]
fn what_needs_a_login() {
    let (_, open) = routes();
    let needs_login = |method: &Method, path: &str| open.needs_login(method, path);
    let get = Method::GET;
    let post = Method::POST;
    for path in [
        "/svc",
        "/svc/",
        "/svc/doc/api",
        "/svc/api/environment",
        "/svc/api/job_exec/log",
        "/svc/api/job_exec/log/stream",
        "/svc/api/events",
        "/svc/api/job_http",
        "/svc/api/metrics",
        "/svc/api/session",
        "/svc/api/audit",
        "/svc/api/cluster",
        "/svc/api/nothing",
        "/svc/loginx",
        "/svc/assets",
    ] {
        assert!(needs_login(&get, path), "GET {path}");
        assert!(needs_login(&Method::HEAD, path), "HEAD {path}");
    }
    for path in [
        "/svc/login",
        "/svc/assets/app.css",
        "/",
        "/index.html",
        "/svcx",
        "/svc-doc",
    ] {
        assert!(!needs_login(&get, path), "GET {path}");
    }
    for path in [
        "/svc/api/login",
        "/svc/api/logout",
        "/svc/api/job_exec/pause",
        "/svc/api/job_exec/resume",
        "/svc/api/job_exec/cancel",
        "/svc/api/job/pause",
        "/svc/api/job/resume",
        "/svc/api/job_http/pause",
        "/svc/api/job_http/resume",
        "/svc/api/job_http/cancel",
        "/svc/api/job/run/deploy",
        "/svc/api/job_exec/run/a/b",
        "/svc/api/reload",
        "/svc/job/deploy",
        "/upload",
    ] {
        assert!(!needs_login(&post, path), "POST {path}");
    }
    for path in ["/svc/api/environment", "/svc/api/other", "/svc/login"] {
        assert!(needs_login(&post, path), "POST {path}");
    }
    assert!(needs_login(&Method::DELETE, "/svc/api/environment"));
    assert!(needs_login(&Method::PUT, "/svc/api/job/run/deploy"));
}

#[test]
fn uri_len_is_the_printed_length() {
    for text in [
        "/",
        "/svc/api/job/run/bench/j00",
        "/a?b=c&d",
        "/a?",
        "/%20x?%41",
        "*",
        "http://example.com",
        "http://example.com/x/y?z=1",
        "https://user@example.com:8443/?",
        "example.com:443",
    ] {
        let uri: Uri = text.parse().expect(text);
        assert_eq!(uri_len(&uri), uri.to_string().len(), "{text}");
    }
}
