//! The schedule grammar on arbitrary text, and `next_after` of what it accepts; the check
//! is `checks::schedule` (shared with tests/tests/fuzz_regressions.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::schedule(data));
