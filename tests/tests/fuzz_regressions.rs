//! The fuzz targets' checks (fuzz/fuzz_targets), run by `cargo test` on stable without
//! libFuzzer: every committed seed (fuzz/seeds/<target>/*) and every input that once
//! made a target fail (fuzz/regressions/<target>/*, when there are any) goes through the
//! same function as in the fuzzer. A crash found by fuzzing gets its input committed
//! under fuzz/regressions and, while unfixed, a test of its own below marked `#[ignore]`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use chrono::{DateTime, TimeZone, Timelike, Utc};
use hmac::{Hmac, Mac};
use proto::{ControllerCodec, ControllerMessage, RunnerCodec, RunnerMessage};
use sha1::Sha1;
use sha2::Sha256;
use svc_controller::auth::{verify_codehost, verify_hmac_sha256, verify_patchhost};
use svc_controller::config::{job_id_from_name, load};
use svc_controller::schedule::Schedule;
use tokio_util::codec::{Decoder, Encoder};

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

// ----- config (fuzz_targets/config.rs) ---------------------------------------------------

fn split_files(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() < 3 {
        match rest.windows(4).position(|w| w == b"\n%%\n") {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + 4..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

fn config_check(data: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path();
    for sub in ["etc/svc/job.d", "etc/svc/job_http.d"] {
        std::fs::create_dir_all(base.join(sub)).expect("create the tree");
    }
    let parts = split_files(data);
    let mut main = format!("[svc]\ndir_base = {}\n", base.display()).into_bytes();
    main.extend_from_slice(parts[0]);
    let main_path = base.join("etc/svc/svc.conf");
    std::fs::write(&main_path, &main).expect("write");
    for (index, name) in ["job.d/a.conf", "job_http.d/a.conf", "user.conf"]
        .iter()
        .enumerate()
    {
        if let Some(part) = parts.get(index + 1) {
            std::fs::write(base.join("etc/svc").join(name), part).expect("write");
        }
    }
    match load(&main_path) {
        Ok(config) => {
            let mut ids = HashSet::new();
            let mut paths = HashSet::new();
            for job in &config.jobs {
                assert_eq!(job.id, job_id_from_name(&job.name));
                assert!(ids.insert(job.id.clone()), "duplicate job ID {:?}", job.id);
                assert!(!job.commands.is_empty());
                if let Some(path) = &job.path {
                    assert!(paths.insert(path.clone()), "duplicate path {path:?}");
                }
            }
            for job in &config.http_jobs {
                assert_eq!(job.id, job_id_from_name(&job.name));
            }
        }
        Err(err) => {
            assert!(!err.issues.is_empty());
            let _ = err.to_string();
        }
    }
}

#[test]
fn config_seeds() {
    replay("config", config_check);
}

// ----- schedule (fuzz_targets/schedule.rs) -----------------------------------------------

fn schedule_check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(schedule) = text.parse::<Schedule>() else {
        return;
    };
    let canonical = schedule.to_string();
    let again: Schedule = canonical.parse().expect("the canonical form parses");
    assert_eq!(again, schedule);
    let seed = data.iter().fold(0u64, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u64::from(*b))
    });
    let instants: [DateTime<Utc>; 4] = [
        Utc.timestamp_opt(0, 0).single().expect("epoch"),
        Utc.timestamp_opt(1_795_219_200, 999_999_999)
            .single()
            .expect("2026"),
        Utc.timestamp_opt(7_258_118_399, 0).single().expect("2199"),
        Utc.timestamp_opt((seed % 7_258_118_400) as i64, 0)
            .single()
            .expect("in range"),
    ];
    for t in instants {
        let next = schedule.next_after(t);
        assert!(next > t, "{canonical}: next_after({t}) = {next}");
        assert_eq!((next.second(), next.nanosecond()), (0, 0));
    }
}

#[test]
fn schedule_seeds() {
    replay("schedule", schedule_check);
}

// ----- protocol frames (fuzz_targets/proto_frames.rs) -------------------------------------

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

fn proto_check(data: &[u8]) -> usize {
    let Some((&first, rest)) = data.split_first() else {
        return 0;
    };
    let piece = usize::from(first) + 1;
    let mut decoded = 0;
    for message in feed::<_, RunnerMessage>(&mut ControllerCodec::new(), rest, piece) {
        let mut frame = BytesMut::new();
        RunnerCodec::new()
            .encode(message.clone(), &mut frame)
            .expect("encodes");
        let again = ControllerCodec::new()
            .decode(&mut frame)
            .expect("decodes")
            .expect("one frame");
        assert_eq!(again, message);
        decoded += 1;
    }
    for message in feed::<_, ControllerMessage>(&mut RunnerCodec::new(), rest, piece) {
        let mut frame = BytesMut::new();
        ControllerCodec::new()
            .encode(message.clone(), &mut frame)
            .expect("encodes");
        let again = RunnerCodec::new()
            .decode(&mut frame)
            .expect("decodes")
            .expect("one frame");
        assert_eq!(again, message);
        decoded += 1;
    }
    decoded
}

#[test]
fn proto_frame_seeds() {
    replay("proto_frames", |data| {
        proto_check(data);
    });
    // The seeds are meaningful: the conversation seed decodes its eight messages.
    let conversation = std::fs::read(fuzz_dir().join("seeds/proto_frames/runner-conversation"))
        .expect("the runner conversation seed");
    assert_eq!(proto_check(&conversation), 8);
}

// ----- signatures (fuzz_targets/signatures.rs) ---------------------------------------------

fn hmac256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hmac1(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha1>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn decoded(value: &str, prefix: &str) -> Option<Vec<u8>> {
    let value = value.trim();
    hex::decode(value.strip_prefix(prefix).unwrap_or(value)).ok()
}

fn signatures_check(data: &[u8]) {
    let mut parts = data.splitn(4, |b| *b == 0);
    let secret = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    let value_bytes = parts.next().unwrap_or_default();
    let second_bytes = parts.next().unwrap_or_default();
    let value = String::from_utf8_lossy(value_bytes);
    let second = String::from_utf8_lossy(second_bytes);
    let expected256 = hmac256(secret, body);
    let expected1 = hmac1(secret, body);
    let hex256 = hex::encode(&expected256);
    let hex1 = hex::encode(&expected1);

    match verify_hmac_sha256(secret, body, "x-svc-sign", Some(&value)) {
        Ok(()) => assert_eq!(
            decoded(&value, "sha256=").as_deref(),
            Some(expected256.as_slice())
        ),
        Err(err) => assert!(!err.to_string().contains(&hex256)),
    }
    verify_hmac_sha256(secret, body, "x-svc-sign", Some(&hex256)).expect("right signature");
    let sha256 = (!value.trim().is_empty()).then_some(value.as_ref());
    match verify_codehost(secret, body, sha256, Some(&second)) {
        Ok(()) => {
            let right = match sha256 {
                Some(v) => decoded(v, "sha256=").as_deref() == Some(expected256.as_slice()),
                None => decoded(&second, "sha1=").as_deref() == Some(expected1.as_slice()),
            };
            assert!(right, "codehost accepted {value:?} / {second:?}");
        }
        Err(err) => {
            let text = err.to_string();
            assert!(!text.contains(&hex256) && !text.contains(&hex1));
        }
    }
    verify_codehost(secret, body, None, Some(&format!("sha1={hex1}"))).expect("right sha1");
    let key = String::from_utf8_lossy(secret);
    let _ = verify_patchhost(&key, body, Some(value_bytes), Some(second_bytes));
}

#[test]
fn signature_seeds() {
    replay("signatures", signatures_check);
    // The documented GitHub check value is among the seeds and is accepted.
    let documented = std::fs::read(fuzz_dir().join("seeds/signatures/github-documented"))
        .expect("the documented seed");
    let mut parts = documented.splitn(4, |b| *b == 0);
    let (secret, body) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let value = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    verify_codehost(secret, body, Some(&value), None).expect("GitHub's documented value");
}
