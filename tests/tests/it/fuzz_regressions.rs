//! The fuzz targets' checks (fuzz/checks.rs), run by `cargo test` on stable without
//! libFuzzer: every committed seed (fuzz/seeds/<target>/*) and every input that once
//! made a target fail (fuzz/regressions/<target>/*, when there are any) goes through the
//! very function the fuzzer runs. A crash found by fuzzing gets its input committed
//! under fuzz/regressions and, while unfixed, a test of its own below marked `#[ignore]`.

use std::path::{Path, PathBuf};

use svc_controller::access::auth::verify_codehost;

#[path = "../../../fuzz/checks.rs"]
mod checks;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The inputs of `target`: its seeds and its regressions.
fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for kind in ["seeds", "regressions"] {
        let dir = fuzz_dir().join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() {
                let data = std::fs::read(&path)
                    .unwrap_or_else(|err| panic!("read {}: {err}", path.display()));
                found.push((path, data));
            }
        }
    }
    found.sort();
    found
}

fn replay(target: &str, check: impl Fn(&[u8])) {
    let inputs = inputs(target);
    assert!(
        !inputs.is_empty(),
        "no seeds for {target} in {}",
        fuzz_dir().display()
    );
    for (path, data) in &inputs {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(data)));
        assert!(outcome.is_ok(), "{target} fails on {}", path.display());
    }
    println!("{target}: {} inputs replayed", inputs.len());
}

#[test]
fn config_seeds() {
    replay("config", |data| {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["etc/svc/job.d", "etc/svc/job_http.d"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("create the tree");
        }
        checks::config(data, dir.path());
    });
}

#[test]
fn schedule_seeds() {
    replay("schedule", checks::schedule);
}

#[test]
fn proto_frame_seeds() {
    replay("proto_frames", |data| {
        checks::proto_frames(data);
    });
    // The seeds are meaningful: the conversation seed decodes its eight messages.
    let conversation = std::fs::read(fuzz_dir().join("seeds/proto_frames/runner-conversation"))
        .expect("the runner conversation seed");
    assert_eq!(checks::proto_frames(&conversation), 8);
}

#[test]
fn signature_seeds() {
    replay("signatures", checks::signatures);
    // The documented GitHub check value is among the seeds and is accepted.
    let documented = std::fs::read(fuzz_dir().join("seeds/signatures/github-documented"))
        .expect("the documented seed");
    let mut parts = documented.splitn(4, |b| *b == 0);
    let (secret, body) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let value = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    verify_codehost(&[secret], body, Some(&value), None).expect("GitHub's documented value");
}
