//! The checks of the fuzz targets, in one place. Each fuzz target (fuzz_targets/*.rs) runs
//! one of them on the fuzzer's inputs, and `tests/tests/it/fuzz_regressions.rs` replays the
//! committed seeds and regressions through the same functions under `cargo test`, so the
//! two can never check different things. Both include this file with `#[path]`.
#![allow(dead_code)] // each fuzz target uses one check

use std::collections::HashSet;
use std::path::Path;

use bytes::BytesMut;
use chrono::{DateTime, TimeZone, Timelike, Utc};
use hmac::{Hmac, Mac};
use proto::{ControllerCodec, ControllerMessage, RunnerCodec, RunnerMessage};
use sha1::Sha1;
use sha2::Sha256;
use svc_controller::access::auth::{verify_codehost, verify_hmac_sha256, verify_patchhost};
use svc_controller::config::{job_id_from_name, load};
use svc_controller::time::schedule::Schedule;
use tokio_util::codec::{Decoder, Encoder};

// ----- config ------------------------------------------------------------------------------

/// Up to four files separated by lines `%%`.
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

fn put(path: &Path, contents: Option<&[u8]>) {
    match contents {
        Some(bytes) => std::fs::write(path, bytes).expect("write a configuration file"),
        None => {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The configuration loader on arbitrary files, written as a tree in `base` (which
/// holds `etc/svc/job.d` and `etc/svc/job_http.d`; it may be reused between inputs). The
/// input holds the main file (after a fixed `[svc]` line and `dir_base` pointing at the
/// tree), `job.d/a.conf`, `job_http.d/a.conf` and `user.conf`, separated by lines `%%`.
/// Checked: a failure lists at least one problem and renders; a success has unique job IDs
/// that follow the ID rule, and unique trigger paths.
pub fn config(data: &[u8], base: &Path) {
    let parts = split_files(data);
    let mut main = format!("[svc]\ndir_base = {}\n", base.display()).into_bytes();
    main.extend_from_slice(parts[0]);
    let main_path = base.join("etc/svc/svc.conf");
    put(&main_path, Some(&main));
    put(&base.join("etc/svc/job.d/a.conf"), parts.get(1).copied());
    put(
        &base.join("etc/svc/job_http.d/a.conf"),
        parts.get(2).copied(),
    );
    put(&base.join("etc/svc/user.conf"), parts.get(3).copied());

    match load(&main_path) {
        Ok(config) => {
            let mut ids = HashSet::new();
            let mut paths = HashSet::new();
            for job in &config.jobs {
                assert_eq!(job.id, job_id_from_name(&job.name), "job ID rule");
                assert!(
                    ids.insert(job.id.clone()),
                    "duplicate job ID {:?} accepted",
                    job.id
                );
                assert!(!job.commands.is_empty(), "a job without commands accepted");
                if let Some(path) = &job.path {
                    assert!(
                        paths.insert(path.clone()),
                        "duplicate path {path:?} accepted"
                    );
                }
            }
            let mut http_ids = HashSet::new();
            for job in &config.http_jobs {
                assert_eq!(job.id, job_id_from_name(&job.name), "JobHttp ID rule");
                assert!(
                    http_ids.insert(job.id.clone()),
                    "duplicate JobHttp ID accepted"
                );
            }
        }
        Err(err) => {
            assert!(!err.issues.is_empty(), "a failure without a problem");
            let _ = err.to_string();
        }
    }
}

// ----- schedule ----------------------------------------------------------------------------

/// The schedule grammar on arbitrary text. Checked: an accepted schedule's canonical text
/// parses back to the same value; `next_after` is strictly later and at second 0, for
/// instants from 1970 to 2199 (one of them taken from the input).
pub fn schedule(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(schedule) = text.parse::<Schedule>() else {
        return;
    };
    let canonical = schedule.to_string();
    let again: Schedule = canonical
        .parse()
        .unwrap_or_else(|err| panic!("canonical form {canonical:?} of {text:?} fails: {err}"));
    assert_eq!(again, schedule, "round trip of {text:?}");

    let seed = data.iter().fold(0u64, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u64::from(*b))
    });
    let from_input = i64::try_from(seed % 7_258_118_400).expect("below 2^63");
    let instants: [DateTime<Utc>; 4] = [
        Utc.timestamp_opt(0, 0).single().expect("epoch"),
        Utc.timestamp_opt(1_795_219_200, 999_999_999)
            .single()
            .expect("2026"),
        Utc.timestamp_opt(7_258_118_399, 0).single().expect("2199"),
        Utc.timestamp_opt(from_input, 0).single().expect("in range"),
    ];
    for t in instants {
        let next = schedule.next_after(t);
        assert!(next > t, "{canonical}: next_after({t}) = {next}");
        assert_eq!(
            (next.second(), next.nanosecond()),
            (0, 0),
            "{canonical}: {next}"
        );
    }
}

// ----- protocol frames ---------------------------------------------------------------------

/// Feeds `data` to `codec` in pieces of `piece` bytes; returns what it decoded before the
/// first error. `decode_eof` must refuse a partial frame.
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

/// Both frame decoders on arbitrary bytes. The first byte sets the size of the pieces the
/// rest is fed in (1 to 256), so frames split at every point are exercised. Checked: a
/// decoded message encodes back to a frame that decodes to the same message. Returns the
/// number of messages decoded.
pub fn proto_frames(data: &[u8]) -> usize {
    let Some((&first, rest)) = data.split_first() else {
        return 0;
    };
    let piece = usize::from(first) + 1;
    let mut decoded = 0;
    for message in feed::<_, RunnerMessage>(&mut ControllerCodec::new(), rest, piece) {
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
        decoded += 1;
    }
    for message in feed::<_, ControllerMessage>(&mut RunnerCodec::new(), rest, piece) {
        let mut frame = BytesMut::new();
        ControllerCodec::new()
            .encode(message.clone(), &mut frame)
            .expect("a decoded message encodes");
        let again = RunnerCodec::new()
            .decode(&mut frame)
            .expect("re-encoded frame decodes")
            .expect("one whole frame");
        assert_eq!(again, message);
        decoded += 1;
    }
    decoded
}

// ----- signatures --------------------------------------------------------------------------

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

/// The hex digits of `value` after an optional `prefix`, decoded, as the checks read it.
fn decoded(value: &str, prefix: &str) -> Option<Vec<u8>> {
    let value = value.trim();
    hex::decode(value.strip_prefix(prefix).unwrap_or(value)).ok()
}

/// The signature checks with arbitrary secrets, bodies and header values: the input is
/// split at its first three 0x00 bytes into secret, body, header value and a second value
/// (the sha1 one for codehost, the nonce for patchhost). Checked: a value is accepted only
/// when it is the right signature; an error's text never contains the expected hex; the
/// right signature, computed here, is always accepted.
pub fn signatures(data: &[u8]) {
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

    match verify_hmac_sha256(&[secret], body, "x-svc-sign", Some(&value)) {
        Ok(()) => assert_eq!(
            decoded(&value, "sha256=").as_deref(),
            Some(expected256.as_slice()),
            "hmac-sha256 accepted a wrong signature"
        ),
        Err(err) => assert!(
            !err.to_string().contains(&hex256),
            "an error echoes the MAC"
        ),
    }
    verify_hmac_sha256(&[secret], body, "x-svc-sign", Some(&hex256)).expect("right signature");
    verify_hmac_sha256(
        &[secret],
        body,
        "x-svc-sign",
        Some(&format!("sha256={hex256}")),
    )
    .expect("right prefixed signature");
    // codehost: the sha256 header wins; sha1 only when it is absent.
    let sha256 = (!value.trim().is_empty()).then_some(value.as_ref());
    match verify_codehost(&[secret], body, sha256, Some(&second)) {
        Ok(()) => {
            let right = match sha256 {
                Some(v) => decoded(v, "sha256=").as_deref() == Some(expected256.as_slice()),
                None => decoded(&second, "sha1=").as_deref() == Some(expected1.as_slice()),
            };
            assert!(right, "codehost accepted {value:?} / {second:?}");
        }
        Err(err) => {
            let text = err.to_string();
            assert!(
                !text.contains(&hex256) && !text.contains(&hex1),
                "an error echoes the MAC"
            );
        }
    }
    verify_codehost(&[secret], body, None, Some(&format!("sha1={hex1}"))).expect("right sha1");
    // patchhost: the secret part is taken as the base64 public key. Nobody knows the
    // private key of an arbitrary key, so acceptance is not expected, only no panic.
    let key = String::from_utf8_lossy(secret);
    let _ = verify_patchhost(&key, body, Some(value_bytes), Some(second_bytes));
    let _ = verify_patchhost(
        "uX7KWyyDNMaBma4aVbJ/cbUQpdjqczuCyK/HxzV/u+4=",
        body,
        Some(value_bytes),
        Some(second_bytes),
    );
}
