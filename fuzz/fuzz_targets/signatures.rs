//! The signature checks of `svc_controller::access::auth` with arbitrary secrets, bodies and
//! header values; the check is `checks::signatures` (shared with
//! tests/tests/fuzz_regressions.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::signatures(data));
