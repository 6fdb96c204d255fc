//! The protocol spoken between `svc-controller` and each `svc-runner` process.
//!
//! Transport: a Unix domain socket created by the controller. Framing: a `u32` big-endian
//! length followed by that many bytes of JSON ([`codec`]). Frames longer than
//! [`MAX_FRAME_LEN`] are refused before any buffer is allocated for them.
//!
//! Conversation, in order:
//!
//! 1. The runner connects and sends [`RunnerMessage::Hello`] with [`PROTOCOL_VERSION`] and
//!    the one-time token it read from its standard input. A runner forked by the runner
//!    fork server ([`fork`]) was born with its connection and sends an empty token.
//! 2. The controller answers [`ControllerMessage::Welcome`] at once (or
//!    [`ControllerMessage::Reject`] and closes). The runner was started ahead of its work:
//!    it prepares what it can (the sandbox's part that depends on the service alone) and
//!    waits for the one [`ControllerMessage::Execute`] the controller sends when the run
//!    begins. That frame may carry a descriptor, the Landlock ruleset the controller
//!    built for the run's job ([`fdpass`], [`Sandbox::attached`]).
//! 3. The runner streams [`RunnerMessage`]s while it works and ends with exactly one
//!    [`RunnerMessage::Finished`] (or [`RunnerMessage::Error`] when it could not start the
//!    work at all), then closes. The controller may send [`ControllerMessage::Cancel`] at
//!    any time.
//!
//! End of stream on a frame boundary is a clean close; anywhere else it is an error.
//!
//! These are wire types: the controller converts them to and from its own domain types.

pub mod codec;
pub mod error_chain;
pub mod fdpass;
pub mod fork;
mod message;
pub mod redact;
pub mod sandbox;

pub use codec::{ControllerCodec, FrameCodec, ProtoError, RunnerCodec};
pub use message::*;

/// Version of this protocol. Bumped on any incompatible change of a message, and when a
/// runner that ignored a new field would do less than asked (6: the run's cgroup).
pub const PROTOCOL_VERSION: u32 = 6;

/// Largest frame either side accepts, in bytes of JSON.
pub const MAX_FRAME_LEN: usize = 1024 * 1024;

/// Largest chunk of output bytes a runner puts in one [`RunnerMessage::Output`].
/// Base64 makes it 4/3 larger; it stays well under [`MAX_FRAME_LEN`].
pub const MAX_OUTPUT_CHUNK: usize = 64 * 1024;
