//! The web UI: the dashboard shell at `/svc`, its static assets under `/svc/assets/`,
//! the login page at `/svc/login` (see [`crate::access::login`]), and the documentation rendered
//! at build time under `/svc/doc`.
//!
//! Everything is embedded in the binary (the files of `svc-controller/ui/`, listed by
//! `build.rs` as it finds them, and the pages it renders); nothing is read from disk or
//! fetched from elsewhere at run time. The dashboard is native ES modules, no bundler:
//! `index.html` loads `main.js` as `<script type="module">`, which imports the rest by
//! relative addresses (`./state.js`, `./views/job.js`), all under `/svc/assets/`, all
//! served as `text/javascript` and allowed by `script-src 'self'`.
//!
//! HTML answers carry a strict Content-Security-Policy (scripts and styles from `'self'`
//! only, no inline script), `X-Content-Type-Options: nosniff`,
//! `Referrer-Policy: same-origin` and `Cache-Control: no-cache` (always revalidated).
//! Assets carry an ETag and answer `304 Not Modified` to a matching `If-None-Match`.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::{ApiError, AppState};

include!(concat!(env!("OUT_DIR"), "/docs.rs"));

/// Policy of every UI page.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The dashboard's HTML shell; the content is built by `main.js` and its modules.
const SHELL: &str = include_str!("../../ui/index.html");

/// The login page; its form is handled by `login.js`.
const LOGIN_PAGE: &str = include_str!("../../ui/login.html");

/// One embedded file under `/svc/assets/`: the generated `ASSETS` lists every file of
/// `svc-controller/ui/` (sub-folders included) but the HTML pages above.
struct Asset {
    /// Its path below `ui/` and under `/svc/assets/`, such as `views/job.js`.
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
    /// Quoted, from the body's SHA-256, computed at build time.
    etag: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

/// Routes of the UI: `/svc`, `/svc/`, `/svc/login`, `/svc/assets/*`, `/svc/doc`,
/// `/svc/doc/*`; the login page and the assets need no session.
pub(super) fn router(open: &mut super::OpenRoutes) -> Router<AppState> {
    Router::new()
        .route("/svc", get(shell))
        .route("/svc/", get(shell))
        .route(open.get("/svc/login"), get(login_page))
        .route(open.get("/svc/assets/{*file}"), get(asset_file))
        .route("/svc/doc", get(doc_index))
        .route("/svc/doc/", get(doc_index))
        .route("/svc/doc/{*page}", get(doc_page))
}

/// An HTML page with the UI's security headers.
fn html_page(body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    common_headers(headers);
    response
}

fn common_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

async fn shell() -> Response {
    html_page(SHELL)
}

/// The login page; without users (login disabled) a redirect to the dashboard.
async fn login_page(State(state): State<AppState>) -> Response {
    if !state.login.enabled() {
        let mut response = StatusCode::SEE_OTHER.into_response();
        response
            .headers_mut()
            .insert(header::LOCATION, HeaderValue::from_static("/svc/"));
        return response;
    }
    html_page(LOGIN_PAGE)
}

async fn doc_index() -> Response {
    html_page(DOC_INDEX)
}

async fn doc_page(Path(page): Path<String>) -> Response {
    match DOC_PAGES.iter().find(|(slug, _, _)| *slug == page) {
        Some((_, _, html)) => html_page(html),
        None => ApiError::not_found("no such documentation page").into_response(),
    }
}

fn find_asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.name == name)
}

async fn asset_file(Path(file): Path<String>, request_headers: HeaderMap) -> Response {
    let Some(asset) = find_asset(&file) else {
        return ApiError::not_found("no such resource").into_response();
    };
    let matches = request_headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|tag| tag.trim() == asset.etag || tag.trim() == "*")
        });
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
    };
    let headers = response.headers_mut();
    common_headers(headers);
    if let Ok(etag) = HeaderValue::from_str(asset.etag) {
        headers.insert(header::ETAG, etag);
    }
    response
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    #[test]
    fn every_documentation_page_is_a_whole_document() {
        assert!(DOC_INDEX.starts_with("<!DOCTYPE html>"));
        for (slug, title, html) in DOC_PAGES {
            assert!(html.starts_with("<!DOCTYPE html>"), "{slug}");
            assert!(html.contains(title), "{slug}");
            assert!(!html.contains("<script"), "{slug}: no script in doc pages");
        }
    }

    #[test]
    fn links_between_documents_point_at_their_pages() {
        let readme = DOC_PAGES
            .iter()
            .find(|(slug, _, _)| *slug == "readme")
            .map(|(_, _, html)| *html)
            .unwrap_or_default();
        assert!(readme.contains("href=\"/svc/doc/formats\""));
        assert!(!readme.contains("href=\"docs/formats.md\""));
        assert!(readme.contains("id=\"configuration\""));
    }

    #[test]
    fn the_asset_table_holds_the_ui_folder_with_script_types() {
        for name in [
            "main.js",
            "login.js",
            "api.js",
            "hmac.js",
            "state.js",
            "views/dashboard.js",
            "views/job.js",
            "app.css",
            "favicon.svg",
        ] {
            assert!(find_asset(name).is_some(), "{name} is embedded");
        }
        for asset in ASSETS {
            assert!(
                !asset.name.ends_with(".html"),
                "{}: pages are routes",
                asset.name
            );
            if asset.name.ends_with(".js") {
                assert_eq!(asset.content_type, "text/javascript; charset=utf-8");
            }
            let digest = Sha256::digest(asset.body);
            assert_eq!(asset.etag, format!("\"{}\"", hex::encode(&digest[..12])));
        }
        assert!(SHELL.contains(r#"<script type="module" src="/svc/assets/main.js">"#));
        assert!(LOGIN_PAGE.contains(r#"<script type="module" src="/svc/assets/login.js">"#));
    }

    #[test]
    fn assets_have_distinct_etags() {
        let mut tags: Vec<&str> = ASSETS.iter().map(|a| a.etag).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), ASSETS.len());
    }
}
