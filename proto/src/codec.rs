//! Framing: `u32` big-endian length + JSON, on top of `tokio_util`'s length-delimited codec.
//!
//! [`FrameCodec`] is generic over the message type read and the one written, so each side
//! gets a codec that can only decode what the other side may send ([`RunnerCodec`],
//! [`ControllerCodec`]).

use std::marker::PhantomData;

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec, LengthDelimitedCodecError};

use crate::{ControllerMessage, MAX_FRAME_LEN, RunnerMessage};

/// Everything that can go wrong on the wire.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("i/o error on the runner connection: {0}")]
    Io(#[source] std::io::Error),
    #[error("frame larger than the maximum of {max} bytes")]
    FrameTooLarge { max: usize },
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("frame is not a valid message: {0}")]
    Json(#[from] serde_json::Error),
    #[error("peer speaks protocol version {peer}, this side speaks {ours}")]
    VersionMismatch { peer: u32, ours: u32 },
    #[error("unexpected message: {0}")]
    Unexpected(String),
}

impl From<std::io::Error> for ProtoError {
    fn from(err: std::io::Error) -> Self {
        let too_large = err
            .get_ref()
            .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>());
        if too_large {
            ProtoError::FrameTooLarge { max: MAX_FRAME_LEN }
        } else {
            ProtoError::Io(err)
        }
    }
}

/// Decodes frames into `In` and encodes `Out` into frames.
#[derive(Debug)]
pub struct FrameCodec<In, Out> {
    frames: LengthDelimitedCodec,
    _messages: PhantomData<fn(Out) -> In>,
}

/// The runner's codec: reads [`ControllerMessage`], writes [`RunnerMessage`].
pub type RunnerCodec = FrameCodec<ControllerMessage, RunnerMessage>;
/// The controller's codec: reads [`RunnerMessage`], writes [`ControllerMessage`].
pub type ControllerCodec = FrameCodec<RunnerMessage, ControllerMessage>;

impl<In, Out> FrameCodec<In, Out> {
    /// A codec refusing frames over [`MAX_FRAME_LEN`].
    pub fn new() -> Self {
        Self::with_max_frame_len(MAX_FRAME_LEN)
    }

    /// A codec refusing frames over `max` bytes.
    pub fn with_max_frame_len(max: usize) -> Self {
        let frames = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .big_endian()
            .max_frame_length(max)
            .new_codec();
        Self {
            frames,
            _messages: PhantomData,
        }
    }
}

impl<In, Out> Default for FrameCodec<In, Out> {
    fn default() -> Self {
        Self::new()
    }
}

impl<In: DeserializeOwned, Out> Decoder for FrameCodec<In, Out> {
    type Item = In;
    type Error = ProtoError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, ProtoError> {
        match self.frames.decode(src)? {
            Some(frame) => Ok(Some(serde_json::from_slice(&frame)?)),
            None => Ok(None),
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<In>, ProtoError> {
        match self.decode(src)? {
            Some(message) => Ok(Some(message)),
            None if src.is_empty() => Ok(None),
            None => Err(ProtoError::Truncated),
        }
    }
}

impl<In, Out: Serialize> Encoder<Out> for FrameCodec<In, Out> {
    type Error = ProtoError;

    fn encode(&mut self, message: Out, dst: &mut BytesMut) -> Result<(), ProtoError> {
        let json = serde_json::to_vec(&message)?;
        self.frames.encode(Bytes::from(json), dst)?;
        Ok(())
    }
}

/// Encodes one message as a complete frame (length prefix included).
pub fn encode_frame<T: Serialize>(message: &T) -> Result<Vec<u8>, ProtoError> {
    let json = serde_json::to_vec(message)?;
    if json.len() > MAX_FRAME_LEN {
        return Err(ProtoError::FrameTooLarge { max: MAX_FRAME_LEN });
    }
    let len =
        u32::try_from(json.len()).map_err(|_| ProtoError::FrameTooLarge { max: MAX_FRAME_LEN })?;
    let mut frame = Vec::with_capacity(4 + json.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&json);
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;
    use futures_util::{SinkExt, StreamExt};
    use tokio_util::codec::{FramedRead, FramedWrite};

    fn sample_request() -> ExecRequest {
        ExecRequest {
            job_id: "backup_home".into(),
            counter: 7,
            timeout_ms: Some(3_600_000),
            kill_grace_ms: 5_000,
            credentials: Some(Credentials {
                uid: 65534,
                gid: 65534,
                groups: vec![65534],
                user_name: "nobody".into(),
            }),
            limits: ResourceLimits {
                nproc: Some(64),
                nofile: Some(256),
                address_space: None,
                data: Some(512 << 20),
                pids: Some(512),
                memory: Some(256 << 20),
                cpu_weight: None,
            },
            keep_capabilities: Some(1 << 10),
            sandbox: Some(Sandbox {
                write_paths: vec!["/var/lib/svc/job/backup_home".into()],
                protected_paths: vec!["/var/lib/svc/state".into()],
                readable_dirs: Vec::new(),
                attached: None,
            }),
            private_dirs: vec![crate::PrivateDir {
                cover: "/var/lib/svc/tmp".into(),
                keep: Some("backup_home".into()),
            }],
            cgroup_procs: vec!["/sys/fs/cgroup/pids/svc-runs.0/job.1.0/cgroup.procs".into()],
            end_yields: true,
            action: Action::Commands {
                commands: vec!["echo 'hi'".into(), "false".into()],
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                dir_work: "/var/lib/svc/job/backup_home".into(),
            },
        }
    }

    fn all_runner_messages() -> Vec<RunnerMessage> {
        vec![
            RunnerMessage::Hello {
                version: PROTOCOL_VERSION,
                token: "t0k3n".into(),
            },
            RunnerMessage::Log {
                line: "GET http://127.0.0.1/".into(),
            },
            RunnerMessage::CommandStarted {
                index: 0,
                command: "echo hi".into(),
                pid: 42,
            },
            RunnerMessage::Output {
                stream: OutputStream::Stderr,
                data: vec![0, 159, 146, 150, b'\n', 255],
            },
            RunnerMessage::CommandExited {
                index: 0,
                exit: ExitReport {
                    code: None,
                    signal: Some(9),
                    timed_out: true,
                    cancelled: false,
                    duration_ms: 12,
                },
            },
            RunnerMessage::HttpResponse {
                status: 204,
                body_bytes: 0,
                truncated: false,
            },
            RunnerMessage::Finished {
                success: false,
                summary: "timed out".into(),
                timed_out: true,
                usage: Some(crate::ResourceUsage {
                    cpu_user_ms: 510,
                    cpu_system_ms: 12,
                    peak_memory_bytes: 67_108_864,
                    io_read_bytes: None,
                    io_write_bytes: Some(4096),
                    measured_by: crate::UsageSource::Rusage,
                }),
            },
            RunnerMessage::Error {
                message: "setuid: EPERM".into(),
            },
        ]
    }

    fn all_controller_messages() -> Vec<ControllerMessage> {
        let mut http = sample_request();
        http.action = Action::Http(HttpCall {
            method: "POST".into(),
            url: "http://127.0.0.1:1/x".into(),
            request_type: HttpRequestType::Json,
            headers: vec![("Authorization".into(), "Bearer x".into())],
            secret: Some(crate::redact::Secret::new("s")),
            sign_header: "x-my-sign".into(),
            insecure: true,
            follow_redirects: false,
            max_body_bytes: 65536,
        });
        vec![
            ControllerMessage::Welcome {
                version: PROTOCOL_VERSION,
                protected_paths: None,
                cgroup_tasks: Vec::new(),
                private_dirs: None,
            },
            ControllerMessage::Welcome {
                version: PROTOCOL_VERSION,
                protected_paths: Some(vec!["/var/lib/svc/state".into(), "/etc/svc".into()]),
                cgroup_tasks: vec!["/sys/fs/cgroup/pids/svc-runs.0/ahead.1/tasks".into()],
                private_dirs: Some(vec![PrivateDir {
                    cover: "/var/lib/svc/run".into(),
                    keep: Some("deploy".into()),
                }]),
            },
            ControllerMessage::Reject {
                reason: "bad token".into(),
            },
            ControllerMessage::Execute(Box::new(sample_request())),
            ControllerMessage::Execute(Box::new(http)),
            ControllerMessage::Cancel {
                reason: "shutdown".into(),
            },
        ]
    }

    #[tokio::test]
    async fn every_message_round_trips_through_a_stream() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (_a_read, a_write) = tokio::io::split(a);
        let (b_read, _b_write) = tokio::io::split(b);
        let mut runner_out = FramedWrite::new(a_write, RunnerCodec::new());
        let mut controller_in = FramedRead::new(b_read, ControllerCodec::new());
        for message in all_runner_messages() {
            runner_out.send(message.clone()).await.expect("send");
            let got = controller_in
                .next()
                .await
                .expect("a frame")
                .expect("decodes");
            assert_eq!(got, message);
        }
    }

    #[test]
    fn every_controller_message_round_trips() {
        let mut runner = RunnerCodec::new();
        let mut controller = ControllerCodec::new();
        for message in all_controller_messages() {
            let mut buf = BytesMut::new();
            controller
                .encode(message.clone(), &mut buf)
                .expect("encode");
            assert_eq!(buf.len(), encode_frame(&message).expect("frame").len());
            let got = runner.decode(&mut buf).expect("decode").expect("complete");
            assert_eq!(got, message);
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn partial_frames_wait_for_more_bytes() {
        let frame = encode_frame(&all_runner_messages()[3]).expect("frame");
        let mut codec = ControllerCodec::new();
        let mut buf = BytesMut::new();
        for (i, byte) in frame.iter().enumerate() {
            buf.extend_from_slice(&[*byte]);
            let got = codec.decode(&mut buf).expect("no error on a prefix");
            assert_eq!(got.is_some(), i == frame.len() - 1);
        }
    }

    #[test]
    fn oversized_length_is_refused_without_allocating() {
        let mut codec = ControllerCodec::new();
        let mut buf = BytesMut::from(&u32::MAX.to_be_bytes()[..]);
        buf.extend_from_slice(b"{}");
        let err = codec.decode(&mut buf).expect_err("too large");
        assert!(matches!(err, ProtoError::FrameTooLarge { .. }), "{err:?}");
        assert!(
            buf.capacity() < 1024,
            "no buffer sized by the claimed length"
        );
    }

    #[test]
    fn garbage_json_is_an_error() {
        let mut codec = ControllerCodec::new();
        for body in [
            &b"not json"[..],
            b"{\"type\":\"nope\"}",
            b"\xff\xfe",
            b"[]",
            b"",
        ] {
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
            buf.extend_from_slice(body);
            let err = codec.decode(&mut buf).expect_err("garbage refused");
            assert!(matches!(err, ProtoError::Json(_)), "{err:?}");
        }
    }

    #[test]
    fn invalid_base64_output_is_an_error() {
        let mut codec = ControllerCodec::new();
        let body = br#"{"type":"output","stream":"stdout","data":"!!!"}"#;
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
        buf.extend_from_slice(body);
        assert!(matches!(codec.decode(&mut buf), Err(ProtoError::Json(_))));
    }

    #[test]
    fn eof_on_a_frame_boundary_is_clean_and_inside_a_frame_is_not() {
        let mut codec = ControllerCodec::new();
        let mut empty = BytesMut::new();
        assert!(codec.decode_eof(&mut empty).expect("clean").is_none());

        let frame = encode_frame(&all_runner_messages()[0]).expect("frame");
        let mut cut = BytesMut::from(&frame[..frame.len() - 1]);
        assert!(matches!(
            codec.decode_eof(&mut cut),
            Err(ProtoError::Truncated)
        ));
    }

    #[tokio::test]
    async fn stream_ends_cleanly_after_last_frame() {
        let (a, b) = tokio::io::duplex(1024);
        let mut writer = FramedWrite::new(a, RunnerCodec::new());
        writer
            .send(RunnerMessage::Log { line: "x".into() })
            .await
            .expect("send");
        drop(writer);
        let mut reader = FramedRead::new(b, ControllerCodec::new());
        assert!(reader.next().await.is_some());
        assert!(
            reader.next().await.is_none(),
            "clean EOF yields end of stream"
        );
    }
}
