//! The public directory (`dir_public`) served under `/`: files, directory redirects,
//! `index.html` or a generated index page; every refusal is a 404 in the JSON wrapper.
//!
//! How a request path becomes a file, in order (any failure is a 404, never a 500):
//!
//! 1. [`PublicPath::parse`]: the raw path is split on `/` and each segment
//!    percent-decoded exactly once. A malformed escape, invalid UTF-8, a segment that
//!    starts with `.` (so `.`, `..` and hidden names), or one holding `/` (from `%2f`),
//!    `\` or NUL is refused, and so is a first segment `svc` (reserved for the service).
//! 2. [`resolve`]: the segments are opened below a handle on `dir_public` in one `openat2` call with
//!    `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (or, on kernels without it, one component
//!    at a time with `O_NOFOLLOW`): no symlink is followed, so a component swapped for
//!    one between checks cannot lead outside. `O_NONBLOCK` keeps a FIFO from hanging the
//!    request. Only directories and regular files, as seen on the open descriptor, go
//!    further; files are streamed, never read into memory whole.
//!
//! Directories need a trailing slash (else a 308 to it); they answer with their
//! `index.html` when it is a servable file, else with a generated page (see
//! [`render_index`]). Files get `Content-Type` by extension, `Content-Length`,
//! `Last-Modified`, a weak `ETag`, `304` for `If-None-Match` / `If-Modified-Since`, and
//! `Content-Security-Policy: sandbox` with `nosniff`: they share the UI's origin.
//! Range requests are not supported (answered in full).

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{Mode, SFlag, fstatat};
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
const INDEX_CSP: &str = "sandbox; default-src 'none'; style-src 'unsafe-inline'";
/// Policy of every public file.
const FILE_CSP: &str = "sandbox";

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

/// Decodes `%XX` escapes once; `None` for a malformed escape (a `%` not followed by two
/// hex digits), which the decoder alone would pass through as it is.
fn percent_decode(raw: &str) -> Option<Vec<u8>> {
    let well_formed = raw.split('%').skip(1).all(|after| {
        after
            .as_bytes()
            .get(..2)
            .is_some_and(|pair| pair.iter().all(u8::is_ascii_hexdigit))
    });
    well_formed.then(|| percent_encoding::percent_decode_str(raw).collect())
}

/// Every byte but the unreserved `A-Z a-z 0-9 - . _ ~` (RFC 3986).
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes every byte except the unreserved `A-Z a-z 0-9 - . _ ~`, so the result
/// is one path segment that no browser reads as a scheme, a query or markup.
fn percent_encode(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, ESCAPED).to_string()
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
    // The configured directory itself may be a symlink (the operator's choice); nothing
    // below it is followed.
    let root = fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let fd = open_beneath(&root, &path.segments, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
    let file = fs::File::from(fd);
    let meta = file.metadata()?;
    if meta.is_dir() {
        if !path.trailing_slash {
            return Ok(Target::Redirect(path.encoded_dir()));
        }
        if let Ok(index) = open_file(&file, &["index.html".to_owned()], "index.html") {
            return Ok(Target::File(index));
        }
        let entries = list_dir(file, path.segments.is_empty())?;
        return Ok(Target::Index(render_index(&path.display(), &entries)));
    }
    if path.trailing_slash {
        return Err(refused("a file asked for as a directory"));
    }
    let name = path.segments.last().map_or("", String::as_str);
    regular_file(file, meta, name).map(Target::File)
}

fn refused(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

/// Whether the kernel lacks `openat2` (before Linux 5.6) or a filter refuses it; then
/// [`open_beneath`] walks the path one component at a time.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens the checked `segments` below the directory `dir` with `flags`, resolved by the
/// kernel in one step that cannot leave `dir` and follows no symlink on the way
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): a component swapped for a symlink between
/// the request's checks and the open makes the open fail instead of leading elsewhere.
fn open_beneath(dir: &impl AsFd, segments: &[String], flags: OFlag) -> io::Result<OwnedFd> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let path = if segments.is_empty() {
            ".".to_owned()
        } else {
            segments.join("/")
        };
        let how = OpenHow::new()
            .flags(flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
        match fcntl::openat2(dir, path.as_str(), how) {
            Err(Errno::ENOSYS | Errno::EPERM) => {
                tracing::info!("openat2 is not available: public files are opened component-wise");
                NO_OPENAT2.store(true, Ordering::Relaxed);
            }
            result => return result.map_err(io::Error::from),
        }
    }
    open_componentwise(dir, segments, flags)
}

/// [`open_beneath`] without `openat2`: every directory on the way is opened relative to
/// the one before with `O_NOFOLLOW | O_DIRECTORY` (a symlink fails with `ENOTDIR`), and
/// the last component with `O_NOFOLLOW`. The segments hold no `..`, `.` nor `/`.
fn open_componentwise(dir: &impl AsFd, segments: &[String], flags: OFlag) -> io::Result<OwnedFd> {
    let Some((last, parents)) = segments.split_last() else {
        return Ok(fcntl::openat(
            dir,
            ".",
            flags | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?);
    };
    let mut current: Option<OwnedFd> = None;
    for name in parents {
        let next = match &current {
            Some(fd) => walk_into(fd, name)?,
            None => walk_into(dir, name)?,
        };
        current = Some(next);
    }
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match &current {
        Some(parent) => fcntl::openat(parent, last.as_str(), flags, Mode::empty())?,
        None => fcntl::openat(dir, last.as_str(), flags, Mode::empty())?,
    };
    Ok(fd)
}

fn walk_into(dir: &impl AsFd, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(fcntl::openat(dir, name, flags, Mode::empty())?)
}

/// Opens `segments` below the directory `dir` as a regular file; `name` (the name asked
/// for) decides the content type.
fn open_file(dir: &impl AsFd, segments: &[String], name: &str) -> io::Result<OpenFile> {
    // O_NONBLOCK: opening a FIFO returns at once (and is then refused).
    let fd = open_beneath(dir, segments, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
    let file = fs::File::from(fd);
    let meta = file.metadata()?;
    regular_file(file, meta, name)
}

/// Keeps `file` when the open descriptor is a regular file.
fn regular_file(file: fs::File, meta: fs::Metadata, name: &str) -> io::Result<OpenFile> {
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

/// Entries of the open directory `dir` that would be served: not hidden, UTF-8 names
/// without `\\`, regular files and directories only (no symlink: none is followed); at the
/// top level no `svc`. Sorted directories first, then by name.
fn list_dir(dir: fs::File, top_level: bool) -> io::Result<Vec<IndexEntry>> {
    let mut listing = Dir::from_fd(OwnedFd::from(dir))?;
    let mut names = Vec::new();
    for entry in listing.iter().take(MAX_INDEX_ENTRIES) {
        let Ok(entry) = entry else { continue };
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if !segment_allowed(name) || (top_level && name.eq_ignore_ascii_case(RESERVED)) {
            continue;
        }
        names.push(name.to_owned());
    }
    let mut entries = Vec::new();
    for name in names {
        let Ok(stat) = fstatat(&listing, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        let is_dir = kind == SFlag::S_IFDIR;
        if !is_dir && kind != SFlag::S_IFREG {
            continue;
        }
        let modified = u64::try_from(stat.st_mtime).ok().map(|secs| {
            UNIX_EPOCH
                + std::time::Duration::new(
                    secs,
                    u32::try_from(stat.st_mtime_nsec).unwrap_or_default(),
                )
        });
        entries.push(IndexEntry {
            name,
            is_dir,
            size: if is_dir {
                0
            } else {
                u64::try_from(stat.st_size).unwrap_or_default()
            },
            modified,
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
    let title = crate::util::html::escape(display_path);
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
            href = crate::util::html::escape(&percent_encode(&entry.name)),
            name = crate::util::html::escape(&entry.name),
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
    // Public files share the UI's origin: sandboxed, a page served from dir_public runs
    // in an opaque origin and cannot reach the UI, its storage or its API with the
    // user's cookies.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(FILE_CSP),
    );
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
#[path = "public_tests.rs"]
mod tests;
