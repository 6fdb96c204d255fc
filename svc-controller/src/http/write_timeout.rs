//! A connection that fails its writes once the client has taken nothing for a while:
//! a client that opens a stream (a log, the live events) and never reads would
//! otherwise hold its connection, and the answer buffered for it, for as long as it
//! likes.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a write may wait for the client to take bytes before the connection fails.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// `inner`, whose writes (and flushes) fail with [`io::ErrorKind::TimedOut`] after
/// waiting `timeout` without progress. The timer is armed only when a write has to
/// wait, and cleared by any progress, so a connection whose client reads costs nothing.
pub(super) struct WriteTimeout<S> {
    inner: S,
    timeout: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteTimeout<S> {
    pub(super) fn new(inner: S, timeout: Duration) -> WriteTimeout<S> {
        WriteTimeout {
            inner,
            timeout,
            timer: None,
        }
    }

    /// What a write that made no progress answers: still pending, or the timeout.
    fn waited<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        // Polled so that it wakes this task when it expires.
        if timer.as_mut().poll(cx).is_ready() {
            self.timer = None;
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing for the write timeout",
            )));
        }
        Poll::Pending
    }

    fn progressed<T>(
        &mut self,
        done: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match done {
            Poll::Ready(result) => {
                self.timer = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.waited(cx),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(done, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(done, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(done, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test(start_paused = true)]
    async fn a_write_the_client_never_takes_fails_after_the_timeout() {
        let (server, _client) = tokio::io::duplex(16);
        let mut server = WriteTimeout::new(server, Duration::from_secs(60));
        server.write_all(&[1; 16]).await.expect("fits the pipe");
        let started = tokio::time::Instant::now();
        let err = server.write_all(&[2; 16]).await.expect_err("timed out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_slowly_but_steadily_is_served() {
        let (server, mut client) = tokio::io::duplex(16);
        let mut server = WriteTimeout::new(server, Duration::from_secs(60));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            while got.len() < 160 {
                // Each read comes 50 s after the last: within the timeout every time,
                // far beyond it in all.
                tokio::time::sleep(Duration::from_secs(50)).await;
                let n = client.read(&mut buf).await.expect("read");
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        server
            .write_all(&[7; 160])
            .await
            .expect("every write progresses in time");
        assert_eq!(reader.await.expect("reader"), vec![7; 160]);
    }
}
