//! Property tests (proptest) of the pure functions the engine relies on:
//!
//! - calendar schedules: `next_after` is strictly after its input, on the grid (second 0,
//!   minute, hour and day in the schedule's lists), the first such instant, and monotonic;
//!   `Display` and `parse` round-trip;
//! - interval timers: `Timer::next_due` stays on the interval grid and is the first grid
//!   point strictly after now;
//! - the job ID rule: only `[A-Za-z0-9_-]`, as many characters as the name, idempotent.
//!
//! A failing case is shrunk and printed by proptest; `PROPTEST_CASES` raises the number
//! of cases (default 256 per property).

use std::time::Duration;

use chrono::{DateTime, Datelike, TimeDelta, TimeZone, Timelike, Utc, Weekday};
use proptest::prelude::*;
use svc_controller::config::job_id_from_name;
use svc_controller::time::schedule::{Schedule, TimeOfDay, Timer};
use svc_controller::time::timezone::Zone;

// ----- generators ------------------------------------------------------------------------

/// Seconds from 1970-01-01 to 2200-01-01.
const MAX_SECS: i64 = 7_258_118_400;

/// Any instant between 1970 and 2200, with nanoseconds.
fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    (0..MAX_SECS, 0..1_000_000_000u32).prop_map(|(secs, nanos)| {
        Utc.timestamp_opt(secs, nanos)
            .single()
            .expect("an instant in range")
    })
}

/// A sorted, non-empty list without duplicates of values below `below`.
fn sorted_set(below: u8, max_len: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::btree_set(0..below, 1..=max_len).prop_map(|set| set.into_iter().collect())
}

fn times() -> impl Strategy<Value = Vec<TimeOfDay>> {
    proptest::collection::btree_set((0..24u8, 0..60u8), 1..=6).prop_map(|set| {
        set.into_iter()
            .map(|(hour, minute)| TimeOfDay { hour, minute })
            .collect()
    })
}

const WEEK: [Weekday; 7] = [
    Weekday::Sun,
    Weekday::Mon,
    Weekday::Tue,
    Weekday::Wed,
    Weekday::Thu,
    Weekday::Fri,
    Weekday::Sat,
];

fn weekdays() -> impl Strategy<Value = Vec<Weekday>> {
    (1u8..128).prop_map(|mask| {
        WEEK.iter()
            .enumerate()
            .filter(|(index, _)| mask & (1 << index) != 0)
            .map(|(_, day)| *day)
            .collect()
    })
}

/// Any schedule as `Schedule::from_str` builds them: non-empty, sorted, deduplicated,
/// in-range lists.
fn schedule() -> impl Strategy<Value = Schedule> {
    prop_oneof![
        Just(Schedule::Minutely),
        sorted_set(60, 8).prop_map(|minutes| Schedule::Hourly { minutes }),
        times().prop_map(|times| Schedule::Daily { times }),
        (weekdays(), times()).prop_map(|(days, times)| Schedule::Weekly { days, times }),
        (sorted_set(31, 6), times()).prop_map(|(days, times)| Schedule::Monthly {
            days: days.into_iter().map(|d| d + 1).collect(),
            times,
        }),
    ]
}

/// Does `t` (at second 0) match `schedule`?
fn matches(schedule: &Schedule, t: DateTime<Utc>) -> bool {
    if t.second() != 0 || t.nanosecond() != 0 {
        return false;
    }
    let now = TimeOfDay {
        hour: t.hour() as u8,
        minute: t.minute() as u8,
    };
    match schedule {
        // Cron expressions have their own property below.
        Schedule::Cron(_) => false,
        Schedule::Minutely => true,
        Schedule::Hourly { minutes } => minutes.contains(&now.minute),
        Schedule::Daily { times } => times.contains(&now),
        Schedule::Weekly { days, times } => days.contains(&t.weekday()) && times.contains(&now),
        Schedule::Monthly { days, times } => {
            days.contains(&(t.day() as u8)) && times.contains(&now)
        }
    }
}

/// A schedule written the way people do: any case, blanks around the separators, short
/// weekday names, hours without a leading zero, lists in any order with repeats.
fn loose_text(schedule: &Schedule, seed: u64) -> String {
    let bit = |n: u32| seed >> (n % 64) & 1 == 1;
    let case = |text: &str, n: u32| {
        if bit(n) {
            text.to_ascii_uppercase()
        } else {
            text.to_owned()
        }
    };
    let sep = |n: u32| if bit(n) { " , " } else { "," };
    let at = |n: u32| if bit(n) { " @ " } else { "@" };
    let time = |t: &TimeOfDay, n: u32| {
        if bit(n) {
            format!("{}:{:02}", t.hour, t.minute)
        } else {
            t.to_string()
        }
    };
    let times_text = |times: &[TimeOfDay]| {
        let mut items: Vec<String> = times
            .iter()
            .enumerate()
            .map(|(i, t)| time(t, 7 + i as u32))
            .collect();
        if bit(3) {
            items.reverse();
        }
        if bit(4) {
            items.push(items[0].clone());
        }
        items.join(sep(5))
    };
    match schedule {
        Schedule::Cron(_) => schedule.to_string(),
        Schedule::Minutely => case("minutely", 0),
        Schedule::Hourly { minutes } => {
            let mut items: Vec<String> = minutes.iter().map(u8::to_string).collect();
            if bit(3) {
                items.reverse();
            }
            format!("{}{}{}", case("hourly", 0), at(1), items.join(sep(5)))
        }
        Schedule::Daily { times } => {
            format!("{}{}{}", case("daily", 0), at(1), times_text(times))
        }
        Schedule::Weekly { days, times } => {
            let names: Vec<String> = days
                .iter()
                .enumerate()
                .map(|(i, day)| {
                    let long = match day {
                        Weekday::Sun => "sunday",
                        Weekday::Mon => "monday",
                        Weekday::Tue => "tuesday",
                        Weekday::Wed => "wednesday",
                        Weekday::Thu => "thursday",
                        Weekday::Fri => "friday",
                        Weekday::Sat => "saturday",
                    };
                    let name = if bit(20 + i as u32) { &long[..3] } else { long };
                    case(name, 30 + i as u32)
                })
                .collect();
            format!(
                "{}{}{}{}{}",
                case("weekly", 0),
                at(1),
                names.join(sep(6)),
                at(2),
                times_text(times)
            )
        }
        Schedule::Monthly { days, times } => {
            let items: Vec<String> = days.iter().map(u8::to_string).collect();
            format!(
                "{}{}{}{}{}",
                case("monthly", 0),
                at(1),
                items.join(sep(6)),
                at(2),
                times_text(times)
            )
        }
    }
}

// ----- schedules -------------------------------------------------------------------------

proptest! {
    #[test]
    fn next_after_is_strictly_later_and_on_the_grid(schedule in schedule(), t in instant()) {
        let next = schedule.next_after(t);
        prop_assert!(next > t, "{schedule}: next_after({t}) = {next} is not after it");
        prop_assert_eq!(next.second(), 0, "{}: {} is not at second 0", schedule, next);
        prop_assert_eq!(next.nanosecond(), 0, "{}: {} has nanoseconds", schedule, next);
        prop_assert!(
            matches(&schedule, next),
            "{schedule}: next_after({t}) = {next} is not one of the schedule's instants"
        );
    }

    #[test]
    fn next_after_skips_no_matching_instant(schedule in schedule(), t in instant()) {
        let next = schedule.next_after(t);
        // Walk the whole minutes between t and next (when the gap is at most 3 days, which
        // covers every schedule but sparse weekly and monthly ones) looking for an earlier
        // match.
        let mut candidate = t
            .with_second(0)
            .and_then(|c| c.with_nanosecond(0))
            .expect("whole minute")
            + TimeDelta::minutes(1);
        let mut steps = 0;
        while candidate < next && steps < 3 * 24 * 60 {
            prop_assert!(
                !matches(&schedule, candidate),
                "{schedule}: next_after({t}) = {next} skips the earlier match {candidate}"
            );
            candidate += TimeDelta::minutes(1);
            steps += 1;
        }
    }

    #[test]
    fn next_after_is_monotonic(schedule in schedule(), a in instant(), b in instant()) {
        let (early, late) = if a <= b { (a, b) } else { (b, a) };
        let (next_early, next_late) = (schedule.next_after(early), schedule.next_after(late));
        prop_assert!(
            next_early <= next_late,
            "{schedule}: {early} -> {next_early} but {late} -> {next_late}"
        );
    }

    #[test]
    fn next_after_close_instants_is_monotonic(
        schedule in schedule(),
        t in instant(),
        gap_ms in 0i64..180_000,
    ) {
        // Instants a few seconds or minutes apart, around the same grid points.
        let later = t + TimeDelta::milliseconds(gap_ms);
        prop_assert!(schedule.next_after(t) <= schedule.next_after(later));
    }

    #[test]
    fn display_and_parse_round_trip(schedule in schedule()) {
        let text = schedule.to_string();
        let parsed: Schedule = text
            .parse()
            .map_err(|err| TestCaseError::fail(format!("{text:?} does not parse: {err}")))?;
        prop_assert_eq!(&parsed, &schedule, "through {:?}", text);
        prop_assert_eq!(parsed.to_string(), text);
    }

    #[test]
    fn loose_text_parses_to_the_canonical_schedule(schedule in schedule(), seed in any::<u64>()) {
        let text = loose_text(&schedule, seed);
        let parsed: Schedule = text
            .parse()
            .map_err(|err| TestCaseError::fail(format!("{text:?} does not parse: {err}")))?;
        prop_assert_eq!(parsed, schedule, "from {:?}", text);
    }

    #[test]
    fn parse_never_panics_and_accepted_text_is_canonical(text in "\\PC{0,40}") {
        if let Ok(schedule) = text.parse::<Schedule>() {
            let canonical = schedule.to_string();
            let again: Schedule = canonical
                .parse()
                .map_err(|err| TestCaseError::fail(format!("canonical {canonical:?}: {err}")))?;
            prop_assert_eq!(again, schedule, "from {:?}", text);
        }
    }
}

// ----- interval timers -------------------------------------------------------------------

fn nanos(d: TimeDelta) -> i128 {
    i128::from(
        d.num_nanoseconds()
            .expect("a gap that fits in i64 nanoseconds"),
    )
}

proptest! {
    #[test]
    fn next_due_stays_on_the_interval_grid(
        interval_ms in 0u64..400_000_000,
        previous in instant(),
        // From a little before the previous due time to about three years after it.
        offset_ms in -5_000_000i64..100_000_000_000,
    ) {
        let interval = Duration::from_millis(interval_ms);
        let timer = Timer::Interval(interval);
        let now = previous + TimeDelta::milliseconds(offset_ms);
        let next = timer.next_due(previous, now);
        let step = i128::try_from(interval.max(Duration::from_secs(1)).as_nanos())
            .expect("step fits");
        prop_assert!(next > now, "next_due({previous}, {now}) = {next} is not after now");
        let from_previous = nanos(next - previous);
        prop_assert!(from_previous > 0, "{next} is not after the previous due {previous}");
        prop_assert_eq!(
            from_previous % step,
            0,
            "{} is not previous due {} plus a whole number of {:?} steps",
            next,
            previous,
            interval
        );
        // The first grid point after now: one step earlier is not after now.
        prop_assert!(
            from_previous == step || nanos(next - now) <= step,
            "next_due({previous}, {now}) = {next} skips a grid point after now"
        );
    }

    #[test]
    fn next_due_of_a_schedule_is_after_now_and_previous(
        schedule in schedule(),
        previous in instant(),
        now in instant(),
    ) {
        let timer = Timer::Schedule(schedule.clone(), Zone::utc());
        let next = timer.next_due(previous, now);
        prop_assert!(next > now && next > previous, "{schedule}: {previous}, {now} -> {next}");
        prop_assert!(matches(&schedule, next));
    }
}

// ----- job IDs ---------------------------------------------------------------------------

proptest! {
    #[test]
    fn job_id_rule(name in any::<String>()) {
        let id = job_id_from_name(&name);
        prop_assert!(
            id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{name:?} -> {id:?} holds other characters"
        );
        prop_assert_eq!(id.chars().count(), name.chars().count(), "{:?} -> {:?}", name, id);
        prop_assert_eq!(job_id_from_name(&id), id.clone(), "not idempotent for {:?}", name);
        // Characters allowed in an ID are kept as they are, in place.
        for (from, to) in name.chars().zip(id.chars()) {
            if from.is_ascii_alphanumeric() || from == '-' || from == '_' {
                prop_assert_eq!(from, to);
            } else {
                prop_assert_eq!(to, '_');
            }
        }
    }

    #[test]
    fn job_id_rule_on_ascii_names(name in "[ -~\\t]{0,40}") {
        let id = job_id_from_name(&name);
        prop_assert_eq!(id.len(), name.len());
        prop_assert_eq!(job_id_from_name(&id), id);
    }
}

#[test]
fn generators_cover_every_schedule_form() {
    // Guards the generators above: the round trip of each documented example holds.
    for text in [
        "minutely",
        "hourly@0,30",
        "daily@06:00,18:30",
        "weekly@mon,fri@07:15",
        "monthly@1,15",
    ] {
        let schedule: Schedule = text.parse().expect("documented example parses");
        let again: Schedule = schedule.to_string().parse().expect("canonical form parses");
        assert_eq!(again, schedule, "{text}");
        let start = Utc
            .with_ymd_and_hms(2026, 11, 20, 23, 30, 0)
            .single()
            .expect("valid");
        assert!(matches(&schedule, schedule.next_after(start)), "{text}");
    }
}

// ----- cron expressions in time zones, against a brute-force reference -------------------

/// One cron field as the reference reads it: `*`, `*/k`, `a`, `a-b`, `a-b/k`, and
/// comma-separated lists of those.
fn field_matches(field: &str, value: u32) -> bool {
    field.split(',').any(|part| {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, step.parse::<u32>().unwrap_or(1)),
            None => (part, 1),
        };
        let (low, high) = match range {
            "*" => (0, u32::MAX),
            _ => match range.split_once('-') {
                Some((a, b)) => (a.parse().unwrap_or(0), b.parse().unwrap_or(0)),
                None => {
                    let a: u32 = range.parse().unwrap_or(0);
                    (a, if step > 1 { u32::MAX } else { a })
                }
            },
        };
        let first = if range == "*" { 0 } else { low };
        value >= first && value <= high && (value - first) % step == 0
    })
}

/// Whether a 5-field expression matches a wall-clock minute (Vixie cron: when both day
/// fields are restricted, either may match).
fn reference_matches(fields: &[String; 5], civil: chrono::NaiveDateTime) -> bool {
    let [minute, hour, dom, month, dow] = fields;
    let day_of_month = field_matches(dom, civil.day());
    let day_of_week = field_matches(dow, civil.weekday().num_days_from_sunday());
    let day = match (dom.as_str(), dow.as_str()) {
        ("*", _) | (_, "*") => day_of_month && day_of_week,
        _ => day_of_month || day_of_week,
    };
    field_matches(minute, civil.minute())
        && field_matches(hour, civil.hour())
        && field_matches(month, civil.month())
        && day
}

/// Times of day, as Vixie cron decides: neither the minute nor the hour a wildcard.
fn reference_fixed(fields: &[String; 5]) -> bool {
    !fields[0].starts_with('*') && !fields[1].starts_with('*')
}

/// The first slot after `after` found by walking real time minute by minute, applying
/// the stated rules directly: a fixed time runs at the first occurrence of its wall-clock
/// time, or at the first minute after a gap that swallowed it; anything else runs at every
/// minute whose wall-clock time matches.
fn reference_next(
    fields: &[String; 5],
    zone: &Zone,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let fixed = reference_fixed(fields);
    let minute = TimeDelta::minutes(1);
    let start = (after - TimeDelta::hours(4))
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))?;
    let mut t = start;
    let mut previous: Option<chrono::NaiveDateTime> = None;
    let mut latest: Option<chrono::NaiveDateTime> = None;
    while t <= after + TimeDelta::days(4) {
        let civil = zone.civil(t);
        let mut slot = false;
        if let Some(p) = previous {
            if fixed && civil - p > minute {
                let mut skipped = p + minute;
                while skipped < civil {
                    slot |= reference_matches(fields, skipped);
                    skipped += minute;
                }
            }
        }
        if reference_matches(fields, civil) {
            let first_time = latest.is_none_or(|l| civil > l);
            slot |= !fixed || first_time;
        }
        if slot && t > after {
            return Some(t);
        }
        latest = Some(latest.map_or(civil, |l| l.max(civil)));
        previous = Some(civil);
        t += minute;
    }
    None
}

fn cron_field(max: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("*".to_string()),
        2 => (0..=max).prop_map(|a| a.to_string()),
        1 => (2..=max.min(30)).prop_map(|k| format!("*/{k}")),
        1 => (0..=max, 0..=max).prop_map(move |(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        1 => (0..=max, 0..=max).prop_map(|(a, b)| if a == b { a.to_string() } else { format!("{a},{b}") }),
        1 => (0..=max / 2, 2..=5u32).prop_map(move |(a, k)| format!("{a}-{max}/{k}")),
    ]
}

fn cron_fields() -> impl Strategy<Value = [String; 5]> {
    (
        cron_field(59),
        cron_field(23),
        prop_oneof![4 => Just("*".to_string()), 1 => (1..=28u32).prop_map(|d| d.to_string())],
        Just("*".to_string()),
        prop_oneof![4 => Just("*".to_string()), 1 => (0..=6u32).prop_map(|d| d.to_string()), 1 => Just("1-5".to_string())],
    )
        .prop_map(|(m, h, dom, mon, dow)| [m, h, dom, mon, dow])
}

/// Instants in 2026 near the daylight-saving changes of the zones below, or anywhere.
fn near_a_change() -> impl Strategy<Value = DateTime<Utc>> {
    let changes: Vec<i64> = [
        (2026, 3, 8, 7, 0),    // New York, spring
        (2026, 11, 1, 6, 0),   // New York, fall
        (2026, 3, 29, 1, 0),   // Berlin, spring
        (2026, 10, 25, 1, 0),  // Berlin, fall
        (2026, 4, 4, 15, 0),   // Lord Howe, fall (30 minutes)
        (2026, 10, 3, 15, 30), // Lord Howe, spring (30 minutes)
    ]
    .iter()
    .map(|&(y, mo, d, h, mi)| {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .expect("valid")
            .timestamp()
    })
    .collect();
    let year = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .expect("valid")
        .timestamp();
    prop_oneof![
        3 => (prop::sample::select(changes), -36 * 3600i64..36 * 3600).prop_map(|(c, d)| c + d),
        1 => (0..365 * 86_400i64).prop_map(move |d| year + d),
    ]
    .prop_map(|secs| Utc.timestamp_opt(secs, 0).single().expect("valid"))
}

proptest! {
    #![proptest_config({
        let cases: u32 =
            std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(96);
        // A case whose reference finds no slot within its days is set aside (about one
        // in five): as many may be, as there are cases, however many are asked for.
        ProptestConfig { max_global_rejects: cases.max(1024), ..ProptestConfig::with_cases(cases) }
    })]

    #[test]
    fn cron_in_a_zone_agrees_with_the_brute_force_reference(
        fields in cron_fields(),
        zone_name in prop::sample::select(vec![
            "UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
        ]),
        after in near_a_change(),
    ) {
        let zone = Zone::parse(zone_name).expect("a known zone");
        let text = fields.join(" ");
        let schedule: Schedule = text.parse().expect("generated expressions parse");
        let expected = reference_next(&fields, &zone, after);
        prop_assume!(expected.is_some());
        let got = schedule.next_in(after, &zone);
        prop_assert_eq!(Some(got), expected, "{} in {} after {}", text, zone_name, after);
    }
}
