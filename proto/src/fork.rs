//! The runner fork server's conversation: the controller asks one pre-initialised
//! `svc-runner --fork-server` process to fork a runner for each execution of a command,
//! instead of starting a fresh `svc-runner` process (exec, dynamic loading, start-up).
//!
//! Transport: a Unix socket pair, the server's end as its standard input; the same
//! framing as the runner connection ([`crate::codec`]). Each [`ForkRequest::Fork`] frame
//! carries one descriptor ([`crate::fdpass`]): one end of a new socket pair, which becomes
//! the forked runner's controller connection. The forked runner then speaks the runner
//! protocol on it, from its `Hello` on (without a token: the connection is its own from
//! birth).
//!
//! The server is the forked runners' parent: it reaps them and reports each exit
//! ([`ForkEvent::Exited`]), and it alone may signal them ([`ForkRequest::Kill`]), since
//! only the parent knows that a pid still names its child and not a later process.

use serde::{Deserialize, Serialize};

use crate::codec::FrameCodec;

/// What the controller asks of the fork server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ForkRequest {
    /// Fork one runner; its connection is the descriptor sent with this frame. `id`
    /// names the answer ([`ForkEvent::Forked`] or [`ForkEvent::ForkFailed`]).
    Fork { id: u64 },
    /// Kill (`SIGKILL`) this forked runner, if it is still a live child of the server.
    Kill { pid: u32 },
}

/// What the fork server tells the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ForkEvent {
    /// Sent once, first: the server is ready and speaks this runner protocol version
    /// (its runners are of its own build).
    Ready { version: u32 },
    /// The runner asked for by `id` was forked with this pid.
    Forked { id: u64, pid: u32 },
    /// The runner asked for by `id` could not be forked.
    ForkFailed { id: u64, message: String },
    /// A forked runner ended and was reaped: its exit code, or the signal that killed it.
    Exited {
        pid: u32,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// The fork server's codec: reads [`ForkRequest`], writes [`ForkEvent`].
pub type ForkServerCodec = FrameCodec<ForkRequest, ForkEvent>;
/// The controller's codec for the fork server: reads [`ForkEvent`], writes [`ForkRequest`].
pub type ForkClientCodec = FrameCodec<ForkEvent, ForkRequest>;

/// How an exit reads in a run's log, in the standard library's words: `exit status: 2`,
/// `signal: 9 (SIGKILL)`.
pub fn exit_text(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(code), _) => format!("exit status: {code}"),
        (None, Some(number)) => match nix::sys::signal::Signal::try_from(number) {
            Ok(signal) => format!("signal: {number} ({})", signal.as_str()),
            Err(_) => format!("signal: {number}"),
        },
        (None, None) => "ended".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use tokio_util::codec::{Decoder as _, Encoder as _};

    #[test]
    fn requests_and_events_cross_the_codecs() {
        let mut client = ForkClientCodec::new();
        let mut server = ForkServerCodec::new();
        let mut wire = BytesMut::new();
        for request in [ForkRequest::Fork { id: 7 }, ForkRequest::Kill { pid: 42 }] {
            client.encode(request.clone(), &mut wire).expect("encode");
            assert_eq!(server.decode(&mut wire).expect("decode"), Some(request));
        }
        let events = [
            ForkEvent::Ready { version: 5 },
            ForkEvent::Forked { id: 7, pid: 42 },
            ForkEvent::ForkFailed {
                id: 8,
                message: "no memory".into(),
            },
            ForkEvent::Exited {
                pid: 42,
                code: None,
                signal: Some(9),
            },
        ];
        for event in events {
            server.encode(event.clone(), &mut wire).expect("encode");
            assert_eq!(client.decode(&mut wire).expect("decode"), Some(event));
        }
        assert!(wire.is_empty());
    }

    #[test]
    fn exits_read_like_the_standard_library_s() {
        assert_eq!(exit_text(Some(2), None), "exit status: 2");
        assert_eq!(exit_text(None, Some(9)), "signal: 9 (SIGKILL)");
        assert_eq!(exit_text(None, Some(200)), "signal: 200");
        assert_eq!(exit_text(None, None), "ended");
    }
}
