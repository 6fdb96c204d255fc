//! The `Origin` check of the front: a request that changes something and comes from a
//! page of another site is refused (403), before its route sees it.
//!
//! Why: `SameSite=Strict` and the `X-Svc-Csrf` token keep another site from acting with a
//! user's session, but not from logging the user's browser in as the attacker (login
//! CSRF: a form of the attacker's site posted to `/svc/api/login`, after which the victim
//! works in the attacker's account), nor from logging them out. Every browser sends
//! `Origin` with such a request, so the service can tell: its scheme, host and port must
//! be the service's own, as the request reached it (`https` when a trusted proxy says so
//! in `X-Forwarded-Proto`, else `http`; the host and port of `Host`).
//!
//! What is not checked: reads (GET, HEAD, OPTIONS), which change nothing; requests
//! without `Origin` (curl, API clients, code hosts); webhook deliveries, which no
//! browser session can authorise (their signature does); and signed control requests
//! (`X-Svc-Sign`), whose signature is what counts wherever they come from.

use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};

/// Message of a refused cross-origin request.
pub(super) const FOREIGN_ORIGIN: &str = "cross-origin request refused: its Origin header \
     names another site than this service (scheme, host and port must match)";

/// True when a request is subject to the check: it may change something, a browser
/// sent it (`Origin`), and it carries no `X-Svc-Sign` signature.
pub(super) fn applies(method: &Method, headers: &HeaderMap) -> bool {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE];
    !reads.contains(method)
        && headers.contains_key(header::ORIGIN)
        && !headers.contains_key("x-svc-sign")
}

/// True when the `Origin` of `headers` is the service as this request reached it: the
/// scheme (`https` when `https`), and the host and port of `Host` (or of the URI, for
/// HTTP/2), a missing port being the scheme's default. `null`, or anything that does not
/// parse as `scheme://host[:port]`, is another site.
pub(super) fn same_origin(headers: &HeaderMap, uri: &Uri, https: bool) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(origin_parts) else {
        return false;
    };
    let own_scheme = if https { "https" } else { "http" };
    let own = match headers.get(header::HOST) {
        Some(host) => host
            .to_str()
            .ok()
            .and_then(|h| h.trim().parse::<Authority>().ok()),
        None => uri.authority().cloned(),
    };
    let Some(own) = own else {
        return false;
    };
    let default_port = |scheme: &str| if scheme == "https" { 443 } else { 80 };
    origin.0 == own_scheme
        && origin.1.host().eq_ignore_ascii_case(own.host())
        && origin.1.port_u16().unwrap_or(default_port(&origin.0))
            == own.port_u16().unwrap_or(default_port(own_scheme))
}

/// The scheme (lower case) and authority of an `Origin` value; `None` for `null`, for a
/// value with a user part or a path, and for anything else than http or https.
fn origin_parts(value: &HeaderValue) -> Option<(String, Authority)> {
    let (scheme, rest) = value.to_str().ok()?.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !(scheme == "http" || scheme == "https") || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    Some((scheme, rest.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: &str, host: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_str(origin).expect("origin"),
        );
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).expect("host"));
        }
        headers
    }

    fn same(origin: &str, host: &str, https: bool) -> bool {
        same_origin(
            &headers(origin, Some(host)),
            &Uri::from_static("/svc/api/login"),
            https,
        )
    }

    #[test]
    fn the_services_own_origin_passes() {
        assert!(same("http://127.0.0.1:31937", "127.0.0.1:31937", false));
        assert!(same("http://Svc.Example.org", "svc.example.org", false));
        assert!(same("http://svc.example.org:80", "svc.example.org", false));
        assert!(same("https://svc.example.org", "svc.example.org", true));
        assert!(same(
            "https://svc.example.org:443",
            "svc.example.org:443",
            true
        ));
        assert!(same("http://[::1]:8080", "[::1]:8080", false));
        // HTTP/2: no Host, the URI's authority.
        let uri = Uri::from_static("http://svc.example.org/svc/api/login");
        assert!(same_origin(
            &headers("http://svc.example.org", None),
            &uri,
            false
        ));
    }

    #[test]
    fn another_scheme_host_or_port_is_another_site() {
        assert!(!same("http://evil.example", "svc.example.org", false));
        assert!(!same(
            "http://svc.example.org.evil.example",
            "svc.example.org",
            false
        ));
        assert!(!same("https://svc.example.org", "svc.example.org", false));
        assert!(!same("http://svc.example.org", "svc.example.org", true));
        assert!(!same("http://127.0.0.1:8080", "127.0.0.1:31937", false));
        assert!(!same("http://127.0.0.1", "127.0.0.1:31937", false));
        assert!(!same("null", "svc.example.org", false));
        assert!(!same(
            "http://user@svc.example.org",
            "svc.example.org",
            false
        ));
        assert!(!same("http://svc.example.org/", "svc.example.org", false));
        assert!(!same("ftp://svc.example.org", "svc.example.org", false));
        assert!(!same("", "svc.example.org", false));
        let no_host = same_origin(
            &headers("http://svc.example.org", None),
            &Uri::from_static("/svc/api/login"),
            false,
        );
        assert!(!no_host);
    }

    #[test]
    fn only_unsigned_changes_sent_by_a_browser_are_checked() {
        let browser = headers("http://evil.example", None);
        assert!(applies(&Method::POST, &browser));
        assert!(applies(&Method::DELETE, &browser));
        assert!(applies(&Method::PUT, &browser));
        assert!(!applies(&Method::GET, &browser));
        assert!(!applies(&Method::HEAD, &browser));
        assert!(!applies(&Method::OPTIONS, &browser));
        assert!(
            !applies(&Method::POST, &HeaderMap::new()),
            "no Origin: not a browser"
        );
        let mut signed = browser.clone();
        signed.insert("x-svc-sign", HeaderValue::from_static("00"));
        assert!(!applies(&Method::POST, &signed), "the signature counts");
    }
}
