//! The public directory (`dir_public`) served under `/`: content types, nested files,
//! directory redirects and index pages, HEAD, conditional GET, and every way out of the
//! directory (traversal, encoded forms, backslashes, symlinks, FIFOs, the reserved `svc`).
//!
//! Requests go over a raw TCP connection: an HTTP client library would normalise `..`
//! and `%2e%2e` away before sending, and these tests need the bytes sent as written.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use svc_tests::TestService;
use svc_tests::raw_http::{RawResponse, parse_response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Content of the file outside `dir_public` that no request may reveal.
const SECRET: &str = "TOP-SECRET-OUTSIDE-PUBLIC";
/// A name that needs HTML escaping and percent-encoding.
const ODD_NAME: &str = "<b>&\"x.txt";
/// A PNG signature plus bytes that are not UTF-8.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\xff\xfe";

/// The checks these tests make on an answer.
trait Checks {
    fn assert_refused(&self, what: &str);
    fn assert_wrapper(&self, status: u16, what: &str);
}

impl Checks for RawResponse {
    /// Panics unless this is a 404 in the JSON wrapper that reveals nothing secret.
    #[track_caller]
    fn assert_refused(&self, what: &str) {
        let text = self.text();
        assert!(!text.contains(SECRET), "{what}: secret leaked: {text}");
        assert!(
            !text.contains("root:"),
            "{what}: /etc/passwd leaked: {text}"
        );
        assert_eq!(
            self.status, 404,
            "{what}: expected 404, got {self:?} {text}"
        );
        self.assert_wrapper(404, what);
    }

    /// Panics unless the body is the JSON wrapper with `code` = `status`.
    #[track_caller]
    fn assert_wrapper(&self, status: u16, what: &str) {
        assert_eq!(self.status, status, "{what}: {}", self.text());
        let content_type = self.header("content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("application/json"),
            "{what}: wrapper is JSON, got {content_type:?}"
        );
        let body: Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|err| panic!("{what}: body is not JSON ({err}): {}", self.text()));
        assert_eq!(body["code"].as_u64(), Some(u64::from(status)), "{what}");
        assert!(body["message"].is_string(), "{what}: {body}");
    }
}

/// Sends `method target` with `headers` over a fresh connection and reads the whole
/// answer (`Connection: close`); `target` is sent byte for byte.
async fn raw(
    svc: &TestService,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> RawResponse {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(svc.listen_address())
            .await
            .expect("connect to the controller");
        let mut request = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            svc.listen_address()
        );
        for (key, value) in headers {
            request.push_str(&format!("{key}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("send the request");
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .expect("read the answer");
        answer
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {target}: no answer within 10 s"));
    parse_response(&answer, true, method == "HEAD")
        .unwrap_or_else(|| panic!("{method} {target}: malformed answer: {answer:?}"))
}

fn write(path: &Path, contents: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|err| panic!("create {}: {err}", parent.display()));
    }
    std::fs::write(path, contents).unwrap_or_else(|err| panic!("write {}: {err}", path.display()));
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|err| panic!("symlink {}: {err}", link.display()));
}

/// Content of `site/big.bin`: 8 MiB, streamed rather than read whole.
fn big_content() -> Vec<u8> {
    (0..8 * 1024 * 1024u32)
        .map(|i| u8::try_from(i % 251).unwrap_or_default())
        .collect()
}

/// A controller with `dir_public = public` and this tree below `dir_base`:
///
/// ```text
/// secret/passwd.txt                 SECRET (outside dir_public)
/// public/site/{index.html, style.css, app.js, data.json, logo.png, readme.txt, blob.unknownext,
///              big.bin}
/// public/site/sub/deeper/page.txt
/// public/list/{<b>&"x.txt, b.txt, .hidden.txt, adir/, zdir/}
/// public/svc/secret.txt             a sub-directory named svc: never served
/// public/.env                       hidden
/// public/link-out-file -> ../secret/passwd.txt
/// public/link-out-dir  -> ../secret
/// public/link-in       -> site/readme.txt   (inside, yet not followed either)
/// public/fifo                       a named pipe
/// ```
async fn start_public() -> TestService {
    let builder = TestService::builder().svc("dir_public = public");
    let base = builder.dir_base().to_path_buf();
    let public = base.join("public");
    write(&base.join("secret/passwd.txt"), SECRET.as_bytes());
    write(&public.join("site/index.html"), b"<h1>site index</h1>");
    write(&public.join("site/style.css"), b"body { color: red }");
    write(&public.join("site/app.js"), b"console.log(1);");
    write(&public.join("site/data.json"), br#"{"a":1}"#);
    write(&public.join("site/logo.png"), PNG);
    write(&public.join("site/readme.txt"), b"read me\n");
    write(&public.join("site/blob.unknownext"), b"blob");
    write(&public.join("site/big.bin"), &big_content());
    write(&public.join("site/sub/deeper/page.txt"), b"deep page");
    write(&public.join("list").join(ODD_NAME), b"odd content");
    write(&public.join("list/b.txt"), b"b");
    write(&public.join("list/.hidden.txt"), b"hidden");
    std::fs::create_dir_all(public.join("list/adir")).expect("mkdir adir");
    std::fs::create_dir_all(public.join("list/zdir")).expect("mkdir zdir");
    write(&public.join("svc/secret.txt"), SECRET.as_bytes());
    write(&public.join(".env"), SECRET.as_bytes());
    symlink(
        &base.join("secret/passwd.txt"),
        &public.join("link-out-file"),
    );
    symlink(&base.join("secret"), &public.join("link-out-dir"));
    symlink(Path::new("site/readme.txt"), &public.join("link-in"));
    nix::unistd::mkfifo(
        &public.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .expect("mkfifo");
    builder.start().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_files_with_their_content_type() {
    let svc = start_public().await;
    let cases: &[(&str, &str, &[u8])] = &[
        ("/site/index.html", "text/html", b"<h1>site index</h1>"),
        ("/site/style.css", "text/css", b"body { color: red }"),
        ("/site/app.js", "text/javascript", b"console.log(1);"),
        ("/site/data.json", "application/json", br#"{"a":1}"#),
        ("/site/logo.png", "image/png", PNG),
        ("/site/readme.txt", "text/plain", b"read me\n"),
        ("/site/blob.unknownext", "application/octet-stream", b"blob"),
        ("/site/sub/deeper/page.txt", "text/plain", b"deep page"),
    ];
    for (path, content_type, body) in cases {
        let response = raw(&svc, "GET", path, &[]).await;
        assert_eq!(response.status, 200, "{path}: {}", response.text());
        let got = response.header("content-type").unwrap_or_default();
        assert!(
            got.starts_with(content_type),
            "{path}: content type {got:?}"
        );
        assert_eq!(response.body, *body, "{path}");
        assert_eq!(
            response.header("content-length"),
            Some(body.len().to_string().as_str()),
            "{path}"
        );
        assert!(response.header("last-modified").is_some(), "{path}");
        // Public files share the UI's origin: sandboxed and never sniffed.
        assert_eq!(
            response.header("content-security-policy"),
            Some("sandbox"),
            "{path}"
        );
        assert_eq!(
            response.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
    }
    let big = raw(&svc, "GET", "/site/big.bin", &[]).await;
    assert_eq!(big.status, 200);
    assert_eq!(big.header("content-length"), Some("8388608"));
    assert!(
        big.body == big_content(),
        "big.bin arrives whole and unchanged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_and_if_modified_since() {
    let svc = start_public().await;
    let head = raw(&svc, "HEAD", "/site/readme.txt", &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("8"));
    assert!(head.body.is_empty(), "HEAD has no body: {:?}", head.body);
    assert!(
        head.header("content-type")
            .is_some_and(|v| v.starts_with("text/plain"))
    );

    let head_index = raw(&svc, "HEAD", "/list/", &[]).await;
    assert_eq!(head_index.status, 200);
    assert!(head_index.body.is_empty());

    let get = raw(&svc, "GET", "/site/readme.txt", &[]).await;
    let last_modified = get
        .header("last-modified")
        .expect("Last-Modified on a file")
        .to_owned();
    let cached = raw(
        &svc,
        "GET",
        "/site/readme.txt",
        &[("If-Modified-Since", &last_modified)],
    )
    .await;
    assert_eq!(cached.status, 304, "{}", cached.text());
    assert!(cached.body.is_empty());

    let stale = raw(
        &svc,
        "GET",
        "/site/readme.txt",
        &[("If-Modified-Since", "Mon, 01 Jan 1990 00:00:00 GMT")],
    )
    .await;
    assert_eq!(stale.status, 200);
    assert_eq!(stale.body, b"read me\n");

    if let Some(etag) = get.header("etag") {
        let cached = raw(&svc, "GET", "/site/readme.txt", &[("If-None-Match", etag)]).await;
        assert_eq!(cached.status, 304);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_redirect_and_prefer_index_html() {
    let svc = start_public().await;
    let redirect = raw(&svc, "GET", "/site", &[]).await;
    assert!(
        [301, 308].contains(&redirect.status),
        "directory without slash redirects: {redirect:?}"
    );
    assert_eq!(redirect.header("location"), Some("/site/"));

    let index = raw(&svc, "GET", "/site/", &[]).await;
    assert_eq!(index.status, 200);
    assert_eq!(index.text(), "<h1>site index</h1>", "index.html wins");
    assert!(
        index
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/html"))
    );

    let deeper = raw(&svc, "GET", "/site/sub/deeper", &[]).await;
    assert_eq!(deeper.header("location"), Some("/site/sub/deeper/"));

    // A protocol-relative form must not become a redirect to another host.
    let doubled = raw(&svc, "GET", "//site", &[]).await;
    assert_eq!(doubled.header("location"), Some("/site/"));

    let file_as_dir = raw(&svc, "GET", "/site/readme.txt/", &[]).await;
    file_as_dir.assert_refused("a file with a trailing slash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_index_escapes_names_and_its_links_work() {
    let svc = start_public().await;
    let page = raw(&svc, "GET", "/list/", &[]).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(
        page.header("content-type")
            .is_some_and(|v| v.starts_with("text/html"))
    );
    let html = page.text();
    assert!(html.contains("<title>Index of /list/</title>"), "{html}");
    assert!(html.contains("href=\"../\""), "parent link: {html}");
    assert!(
        html.contains("&lt;b&gt;&amp;&quot;x.txt"),
        "escaped: {html}"
    );
    assert!(
        !html.contains(ODD_NAME),
        "raw name never in the page: {html}"
    );
    assert!(
        !html.contains(".hidden"),
        "hidden entries not listed: {html}"
    );
    let adir = html.find("href=\"adir/\"").expect("adir/ listed");
    let zdir = html.find("href=\"zdir/\"").expect("zdir/ listed");
    let b_txt = html.find("href=\"b.txt\"").expect("b.txt listed");
    assert!(
        adir < zdir && zdir < b_txt,
        "directories first, then by name"
    );

    // Follow the odd name's link as a browser would: relative to /list/.
    let href_start = html
        .find("href=\"%3C")
        .expect("encoded href of the odd name")
        + 6;
    let href_len = html[href_start..].find('"').expect("end of href");
    let href = &html[href_start..href_start + href_len];
    let followed = raw(&svc, "GET", &format!("/list/{href}"), &[]).await;
    assert_eq!(
        followed.status,
        200,
        "GET /list/{href}: {}",
        followed.text()
    );
    assert_eq!(followed.body, b"odd content");

    let top = raw(&svc, "GET", "/", &[]).await;
    assert_eq!(top.status, 200);
    let html = top.text();
    assert!(
        !html.contains("href=\"../\""),
        "no parent at the top: {html}"
    );
    assert!(html.contains("href=\"site/\""), "{html}");
    // No symlink is followed, so none is listed, not even one leading inside.
    for absent in ["svc", "link-out", "link-in", ".env", "fifo"] {
        assert!(!html.contains(absent), "{absent} not listed: {html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_symlinks_and_special_files_are_refused() {
    let svc = start_public().await;
    for target in [
        "/../etc/passwd",
        "/../secret/passwd.txt",
        "/../../../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2e%2e/secret/passwd.txt",
        "/%2E%2E/secret/passwd.txt",
        "/a/%2e%2e/%2e%2e/x",
        "/site/%2e%2e/%2e%2e/secret/passwd.txt",
        "/..%2fetc%2fpasswd",
        "/..%2fsecret%2fpasswd.txt",
        "/site%2f..%2f..%2fsecret%2fpasswd.txt",
        "/%252e%252e/",
        "/%252e%252e/secret/passwd.txt",
        "/..%5csecret%5cpasswd.txt",
        "/%5c..%5csecret%5cpasswd.txt",
        "/site/..%5C..%5Csecret%5Cpasswd.txt",
        "/..\\secret\\passwd.txt",
        "/site\\..\\..\\secret\\passwd.txt",
        "/site\\readme.txt",
        "/site%00/readme.txt",
        "/.env",
        "/%2eenv",
        "/list/.hidden.txt",
        "/link-out-file",
        "/link-out-dir",
        "/link-out-dir/",
        "/link-out-dir/passwd.txt",
        "/link-in",
        "/fifo",
        "/nothing-here.txt",
        "/%ff",
    ] {
        raw(&svc, "GET", target, &[])
            .await
            .assert_refused(&format!("GET {target}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn svc_is_reserved_for_the_service() {
    let svc = start_public().await;
    for target in [
        "/svc/secret.txt",
        "/svc/anything",
        "/%73vc/secret.txt",
        "/SVC/secret.txt",
    ] {
        raw(&svc, "GET", target, &[])
            .await
            .assert_refused(&format!("GET {target}"));
    }
    // `/svc` itself is the service's UI, never the public `svc` directory's listing.
    for target in ["/svc", "/svc/"] {
        let response = raw(&svc, "GET", target, &[]).await;
        assert!(
            !response.text().contains("secret.txt"),
            "GET {target} lists the public svc directory: {}",
            response.text()
        );
    }
    // The service's own API still answers.
    let environment = raw(&svc, "GET", "/svc/api/environment", &[]).await;
    assert_eq!(environment.status, 200, "{}", environment.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_are_not_allowed() {
    let svc = start_public().await;
    for (method, target) in [
        ("POST", "/site/readme.txt"),
        ("PUT", "/site/readme.txt"),
        ("DELETE", "/site/"),
        ("POST", "/nothing-here"),
    ] {
        let response = raw(&svc, method, target, &[("Content-Length", "0")]).await;
        response.assert_wrapper(405, &format!("{method} {target}"));
    }
    // Still served afterwards.
    let get = raw(&svc, "GET", "/site/readme.txt", &[]).await;
    assert_eq!(get.body, b"read me\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_dir_public_everything_is_404() {
    let svc = TestService::builder().start().await;
    let base = svc.dir_base().to_path_buf();
    write(&base.join("public/index.html"), b"not served");
    for (method, target) in [
        ("GET", "/"),
        ("GET", "/index.html"),
        ("GET", "/public/index.html"),
        ("HEAD", "/x.txt"),
        ("POST", "/x"),
    ] {
        let response = raw(&svc, method, target, &[("Content-Length", "0")]).await;
        assert_eq!(response.status, 404, "{method} {target}: {response:?}");
        if method != "HEAD" {
            response.assert_wrapper(404, &format!("{method} {target}"));
            assert!(!response.text().contains("not served"));
        }
    }
}
