//! Entry point of `svc-runner`; everything lives in the library.

fn main() {}
