//! The protocol frame decoders (`ControllerCodec` reads runner messages, `RunnerCodec`
//! reads controller messages) on arbitrary bytes, fed in pieces.
//!
//! The first input byte sets the size of the pieces the rest is fed in (1 to 256
//! bytes), so partial frames and frames split at every point are exercised. Checked: no
//! panic; decoding stops at the first error; a decoded message encodes back to a frame
//! that decodes to the same message; `decode_eof` refuses a partial frame.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use proto::{ControllerCodec, ControllerMessage, RunnerCodec, RunnerMessage};
use tokio_util::codec::{Decoder, Encoder};

fn feed<D, T>(codec: &mut D, data: &[u8], piece: usize) -> Vec<T>
where
    D: Decoder<Item = T>,
{
    let mut buffer = BytesMut::new();
    let mut out = Vec::new();
    for chunk in data.chunks(piece) {
        buffer.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(message)) => out.push(message),
                Ok(None) => break,
                Err(_) => return out,
            }
        }
    }
    match codec.decode_eof(&mut buffer) {
        Ok(Some(message)) => out.push(message),
        Ok(None) => assert!(buffer.is_empty(), "decode_eof accepted a partial frame"),
        Err(_) => {}
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let piece = usize::from(first) + 1;

    let mut controller_side = ControllerCodec::new();
    for message in feed::<_, RunnerMessage>(&mut controller_side, rest, piece) {
        // The runner's encoder writes what the controller's decoder reads.
        let mut frame = BytesMut::new();
        RunnerCodec::new()
            .encode(message.clone(), &mut frame)
            .expect("a decoded message encodes");
        let again = ControllerCodec::new()
            .decode(&mut frame)
            .expect("re-encoded frame decodes")
            .expect("one whole frame");
        assert_eq!(again, message);
    }

    let mut runner_side = RunnerCodec::new();
    for message in feed::<_, ControllerMessage>(&mut runner_side, rest, piece) {
        let mut frame = BytesMut::new();
        ControllerCodec::new()
            .encode(message.clone(), &mut frame)
            .expect("a decoded message encodes");
        let again = RunnerCodec::new()
            .decode(&mut frame)
            .expect("re-encoded frame decodes")
            .expect("one whole frame");
        assert_eq!(again, message);
    }
});
