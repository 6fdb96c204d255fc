//! The web UI's static pages: the dashboard shell, its assets and the documentation
//! under `/svc/doc`, checked over HTTP against the real service.
//!
//! The link checker crawls every page reachable from `/svc/doc` and `/svc`, and asks
//! every internal link (`href` and `src`) of every page: each must answer 200, and a
//! `#fragment` on a documentation page must name an element `id` of its target.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderMap;
use svc_tests::{TestService, job_section};

/// One fetched page or file.
struct Fetched {
    status: u16,
    headers: HeaderMap,
    body: String,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build the HTTP client")
}

async fn fetch(client: &reqwest::Client, url: &Url) -> Fetched {
    let response = client
        .get(url.clone())
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {url}: {err}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .text()
        .await
        .unwrap_or_else(|err| panic!("GET {url}: body: {err}"));
    Fetched {
        status,
        headers,
        body,
    }
}

fn header<'a>(fetched: &'a Fetched, name: &str) -> &'a str {
    fetched
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// Values of every `attr="..."` in `html`, with `&amp;` decoded.
fn attributes(html: &str, attr: &str) -> Vec<String> {
    let needle = format!(" {attr}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&needle) {
        rest = &rest[start + needle.len()..];
        let Some(end) = rest.find('"') else { break };
        out.push(rest[..end].replace("&amp;", "&"));
        rest = &rest[end..];
    }
    out
}

async fn service() -> TestService {
    TestService::builder()
        .job_file(
            "hello",
            job_section("hello", &["interval = 1h", "command = echo hello"]),
        )
        .start()
        .await
}

fn assert_ui_headers(fetched: &Fetched, what: &str) {
    assert!(
        header(fetched, "content-type").starts_with("text/html"),
        "{what}: content type {:?}",
        header(fetched, "content-type")
    );
    let csp = header(fetched, "content-security-policy");
    assert!(csp.contains("script-src 'self'"), "{what}: CSP {csp:?}");
    assert!(csp.contains("style-src 'self'"), "{what}: CSP {csp:?}");
    assert!(!csp.contains("unsafe-inline"), "{what}: CSP {csp:?}");
    assert_eq!(
        header(fetched, "x-content-type-options"),
        "nosniff",
        "{what}"
    );
    assert_eq!(header(fetched, "referrer-policy"), "same-origin", "{what}");
    assert_eq!(header(fetched, "cache-control"), "no-cache", "{what}");
}

#[tokio::test]
async fn documentation_pages_load_and_every_internal_link_resolves() {
    let service = service().await;
    let base = Url::parse(&service.base_url()).expect("base URL");
    let client = client();

    let mut queue: VecDeque<Url> = VecDeque::new();
    for start in ["/svc/doc", "/svc/doc/", "/svc", "/svc/"] {
        queue.push_back(base.join(start).expect("start URL"));
    }
    // Path -> element ids of the HTML pages fetched; links checked afterwards.
    let mut pages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut links: Vec<(String, Url)> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some(url) = queue.pop_front() {
        if !seen.insert(url.path().to_string()) {
            continue;
        }
        let fetched = fetch(&client, &url).await;
        assert_eq!(fetched.status, 200, "GET {url}: {}", fetched.body);
        if !header(&fetched, "content-type").starts_with("text/html") {
            continue;
        }
        assert_ui_headers(&fetched, url.as_str());
        assert!(
            !fetched.body.contains("<script>"),
            "{url}: no inline script"
        );
        let ids: BTreeSet<String> = attributes(&fetched.body, "id").into_iter().collect();
        pages.insert(url.path().to_string(), ids);
        for link in attributes(&fetched.body, "href")
            .into_iter()
            .chain(attributes(&fetched.body, "src"))
        {
            if link.starts_with("http://") || link.starts_with("https://") {
                // External: not fetched (no network in tests), but never our own server.
                assert!(
                    !link.contains("127.0.0.1"),
                    "{url}: absolute link to the service: {link}"
                );
                continue;
            }
            assert!(
                !link.contains(".md"),
                "{url}: link to Markdown source not rewritten: {link}"
            );
            let target = url
                .join(&link)
                .unwrap_or_else(|err| panic!("{url}: bad link {link}: {err}"));
            assert_eq!(target.origin(), base.origin(), "{url}: {link}");
            links.push((url.to_string(), target.clone()));
            if target.path().starts_with("/svc/doc") || target.path().starts_with("/svc/assets") {
                queue.push_back(target);
            }
        }
    }
    for slug in [
        "readme",
        "api",
        "scheduling",
        "formats",
        "operations",
        "cluster",
        "architecture",
        "changelog",
    ] {
        assert!(
            pages.contains_key(&format!("/svc/doc/{slug}")),
            "page /svc/doc/{slug} is linked from the index; crawled: {:?}",
            pages.keys().collect::<Vec<_>>()
        );
    }
    assert!(links.len() > 20, "too few links found: {}", links.len());
    for (from, target) in &links {
        let path = target.path();
        if !seen.contains(path) {
            let fetched = fetch(&client, target).await;
            assert_eq!(
                fetched.status, 200,
                "{from} links to {target}: {}",
                fetched.body
            );
        }
        // Fragments of the dashboard shell are its own client-side routes.
        if let Some(fragment) = target.fragment()
            && path.starts_with("/svc/doc")
        {
            let ids = pages
                .get(path)
                .unwrap_or_else(|| panic!("{from} links to {target}, which was not crawled"));
            assert!(
                ids.contains(fragment),
                "{from} links to {target}: no element with id {fragment:?} there"
            );
        }
    }
}

#[tokio::test]
async fn documentation_renders_the_repository_markdown() {
    let service = service().await;
    let base = Url::parse(&service.base_url()).expect("base URL");
    let client = client();
    let api = fetch(&client, &base.join("/svc/doc/api").expect("URL")).await;
    assert_eq!(api.status, 200);
    assert!(api.body.contains("<table>"), "tables are rendered");
    assert!(api.body.contains("/svc/api/environment"));
    let readme = fetch(&client, &base.join("/svc/doc/readme").expect("URL")).await;
    assert!(readme.body.contains("id=\"configuration\""));
    assert!(readme.body.contains("href=\"/svc/doc/formats\""));
    let changelog = fetch(&client, &base.join("/svc/doc/changelog").expect("URL")).await;
    assert!(changelog.body.contains("0.1.0"));
    let index = fetch(&client, &base.join("/svc/doc").expect("URL")).await;
    assert!(index.body.contains("/svc/doc/readme#configuration"));
}

#[tokio::test]
async fn unknown_ui_paths_answer_404_in_the_wrapper() {
    let service = service().await;
    for path in [
        "/svc/doc/nope",
        "/svc/doc/api/",
        "/svc/doc/../api",
        "/svc/assets/nope.js",
        "/svc/assets/",
        "/svc/nothing-here",
    ] {
        let response = service.get(path).await;
        response.assert_status(404);
        assert!(!response.message().is_empty(), "{path}: {}", response.raw);
    }
}

#[tokio::test]
async fn assets_are_revalidated_with_an_etag() {
    let service = service().await;
    let base = Url::parse(&service.base_url()).expect("base URL");
    let client = client();
    let url = base.join("/svc/assets/main.js").expect("URL");
    let first = fetch(&client, &url).await;
    assert_eq!(first.status, 200);
    assert!(header(&first, "content-type").starts_with("text/javascript"));
    assert_eq!(header(&first, "x-content-type-options"), "nosniff");
    let etag = header(&first, "etag").to_string();
    assert!(etag.starts_with('"'), "etag {etag:?}");
    let again = client
        .get(url)
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("GET with If-None-Match");
    assert_eq!(again.status().as_u16(), 304);
}

/// The module specifiers of a script: what follows `from`, `import` and `import(` in
/// quotes (type-only `import("…")` of JSDoc comments included: they must resolve too).
fn module_specifiers(script: &str) -> Vec<String> {
    let mut found = Vec::new();
    for opener in [
        "from \"",
        "from '",
        "import \"",
        "import '",
        "import(\"",
        "import('",
    ] {
        let quote = opener.chars().last().unwrap_or('"');
        let mut rest = script;
        while let Some(start) = rest.find(opener) {
            rest = &rest[start + opener.len()..];
            let Some(end) = rest.find(quote) else { break };
            found.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    found
}

/// The `.js` files of `svc-controller/ui/`, as paths below it.
fn ui_scripts() -> BTreeSet<String> {
    let ui = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../svc-controller/ui");
    let mut found = BTreeSet::new();
    let mut pending = vec![ui.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("list the UI folder")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "js") {
                let relative = path.strip_prefix(&ui).expect("below ui/");
                found.insert(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found
}

/// The pages load their scripts as ES modules, and every import of every module, followed
/// from the pages, is a relative address of an embedded script served with a JavaScript
/// type (a browser refuses a module of any other type). Every script of the UI folder is
/// reached so: none is left over.
#[tokio::test]
async fn every_module_import_resolves_to_an_embedded_script() {
    let service = service().await;
    let base = Url::parse(&service.base_url()).expect("base URL");
    let client = client();
    let shell = fetch(&client, &base.join("/svc/").expect("URL")).await;
    assert_eq!(shell.status, 200);
    assert!(
        shell
            .body
            .contains(r#"<script type="module" src="/svc/assets/main.js"></script>"#),
        "the dashboard loads main.js as a module:\n{}",
        shell.body
    );
    let mut queue: VecDeque<Url> = VecDeque::new();
    queue.push_back(base.join("/svc/assets/main.js").expect("URL"));
    // The login page answers only when the service has users: its module is checked
    // from the asset itself.
    queue.push_back(base.join("/svc/assets/login.js").expect("URL"));
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some(url) = queue.pop_front() {
        if !seen.insert(url.path().to_string()) {
            continue;
        }
        let fetched = fetch(&client, &url).await;
        assert_eq!(fetched.status, 200, "GET {url}: {}", fetched.body);
        assert_eq!(
            header(&fetched, "content-type"),
            "text/javascript; charset=utf-8",
            "{url}"
        );
        assert_eq!(
            header(&fetched, "x-content-type-options"),
            "nosniff",
            "{url}"
        );
        assert!(
            fetched.body.starts_with("// @ts-check"),
            "{url}: type-checked"
        );
        for specifier in module_specifiers(&fetched.body) {
            assert!(
                specifier.starts_with("./") || specifier.starts_with("../"),
                "{url} imports {specifier:?}: only relative addresses work without a bundler"
            );
            let target = url
                .join(&specifier)
                .unwrap_or_else(|err| panic!("{url}: bad import {specifier}: {err}"));
            assert!(
                target.path().starts_with("/svc/assets/"),
                "{url} imports {specifier:?}, outside the assets: {target}"
            );
            queue.push_back(target);
        }
    }
    let reached: BTreeSet<String> = seen
        .iter()
        .map(|path| path.trim_start_matches("/svc/assets/").to_string())
        .collect();
    assert_eq!(
        reached,
        ui_scripts(),
        "the modules reached from the pages are the UI folder's scripts"
    );
    assert!(reached.contains("views/dashboard.js"), "{reached:?}");
}

#[tokio::test]
async fn log_stream_sends_the_log_then_the_end() {
    let service = service().await;
    service.wait_run_finished("hello", 1, svc_tests::WAIT).await;
    let base = Url::parse(&service.base_url()).expect("base URL");
    let client = client();
    let url = base
        .join("/svc/api/job_exec/log/stream?id=hello&counter=1")
        .expect("URL");
    let fetched = fetch(&client, &url).await;
    assert_eq!(fetched.status, 200);
    assert!(header(&fetched, "content-type").starts_with("text/event-stream"));
    let events: Vec<&str> = fetched
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .collect();
    assert_eq!(events.first(), Some(&"meta"), "{}", fetched.body);
    assert_eq!(events.last(), Some(&"end"), "{}", fetched.body);
    assert!(
        fetched.body.contains("\"status\":\"success\""),
        "{}",
        fetched.body
    );

    for (query, status) in [
        ("id=hello&counter=99", 404),
        ("id=nope&counter=1", 404),
        ("id=hello&counter=x", 400),
        ("id=&counter=1", 400),
        ("id=a.b&counter=1", 400),
    ] {
        service
            .get(&format!("/svc/api/job_exec/log/stream?{query}"))
            .await
            .assert_status(status);
    }
}
