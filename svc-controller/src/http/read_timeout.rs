//! The request body as the front hands it on: it fails with [`BodyReadTimedOut`] when the
//! client keeps the server waiting too long for the next frame or for the whole body
//! (`BODY_READ_TIMEOUT`, `http_body_timeout`); [`super::ApiError`] turns that into a 408.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A request body that fails once the client has sent nothing for `timeout` while a
/// frame is awaited, as tower-http's `TimeoutBody` (the timer restarts with every frame;
/// size hint and end of stream are left unknown, as there), and in any case at its
/// `deadline` (`http_body_timeout` after the head), so that a body dripped a byte at a
/// time cannot hold its connection and its share of memory for ever. Its timer is armed
/// only when the client actually keeps the server waiting: tower-http's creates and
/// registers one on every poll, although a small body has usually arrived with the head.
pub(super) struct ReadTimeout<B> {
    body: B,
    timeout: std::time::Duration,
    deadline: tokio::time::Instant,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> ReadTimeout<B> {
    pub(super) fn new(
        body: B,
        timeout: std::time::Duration,
        whole: std::time::Duration,
    ) -> ReadTimeout<B> {
        ReadTimeout {
            body,
            timeout,
            deadline: tokio::time::Instant::now() + whole,
            timer: None,
        }
    }
}

/// The error of a body that timed out.
#[derive(Debug)]
pub(super) struct BodyReadTimedOut;

impl std::fmt::Display for BodyReadTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body was not received in time")
    }
}

impl std::error::Error for BodyReadTimedOut {}

impl<B> hyper::body::Body for ReadTimeout<B>
where
    B: hyper::body::Body + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = B::Data;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, axum::BoxError>>> {
        let this = &mut *self;
        if let Some(timer) = &mut this.timer {
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Some(Err(BodyReadTimedOut.into())));
            }
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.timer = None;
                if frame.is_some() && tokio::time::Instant::now() >= this.deadline {
                    return Poll::Ready(Some(Err(BodyReadTimedOut.into())));
                }
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                if this.timer.is_none() {
                    let until = (tokio::time::Instant::now() + this.timeout).min(this.deadline);
                    let mut timer = Box::pin(tokio::time::sleep_until(until));
                    // Polled once so that it wakes this task when it expires.
                    if timer.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Some(Err(BodyReadTimedOut.into())));
                    }
                    this.timer = Some(timer);
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::{Body, Bytes};
    use futures_util::StreamExt as _;

    use super::*;

    /// A body whose chunks arrive after the given delays.
    fn trickle(delays: &'static [u64]) -> Body {
        Body::from_stream(futures_util::stream::iter(delays).then(|ms| async move {
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            Ok::<_, std::io::Error>(Bytes::from_static(b"x"))
        }))
    }

    async fn read(body: Body, timeout_ms: u64) -> Result<Bytes, axum::Error> {
        let body = Body::new(ReadTimeout::new(
            body,
            Duration::from_millis(timeout_ms),
            Duration::from_secs(3600),
        ));
        axum::body::to_bytes(body, usize::MAX).await
    }

    #[tokio::test]
    async fn a_stalled_body_times_out() {
        let stalled =
            Body::from_stream(futures_util::stream::pending::<Result<Bytes, std::io::Error>>());
        let err = read(stalled, 50).await.expect_err("timed out");
        assert!(
            std::error::Error::source(&err)
                .is_some_and(|source| source.to_string().contains("not received in time")),
            "{err:?}"
        );
        // The wait is per frame: a pause longer than the limit between frames fails...
        assert!(read(trickle(&[0, 300]), 150).await.is_err());
    }

    #[tokio::test]
    async fn the_timer_restarts_with_every_frame() {
        // ...while frames that each come within it add up to far more.
        let body = read(trickle(&[60, 60, 60, 60, 60]), 150)
            .await
            .expect("body");
        assert_eq!(&body[..], b"xxxxx");
    }

    #[tokio::test]
    async fn a_steady_trickle_still_ends_at_the_whole_body_deadline() {
        // Every frame comes well within the per-frame limit, but they add up to more
        // than the whole-body deadline.
        let body = Body::new(ReadTimeout::new(
            trickle(&[40; 10]),
            Duration::from_millis(100),
            Duration::from_millis(200),
        ));
        let err = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect_err("cut at the deadline");
        assert!(format!("{err:?}").contains("BodyReadTimedOut"), "{err:?}");
        // The same trickle within a longer deadline is read whole.
        let body = Body::new(ReadTimeout::new(
            trickle(&[40; 10]),
            Duration::from_secs(60),
            Duration::from_secs(60),
        ));
        assert_eq!(
            axum::body::to_bytes(body, usize::MAX)
                .await
                .expect("whole")
                .len(),
            10
        );
    }

    #[tokio::test]
    async fn a_body_already_there_arms_no_timer() {
        let mut body = ReadTimeout::new(
            Body::from("ready"),
            Duration::from_millis(50),
            Duration::from_millis(50),
        );
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let frame = hyper::body::Body::poll_frame(Pin::new(&mut body), &mut cx);
        assert!(matches!(frame, Poll::Ready(Some(Ok(_)))));
        assert!(body.timer.is_none());
        let end = hyper::body::Body::poll_frame(Pin::new(&mut body), &mut cx);
        assert!(matches!(end, Poll::Ready(None)));
        assert!(body.timer.is_none());
    }
}
