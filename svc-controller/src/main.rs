//! Entry point of `svc-controller`; everything lives in the library.

fn main() {}
