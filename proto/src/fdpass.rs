//! A descriptor sent with a frame on the runner connection (`SCM_RIGHTS` on its Unix
//! socket): the Landlock ruleset the controller built for a run's job goes to the runner
//! with the run's `Execute`.
//!
//! The sender writes the first bytes of the frame with the descriptor attached
//! ([`send_with_fd`]) and the rest as usual. The receiver reads the connection only
//! through an [`FdReader`], which keeps every descriptor that arrives. The kernel hands
//! a descriptor over with the first byte it was sent with and never joins the bytes
//! before it and after it into one read, so by the time the frame is decoded its
//! descriptor is kept, and one that comes unasked is closed with the reader.

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio_util::codec::Encoder as _;

use crate::{ControllerCodec, ControllerMessage, ProtoError};

/// Most descriptors one read accepts; more (never sent by this protocol) fail the read.
const MAX_FDS_PER_READ: usize = 4;

/// Writes `bytes` (not empty: a descriptor travels with a byte) to `stream` with `fd`
/// attached to the first of them. The caller must have flushed whatever it buffered for
/// the stream before.
pub async fn send_with_fd(stream: &UnixStream, bytes: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    if bytes.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a descriptor is sent with at least one byte",
        ));
    }
    let fds = [fd.as_raw_fd()];
    let mut sent = 0;
    while sent < bytes.len() {
        stream.writable().await?;
        let result = if sent == 0 {
            stream.try_io(Interest::WRITABLE, || {
                let iov = [IoSlice::new(bytes)];
                let cmsgs = [ControlMessage::ScmRights(&fds)];
                sendmsg::<()>(
                    stream.as_raw_fd(),
                    &iov,
                    &cmsgs,
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(io::Error::from)
            })
        } else {
            stream.try_write(&bytes[sent..])
        };
        match result {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(written) => sent += written,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Sends `message` as one frame on `stream` with `fd` attached (an `Execute` with the
/// ruleset the controller built). Whatever was buffered for the stream must have been
/// flushed before.
pub async fn send_message_with_fd(
    stream: &UnixStream,
    message: ControllerMessage,
    fd: BorrowedFd<'_>,
) -> Result<(), ProtoError> {
    let mut frame = bytes::BytesMut::new();
    ControllerCodec::new().encode(message, &mut frame)?;
    send_with_fd(stream, &frame, fd).await?;
    Ok(())
}

/// The reading half of a runner connection that keeps the descriptors sent with its
/// bytes ([`FdReader::take_fd`]).
#[derive(Debug)]
pub struct FdReader {
    half: OwnedReadHalf,
    fds: VecDeque<OwnedFd>,
}

impl FdReader {
    pub fn new(half: OwnedReadHalf) -> FdReader {
        FdReader {
            half,
            fds: VecDeque::new(),
        }
    }

    /// The oldest descriptor received and not taken yet.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fds.pop_front()
    }
}

/// One `recvmsg` on the socket `socket` into `buf`: the bytes read and the descriptors
/// that came with them (close-on-exec). Blocking unless the socket is not; used by
/// [`FdReader`] and by the runner fork server, which reads its requests without a
/// runtime.
pub fn receive_with_fds(
    socket: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_READ]);
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: the kernel just installed these descriptors in this process
            // for this message; nothing else owns them.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        // Descriptors beyond the space were closed by the kernel; those received
        // close as `fds` drops.
        return Err(io::Error::other(
            "more descriptors came with a frame than the protocol sends",
        ));
    }
    Ok((msg.bytes, fds))
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let stream: &UnixStream = this.half.as_ref();
        loop {
            ready!(stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match stream.try_io(Interest::READABLE, || {
                receive_with_fds(stream.as_fd(), unfilled)
            }) {
                Ok((read, fds)) => {
                    this.fds.extend(fds);
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Poll::Ready(Err(err)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Seek as _, Write as _};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn file_with(text: &str) -> std::fs::File {
        let mut file = tempfile::tempfile().expect("tempfile");
        file.write_all(text.as_bytes()).expect("write");
        file
    }

    fn text_of(fd: OwnedFd) -> String {
        let mut file = std::fs::File::from(fd);
        file.rewind().expect("rewind");
        let mut text = String::new();
        file.read_to_string(&mut text).expect("read");
        text
    }

    #[tokio::test]
    async fn a_descriptor_arrives_with_its_bytes_and_between_others() {
        use std::os::fd::AsFd as _;
        let (sender, receiver) = UnixStream::pair().expect("pair");
        let (read, _write) = receiver.into_split();
        let mut reader = FdReader::new(read);
        let mut sender = sender;

        // Plain bytes, then a frame with a descriptor, then plain bytes again: written
        // before anything is read, so the reads could join them.
        sender.write_all(b"before|").await.expect("write");
        let file = file_with("the ruleset");
        send_with_fd(&sender, b"frame with fd|", file.as_fd())
            .await
            .expect("send");
        sender.write_all(b"after").await.expect("write");
        drop(sender);

        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.expect("read");
        assert_eq!(all, b"before|frame with fd|after");
        let fd = reader.take_fd().expect("the descriptor was kept");
        assert_eq!(text_of(fd), "the ruleset");
        assert!(reader.take_fd().is_none(), "one descriptor sent, one kept");
    }

    #[tokio::test]
    async fn a_received_descriptor_is_closed_on_exec() {
        use std::os::fd::AsFd as _;
        let (sender, receiver) = UnixStream::pair().expect("pair");
        let (read, _write) = receiver.into_split();
        let mut reader = FdReader::new(read);
        let file = file_with("x");
        send_with_fd(&sender, b"x", file.as_fd())
            .await
            .expect("send");
        let mut byte = [0u8; 1];
        reader.read_exact(&mut byte).await.expect("read");
        let fd = reader.take_fd().expect("kept");
        let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFD).expect("getfd");
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "a command must not inherit it");
    }
}
