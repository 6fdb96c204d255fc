//! The HTTP/1.1 accept loop: per-connection limits that `axum::serve` does not offer.
//!
//! - Header read timeout: a client gets [`HEADER_READ_TIMEOUT`] to send a request head.
//!   hyper arms it whenever it waits for a head, so it also closes idle keep-alive
//!   connections. A body has `http_body_timeout` from the end of its head, enforced by
//!   the front ([`super::App`]), however steadily its bytes come.
//! - At most [`MAX_BUFFERED_HEAD`] of request head are buffered; past it hyper answers
//!   431 itself. The router refuses heads over [`MAX_HEADER_BYTES`] earlier, in the JSON
//!   wrapper, so hyper's bare answer is only a backstop.
//! - At most a limit of connections at once ([`connection_limit`], derived from the
//!   open-file limit). The accept loop never stops accepting: a connection past the
//!   limit makes room by closing the oldest connection that is idle (waiting for a
//!   request head, as a slow-header client does); when every connection is busy with a
//!   request, the newcomer gets a 503 with `Retry-After` and is closed. Either way the
//!   service keeps answering, and an attacker's open connections cost it nothing but
//!   memory.
//! - Write timeout: a connection whose client takes nothing for [`WRITE_TIMEOUT`] while
//!   an answer waits to be written is closed, so a stream nobody reads does not stay.
//! - A request that may change state is answered to its end, on a task of its own, even
//!   when its client closes the connection without waiting for the answer ([`answer`]).
//! - Graceful shutdown: stop accepting, let requests in flight finish (bounded by the
//!   caller).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt as _;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower::ServiceExt as _;

use super::App;
use super::write_timeout::WRITE_TIMEOUT;

/// Time a client has to send a request head (and the idle limit between requests).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head accepted by the router.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Largest request head hyper buffers at all, and the most of an answer it buffers
/// for a client that does not read (hyper's one limit for both): with a log stream's
/// one chunk, what such a client costs beyond the kernel's socket buffers.
pub const MAX_BUFFERED_HEAD: usize = 256 * 1024;
/// Header lines hyper parses; far above what the byte limit allows, so that the
/// router's [`MAX_HEADER_BYTES`] check (which answers in the JSON wrapper) decides.
pub const MAX_HEADER_LINES: usize = 4096;

/// Open files kept for everything but connections: state and replay files, the runner
/// socket, the journal, libraries.
const RESERVED_FDS: u64 = 256;
/// Open files one run may hold in the controller (runner connection, log file, pipes).
const FDS_PER_RUN: u64 = 8;
/// Most connections a derived limit allows, whatever the open-file limit: beyond it the
/// memory of idle connections, not file descriptors, is what runs out.
pub const MAX_DERIVED_CONNECTIONS: usize = 16_384;
/// Fewest connections any limit allows.
pub const MIN_CONNECTIONS: usize = 16;

/// How long the refusal of a connection past the limit may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// The answer to a connection past the limit when no idle one can make room. Written
/// without reading the request: the connection is closed right after.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 95\r\n\
\r\n\
{\"code\":503,\"message\":\"too many connections: retry later\",\"data\":null,\"name\":\"ERR_UNAVAILABLE\"}";

/// How many connections are served at once, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimit {
    /// The limit in force.
    pub limit: usize,
    /// What the open-file limit allows.
    pub derived: usize,
    /// True when `max_connections` asked for more than [`Self::derived`] and was cut.
    pub cut: bool,
}

/// The connection limit for an open-file limit of `nofile`, `max_job_running` runs at
/// once, and the configured `max_connections`, if any: a configured value is kept unless
/// it exceeds what the file descriptors allow.
pub fn connection_limit(
    nofile: u64,
    max_job_running: usize,
    configured: Option<usize>,
) -> ConnectionLimit {
    let runs = FDS_PER_RUN.saturating_mul(max_job_running as u64);
    let free = nofile.saturating_sub(RESERVED_FDS).saturating_sub(runs);
    let derived = usize::try_from(free)
        .unwrap_or(usize::MAX)
        .clamp(MIN_CONNECTIONS, MAX_DERIVED_CONNECTIONS);
    match configured {
        None => ConnectionLimit {
            limit: derived,
            derived,
            cut: false,
        },
        Some(wanted) => {
            let fits = usize::try_from(free)
                .unwrap_or(usize::MAX)
                .max(MIN_CONNECTIONS);
            ConnectionLimit {
                limit: wanted.min(fits),
                derived,
                cut: wanted > fits,
            }
        }
    }
}

/// One open connection, as the accept loop sees it.
#[derive(Debug, Default)]
struct Slot {
    /// Requests of this connection in a handler or sending their answer.
    busy: AtomicUsize,
    /// Told to close the connection to make room for a new one.
    evict: Notify,
}

/// Marks a connection busy while it lives.
#[derive(Debug)]
struct BusyGuard(Arc<Slot>);

impl BusyGuard {
    fn new(slot: &Arc<Slot>) -> BusyGuard {
        slot.busy.fetch_add(1, Ordering::AcqRel);
        BusyGuard(slot.clone())
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The open connections, oldest first.
#[derive(Debug)]
struct Connections {
    limit: usize,
    open: Mutex<BTreeMap<u64, Arc<Slot>>>,
}

impl Connections {
    fn new(limit: usize) -> Connections {
        Connections {
            limit: limit.max(1),
            open: Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers connection `id`, first making room when the limit is reached; `None`
    /// when the connection must be refused.
    fn admit(&self, id: u64) -> Option<Arc<Slot>> {
        let mut open = self.open.lock().ok()?;
        if open.len() >= self.limit {
            let idle = open
                .iter()
                .find(|(_, slot)| slot.busy.load(Ordering::Acquire) == 0)
                .map(|(&id, _)| id);
            let Some(idle) = idle else {
                crate::metrics::connection_shed("refused");
                return None;
            };
            if let Some(slot) = open.remove(&idle) {
                // `notify_one` keeps the permit if the task is not waiting yet.
                slot.evict.notify_one();
            }
            crate::metrics::connection_shed("idle_closed");
        }
        let slot = Arc::new(Slot::default());
        open.insert(id, slot.clone());
        Some(slot)
    }

    fn remove(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&id);
        }
    }
}

/// Answers a connection past the limit with [`REFUSAL`] and closes it, off the accept
/// loop and bounded in time.
fn refuse(mut stream: TcpStream) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, async {
            let _ = stream.write_all(REFUSAL).await;
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

/// The answer of `app` to `request`. A request that may change state (any method but
/// `GET`, `HEAD` and `OPTIONS`) is answered on a task of its own, started here, as hyper
/// hands the request over: once a client has sent a whole request, what it asks is done
/// to its end (its effect, its spent signature, its audit entry) even if the client
/// closes the connection without waiting for the answer. hyper drops the answer of a
/// connection whose client is gone, and it looks for that end of the connection before
/// it first polls the answer: without this task, a pause from a client that closed right
/// after sending it was dropped before its handler ever ran, with nothing done, nothing
/// answered and nothing recorded (the handlers' own `to_completion` starts only when
/// they are first polled). A read is dropped with its client, which frees its work.
fn answer<S>(
    app: S,
    request: hyper::Request<hyper::body::Incoming>,
) -> impl Future<Output = axum::response::Response> + Send
where
    S: tower::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Send
        + 'static,
{
    use axum::http::Method;
    use futures_util::future::Either;
    let reads = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let answered = app.oneshot(request);
    if reads {
        return Either::Left(async move {
            match answered.await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        });
    }
    let task = tokio::spawn(answered);
    Either::Right(async move {
        match task.await {
            Ok(Ok(response)) => response,
            Ok(Err(never)) => match never {},
            Err(err) => axum::response::IntoResponse::into_response(super::ApiError::internal(
                "a request's task failed",
                err,
            )),
        }
    })
}

/// Serves `app` on `listener`, at most `limit` connections at once, until `shutdown`
/// resolves, then waits at most `drain` for requests in flight.
pub async fn serve(
    listener: TcpListener,
    app: App,
    limit: usize,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_BUFFERED_HEAD)
        .max_headers(MAX_HEADER_LINES)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let connections = Arc::new(Connections::new(limit));
    let mut next_id: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        next_id += 1;
        let id = next_id;
        let Some(slot) = connections.admit(id) else {
            tracing::debug!(%peer, "connection refused: every connection is busy");
            refuse(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Handlers that care (the login throttle) find the client's address here.
        let app = tower::Layer::layer(
            &axum::Extension(axum::extract::ConnectInfo(peer)),
            app.clone(),
        );
        let request_slot = slot.clone();
        let service = hyper::service::service_fn(move |request| {
            // Busy from the head until the answer's body is sent or dropped.
            let busy = BusyGuard::new(&request_slot);
            let answered = answer(app.clone(), request);
            async move {
                let response = answered.await;
                Ok::<_, std::convert::Infallible>(response.map(move |body| {
                    Body::new(body.map_frame(move |frame| {
                        let _ = &busy;
                        frame
                    }))
                }))
            }
        });
        let stream = super::write_timeout::WriteTimeout::new(stream, WRITE_TIMEOUT);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        let connections = connections.clone();
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(err) = ended {
                    tracing::debug!(%peer, error = %err, "connection ended with an error");
                },
                () = slot.evict.notified() => {
                    tracing::debug!(%peer, "idle connection closed to make room for a new one");
                }
            }
            connections.remove(id);
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("connections still open at the end of the drain time");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_answer() {
        let text = std::str::from_utf8(REFUSAL).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: "))
            .and_then(|n| n.parse::<usize>().ok());
        assert_eq!(length, Some(body.len()));
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["code"], 503);
        assert_eq!(json["name"], "ERR_UNAVAILABLE");
    }

    #[test]
    fn the_limit_follows_the_open_file_limit() {
        // systemd's default soft limit, one run at a time.
        let limit = connection_limit(1024, 1, None);
        assert_eq!(limit.limit, 1024 - 256 - 8);
        assert_eq!(limit.derived, limit.limit);
        assert!(!limit.cut);
        // More runs keep more descriptors aside.
        assert_eq!(connection_limit(1024, 16, None).limit, 1024 - 256 - 128);
        // A large hard limit is capped by memory, a tiny one still serves a few.
        assert_eq!(
            connection_limit(1 << 20, 1, None).limit,
            MAX_DERIVED_CONNECTIONS
        );
        assert_eq!(connection_limit(64, 1, None).limit, MIN_CONNECTIONS);
    }

    #[test]
    fn a_configured_limit_is_kept_unless_descriptors_cannot_carry_it() {
        let kept = connection_limit(1 << 20, 1, Some(100_000));
        assert_eq!(kept.limit, 100_000);
        assert!(!kept.cut);
        let small = connection_limit(1024, 1, Some(3));
        assert_eq!(small.limit, 3);
        let cut = connection_limit(1024, 1, Some(5000));
        assert_eq!(cut.limit, 1024 - 256 - 8);
        assert!(cut.cut);
    }

    /// A registry of `limit` connections, filled with connections 1 to `limit`.
    fn filled(limit: usize) -> (Connections, Vec<Arc<Slot>>) {
        let connections = Connections::new(limit);
        let slots = (1..=limit as u64)
            .map(|id| {
                connections
                    .admit(id)
                    .unwrap_or_else(|| panic!("connection {id} refused below the limit"))
            })
            .collect();
        (connections, slots)
    }

    #[test]
    fn past_the_limit_the_oldest_idle_connection_makes_room() {
        let (connections, slots) = filled(3);
        // The oldest is busy: the second-oldest, idle, is closed instead.
        let busy = BusyGuard::new(&slots[0]);
        assert!(connections.admit(4).is_some());
        let open: Vec<u64> = connections
            .open
            .lock()
            .expect("lock")
            .keys()
            .copied()
            .collect();
        assert_eq!(open, vec![1, 3, 4]);
        // The evicted one was told (the permit waits for its task).
        let told = slots[1].evict.notified();
        tokio_test_now(told);
        drop(busy);
    }

    #[test]
    fn when_every_connection_is_busy_a_new_one_is_refused() {
        let (connections, slots) = filled(2);
        let mut guards: Vec<BusyGuard> = slots.iter().map(BusyGuard::new).collect();
        assert!(connections.admit(3).is_none());
        // Once one is idle again, it makes room.
        guards.pop();
        assert!(connections.admit(4).is_some());
    }

    /// Asserts that `notified` completes at once (a stored permit).
    fn tokio_test_now(notified: tokio::sync::futures::Notified<'_>) {
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut notified = std::pin::pin!(notified);
        assert!(notified.as_mut().poll(&mut cx).is_ready());
    }
}
