//! The values of the configuration's keys: booleans, counts, sizes, durations, names,
//! paths, URLs and the like. Each parser returns the value, or the message of the
//! problem that the section loader records with the file, section and key. The values
//! of one section only (`[notif]`, the cluster keys) are parsed beside their section.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;

use super::job_model::{AuthKind, HttpMethod, HttpRequestType, OnBusy, PingUrl};
use super::model::WebhookKey;
use crate::time::duration::parse_duration;

/// `true/false/yes/no/on/off/1/0`, any case.
pub(super) fn parse_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Ok(true),
        "false" | "no" | "off" | "0" => Ok(false),
        _ => Err("not a boolean (expected true/false, yes/no, on/off or 1/0)".into()),
    }
}

/// A whole number of at least 1.
pub(super) fn parse_count(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("not a whole number of at least 1".into()),
    }
}

/// A whole number of at least 1, as a resource limit.
pub(super) fn parse_limit(value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("not a whole number of at least 1".into()),
    }
}

/// `cpu_weight`: 1 to 10000, as cgroup v2's `cpu.weight`.
pub(super) fn parse_cpu_weight(value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n @ 1..=10000) => Ok(n),
        _ => Err("not a whole number from 1 to 10000 (100 is an even share)".into()),
    }
}

/// A size in bytes: a whole number with an optional binary suffix `K`, `M`, `G` or `T`
/// (also written `KiB`, `MB` ...; any case), at least 1 MiB so that a shell can start.
pub(crate) fn parse_bytes(value: &str) -> Result<u64, String> {
    let bytes = parse_size(value)?;
    if bytes < 1 << 20 {
        return Err("must be at least 1M: below that no command can start".into());
    }
    Ok(bytes)
}

/// `audit_max_size`: a size of at least 4K (a few entries per file; tests use small
/// files to see rotations).
pub(super) fn parse_audit_size(value: &str) -> Result<u64, String> {
    let bytes = parse_size(value)?;
    if bytes < 4 << 10 {
        return Err("must be at least 4K".into());
    }
    Ok(bytes)
}

/// A size: a whole number with an optional unit K, M, G or T (powers of 1024).
fn parse_size(value: &str) -> Result<u64, String> {
    let text = value.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let number: u64 = digits
        .parse()
        .map_err(|_| "not a size (a whole number with an optional K, M, G or T)".to_string())?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size unit {other:?} (use K, M, G or T)")),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| "size too large".to_string())
}

/// A timeout: at least 1ms, which catches a bare number meant as seconds (a bare
/// integer counts nanoseconds).
pub(super) fn parse_positive_duration(value: &str) -> Result<Duration, String> {
    let d = parse_duration(value)?;
    if d < Duration::from_millis(1) {
        return Err(
            "a timeout must be at least 1ms (a bare number counts nanoseconds; write 30s)".into(),
        );
    }
    Ok(d)
}

pub(super) fn parse_interval(value: &str) -> Result<Duration, String> {
    let d = parse_duration(value)?;
    if d < Duration::from_secs(1) {
        return Err("an interval must be at least 1s".into());
    }
    Ok(d)
}

/// `0` (or any zero duration) means no limit; otherwise as [`parse_positive_duration`].
pub(super) fn parse_timeout(value: &str) -> Result<Option<Duration>, String> {
    if parse_duration(value)?.is_zero() {
        return Ok(None);
    }
    parse_positive_duration(value).map(Some)
}

/// A host name for `allowed_hosts`: letters, digits, `-` and `.`, kept lower-cased.
pub(super) fn check_host_name(value: &str) -> Result<String, String> {
    let name = value.trim().trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err("not a host name (letters, digits, '-' and '.')".into());
    }
    Ok(name)
}

/// `host:port` with a non-empty host and a numeric port; `[v6]:port` accepted.
pub(super) fn check_listen_address(value: &str) -> Result<String, String> {
    let expected = "expected host:port, e.g. 127.0.0.1:31937";
    let Some((host, port)) = value.rsplit_once(':') else {
        return Err(format!("missing port ({expected})"));
    };
    if host.is_empty() || host.chars().any(char::is_whitespace) {
        return Err(format!("missing or invalid host ({expected})"));
    }
    if host.starts_with('[') != host.ends_with(']') {
        return Err(format!(
            "unbalanced brackets around an IPv6 host ({expected})"
        ));
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err(format!(
            "an IPv6 host needs brackets, e.g. [::1]:31937 ({expected})"
        ));
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err()
    {
        return Err(format!(
            "port {port:?} is not a number 0-65535 ({expected})"
        ));
    }
    Ok(value.to_string())
}

pub(super) fn check_user(name: &str) -> Result<String, String> {
    match nix::unistd::User::from_name(name) {
        Ok(Some(_)) => Ok(name.to_string()),
        Ok(None) => Err(format!("no such user {name:?} on this system")),
        Err(e) => Err(format!("cannot look up user {name:?}: {e}")),
    }
}

/// Whether `name` is a user with uid 0 (whatever it is called).
pub(super) fn is_root_user(name: &str) -> bool {
    matches!(nix::unistd::User::from_name(name), Ok(Some(user)) if user.uid.is_root())
}

/// One `capabilities` value: names separated by commas or blanks, each like
/// `CAP_NET_BIND_SERVICE` or `net_bind_service`, in any case; as a bit mask.
pub(super) fn parse_capabilities(value: &str) -> Result<u64, String> {
    let mut mask = 0u64;
    for name in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|name| !name.is_empty())
    {
        let upper = name.to_ascii_uppercase();
        let full = if upper.starts_with("CAP_") {
            upper
        } else {
            format!("CAP_{upper}")
        };
        let cap: caps::Capability = full
            .parse()
            .map_err(|_| format!("unknown capability {name:?} (see capabilities(7))"))?;
        mask |= cap.bitmask();
    }
    Ok(mask)
}

pub(super) fn check_group(name: &str) -> Result<String, String> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(_)) => Ok(name.to_string()),
        Ok(None) => Err(format!("no such group {name:?} on this system")),
        Err(e) => Err(format!("cannot look up group {name:?}: {e}")),
    }
}

pub(super) fn check_log_level(value: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(value)
        .map(|_| value.to_string())
        .map_err(|e| format!("not a log filter such as info or svc_controller=debug: {e}"))
}

/// An HTTP header name (RFC 9110 token), lower-cased.
pub(super) fn check_header_name(name: &str) -> Result<String, String> {
    let is_tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(is_tchar) {
        return Err(format!("{name:?} is not a valid HTTP header name"));
    }
    Ok(name.to_ascii_lowercase())
}

/// `auth_kind`: the kind, and the name it was given by.
pub(super) fn parse_auth_kind(value: &str) -> Result<(AuthKind, &'static str), String> {
    AuthKind::parse(value).ok_or_else(|| {
        "unknown auth_kind (expected hmac-sha256, github, gitlab, gitea, bitbucket, \
         standard or sourcehut; codehost and patchhost are the older names of github and \
         sourcehut, forgejo signs as gitea)"
            .into()
    })
}

/// `on_busy`: `queue`, `skip` or `replace`.
pub(super) fn parse_on_busy(value: &str) -> Result<OnBusy, String> {
    match value.to_ascii_lowercase().as_str() {
        "queue" => Ok(OnBusy::Queue),
        "skip" => Ok(OnBusy::Skip),
        "replace" => Ok(OnBusy::Replace),
        _ => Err("unknown on_busy (expected queue, skip or replace)".into()),
    }
}

/// A `filter_ref` glob, matched against `refs/...` by the webhook.
pub(super) fn parse_ref_glob(value: &str) -> Result<glob::Pattern, String> {
    glob::Pattern::new(value).map_err(|e| format!("not a glob: {e}"))
}

/// A job's `secret` as the key its deliveries are checked with: for `standard`, a
/// `whsec_<base64>` secret decoded (it must decode), decoded here once rather than for
/// every delivery; for any other scheme the secret's own bytes.
pub(super) fn job_key(kind: AuthKind, value: &str) -> Result<WebhookKey, String> {
    match kind {
        AuthKind::Standard => standard_key(value).map(WebhookKey::new),
        _ => Ok(WebhookKey::new(value.as_bytes().to_vec())),
    }
}

/// The HMAC key of a Standard Webhooks secret ([`crate::security::standard_secret::standard_key`]), or why it
/// has none. The message never quotes the value.
pub(super) fn standard_key(value: &str) -> Result<Vec<u8>, String> {
    crate::security::standard_secret::standard_key(value.as_bytes())
        .ok_or_else(|| "a secret that starts with whsec_ must be base64 after it".to_string())
}

pub(super) fn check_public_key(value: &str) -> Result<String, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|e| format!("not base64: {e}"))?;
    if bytes.len() != 32 {
        return Err(format!(
            "an Ed25519 public key is 32 bytes, this one decodes to {}",
            bytes.len()
        ));
    }
    Ok(value.to_string())
}

/// Normalises a trigger path to start with `/` and rejects what could not be matched
/// reliably against a request path.
pub(super) fn normalize_path(value: &str) -> Result<String, String> {
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a path must not contain white space".into());
    }
    if value.contains('?') || value.contains('#') {
        return Err("a path must not contain '?' or '#'".into());
    }
    let path = if value.starts_with('/') {
        value.to_string()
    } else {
        format!("/{value}")
    };
    if path == "/" {
        return Err("a path must not be just '/'".into());
    }
    if path.contains("//") {
        return Err("a path must not contain an empty segment '//'".into());
    }
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return Err("a path must not contain '.' or '..' segments".into());
    }
    Ok(path)
}

/// One `write_paths` value: an absolute path without `.` or `..` parts, apart from what
/// the sandbox protects.
pub(super) fn check_write_path(
    value: &str,
    protected: &[(PathBuf, &'static str)],
) -> Result<PathBuf, String> {
    let path = Path::new(value);
    if !path.is_absolute() {
        return Err("not an absolute path (write_paths lists paths that start with /)".into());
    }
    if path
        .components()
        .any(|part| matches!(part, Component::CurDir | Component::ParentDir))
    {
        return Err("a path in write_paths must not contain '.' or '..' parts".into());
    }
    let path: PathBuf = path.components().collect();
    check_outside_protected(&path, protected)?;
    Ok(path)
}

/// Refuses a writable path that is, holds or lies below what the sandbox protects
/// (compared as written, and as resolved when both exist).
pub(super) fn check_outside_protected(
    path: &Path,
    protected: &[(PathBuf, &'static str)],
) -> Result<(), String> {
    let real = fs::canonicalize(path).ok();
    for (guarded, what) in protected {
        let guarded_real = fs::canonicalize(guarded).ok();
        let hit = overlaps(path, guarded)
            || matches!((&real, &guarded_real), (Some(a), Some(b)) if overlaps(a, b));
        if hit {
            return Err(format!(
                "{} would let the job write to or read the service's {what} ({}); the \
                 sandbox keeps it out of reach of jobs",
                path.display(),
                guarded.display()
            ));
        }
    }
    Ok(())
}

/// True when `a` and `b` are the same path or one is below the other.
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `K=V` with K a shell-style variable name.
pub(super) fn parse_env(value: &str) -> Result<(String, String), String> {
    let Some((name, val)) = value.split_once('=') else {
        return Err("expected NAME=VALUE".into());
    };
    let name = name.trim();
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "invalid variable name {name:?} (expected [A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    Ok((name.to_string(), val.trim().to_string()))
}

/// `Key: Value`, split at the first `:`.
pub(super) fn parse_http_header(value: &str) -> Result<(String, String), String> {
    let Some((name, val)) = value.split_once(':') else {
        return Err("expected 'Name: value'".into());
    };
    let name = name.trim();
    check_header_name(name)?;
    Ok((name.to_string(), val.trim().to_string()))
}

pub(super) fn parse_http_method(value: &str) -> Result<HttpMethod, String> {
    match value.to_ascii_uppercase().as_str() {
        "GET" => Ok(HttpMethod::Get),
        "POST" => Ok(HttpMethod::Post),
        "PUT" => Ok(HttpMethod::Put),
        "DELETE" => Ok(HttpMethod::Delete),
        _ => Err("unknown http_method (expected GET, POST, PUT or DELETE)".into()),
    }
}

pub(super) fn parse_request_type(value: &str) -> Result<HttpRequestType, String> {
    match value.to_ascii_lowercase().as_str() {
        "query" => Ok(HttpRequestType::Query),
        "form" => Ok(HttpRequestType::Form),
        "json" => Ok(HttpRequestType::Json),
        _ => Err("unknown http_request_type (expected query, form or json)".into()),
    }
}

/// `http_timeout`: as [`parse_positive_duration`], but `0` or a negative duration means
/// the default (`None`), as upstream reads it.
pub(super) fn parse_http_timeout(value: &str) -> Result<Option<Duration>, String> {
    let magnitude = value.trim().strip_prefix('-');
    let duration = parse_duration(magnitude.unwrap_or(value))?;
    if magnitude.is_some() || duration.is_zero() {
        return Ok(None);
    }
    parse_positive_duration(value).map(Some)
}

/// `http_url`: an absolute URL (see [`check_http_url`]), or a path starting with `/`,
/// which names the service itself (upstream's relative URLs): it is resolved against
/// `listen_address`, a wildcard address replaced by the loopback one.
pub(super) fn resolve_http_url(value: &str, listen_address: &str) -> Result<String, String> {
    if !value.starts_with('/') || value.starts_with("//") {
        return check_http_url(value);
    }
    let (host, port) = listen_address
        .rsplit_once(':')
        .unwrap_or((listen_address, "80"));
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        other => other,
    };
    check_http_url(&format!("http://{host}:{port}{value}"))
}

/// An absolute `http://` or `https://` URL with a host.
pub(super) fn check_http_url(value: &str) -> Result<String, String> {
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a URL must not contain white space".into());
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err("not an absolute URL (expected http://HOST/... or https://HOST/...)".into());
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!("scheme {scheme:?} is not http or https"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, after)) => (h, after.strip_prefix(':')),
            None => return Err("unbalanced '[' in the URL host".into()),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".into());
    }
    if let Some(port) = port {
        if !port.is_empty() && port.parse::<u16>().is_err() {
            return Err(format!("URL port {port:?} is not a number 0-65535"));
        }
    }
    Ok(value.to_string())
}

/// `ping_url`: an `http://` or `https://` URL with a host.
pub(super) fn parse_ping_url(value: &str) -> Result<PingUrl, String> {
    check_http_url(value).map(PingUrl::new)
}

/// `smtp_user` or `smtp_password`: a value `$NAME` is the controller's environment
/// variable NAME (as upstream reads it), which must be set and not empty; any other
/// value is taken as it is. The message names the variable, never a value.
pub(super) fn from_env(
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let Some(name) = value.strip_prefix('$') else {
        return Ok(value.to_string());
    };
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(
            "a value starting with $ names an environment variable ($NAME, NAME made of \
             letters, digits and _)"
                .into(),
        );
    }
    match env(name) {
        Some(found) if !found.is_empty() => Ok(found),
        Some(_) => Err(format!(
            "the environment variable {name} is empty in the controller's environment"
        )),
        None => Err(format!(
            "the environment variable {name} is not set in the controller's environment"
        )),
    }
}
