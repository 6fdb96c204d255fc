//! The schedule grammar on arbitrary text, and `next_after` of what it accepts.
//!
//! Checked: no panic; an accepted schedule's canonical text (`Display`) parses back to the
//! same value; `next_after` is strictly later, at second 0, for instants from 1970 to
//! 2199 (one of them taken from the input).
#![no_main]

use chrono::{DateTime, TimeZone, Timelike, Utc};
use libfuzzer_sys::fuzz_target;
use svc_controller::schedule::Schedule;

fuzz_target!(|data: &[u8]| {
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
    let from_input = (seed % 7_258_118_400) as i64;
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
});
