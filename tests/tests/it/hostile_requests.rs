//! The generator of the hostile HTTP requests `hostile_http.rs` sends: a request line,
//! headers, a body and its framing drawn from a seeded random generator, about half of
//! them well framed (hostile only in their content: odd targets, bad signatures, junk and
//! huge headers), the rest with one or two protocol defects.

use rand::Rng;
use rand::rngs::StdRng;

/// One generated request.
#[derive(Debug, Clone)]
pub(crate) struct Hostile {
    pub(crate) bytes: Vec<u8>,
    /// The request target as sent (lossy), for messages.
    pub(crate) target: String,
    /// The path the server sees starts with `/svc/api`.
    pub(crate) api_path: bool,
    pub(crate) head_request: bool,
    pub(crate) half_close: bool,
    /// The protocol defects put in.
    pub(crate) defects: Vec<Defect>,
}

fn pick<'a, T: ?Sized>(rng: &mut StdRng, items: &'a [&'a T]) -> &'a T {
    items[rng.random_range(0..items.len())]
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.random::<u8>()).collect()
}

/// Bytes that are not valid UTF-8 (a lone continuation byte, an overlong form, ...).
fn invalid_utf8(rng: &mut StdRng) -> Vec<u8> {
    let pieces: [&[u8]; 6] = [
        b"\x80",
        b"\xc3\x28",
        b"\xe2\x82",
        b"\xf0\x28\x8c\xbc",
        b"\xff\xfe",
        b"\xc0\xaf",
    ];
    pieces[rng.random_range(0..pieces.len())].to_vec()
}

const ROUTES: &[&str] = &[
    "/svc/api/environment",
    "/svc/api/job_exec/pause",
    "/svc/api/job_exec/resume",
    "/svc/api/job_exec/cancel",
    "/svc/api/job/pause",
    "/svc/api/job/resume",
    "/svc/api/job_exec/log",
    "/svc/api/job/log",
    "/svc/api/job_http",
    "/svc/api/job_http/logs",
    "/svc/api/job_http/log",
    "/svc/api/job_http/pause",
    "/svc/api/job_http/resume",
    "/svc/api/job/run/deploy",
    "/svc/api/job_exec/run/deploy",
    "/svc/api/job/run/",
    "/svc/api/nothing",
    "/svc/api/",
    "/svc/api",
];

const ELSEWHERE: &[&str] = &[
    "/",
    "/svc",
    "/svc/",
    "/svc/doc",
    "/svc/job/deploy",
    "/index.html",
    "/../../etc/passwd",
    "/svc/../svc/api/environment",
];

const QUERY_PIECES: &[&str] = &[
    "id=hello",
    "id=",
    "id=%zz",
    "id=%",
    "id=%C3%28",
    "id=a/b",
    "counter=1",
    "counter=x",
    "counter=99999999999999999999999",
    "id=hello&counter=1",
    "id=ping",
    "%",
    "&&&",
    "=",
    "id=hello%00",
];

/// A request target that hyper accepts (printable ASCII), hostile in its content: odd
/// segments, bad percent-encoding, percent-encoded invalid UTF-8, long paths, queries.
fn target(rng: &mut StdRng) -> Vec<u8> {
    let mut path: Vec<u8> = if rng.random_bool(0.75) {
        pick(rng, ROUTES).as_bytes().to_vec()
    } else {
        pick(rng, ELSEWHERE).as_bytes().to_vec()
    };
    match rng.random_range(0..10) {
        0 => path.extend_from_slice(b"/%zz"),
        1 => path.extend_from_slice(b"/%"),
        2 => path.extend_from_slice(b"/%C3%28/%ff%fe"),
        3 => {
            // Any of the characters a path may hold, `%` included (often badly).
            const CHARS: &[u8] = b"abcXYZ019-._~!$&'()*+,;=:@%/";
            path.push(b'/');
            let len = rng.random_range(1..40);
            path.extend((0..len).map(|_| CHARS[rng.random_range(0..CHARS.len())]));
        }
        4 => path.extend(std::iter::repeat_n(b'a', rng.random_range(1000..20_000))),
        _ => {}
    }
    if rng.random_bool(0.6) {
        path.push(b'?');
        let count = rng.random_range(1..4);
        for index in 0..count {
            if index > 0 {
                path.push(b'&');
            }
            path.extend_from_slice(pick(rng, QUERY_PIECES).as_bytes());
        }
    }
    path
}

const METHODS: &[&str] = &[
    "GET", "GET", "GET", "POST", "POST", "POST", "POST", "PUT", "DELETE", "HEAD", "OPTIONS",
    "PATCH", "TRACE", "BREW", "get",
];

/// What makes a request invalid at the protocol level (hyper refuses most of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Defect {
    /// A method that is not a token.
    Method,
    /// Raw bytes that are not UTF-8, or control characters, in the target.
    Target,
    Version,
    /// A Content-Length that is absurd, negative, not a number or given twice.
    ContentLength,
    /// Chunked encoding with a bad chunk size.
    Chunk,
    /// A header line without a colon, with a bad name, or folded.
    HeaderLine,
    /// More header lines than hyper takes.
    ManyHeaders,
    /// The request stops in the middle and the client goes away.
    Truncated,
    /// A Content-Length larger than the body sent (the client then waits).
    ShortBody,
}

const DEFECTS: &[Defect] = &[
    Defect::Method,
    Defect::Target,
    Defect::Version,
    Defect::ContentLength,
    Defect::Chunk,
    Defect::HeaderLine,
    Defect::ManyHeaders,
    Defect::Truncated,
    Defect::ShortBody,
];

/// One hostile request for the service at `address`, drawn from `rng`: the request line,
/// the headers, the body and its framing, each step drawing in turn (so that a seed
/// replays the same requests), then cut short for the `Truncated` defect.
pub(crate) fn generate(rng: &mut StdRng, address: &str) -> Hostile {
    let defects = draw_defects(rng);
    let has = |defect: Defect| defects.contains(&defect);
    let method = draw_method(rng, has(Defect::Method));
    let target = draw_target(rng, has(Defect::Target));
    let version = draw_version(rng, has(Defect::Version));
    let mut request = Vec::new();
    request.extend_from_slice(&method);
    request.push(b' ');
    request.extend_from_slice(&target);
    if !version.is_empty() {
        request.push(b' ');
        request.extend_from_slice(version);
    }
    request.extend_from_slice(b"\r\n");
    let mut headers = draw_headers(rng, address, &defects);
    let body = draw_body(rng);
    let chunked = draw_framing(rng, &defects, version, &body, &mut headers);
    push_head_end_and_body(rng, &mut request, &headers, &body, chunked, &defects);

    let truncated = has(Defect::Truncated);
    if truncated {
        let cut = rng.random_range(0..request.len());
        request.truncate(cut);
    }
    let path = target.strip_prefix(b"http://localhost").unwrap_or(&target);
    Hostile {
        target: String::from_utf8_lossy(&target[..target.len().min(120)]).into_owned(),
        api_path: path.starts_with(b"/svc/api"),
        head_request: method == b"HEAD",
        half_close: truncated,
        defects,
        bytes: request,
    }
}

/// The protocol defects of one request: about half the requests are well framed
/// (hostile only in their content), the rest have one or two.
fn draw_defects(rng: &mut StdRng) -> Vec<Defect> {
    let mut defects = Vec::new();
    for _ in 0..[0, 0, 0, 0, 0, 1, 1, 1, 2, 2][rng.random_range(0..10)] {
        defects.push(DEFECTS[rng.random_range(0..DEFECTS.len())]);
    }
    defects
}

/// A method of [`METHODS`], or with the `Method` defect one that is no token: random
/// bytes, punctuation, quotes, or thousands of letters.
fn draw_method(rng: &mut StdRng, defect: bool) -> Vec<u8> {
    if defect {
        match rng.random_range(0..4) {
            0 => {
                let len = rng.random_range(1..10);
                random_bytes(rng, len)
            }
            1 => b"G@T".to_vec(),
            2 => b"\"GET\"".to_vec(),
            _ => std::iter::repeat_n(b'X', rng.random_range(100..5000)).collect(),
        }
    } else {
        pick(rng, METHODS).as_bytes().to_vec()
    }
}

/// A [`target`], spoilt for the `Target` defect: invalid UTF-8 or control characters in
/// its path or query, an absolute form, or random bytes.
fn draw_target(rng: &mut StdRng, defect: bool) -> Vec<u8> {
    let mut target = target(rng);
    if defect {
        match rng.random_range(0..5) {
            0 => {
                target.push(b'/');
                target.extend(invalid_utf8(rng));
            }
            1 => target.extend_from_slice(b"?id=\x01\x7f<>\"{}"),
            4 => {
                target.extend_from_slice(b"?id=");
                target.extend(invalid_utf8(rng));
            }
            2 => target = [b"http://localhost".as_slice(), &target].concat(),
            _ => target = random_bytes(rng, 12),
        }
    }
    target
}

/// The HTTP version: HTTP/1.1, sometimes 1.0, or a bad one (none at all included) for
/// the `Version` defect.
fn draw_version(rng: &mut StdRng, defect: bool) -> &'static [u8] {
    const BAD_VERSIONS: &[&[u8]] = &[b"HTTP/2.0", b"HTTP/9.9", b"HTTX/1.1", b"", b"HTTP/1.1x"];
    if defect {
        pick(rng, BAD_VERSIONS)
    } else if rng.random_bool(0.1) {
        b"HTTP/1.0"
    } else {
        b"HTTP/1.1"
    }
}

/// The header lines but the body's framing: mostly a Host, sometimes `Connection:
/// close`, a few hostile but well-formed headers (bad signatures, junk, huge values),
/// and the bad lines of the `HeaderLine` and `ManyHeaders` defects.
fn draw_headers(rng: &mut StdRng, address: &str, defects: &[Defect]) -> Vec<Vec<u8>> {
    let mut headers: Vec<Vec<u8>> = Vec::new();
    if rng.random_bool(0.95) {
        headers.push(format!("Host: {address}").into_bytes());
    }
    if rng.random_bool(0.5) {
        headers.push(b"Connection: close".to_vec());
    }
    for _ in 0..rng.random_range(0..4) {
        match rng.random_range(0..8) {
            0 => headers.push([b"X-Svc-Sign: ".as_slice(), &invalid_utf8(rng)].concat()),
            1 => headers.push(format!("X-Svc-Sign: {}", "0".repeat(64)).into_bytes()),
            2 => headers.push(b"Content-Type: application/x-www-form-urlencoded".to_vec()),
            3 => {
                // Visible ASCII and any byte from 0x80 up (obs-text): allowed in a value.
                let mut value = random_bytes(rng, 40);
                value.retain(|b| (0x20..0x7f).contains(b) || *b >= 0x80);
                headers.push([b"X-Junk: ".as_slice(), &value].concat());
            }
            4 => headers.push(
                [
                    b"X-Big: ".as_slice(),
                    &vec![b'b'; rng.random_range(20_000..200_000)],
                ]
                .concat(),
            ),
            5 => headers.push(b"Accept-Encoding: gzip".to_vec()),
            6 => headers.push(
                [
                    b"X-Hub-Signature-256: sha256=".as_slice(),
                    &invalid_utf8(rng),
                ]
                .concat(),
            ),
            _ => headers.push(b"X-GitHub-Event: push".to_vec()),
        }
    }
    if defects.contains(&Defect::HeaderLine) {
        headers.push(
            pick(
                rng,
                &[
                    b"no colon in this line".as_slice(),
                    b"Bad Name: x",
                    b" folded: continuation",
                    b": empty name",
                    b"X-Nul: a\x00b",
                ],
            )
            .to_vec(),
        );
    }
    if defects.contains(&Defect::ManyHeaders) {
        for index in 0..rng.random_range(110..300) {
            headers.push(format!("X-Many-{index}: {index}").into_bytes());
        }
    }
    headers
}

/// A body: mostly empty or small, now and then over 1 MiB; random bytes, or a form
/// with a fresh epoch and a random ID.
fn draw_body(rng: &mut StdRng) -> Vec<u8> {
    let body_len = match rng.random_range(0..20) {
        0 => 1024 * 1024 + rng.random_range(1..4096),
        1..=8 => 0,
        _ => rng.random_range(1..4096),
    };
    if rng.random_bool(0.5) {
        random_bytes(rng, body_len)
    } else {
        let mut body = format!("_svc_epoch={}&id=", chrono::Utc::now().timestamp()).into_bytes();
        body.extend(random_bytes(rng, body_len.min(64)));
        body
    }
}

/// The framing headers of `body`, pushed to `headers`: chunked (a defect with HTTP/1.0,
/// as chunked framing exists from 1.1 on), or a Content-Length that is bad (the
/// `ContentLength` defect), too large (`ShortBody`) or right. Answers whether chunked.
fn draw_framing(
    rng: &mut StdRng,
    defects: &[Defect],
    version: &[u8],
    body: &[u8],
    headers: &mut Vec<Vec<u8>>,
) -> bool {
    let has = |defect: Defect| defects.contains(&defect);
    let chunked = has(Defect::Chunk) || (version == b"HTTP/1.1" && rng.random_bool(0.1));
    if chunked {
        headers.push(b"Transfer-Encoding: chunked".to_vec());
    } else if has(Defect::ContentLength) {
        match rng.random_range(0..4) {
            0 => headers.push(b"Content-Length: 99999999999999999999999".to_vec()),
            1 => headers.push(b"Content-Length: -1".to_vec()),
            2 => headers.push(b"Content-Length: abc".to_vec()),
            _ => {
                headers.push(format!("Content-Length: {}", body.len()).into_bytes());
                headers.push(format!("Content-Length: {}", body.len() + 1).into_bytes());
            }
        }
    } else if has(Defect::ShortBody) {
        headers.push(format!("Content-Length: {}", body.len() + 100).into_bytes());
    } else if !body.is_empty() || rng.random_bool(0.5) {
        headers.push(format!("Content-Length: {}", body.len()).into_bytes());
    }
    chunked
}

/// The header lines, the blank line ending the head, and the body: as one chunk (with a
/// bad chunk size for the `Chunk` defect) when `chunked`, else as it is (under a bad
/// Content-Length, only half the time).
fn push_head_end_and_body(
    rng: &mut StdRng,
    request: &mut Vec<u8>,
    headers: &[Vec<u8>],
    body: &[u8],
    chunked: bool,
    defects: &[Defect],
) {
    for header in headers {
        request.extend_from_slice(header);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    if chunked {
        if defects.contains(&Defect::Chunk) {
            request.extend_from_slice(b"zz\r\n");
        } else {
            request.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        }
        request.extend_from_slice(body);
        request.extend_from_slice(b"\r\n0\r\n\r\n");
    } else if !defects.contains(&Defect::ContentLength) || rng.random_bool(0.5) {
        request.extend_from_slice(body);
    }
}
