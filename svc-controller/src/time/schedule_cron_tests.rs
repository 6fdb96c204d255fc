//! Unit tests of cron expressions and of calendar schedules across daylight-saving
//! changes (New York, Berlin, Lord Howe's half hour).

use super::tests::{at, err, sched};
use super::*;

fn zone(name: &str) -> Zone {
    Zone::parse(name).expect("a known zone")
}

/// The next `n` slots of `text` in `zone` after `after`.
fn slots(text: &str, zone_name: &str, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let schedule = sched(text);
    let zone = zone(zone_name);
    let mut out = Vec::new();
    let mut t = after;
    for _ in 0..n {
        t = schedule.next_in(t, &zone);
        out.push(t);
    }
    out
}

#[test]
fn cron_forms() {
    for (text, after, expected) in [
        (
            "*/15 * * * *",
            at(2026, 1, 1, 0, 7, 0),
            at(2026, 1, 1, 0, 15, 0),
        ),
        (
            "30 */2 * * *",
            at(2026, 1, 1, 1, 0, 0),
            at(2026, 1, 1, 2, 30, 0),
        ),
        (
            "0 9 * * MON-FRI",
            at(2026, 1, 3, 0, 0, 0),
            at(2026, 1, 5, 9, 0, 0),
        ),
        (
            "0 9 * JAN,jul SUN",
            at(2026, 1, 31, 0, 0, 0),
            at(2026, 7, 5, 9, 0, 0),
        ),
        (
            "5,10-12 0 1 * *",
            at(2026, 1, 1, 0, 10, 30),
            at(2026, 1, 1, 0, 11, 0),
        ),
        (
            "30 * * * * *",
            at(2026, 1, 1, 0, 0, 31),
            at(2026, 1, 1, 0, 1, 30),
        ),
        (
            "0 0 L * *",
            at(2026, 2, 10, 0, 0, 0),
            at(2026, 2, 28, 0, 0, 0),
        ),
        (
            "0 0 29 2 *",
            at(2026, 1, 1, 0, 0, 0),
            at(2028, 2, 29, 0, 0, 0),
        ),
        (
            "0 0 * * 5#3",
            at(2026, 1, 1, 0, 0, 0),
            at(2026, 1, 16, 0, 0, 0),
        ),
        (
            "0 0 * * 5L",
            at(2026, 1, 1, 0, 0, 0),
            at(2026, 1, 30, 0, 0, 0),
        ),
        // The 15th of August 2026 is a Saturday: the nearest weekday is Friday the 14th.
        (
            "0 0 15W * *",
            at(2026, 8, 1, 0, 0, 0),
            at(2026, 8, 14, 0, 0, 0),
        ),
        ("@hourly", at(2026, 1, 1, 0, 0, 0), at(2026, 1, 1, 1, 0, 0)),
        ("@daily", at(2026, 1, 1, 0, 0, 0), at(2026, 1, 2, 0, 0, 0)),
        ("@weekly", at(2026, 1, 1, 0, 0, 0), at(2026, 1, 4, 0, 0, 0)),
        ("@monthly", at(2026, 1, 1, 0, 0, 0), at(2026, 2, 1, 0, 0, 0)),
        ("@yearly", at(2026, 1, 1, 0, 0, 0), at(2027, 1, 1, 0, 0, 0)),
    ] {
        assert_eq!(
            sched(text).next_after(after),
            expected,
            "{text} after {after}"
        );
        assert_eq!(
            sched(text).to_string(),
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    // Day of month and day of week: either matches, as in Vixie cron (the 13th, and
    // every Friday).
    let either = slots("0 0 13 * FRI", "UTC", at(2026, 2, 1, 0, 0, 0), 3);
    assert_eq!(
        either,
        [
            at(2026, 2, 6, 0, 0, 0),
            at(2026, 2, 13, 0, 0, 0),
            at(2026, 2, 20, 0, 0, 0)
        ]
    );
}

#[test]
fn cron_errors_name_the_field_and_value() {
    assert!(
        err("61 * * * *").starts_with("cron field 1 (minute) is invalid: \"61\""),
        "{}",
        err("61 * * * *")
    );
    assert!(err("0 24 * * *").starts_with("cron field 2 (hour) is invalid: \"24\""));
    assert!(err("0 0 32 * *").starts_with("cron field 3 (day of month) is invalid: \"32\""));
    assert!(err("0 0 * 13 *").starts_with("cron field 4 (month) is invalid: \"13\""));
    assert!(err("0 0 * * FUN").starts_with("cron field 5 (day of week) is invalid: \"FUN\""));
    assert!(err("99 0 0 * * *").starts_with("cron field 1 (second) is invalid: \"99\""));
    assert!(err("* * *").contains("has 3"));
    assert!(err("* * * * * * *").contains("has 7"));
    assert!(err("@sometimes").contains("unknown nickname"));
    assert!(err("yearly").contains("unknown schedule \"yearly\""));
}

/// Each field is valid alone and no date has them all: refused at load, rather than
/// a job that never runs (and a timer far in the future).
#[test]
fn a_cron_expression_that_matches_no_date_is_an_error() {
    for text in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 0 31 2 *"] {
        assert!(
            err(text).contains("matches no date"),
            "{text}: {}",
            err(text)
        );
    }
    // The 29th of February comes, every four years.
    assert_eq!(
        sched("0 0 29 2 *").next_in(at(2026, 1, 5, 0, 0, 0), &Zone::utc()),
        at(2028, 2, 29, 0, 0, 0)
    );
}

/// New York, 2026: spring forward on March 8 at 02:00 EST (07:00 UTC), fall back on
/// November 1 at 02:00 EDT (06:00 UTC).
#[test]
fn new_york_across_both_changes() {
    // 02:30 does not exist on March 8: once, at the end of the gap (03:00 EDT).
    assert_eq!(
        slots(
            "30 2 * * *",
            "America/New_York",
            at(2026, 3, 7, 12, 0, 0),
            2
        ),
        [at(2026, 3, 8, 7, 0, 0), at(2026, 3, 9, 6, 30, 0)]
    );
    // Upstream's grammar follows the same rules.
    assert_eq!(
        slots(
            "daily@02:30",
            "America/New_York",
            at(2026, 3, 7, 12, 0, 0),
            1
        ),
        [at(2026, 3, 8, 7, 0, 0)]
    );
    // 01:30 happens twice on November 1: once, at its first occurrence (EDT).
    assert_eq!(
        slots(
            "30 1 * * *",
            "America/New_York",
            at(2026, 10, 31, 12, 0, 0),
            2
        ),
        [at(2026, 11, 1, 5, 30, 0), at(2026, 11, 2, 6, 30, 0)]
    );
    // Every half hour follows the wall clock through both passes.
    assert_eq!(
        slots(
            "*/30 * * * *",
            "America/New_York",
            at(2026, 11, 1, 5, 20, 0),
            4
        ),
        [
            at(2026, 11, 1, 5, 30, 0),
            at(2026, 11, 1, 6, 0, 0),
            at(2026, 11, 1, 6, 30, 0),
            at(2026, 11, 1, 7, 0, 0)
        ]
    );
    // And skips the missing hour in spring: 01:30 EST, then 03:00 EDT.
    assert_eq!(
        slots(
            "*/30 * * * *",
            "America/New_York",
            at(2026, 3, 8, 6, 20, 0),
            2
        ),
        [at(2026, 3, 8, 6, 30, 0), at(2026, 3, 8, 7, 0, 0)]
    );
}

/// Several hours or minutes are times of day too, as one: `30 2,14 * * *` keeps its
/// 02:30 through the spring gap, and runs 01:30 once in the fall overlap, like
/// `daily@02:30,14:30`.
#[test]
fn lists_and_ranges_of_hours_are_times_of_day() {
    for text in ["30 2,14 * * *", "daily@02:30,14:30"] {
        assert_eq!(
            slots(text, "America/New_York", at(2026, 3, 7, 20, 0, 0), 3),
            [
                at(2026, 3, 8, 7, 0, 0),
                at(2026, 3, 8, 18, 30, 0),
                at(2026, 3, 9, 6, 30, 0)
            ],
            "{text}"
        );
    }
    assert_eq!(
        slots(
            "30 1-2 * * *",
            "America/New_York",
            at(2026, 10, 31, 20, 0, 0),
            3
        ),
        [
            at(2026, 11, 1, 5, 30, 0),
            at(2026, 11, 1, 7, 30, 0),
            at(2026, 11, 2, 6, 30, 0)
        ],
        "01:30 EDT once, then 02:30 EST"
    );
    assert!(sched("0 8-17 * * 1-5").is_fixed_time());
    assert!(sched("@daily").is_fixed_time());
    for text in [
        "*/15 * * * *",
        "0 * * * *",
        "30 */2 * * *",
        "@hourly",
        "hourly",
    ] {
        assert!(!sched(text).is_fixed_time(), "{text}");
    }
}

/// Berlin, 2026: March 29 02:00 CET -> 03:00 CEST (01:00 UTC); October 25 03:00 CEST
/// -> 02:00 CET (01:00 UTC).
#[test]
fn berlin_across_both_changes() {
    assert_eq!(
        slots("0 2 * * *", "Europe/Berlin", at(2026, 3, 28, 12, 0, 0), 2),
        [at(2026, 3, 29, 1, 0, 0), at(2026, 3, 30, 0, 0, 0)]
    );
    assert_eq!(
        slots("30 2 * * *", "Europe/Berlin", at(2026, 10, 24, 12, 0, 0), 2),
        [at(2026, 10, 25, 0, 30, 0), at(2026, 10, 26, 1, 30, 0)]
    );
    assert_eq!(
        slots("0 12 * * *", "Europe/Berlin", at(2026, 7, 1, 0, 0, 0), 1),
        [at(2026, 7, 1, 10, 0, 0)]
    );
}

/// Lord Howe Island shifts by 30 minutes: April 5 2026 02:00 (+11) -> 01:30 (+10:30)
/// at 15:00 UTC the day before; October 4 2026 02:00 (+10:30) -> 02:30 (+11) at 15:30
/// UTC the day before.
#[test]
fn lord_howe_half_hour_changes() {
    assert_eq!(
        slots(
            "15 2 * * *",
            "Australia/Lord_Howe",
            at(2026, 10, 3, 0, 0, 0),
            2
        ),
        [at(2026, 10, 3, 15, 30, 0), at(2026, 10, 4, 15, 15, 0)]
    );
    assert_eq!(
        slots(
            "45 1 * * *",
            "Australia/Lord_Howe",
            at(2026, 4, 4, 0, 0, 0),
            2
        ),
        [at(2026, 4, 4, 14, 45, 0), at(2026, 4, 5, 15, 15, 0)]
    );
    // Every 10 minutes: 01:40 and 01:50 come twice, 30 minutes apart.
    assert_eq!(
        slots(
            "*/10 * * * *",
            "Australia/Lord_Howe",
            at(2026, 4, 4, 14, 35, 0),
            6
        ),
        [
            at(2026, 4, 4, 14, 40, 0),
            at(2026, 4, 4, 14, 50, 0),
            at(2026, 4, 4, 15, 0, 0),
            at(2026, 4, 4, 15, 10, 0),
            at(2026, 4, 4, 15, 20, 0),
            at(2026, 4, 4, 15, 30, 0),
        ]
    );
}
