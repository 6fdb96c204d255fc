//! The HTTP/1.1 accept loop: per-connection limits that `axum::serve` does not offer.
//!
//! - Header read timeout: a client gets [`HEADER_READ_TIMEOUT`] to send a request head.
//!   hyper arms it whenever it waits for a head, so it also closes idle keep-alive
//!   connections. A slow body is bounded by the router's request-body timeout.
//! - At most [`MAX_BUFFERED_HEAD`] of request head are buffered; past it hyper answers
//!   431 itself. The router refuses heads over [`MAX_HEADER_BYTES`] earlier, in the JSON
//!   wrapper, so hyper's bare answer is only a backstop.
//! - At most [`MAX_CONNECTIONS`] connections at once; further ones wait in the kernel's
//!   backlog until a slot frees.
//! - Graceful shutdown: stop accepting, let requests in flight finish (bounded by the
//!   caller).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::App;

/// Time a client has to send a request head (and the idle limit between requests).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head accepted by the router.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Largest request head hyper buffers at all.
pub const MAX_BUFFERED_HEAD: usize = 256 * 1024;
/// Header lines hyper parses; far above what the byte limit allows, so that the
/// router's [`MAX_HEADER_BYTES`] check (which answers in the JSON wrapper) decides.
pub const MAX_HEADER_LINES: usize = 4096;
/// Connections served at the same time.
pub const MAX_CONNECTIONS: usize = 4096;

/// Serves `app` on `listener` until `shutdown` resolves, then waits at most `drain` for
/// requests in flight.
pub async fn serve(
    listener: TcpListener,
    app: App,
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
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
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
        let _ = stream.set_nodelay(true);
        // Handlers that care (the login throttle) find the client's address here.
        let service = TowerToHyperService::new(tower::Layer::layer(
            &axum::Extension(axum::extract::ConnectInfo(peer)),
            app.clone(),
        ));
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
            drop(permit);
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
