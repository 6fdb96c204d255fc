//! HTTP/1.1 answers read off raw TCP connections, for the tests that send what a client
//! library would not (malformed heads, bodies cut short, bytes outside the grammar).

/// A response read off a raw connection.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The status code of the status line.
    pub status: u16,
    /// Header lines in order, names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked (not decompressed).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Decodes a chunked body at the start of `buf`; `None` while incomplete.
fn dechunk(mut buf: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&buf[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        buf = &buf[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        if buf.len() < size + 2 {
            return None;
        }
        body.extend_from_slice(&buf[..size]);
        buf = &buf[size + 2..];
    }
}

/// Parses one response at the start of `buf`; `None` while incomplete. A body without
/// a length ends at `eof`; the answer to a HEAD request has none.
pub fn parse_response(buf: &[u8], eof: bool, head_request: bool) -> Option<RawResponse> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        })
        .collect();
    let rest = &buf[end + 4..];
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let body = if head_request || status == 204 || status == 304 || status < 200 {
        Vec::new()
    } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        match dechunk(rest) {
            Some(body) => body,
            None if eof => rest.to_vec(),
            None => return None,
        }
    } else if let Some(length) = find("content-length").and_then(|v| v.parse::<usize>().ok()) {
        if rest.len() < length && !eof {
            return None;
        }
        rest[..length.min(rest.len())].to_vec()
    } else if eof {
        rest.to_vec()
    } else {
        return None;
    };
    Some(RawResponse {
        status,
        headers,
        body,
    })
}

/// Reads one response (or an interim `100 Continue`) off `stream`. `None` when the
/// server closes the connection without one; panics when `limit` passes first.
pub async fn read_response(
    stream: &mut tokio::net::TcpStream,
    limit: std::time::Duration,
) -> Option<RawResponse> {
    use tokio::io::AsyncReadExt as _;
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            // A reset counts as closed.
            let n = stream.read(&mut chunk).await.unwrap_or(0);
            buf.extend_from_slice(&chunk[..n]);
            if let Some(response) = parse_response(&buf, n == 0, false) {
                return Some(response);
            }
            if n == 0 {
                return None;
            }
        }
    };
    tokio::time::timeout(limit, read)
        .await
        .unwrap_or_else(|_| panic!("no answer and no close within {limit:?}"))
}
