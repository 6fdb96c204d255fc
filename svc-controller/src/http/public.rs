//! The public directory (`dir_public`) served under `/`: files, directory redirects,
//! `index.html` or a generated index page; every refusal is a 404 in the JSON wrapper.
//!
//! How a request path becomes a file, in order (any failure is a 404, never a 500):
//!
//! 1. [`PublicPath::parse`]: the raw path is split on `/` and each segment
//!    percent-decoded exactly once. A malformed escape, invalid UTF-8, a segment that
//!    starts with `.` (so `.`, `..` and hidden names), or one holding `/` (from `%2f`),
//!    `\` or NUL is refused, and so is a first segment `svc` (reserved for the service).
//! 2. [`resolve`]: the segments are joined below the canonical `dir_public`, the result
//!    is canonicalized (symlinks resolved) and must still lie inside it, with no hidden
//!    component and no top-level `svc` on the way.
//! 3. Only directories and regular files go further. A file is opened with `O_NOFOLLOW`
//!    and `O_NONBLOCK` (a FIFO swapped in cannot hang the request) and checked again on
//!    the open descriptor, then streamed; nothing is read into memory whole.
//!
//! Directories need a trailing slash (else a 308 to it); they answer with their
//! `index.html` when it is a servable file, else with a generated page (see
//! [`render_index`]). Files get `Content-Type` by extension, `Content-Length`,
//! `Last-Modified`, a weak `ETag`, and `304` for `If-None-Match` / `If-Modified-Since`.
//! Range requests are not supported (answered in full).

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncReadExt;
use tokio_util::io::ReaderStream;

use super::{ApiError, AppState};

/// The reserved first path segment.
const RESERVED: &str = "svc";
/// Most entries read into one generated index page.
const MAX_INDEX_ENTRIES: usize = 10_000;
/// Read buffer of a streamed file.
const STREAM_CHUNK: usize = 64 * 1024;
/// Policy of the generated index page: no scripts, no remote anything.
const INDEX_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// Fallback handler of the router: serves `dir_public` for GET and HEAD.
pub(super) async fn serve(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Some(root) = state.engine.main().dir_public.clone() else {
        return not_found();
    };
    let head = if method == Method::HEAD {
        true
    } else if method == Method::GET {
        false
    } else {
        let mut response =
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed").into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    };
    let Some(path) = PublicPath::parse(uri.path()) else {
        return not_found();
    };
    let resolved = tokio::task::spawn_blocking(move || resolve(&root, &path)).await;
    match resolved {
        Ok(Ok(Target::File(file))) => file_response(file, head, &headers),
        Ok(Ok(Target::Redirect(location))) => redirect(&location, uri.query()),
        Ok(Ok(Target::Index(html))) => index_response(html, head),
        Ok(Err(err)) => {
            tracing::debug!(path = uri.path(), error = %err, "public directory: not served");
            not_found()
        }
        Err(err) => ApiError::internal("public directory task failed", err).into_response(),
    }
}

fn not_found() -> Response {
    ApiError::not_found("no such resource").into_response()
}

// ----- request path ----------------------------------------------------------------------

/// A request path, decoded and checked segment by segment (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublicPath {
    /// Decoded segments, none empty, none `.`/`..`/hidden, none holding `/`, `\` or NUL.
    segments: Vec<String>,
    /// Whether the path ends with `/` (always true for `/` itself).
    trailing_slash: bool,
}

impl PublicPath {
    /// Parses the raw (still percent-encoded) path of a request; `None` when it must not
    /// be served. Empty segments (`//`) are skipped.
    pub(crate) fn parse(raw: &str) -> Option<PublicPath> {
        let rest = raw.strip_prefix('/')?;
        let mut segments = Vec::new();
        for raw_segment in rest.split('/').filter(|s| !s.is_empty()) {
            let bytes = percent_decode(raw_segment)?;
            let segment = String::from_utf8(bytes).ok()?;
            if !segment_allowed(&segment) {
                return None;
            }
            if segments.is_empty() && segment.eq_ignore_ascii_case(RESERVED) {
                return None;
            }
            segments.push(segment);
        }
        Some(PublicPath {
            segments,
            trailing_slash: raw.ends_with('/'),
        })
    }

    /// The path for display: `/a/b/` style, decoded.
    fn display(&self) -> String {
        let mut text = String::from("/");
        for segment in &self.segments {
            text.push_str(segment);
            text.push('/');
        }
        text
    }

    /// The path re-encoded, with a trailing slash: the target of a directory redirect.
    /// Built from the checked segments, never from the raw path, so it cannot become
    /// `//host/...` (a redirect to another site).
    fn encoded_dir(&self) -> String {
        let mut text = String::from("/");
        for segment in &self.segments {
            text.push_str(&percent_encode(segment));
            text.push('/');
        }
        text
    }
}

/// Whether a decoded name may be served or listed.
fn segment_allowed(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\0'])
}

/// Decodes `%XX` escapes once; `None` for a malformed escape.
fn percent_decode(raw: &str) -> Option<Vec<u8>> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let high = hex_value(*bytes.get(i + 1)?)?;
            let low = hex_value(*bytes.get(i + 2)?)?;
            out.push((high << 4) | low);
            i += 3;
        } else {
            out.push(byte);
            i += 1;
        }
    }
    Some(out)
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes every byte except the unreserved `A-Z a-z 0-9 - . _ ~`, so the result
/// is one path segment that no browser reads as a scheme, a query or markup.
fn percent_encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &byte in name.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

// ----- file system -----------------------------------------------------------------------

/// What a request resolved to.
#[derive(Debug)]
enum Target {
    /// A regular file, open.
    File(OpenFile),
    /// A directory asked for without its trailing slash: where to go instead.
    Redirect(String),
    /// A directory without a servable `index.html`: the generated page.
    Index(String),
}

/// An open regular file and what its headers need.
#[derive(Debug)]
struct OpenFile {
    file: fs::File,
    len: u64,
    modified: Option<SystemTime>,
    content_type: String,
}

/// Maps `path` to what is served, touching the file system (blocking: run it off the
/// async workers). Every error means "not served".
fn resolve(root: &Path, path: &PublicPath) -> io::Result<Target> {
    let root = fs::canonicalize(root)?;
    let mut candidate = root.clone();
    candidate.extend(&path.segments);
    let real = fs::canonicalize(&candidate)?;
    check_inside(&root, &real)?;
    let meta = fs::metadata(&real)?;
    if meta.is_dir() {
        if !path.trailing_slash {
            return Ok(Target::Redirect(path.encoded_dir()));
        }
        if let Ok(file) = open_file(&root, &real.join("index.html"), "index.html") {
            return Ok(Target::File(file));
        }
        let entries = list_dir(&root, &real, path.segments.is_empty())?;
        return Ok(Target::Index(render_index(&path.display(), &entries)));
    }
    if path.trailing_slash {
        return Err(refused("a file asked for as a directory"));
    }
    let name = path.segments.last().map_or("", String::as_str);
    open_file(&root, &real, name).map(Target::File)
}

fn refused(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

/// Requires the canonical `real` to lie inside the canonical `root`, with no hidden
/// component and no top-level `svc` (a symlink could lead to either).
fn check_inside(root: &Path, real: &Path) -> io::Result<()> {
    let relative = real
        .strip_prefix(root)
        .map_err(|_| refused("outside dir_public"))?;
    for (index, component) in relative.components().enumerate() {
        let Component::Normal(name) = component else {
            return Err(refused("unexpected path component"));
        };
        let name = name.to_str().ok_or_else(|| refused("name is not UTF-8"))?;
        if !segment_allowed(name) || (index == 0 && name.eq_ignore_ascii_case(RESERVED)) {
            return Err(refused("hidden or reserved name"));
        }
    }
    Ok(())
}

/// Opens `path` (whose canonical form must pass [`check_inside`]) as a regular file;
/// `name` (the name asked for) decides the content type.
fn open_file(root: &Path, path: &Path, name: &str) -> io::Result<OpenFile> {
    let real = fs::canonicalize(path)?;
    check_inside(root, &real)?;
    if !fs::metadata(&real)?.is_file() {
        return Err(refused("not a regular file"));
    }
    // O_NOFOLLOW: `real` has no symlink left, so one appearing now is refused.
    // O_NONBLOCK: opening a FIFO swapped in after the check returns at once.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refused("not a regular file"));
    }
    Ok(OpenFile {
        file,
        len: meta.len(),
        modified: meta.modified().ok(),
        content_type: content_type(name),
    })
}

/// One line of a generated index page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// File name, as on disk.
    pub(crate) name: String,
    /// Whether it is (or its symlink leads to) a directory.
    pub(crate) is_dir: bool,
    /// Size in bytes (files).
    pub(crate) size: u64,
    /// Modification time, when known.
    pub(crate) modified: Option<SystemTime>,
}

/// Entries of directory `dir` that would be served: not hidden, UTF-8 names without `\`,
/// regular files and directories only, symlinks only when they lead inside `root`; at the
/// top level no `svc`. Sorted directories first, then by name.
fn list_dir(root: &Path, dir: &Path, top_level: bool) -> io::Result<Vec<IndexEntry>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)?.take(MAX_INDEX_ENTRIES) {
        let Ok(entry) = entry else { continue };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !segment_allowed(&name) || (top_level && name.eq_ignore_ascii_case(RESERVED)) {
            continue;
        }
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let meta = if file_type.is_symlink() {
            let Ok(real) = fs::canonicalize(entry.path()) else {
                continue;
            };
            if check_inside(root, &real).is_err() {
                continue;
            }
            fs::metadata(&real)
        } else {
            entry.metadata()
        };
        let Ok(meta) = meta else { continue };
        if !meta.is_dir() && !meta.is_file() {
            continue;
        }
        entries.push(IndexEntry {
            name,
            is_dir: meta.is_dir(),
            size: if meta.is_dir() { 0 } else { meta.len() },
            modified: meta.modified().ok(),
        });
    }
    entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    Ok(entries)
}

// ----- index page ------------------------------------------------------------------------

/// The generated index page of the directory shown as `display_path` (`/a/b/`): its
/// title, a link to the parent (except at the top), and a table of `entries` (name, with
/// `/` for directories; size; modification time in UTC). Names are HTML-escaped and
/// hrefs percent-encoded.
pub(crate) fn render_index(display_path: &str, entries: &[IndexEntry]) -> String {
    let title = crate::html::escape(display_path);
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Index of {title}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}\
         table{{border-collapse:collapse}}\
         th,td{{padding:.2em 1.2em .2em 0;text-align:left}}\
         td.size{{text-align:right}}</style>\n\
         </head>\n<body>\n<h1>Index of {title}</h1>\n<table>\n\
         <thead><tr><th>Name</th><th>Size</th><th>Modified (UTC)</th></tr></thead>\n<tbody>\n"
    );
    if display_path != "/" {
        html.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    for entry in entries {
        let slash = if entry.is_dir { "/" } else { "" };
        let size = if entry.is_dir {
            String::from("-")
        } else {
            entry.size.to_string()
        };
        let modified = entry.modified.map_or_else(String::new, |time| {
            chrono::DateTime::<chrono::Utc>::from(time)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        });
        html.push_str(&format!(
            "<tr><td><a href=\"{href}{slash}\">{name}{slash}</a></td>\
             <td class=\"size\">{size}</td><td>{modified}</td></tr>\n",
            href = crate::html::escape(&percent_encode(&entry.name)),
            name = crate::html::escape(&entry.name),
        ));
    }
    if entries.len() >= MAX_INDEX_ENTRIES {
        html.push_str("<tr><td colspan=\"3\">(listing truncated)</td></tr>\n");
    }
    html.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    html
}

// ----- responses -------------------------------------------------------------------------

fn redirect(location: &str, query: Option<&str>) -> Response {
    let target = match query {
        Some(query) => format!("{location}?{query}"),
        None => location.to_owned(),
    };
    match HeaderValue::from_str(&target) {
        Ok(value) => (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, value)]).into_response(),
        Err(_) => not_found(),
    }
}

fn index_response(html: String, head: bool) -> Response {
    let len = html.len();
    let body = if head {
        Body::empty()
    } else {
        Body::from(html)
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(INDEX_CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn file_response(file: OpenFile, head: bool, request: &HeaderMap) -> Response {
    let modified = file.modified.and_then(|time| {
        // HTTP dates have whole seconds; compare and show the truncated time.
        let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
        Some(UNIX_EPOCH + std::time::Duration::from_secs(secs))
    });
    let etag = etag(&file);
    let mut validators = HeaderMap::new();
    if let Some(time) = modified
        && let Ok(value) = HeaderValue::from_str(&httpdate::fmt_http_date(time))
    {
        validators.insert(header::LAST_MODIFIED, value);
    }
    if let Ok(value) = HeaderValue::from_str(&etag) {
        validators.insert(header::ETAG, value);
    }

    if not_modified(request, &etag, modified) {
        let mut response = StatusCode::NOT_MODIFIED.into_response();
        response.headers_mut().extend(validators);
        return response;
    }

    let body = if head {
        Body::empty()
    } else {
        let reader = tokio::fs::File::from_std(file.file).take(file.len);
        Body::from_stream(ReaderStream::with_capacity(reader, STREAM_CHUNK))
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    let content_type = HeaderValue::from_str(&file.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(file.len));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("none"));
    headers.extend(validators);
    response
}

/// A weak validator from modification time (to the nanosecond) and size.
fn etag(file: &OpenFile) -> String {
    let since_epoch = file
        .modified
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default();
    format!(
        "W/\"{:x}-{:x}-{:x}\"",
        since_epoch.as_secs(),
        since_epoch.subsec_nanos(),
        file.len
    )
}

/// RFC 9110 section 13.2.2 for GET/HEAD: `If-None-Match` (weak comparison) when present,
/// else `If-Modified-Since`.
fn not_modified(request: &HeaderMap, etag: &str, modified: Option<SystemTime>) -> bool {
    if let Some(value) = request.get(header::IF_NONE_MATCH) {
        let Ok(list) = value.to_str() else {
            return false;
        };
        let ours = etag.trim_start_matches("W/");
        return list
            .split(',')
            .map(str::trim)
            .any(|candidate| candidate == "*" || candidate.trim_start_matches("W/") == ours);
    }
    let Some(modified) = modified else {
        return false;
    };
    request
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| httpdate::parse_http_date(text).ok())
        .is_some_and(|since| modified <= since)
}

/// Content type by extension (case-insensitive); `application/octet-stream` otherwise.
/// Content type by file extension (`mime_guess`), with UTF-8 declared for text.
fn content_type(name: &str) -> String {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || mime.subtype() == mime_guess::mime::JAVASCRIPT
        || mime.essence_str() == "application/json";
    if textual && mime.get_param(mime_guess::mime::CHARSET).is_none() {
        format!("{}; charset=utf-8", mime.essence_str())
    } else {
        mime.essence_str().to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn parse(raw: &str) -> Option<Vec<String>> {
        PublicPath::parse(raw).map(|p| p.segments)
    }

    #[test]
    fn plain_paths_are_decoded_once() {
        assert_eq!(parse("/"), Some(vec![]));
        assert_eq!(parse("/a/b.txt"), Some(vec!["a".into(), "b.txt".into()]));
        assert_eq!(parse("/a%20b/c"), Some(vec!["a b".into(), "c".into()]));
        assert_eq!(parse("//a///b"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(parse("/%C3%A9t%C3%A9"), Some(vec!["été".into()]));
        // Double encoding stays literal after the one decoding.
        assert_eq!(parse("/%252e%252e/"), Some(vec!["%2e%2e".into()]));
        assert_eq!(parse("/svcx/a"), Some(vec!["svcx".into(), "a".into()]));
        assert_eq!(parse("/a/svc"), Some(vec!["a".into(), "svc".into()]));
        let p = PublicPath::parse("/a/").expect("parses");
        assert!(p.trailing_slash);
        assert!(PublicPath::parse("/").is_some_and(|p| p.trailing_slash));
        assert!(PublicPath::parse("/a").is_some_and(|p| !p.trailing_slash));
    }

    #[test]
    fn traversal_and_odd_segments_are_refused() {
        for raw in [
            "/..",
            "/../etc/passwd",
            "/a/../b",
            "/./a",
            "/a/.",
            "/%2e%2e/%2e%2e/etc/passwd",
            "/%2E%2E/x",
            "/a/%2e%2e/%2e%2e/x",
            "/..%2fetc%2fpasswd",
            "/a%2fb",
            "/a%2Fb",
            "/..\\etc\\passwd",
            "/a%5c..%5cb",
            "/a%5C..",
            "/a%00b",
            "/.hidden",
            "/a/.git/config",
            "/%2ehidden",
            "/%ff",
            "/%c3%28",
            "/bad%zz",
            "/bad%2",
            "/bad%",
            "/svc",
            "/svc/",
            "/svc/x",
            "/SVC/x",
            "/%73vc/x",
            "relative",
            "",
        ] {
            assert_eq!(parse(raw), None, "{raw:?} must be refused");
        }
    }

    #[test]
    fn redirect_target_is_rebuilt_from_segments() {
        let p = PublicPath::parse("//evil.example/dir").expect("parses");
        assert_eq!(p.encoded_dir(), "/evil.example/dir/");
        let p = PublicPath::parse("/a%20b/%3Cx%3E").expect("parses");
        assert_eq!(p.encoded_dir(), "/a%20b/%3Cx%3E/");
        assert_eq!(p.display(), "/a b/<x>/");
    }

    #[test]
    fn encoding_round_trips_and_leaves_only_safe_bytes() {
        for name in [
            "plain.txt",
            "<b>&\"x.txt",
            "a b",
            "javascript:x",
            "été",
            "50%",
            "a?b#c",
        ] {
            let encoded = percent_encode(name);
            assert!(
                encoded
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)),
                "{encoded}"
            );
            assert_eq!(percent_decode(&encoded).as_deref(), Some(name.as_bytes()));
        }
        assert_eq!(percent_encode("javascript:x"), "javascript%3Ax");
    }

    #[test]
    fn index_page_escapes_names_and_encodes_hrefs() {
        let entries = [
            IndexEntry {
                name: "sub<dir>".into(),
                is_dir: true,
                size: 0,
                modified: Some(UNIX_EPOCH),
            },
            IndexEntry {
                name: "<b>&\"x.txt".into(),
                is_dir: false,
                size: 42,
                modified: Some(UNIX_EPOCH + std::time::Duration::from_secs(86_400 + 61)),
            },
            IndexEntry {
                name: "it's".into(),
                is_dir: false,
                size: 1,
                modified: None,
            },
        ];
        let html = render_index("/a&b/<c>/", &entries);
        assert!(
            html.contains("<title>Index of /a&amp;b/&lt;c&gt;/</title>"),
            "{html}"
        );
        assert!(html.contains("<a href=\"../\">../</a>"));
        assert!(
            html.contains("<a href=\"sub%3Cdir%3E/\">sub&lt;dir&gt;/</a>"),
            "{html}"
        );
        assert!(html.contains("<a href=\"%3Cb%3E%26%22x.txt\">&lt;b&gt;&amp;&quot;x.txt</a>"));
        assert!(html.contains("<a href=\"it%27s\">it&#39;s</a>"));
        assert!(html.contains(">42<") && html.contains("1970-01-02 00:01:01"));
        assert!(html.contains("1970-01-01 00:00:00"));
        assert!(!html.contains("<b>&"), "raw name leaked: {html}");
        assert!(!render_index("/", &[]).contains("href=\"../\""));
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("A.CSS"), "text/css; charset=utf-8");
        assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("d.json"), "application/json; charset=utf-8");
        assert_eq!(content_type("i.png"), "image/png");
        assert_eq!(content_type("n.txt"), "text/plain; charset=utf-8");
        assert_eq!(content_type("blob.unknownext"), "application/octet-stream");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[test]
    fn conditional_requests() {
        let time = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let mut request = HeaderMap::new();
        assert!(!not_modified(&request, "W/\"1\"", Some(time)));
        request.insert(
            header::IF_MODIFIED_SINCE,
            HeaderValue::from_str(&httpdate::fmt_http_date(time)).expect("date"),
        );
        assert!(not_modified(&request, "W/\"1\"", Some(time)));
        assert!(!not_modified(
            &request,
            "W/\"1\"",
            Some(time + std::time::Duration::from_secs(1))
        ));
        request.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"2\""));
        assert!(!not_modified(&request, "W/\"1\"", Some(time)), "ETag wins");
        request.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"0\", W/\"1\""),
        );
        assert!(not_modified(&request, "W/\"1\"", Some(time)));
    }

    /// A tree with everything `resolve` must refuse or accept.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().expect("tempdir");
        let root = base.path().join("public");
        fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
        fs::create_dir_all(root.join("svc")).expect("mkdir");
        fs::create_dir_all(root.join(".git")).expect("mkdir");
        fs::write(root.join("a.txt"), "A").expect("write");
        fs::write(root.join("sub/deeper/b.txt"), "B").expect("write");
        fs::write(root.join("svc/s.txt"), "S").expect("write");
        fs::write(root.join(".git/config"), "G").expect("write");
        fs::write(base.path().join("secret.txt"), "SECRET").expect("write");
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).expect("symlink");
        };
        link(&base.path().join("secret.txt"), "out-file");
        link(base.path(), "out-dir");
        link(Path::new("sub/deeper/b.txt"), "in-file");
        link(Path::new("sub"), "in-dir");
        link(Path::new("svc"), "to-svc");
        link(Path::new(".git"), "to-git");
        nix::unistd::mkfifo(
            &root.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .expect("mkfifo");
        (base, root)
    }

    fn get(root: &Path, raw: &str) -> Option<Target> {
        resolve(root, &PublicPath::parse(raw)?).ok()
    }

    fn file_text(target: Option<Target>) -> Option<String> {
        match target? {
            Target::File(mut open) => {
                let mut text = String::new();
                io::Read::read_to_string(&mut open.file, &mut text).ok()?;
                Some(text)
            }
            _ => None,
        }
    }

    #[test]
    fn resolve_serves_inside_and_refuses_outside() {
        let (_base, root) = tree();
        assert_eq!(file_text(get(&root, "/a.txt")).as_deref(), Some("A"));
        assert_eq!(
            file_text(get(&root, "/sub/deeper/b.txt")).as_deref(),
            Some("B")
        );
        assert_eq!(file_text(get(&root, "/in-file")).as_deref(), Some("B"));
        assert_eq!(
            file_text(get(&root, "/in-dir/deeper/b.txt")).as_deref(),
            Some("B")
        );
        for raw in [
            "/out-file",
            "/out-dir/",
            "/out-dir/secret.txt",
            "/to-svc/s.txt",
            "/to-git/config",
            "/fifo",
            "/a.txt/",
            "/missing",
            "/svc/s.txt",
        ] {
            assert!(get(&root, raw).is_none(), "{raw} must not be served");
        }
        assert!(matches!(get(&root, "/sub"), Some(Target::Redirect(to)) if to == "/sub/"));
    }

    #[test]
    fn index_lists_only_what_is_served() {
        let (_base, root) = tree();
        let Some(Target::Index(html)) = get(&root, "/") else {
            panic!("the top level is an index page");
        };
        for shown in [
            "href=\"sub/\"",
            "href=\"in-dir/\"",
            "href=\"a.txt\"",
            "href=\"in-file\"",
        ] {
            assert!(html.contains(shown), "{shown} in {html}");
        }
        for hidden in ["svc", "git", "out-", "fifo", "to-"] {
            assert!(
                !html.contains(hidden),
                "{hidden} must not be listed: {html}"
            );
        }
        let dirs_first = html.find("in-dir/").zip(html.find("a.txt"));
        assert!(dirs_first.is_some_and(|(dir, file)| dir < file), "{html}");

        fs::write(root.join("sub/index.html"), "INDEX").expect("write");
        assert_eq!(file_text(get(&root, "/sub/")).as_deref(), Some("INDEX"));
    }
}
