//! The protocol frame decoders on arbitrary bytes, fed in pieces; the check is
//! `checks::proto_frames` (shared with tests/tests/fuzz_regressions.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    checks::proto_frames(data);
});
