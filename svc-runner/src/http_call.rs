//! `Action::Http` (a JobHttp run): builds the request with `_svc_epoch` and the optional
//! `x-svc-sign` signature, sends it with reqwest and streams back the response.

use hmac::{Hmac, Mac as _};
use proto::{HttpCall, HttpRequestType, MAX_OUTPUT_CHUNK, OutputStream, RunnerMessage};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION};
use reqwest::{Method, Url};
use sha2::Sha256;

use crate::commands::format_secs;
use crate::connection::wait_stop;
use crate::{Finish, Work};

/// Name of the epoch parameter.
pub const EPOCH_PARAM: &str = "_svc_epoch";
/// Content type of a `form` body.
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";
/// Content type of a `json` body.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// Why the request could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The method is not one of GET, POST, PUT, DELETE.
    #[error("unsupported HTTP method {0:?}")]
    Method(String),
    /// The URL does not parse.
    #[error("invalid URL {url:?}: {source}")]
    Url {
        /// The URL as configured.
        url: String,
        /// The parse error.
        #[source]
        source: <Url as std::str::FromStr>::Err,
    },
    /// A configured header has an invalid name or value.
    #[error("invalid header {0:?}")]
    Header(String),
    /// The HMAC key was refused.
    #[error("cannot use the secret as an HMAC key")]
    Key,
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The request to send, built from an [`HttpCall`] by [`prepare`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Request method.
    pub method: Method,
    /// Final URL, `_svc_epoch` included for `query`.
    pub url: Url,
    /// Content type and bytes of the body, for `form` and `json` with POST/PUT.
    pub body: Option<(&'static str, Vec<u8>)>,
    /// Hex HMAC-SHA-256 of the signed bytes, when the call has a secret.
    pub signature: Option<String>,
}

/// Builds method, URL, body and signature of `call` for Unix time `epoch`.
pub fn prepare(call: &HttpCall, epoch: u64) -> Result<Prepared, HttpError> {
    let method = match call.method.to_ascii_uppercase().as_str() {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PUT" => Method::PUT,
        "DELETE" => Method::DELETE,
        _ => return Err(HttpError::Method(call.method.clone())),
    };
    let mut url = Url::parse(&call.url).map_err(|source| HttpError::Url {
        url: call.url.clone(),
        source,
    })?;
    let param = format!("{EPOCH_PARAM}={epoch}");
    let with_body = matches!(method, Method::POST | Method::PUT);
    let body = match call.request_type {
        HttpRequestType::Form if with_body => Some((FORM_CONTENT_TYPE, param.into_bytes())),
        HttpRequestType::Json if with_body => Some((
            JSON_CONTENT_TYPE,
            format!("{{\"{EPOCH_PARAM}\":{epoch}}}").into_bytes(),
        )),
        _ => {
            append_query(&mut url, &param);
            None
        }
    };
    let signature = match &call.secret {
        None => None,
        Some(secret) => {
            let signed: &[u8] = match &body {
                Some((_, bytes)) => bytes,
                None => url.query().unwrap_or("").as_bytes(),
            };
            Some(sign(secret.expose().as_bytes(), signed)?)
        }
    };
    Ok(Prepared {
        method,
        url,
        body,
        signature,
    })
}

/// Appends `param` (already encoded) to the query of `url`, `&`-joined.
pub fn append_query(url: &mut Url, param: &str) {
    let query = match url.query() {
        Some(existing) if !existing.is_empty() && existing.ends_with('&') => {
            format!("{existing}{param}")
        }
        Some(existing) if !existing.is_empty() => format!("{existing}&{param}"),
        _ => param.to_string(),
    };
    url.set_query(Some(&query));
}

/// Hex HMAC-SHA-256 of `data` with `key`.
pub fn sign(key: &[u8], data: &[u8]) -> Result<String, HttpError> {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).map_err(|_| HttpError::Key)?;
    mac.update(data);
    Ok(hex::encode(mac.finalize().into_bytes()))
}

/// The log line of one response header, through the one redaction rule
/// ([`proto::redact`]).
pub fn header_line(name: &str, value: &[u8]) -> String {
    proto::redact::redact_header(name, &String::from_utf8_lossy(value))
}

/// The URL as written to the log, through the one redaction rule ([`proto::redact`]).
pub fn loggable_url(url: &Url) -> String {
    proto::redact::redact_url(url.as_str())
}

/// Builds the header map: the content type of the body, the configured headers in order
/// (a configured `Content-Type` replaces ours), then the signature.
pub fn build_headers(call: &HttpCall, prepared: &Prepared) -> Result<HeaderMap, HttpError> {
    let mut headers = HeaderMap::new();
    if let Some((content_type, _)) = &prepared.body {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    for (name, value) in &call.headers {
        let header_name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| HttpError::Header(name.clone()))?;
        let header_value =
            HeaderValue::from_str(value.trim()).map_err(|_| HttpError::Header(name.clone()))?;
        if header_name == CONTENT_TYPE {
            headers.insert(header_name, header_value);
        } else {
            headers.append(header_name, header_value);
        }
    }
    if let Some(signature) = &prepared.signature {
        let header = || HttpError::Header(call.sign_header.clone());
        let name = HeaderName::from_bytes(call.sign_header.as_bytes()).map_err(|_| header())?;
        let value = HeaderValue::from_str(signature).map_err(|_| header())?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Current Unix time in whole seconds.
pub fn unix_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Most redirects followed in one call (with `http_follow_redirects`).
const MAX_REDIRECTS: usize = 10;

/// Redirects are not followed unless the job allows it, and then only while they stay
/// on the origin (scheme, host, port) of the configured URL: the job's headers carry
/// credentials meant for that origin alone. A redirect that is not followed comes back
/// as the response, and [`redirect_not_followed`] fails the run with it.
fn redirect_policy(follow: bool, url: &Url) -> reqwest::redirect::Policy {
    if !follow {
        return reqwest::redirect::Policy::none();
    }
    let origin = url.origin();
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.url().origin() != origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// For a 3xx response: the log line and run summary that say where it pointed and why
/// it was not followed.
fn redirect_not_followed(response: &reqwest::Response, follow: bool) -> Option<(String, String)> {
    if !response.status().is_redirection() {
        return None;
    }
    let target = response
        .headers()
        .get(LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(|location| match response.url().join(location) {
            Ok(url) => loggable_url(&url),
            Err(_) => "an invalid Location".to_string(),
        })
        .unwrap_or_else(|| "no Location".to_string());
    let why = if follow {
        "it leaves the origin of http_url"
    } else {
        "http_follow_redirects is off"
    };
    Some((
        format!("redirect to {target} not followed: {why}"),
        format!(
            "HTTP {}: redirect to {target} not followed",
            response.status().as_u16()
        ),
    ))
}

/// Performs the call and reports it. `Err` means the request could not even be built (the
/// caller reports it as `Error`).
pub async fn run_http(work: &mut Work<'_>, call: &HttpCall) -> Result<Finish, HttpError> {
    let prepared = prepare(call, unix_epoch())?;
    let headers = build_headers(call, &prepared)?;
    let mut builder = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(call.insecure)
        .redirect(redirect_policy(call.follow_redirects, &prepared.url))
        // Where the call came from is nobody else's business (its URL may hold a token).
        .referer(false);
    let timeout = work
        .deadline
        .map(|deadline| deadline.saturating_duration_since(tokio::time::Instant::now()));
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    let client = builder.build().map_err(HttpError::Client)?;
    let mut request = client
        .request(prepared.method.clone(), prepared.url.clone())
        .headers(headers);
    if let Some((_, body)) = &prepared.body {
        request = request.body(body.clone());
    }

    let mut stop = work.stop.clone();
    let outcome = {
        let exchange = exchange(work, request, prepared, call);
        tokio::select! {
            finish = exchange => Ok(finish),
            stop = wait_stop(&mut stop) => Err(stop),
        }
    };
    Ok(match outcome {
        Ok(finish) => finish,
        Err(stop) => {
            let reason = stop.reason();
            work.reporter
                .log(format!("request abandoned: {reason}"))
                .await;
            Finish::fail(crate::commands::cancelled_summary(&reason))
        }
    })
}

/// Sends the request and passes the response on (status line, headers, the body up to
/// `max_body_bytes`); how the call ended.
async fn exchange(
    work: &mut Work<'_>,
    request: reqwest::RequestBuilder,
    prepared: Prepared,
    call: &HttpCall,
) -> Finish {
    let timeout_ms = work.timeout_ms;
    work.reporter
        .log(format!(
            "{} {}",
            prepared.method,
            loggable_url(&prepared.url)
        ))
        .await;
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => {
            let (line, finish) = failed(err, "request", timeout_ms);
            work.reporter.log(line).await;
            return finish;
        }
    };
    let status = response.status();
    let redirect = log_head(work, &response, call.follow_redirects).await;
    let body = forward_body(work, response, call.max_body_bytes).await;
    work.reporter
        .send(RunnerMessage::HttpResponse {
            status: status.as_u16(),
            body_bytes: body.received,
            truncated: body.truncated,
        })
        .await;
    if let Some(err) = body.error {
        let (line, finish) = failed(err, "reading the response body", timeout_ms);
        work.reporter.log(line).await;
        return finish;
    }
    if let Some(summary) = redirect {
        return Finish::fail(summary);
    }
    let summary = format!(
        "HTTP {} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .trim_end()
    .to_string();
    Finish {
        success: status.is_success(),
        summary,
        timed_out: false,
    }
}

/// A failed request or body read: its log line, and how the run ends. reqwest's errors
/// end with "for url (...)", the full URL with its query, which may carry a token: it
/// goes, since the request line logged before shows the URL with sensitive values
/// hidden.
fn failed(err: reqwest::Error, what: &str, timeout_ms: Option<u64>) -> (String, Finish) {
    let err = err.without_url();
    let chain = proto::error_chain::describe(&err);
    let finish = if err.is_timeout() {
        Finish::timed_out(format!(
            "timed out after {}",
            format_secs(timeout_ms.unwrap_or_default())
        ))
    } else if err.is_connect() {
        Finish::fail(format!("connection failed: {chain}"))
    } else {
        Finish::fail(format!("{what} failed: {chain}"))
    };
    (format!("{what} failed: {chain}"), finish)
}

/// Logs the response's status line and headers, and a redirect not followed; the run's
/// summary for that redirect.
async fn log_head(
    work: &mut Work<'_>,
    response: &reqwest::Response,
    follow_redirects: bool,
) -> Option<String> {
    let status = response.status();
    let status_line = format!(
        "{:?} {} {}",
        response.version(),
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    work.reporter.log(status_line.trim_end().to_string()).await;
    let header_lines: Vec<String> = response
        .headers()
        .iter()
        .map(|(name, value)| header_line(name.as_str(), value.as_bytes()))
        .collect();
    for line in header_lines {
        work.reporter.log(line).await;
    }
    let (line, summary) = redirect_not_followed(response, follow_redirects)?;
    work.reporter.log(line).await;
    Some(summary)
}

/// What [`forward_body`] read of a response body.
struct BodyRead {
    received: u64,
    truncated: bool,
    error: Option<reqwest::Error>,
}

/// Forwards the response body as output, at most `max_body_bytes` of it (the rest is
/// not read: the connection is dropped).
async fn forward_body(
    work: &mut Work<'_>,
    mut response: reqwest::Response,
    max_body_bytes: u64,
) -> BodyRead {
    let mut read = BodyRead {
        received: 0,
        truncated: false,
        error: None,
    };
    let mut kept: u64 = 0;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(err) => {
                read.error = Some(err);
                break;
            }
        };
        read.received = read.received.saturating_add(chunk.len() as u64);
        let room = usize::try_from(max_body_bytes.saturating_sub(kept)).unwrap_or(usize::MAX);
        let keep = &chunk[..chunk.len().min(room)];
        for piece in keep.chunks(MAX_OUTPUT_CHUNK) {
            work.reporter
                .send(RunnerMessage::Output {
                    stream: OutputStream::Body,
                    data: piece.to_vec(),
                })
                .await;
        }
        kept += keep.len() as u64;
        if read.received > max_body_bytes {
            read.truncated = true;
            break;
        }
    }
    drop(response);
    if read.truncated {
        work.reporter
            .log(format!(
                "response body cut at {max_body_bytes} bytes (max_body_bytes)"
            ))
            .await;
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(method: &str, url: &str, request_type: HttpRequestType) -> HttpCall {
        HttpCall {
            method: method.into(),
            url: url.into(),
            request_type,
            headers: vec![],
            secret: None,
            sign_header: "x-svc-sign".into(),
            insecure: false,
            follow_redirects: false,
            max_body_bytes: 1024,
        }
    }

    #[test]
    fn query_is_appended() {
        let p = prepare(&call("GET", "http://h/x", HttpRequestType::Query), 17).expect("ok");
        assert_eq!(p.url.as_str(), "http://h/x?_svc_epoch=17");
        assert_eq!(p.body, None);
        let p = prepare(
            &call("get", "http://h/x?a=1&b=%20c", HttpRequestType::Query),
            17,
        )
        .expect("ok");
        assert_eq!(p.method, Method::GET);
        assert_eq!(p.url.as_str(), "http://h/x?a=1&b=%20c&_svc_epoch=17");
        let p = prepare(&call("GET", "http://h/x?", HttpRequestType::Query), 1).expect("ok");
        assert_eq!(p.url.query(), Some("_svc_epoch=1"));
        let p = prepare(&call("GET", "http://h/x?a=1&", HttpRequestType::Query), 1).expect("ok");
        assert_eq!(p.url.query(), Some("a=1&_svc_epoch=1"));
    }

    #[test]
    fn form_and_json_bodies_for_post_and_put() {
        let p = prepare(&call("POST", "http://h/x?a=1", HttpRequestType::Form), 5).expect("ok");
        assert_eq!(p.url.query(), Some("a=1"));
        assert_eq!(p.body, Some((FORM_CONTENT_TYPE, b"_svc_epoch=5".to_vec())));
        let p = prepare(&call("PUT", "http://h/x", HttpRequestType::Json), 5).expect("ok");
        assert_eq!(p.url.query(), None);
        assert_eq!(
            p.body,
            Some((JSON_CONTENT_TYPE, br#"{"_svc_epoch":5}"#.to_vec()))
        );
    }

    #[test]
    fn form_and_json_become_query_for_get_and_delete() {
        for (method, kind) in [
            ("GET", HttpRequestType::Json),
            ("DELETE", HttpRequestType::Form),
        ] {
            let p = prepare(&call(method, "http://h/x", kind), 9).expect("ok");
            assert_eq!(p.url.query(), Some("_svc_epoch=9"));
            assert_eq!(p.body, None);
        }
    }

    #[test]
    fn bad_method_and_url_are_refused() {
        assert!(matches!(
            prepare(&call("PATCH", "http://h/", HttpRequestType::Query), 1),
            Err(HttpError::Method(_))
        ));
        assert!(matches!(
            prepare(&call("GET", "not a url", HttpRequestType::Query), 1),
            Err(HttpError::Url { .. })
        ));
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?").expect("sign"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn signature_covers_exactly_the_sent_bytes() {
        let mut c = call("GET", "http://h/x?a=b%2Fc", HttpRequestType::Query);
        c.secret = Some(proto::redact::Secret::new("k"));
        let p = prepare(&c, 3).expect("ok");
        assert_eq!(
            p.signature.as_deref(),
            Some(sign(b"k", b"a=b%2Fc&_svc_epoch=3").expect("sign").as_str())
        );
        c.method = "POST".into();
        c.request_type = HttpRequestType::Json;
        let p = prepare(&c, 3).expect("ok");
        assert_eq!(
            p.signature.as_deref(),
            Some(sign(b"k", br#"{"_svc_epoch":3}"#).expect("sign").as_str())
        );
        c.secret = None;
        assert_eq!(prepare(&c, 3).expect("ok").signature, None);
    }

    #[test]
    fn headers_are_built_in_order_with_signature() {
        let mut c = call("POST", "http://h/x", HttpRequestType::Form);
        c.secret = Some(proto::redact::Secret::new("k"));
        c.headers = vec![
            ("X-A".into(), "1".into()),
            ("X-A".into(), "2".into()),
            ("Authorization".into(), "Bearer t".into()),
        ];
        let p = prepare(&c, 3).expect("ok");
        let h = build_headers(&c, &p).expect("ok");
        assert_eq!(h[CONTENT_TYPE], FORM_CONTENT_TYPE);
        let xa: Vec<_> = h.get_all("x-a").iter().collect();
        assert_eq!(xa, ["1", "2"]);
        assert_eq!(h["authorization"], "Bearer t");
        assert_eq!(h["x-svc-sign"], p.signature.as_deref().expect("signed"));
        c.sign_header = "x-hub-signature".into();
        let h = build_headers(&c, &p).expect("ok");
        assert_eq!(
            h["x-hub-signature"],
            p.signature.as_deref().expect("signed")
        );
        assert!(h.get("x-svc-sign").is_none());
        c.headers = vec![("bad header".into(), "x".into())];
        assert!(build_headers(&c, &p).is_err());
    }

    #[test]
    fn sensitive_headers_are_redacted() {
        assert_eq!(header_line("Set-Cookie", b"a=b"), "Set-Cookie: [redacted]");
        assert_eq!(
            header_line("authorization", b"x"),
            "authorization: [redacted]"
        );
        assert_eq!(header_line("x-api-key", b"x"), "x-api-key: [redacted]");
        assert_eq!(
            header_line("X-Auth-Token", b"x"),
            "X-Auth-Token: [redacted]"
        );
        assert_eq!(
            header_line("x-client-secret", b"x"),
            "x-client-secret: [redacted]"
        );
        assert_eq!(header_line("x-password", b"x"), "x-password: [redacted]");
        assert_eq!(
            header_line("content-type", b"text/plain"),
            "content-type: text/plain"
        );
    }

    #[test]
    fn password_in_url_is_hidden() {
        let url = Url::parse("https://u:pw@h/x?q=1").expect("url");
        assert_eq!(loggable_url(&url), "https://u:[redacted]@h/x?q=1");
        let url = Url::parse("https://h/x").expect("url");
        assert_eq!(loggable_url(&url), "https://h/x");
    }

    #[test]
    fn sensitive_query_values_are_hidden() {
        let url = Url::parse("https://h/x?token=abc&page=2&api%5Fkey=k&_svc_epoch=1").expect("url");
        assert_eq!(
            loggable_url(&url),
            "https://h/x?token=[redacted]&page=2&api%5Fkey=[redacted]&_svc_epoch=1"
        );
    }
}
