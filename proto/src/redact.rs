//! The one redaction rule of svc: which header and parameter names are sensitive, and how
//! a header line or a URL is shown with their values hidden. The controller uses it for
//! the JSON views (Environment, JobHttp), the runner for the JobHttp lines of run logs;
//! both sides must hide the same things, so the rule lives here, beside the protocol
//! they share.

/// What a hidden value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// A secret value (a signing key, the main secret): it can be used, cloned, compared and
/// sent to the runner, but its `Debug` shows [`REDACTED`], so no log line or panic message
/// that prints a configuration or a protocol message can show it.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the one place that signs or checks with it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Words that make a name sensitive wherever they appear in it (`X-Api-Key`,
/// `client_secret`, `X-Amz-Signature`, `X-Hub-Signature-256`, `Set-Cookie`, ...).
const SENSITIVE_PARTS: &[&str] = &[
    "authorization",
    "cookie",
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "auth",
    "signature",
    "credential",
    "session",
];

/// Words that make a name sensitive only on their own (`sig`, but not `design`).
const SENSITIVE_WORDS: &[&str] = &["sig", "pwd", "pass"];

/// Shortest path segment taken for a token (`/hooks/T0AB12/B3CD45/Xy9...`).
const TOKEN_SEGMENT_MIN: usize = 20;

/// Whether values of a header, query parameter or form field called `name` must never
/// be shown. The name is percent-decoded first, so `%74oken` is `token`.
pub fn is_sensitive_name(name: &str) -> bool {
    let name = percent_decode(name).to_ascii_lowercase();
    SENSITIVE_PARTS.iter().any(|part| name.contains(part))
        || name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| SENSITIVE_WORDS.contains(&word))
}

/// `name: value`, the value hidden when the name is sensitive; a URL in a `Location`
/// header is shown through [`redact_url`].
pub fn redact_header(name: &str, value: &str) -> String {
    if is_sensitive_name(name) {
        format!("{name}: {REDACTED}")
    } else if name.eq_ignore_ascii_case("location") {
        format!("{name}: {}", redact_url(value))
    } else {
        format!("{name}: {value}")
    }
}

/// A URL as it may be shown: the password of its user part, path segments that look
/// like tokens, and the values of sensitive query parameters are hidden.
pub fn redact_url(url: &str) -> String {
    let (before_fragment, fragment) = match url.split_once('#') {
        Some((head, fragment)) => (head, Some(fragment)),
        None => (url, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (before_fragment, None),
    };
    let (prefix, path) = match before_query.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, host)) if userinfo.contains(':') => {
                    let user = userinfo.split(':').next().unwrap_or_default();
                    format!("{user}:{REDACTED}@{host}")
                }
                _ => authority.to_string(),
            };
            (format!("{scheme}://{authority}"), path)
        }
        None => (String::new(), before_query),
    };
    let path: Vec<&str> = path
        .split('/')
        .map(|segment| {
            // Blanks around a token (a URL pasted with a space, which the configuration
            // then refuses and shows) keep it a token.
            if looks_like_token(segment.trim()) {
                REDACTED
            } else {
                segment
            }
        })
        .collect();
    let mut out = prefix + &path.join("/");
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_pairs(query));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(&redact_pairs(fragment));
    }
    out
}

/// `a=1&token=x` with the values of sensitive names hidden.
fn redact_pairs(text: &str) -> String {
    text.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_sensitive_name(name) => format!("{name}={REDACTED}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A long path segment of letters and digits mixed, such as the secret part of a chat
/// service's webhook URL.
fn looks_like_token(segment: &str) -> bool {
    segment.len() >= TOKEN_SEGMENT_MIN
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && segment.bytes().any(|b| b.is_ascii_digit())
        && segment.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Percent-decodes `text` (and `+` as a space); bad escapes stay as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_secret_debug_shows_nothing_of_it() {
        let secret = super::Secret::new("hunter2-the-secret");
        assert_eq!(format!("{secret:?}"), super::REDACTED);
        assert_eq!(
            format!("{:?}", Some(&secret)),
            format!("Some({})", super::REDACTED)
        );
        assert_eq!(secret.expose(), "hunter2-the-secret");
        let json = serde_json::to_string(&secret).expect("serialize");
        assert_eq!(json, "\"hunter2-the-secret\"");
        let back: super::Secret = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, secret);
    }

    use super::*;

    #[test]
    fn sensitive_names_in_any_spelling() {
        for name in [
            "Authorization",
            "X-Api-Key",
            "x-client-secret",
            "Set-Cookie",
            "X-Auth-Token",
            "access_token",
            "%74oken",
            "%54OKEN",
            "X-Amz-Signature",
            "X-Hub-Signature-256",
            "x-hub-signature",
            "sig",
            "api-sig",
            "pwd",
            "session_id",
        ] {
            assert!(is_sensitive_name(name), "{name}");
        }
        for name in ["Accept", "design", "page", "x-plain", "content-type", "%zz"] {
            assert!(!is_sensitive_name(name), "{name}");
        }
    }

    #[test]
    fn header_lines() {
        assert_eq!(
            redact_header("Authorization", "Bearer x"),
            "Authorization: [redacted]"
        );
        assert_eq!(redact_header("Accept", "text/plain"), "Accept: text/plain");
        assert_eq!(
            redact_header("Location", "https://h/next?token=t&page=2"),
            "Location: https://h/next?token=[redacted]&page=2"
        );
    }

    #[test]
    fn urls() {
        let cases = [
            (
                "https://user:pw@example.com:8443/ping?a=1&token=t&%74oken=u#x",
                "https://user:[redacted]@example.com:8443/ping?a=1&token=[redacted]&%74oken=[redacted]#x",
            ),
            (
                "https://hooks.example.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXX1",
                "https://hooks.example.com/services/T00000000/B00000000/[redacted]",
            ),
            (
                "https://s3.example.com/b/o?X-Amz-Credential=c&X-Amz-Signature=s&x=1",
                "https://s3.example.com/b/o?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&x=1",
            ),
            ("http://user@h/a/b", "http://user@h/a/b"),
            ("/relative?key=k", "/relative?key=[redacted]"),
            (
                "https://h/page#access_token=abc&state=1",
                "https://h/page#access_token=[redacted]&state=1",
            ),
            (
                "https://hc-ping.com/ 5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278",
                "https://hc-ping.com/[redacted]",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
