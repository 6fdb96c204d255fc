//! Time zones (IANA names, through jiff and its zone database) and the rules that turn a
//! schedule's wall-clock slots into instants across daylight-saving changes:
//!
//! - a slot whose wall-clock time does not exist (a spring-forward gap) runs once, at the
//!   first instant after the gap, when it is a fixed time of day (as Vixie cron decides:
//!   neither minute nor hour is a wildcard); a slot of an expression with a wildcard
//!   minute or hour is skipped there (its next slot follows);
//! - a wall-clock time that happens twice (a fall-back overlap) runs once, at its first
//!   occurrence, when it is a fixed time of day; an expression with a wildcard minute or
//!   hour follows the wall clock through both passes;
//! - intervals count real elapsed time and never look at a zone.
//!
//! Schedules compute wall-clock slots as plain civil times ([`NaiveDateTime`]); this
//! module maps them to instants ([`DateTime<Utc>`]).

use std::fmt;

use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use jiff::tz::{AmbiguousOffset, TimeZone};

/// How far ahead of now the search below looks for offset changes: farther than any
/// slot that an overlap or a gap can move (today's zones shift by 30 minutes to 2 hours).
const MAX_SHIFT_HOURS: i64 = 3;

/// How many wall-clock slots a search looks at before it gives up (an expression that
/// matches only in a far year, or a zone whose every candidate falls in gaps).
const MAX_SLOTS: usize = 100_000;

/// How an instant is written wherever svc writes one (state files, the API, logs,
/// notifications, previews): RFC 3339 in UTC, whole seconds, `Z`, as upstream does.
pub fn utc_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A time zone by its IANA name (`Europe/Berlin`), or UTC.
#[derive(Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name)
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl Default for Zone {
    fn default() -> Zone {
        Zone::utc()
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Zone {
    /// UTC, the default.
    pub fn utc() -> Zone {
        Zone {
            name: "UTC".to_string(),
            tz: TimeZone::UTC,
        }
    }

    /// The zone an IANA name names (`America/New_York`; `UTC`), or why not.
    pub fn parse(name: &str) -> Result<Zone, String> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("utc") {
            return Ok(Zone::utc());
        }
        match TimeZone::get(name) {
            Ok(tz) => Ok(Zone {
                name: tz.iana_name().unwrap_or(name).to_string(),
                tz,
            }),
            Err(_) => Err(format!(
                "unknown time zone {name:?} (expected an IANA name such as Europe/Berlin, \
                 America/New_York or UTC)"
            )),
        }
    }

    /// Its IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_utc(&self) -> bool {
        self.tz == TimeZone::UTC
    }

    /// The wall-clock time of `t` in this zone.
    pub fn civil(&self, t: DateTime<Utc>) -> NaiveDateTime {
        match to_timestamp(t) {
            Some(ts) => from_civil(self.tz.to_datetime(ts)).unwrap_or(t.naive_utc()),
            None => t.naive_utc(),
        }
    }

    /// The offset from UTC at `t`, in seconds.
    pub fn offset_seconds(&self, t: DateTime<Utc>) -> i32 {
        to_timestamp(t).map_or(0, |ts| self.tz.to_offset(ts).seconds())
    }

    /// The instants a wall-clock slot names here: one normally; in a gap the first
    /// instant after it for a fixed time of day, none otherwise; in an overlap the first
    /// occurrence for a fixed time of day, both otherwise.
    pub fn instants(&self, civil: NaiveDateTime, fixed_time: bool) -> Vec<DateTime<Utc>> {
        let Some(dt) = to_civil(civil) else {
            return Vec::new();
        };
        let ambiguous = self.tz.to_ambiguous_timestamp(dt);
        let at = |offset: jiff::tz::Offset| offset.to_timestamp(dt).ok().and_then(from_timestamp);
        match ambiguous.offset() {
            AmbiguousOffset::Unambiguous { offset } => at(offset).into_iter().collect(),
            AmbiguousOffset::Gap { after, .. } => {
                if !fixed_time {
                    return Vec::new();
                }
                // Read with the offset after the gap, the time lies before the
                // transition; the transition that follows is the gap's end.
                at(after)
                    .and_then(to_timestamp)
                    .and_then(|ts| self.tz.following(ts).next())
                    .and_then(|transition| from_timestamp(transition.timestamp()))
                    .into_iter()
                    .collect()
            }
            AmbiguousOffset::Fold { before, after } => {
                let first = at(before);
                if fixed_time {
                    first.into_iter().collect()
                } else {
                    first.into_iter().chain(at(after)).collect()
                }
            }
        }
    }

    /// The smallest and the largest offset in force from `from` to `to`, in seconds.
    fn offsets_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> (i32, i32) {
        let first = self.offset_seconds(from);
        let (mut low, mut high) = (first, first);
        if let (Some(from), Some(to)) = (to_timestamp(from), to_timestamp(to)) {
            let changes = self.tz.following(from);
            for change in changes.take_while(|change| change.timestamp() <= to) {
                let offset = change.offset().seconds();
                (low, high) = (low.min(offset), high.max(offset));
            }
        }
        (low, high)
    }

    /// The first slot strictly after `after`: `next_civil(c)` gives the first wall-clock
    /// slot strictly after the civil time `c` (or `None` when there is none), mapped to
    /// instants by [`Zone::instants`]. `None` when no slot is found within the search's
    /// bounds.
    pub fn next_slot(
        &self,
        after: DateTime<Utc>,
        fixed_time: bool,
        next_civil: impl Fn(NaiveDateTime) -> Option<NaiveDateTime>,
    ) -> Option<DateTime<Utc>> {
        // Around an offset change, wall clock and instants are out of step by up to the
        // spread of the offsets in force from now on: a slot whose wall-clock time reads
        // earlier than now's may lie ahead (the second pass of an overlap), so the search
        // starts at now read with the smallest of them; and a slot that reads later than
        // the best found may come before it, by at most the spread. Without a change,
        // both are nothing: the first slot found is the one.
        let (low, high) = self.offsets_between(after, after + TimeDelta::hours(MAX_SHIFT_HOURS));
        let mut civil = after.naive_utc() + TimeDelta::seconds(low.into());
        let spread = TimeDelta::seconds((high - low).into());
        // The best instant so far, and its wall-clock time.
        let mut best: Option<(DateTime<Utc>, NaiveDateTime)> = None;
        for _ in 0..MAX_SLOTS {
            let Some(next) = next_civil(civil) else {
                break;
            };
            civil = next;
            if let Some((_, best_civil)) = best
                && civil > best_civil + spread
            {
                break;
            }
            for instant in self.instants(civil, fixed_time) {
                if instant > after && best.is_none_or(|(b, _)| instant < b) {
                    best = Some((instant, self.civil(instant)));
                }
            }
            // No offset change ahead: nothing later on the wall clock comes earlier, so
            // the search need not look at the next slot to know.
            if spread.is_zero() && best.is_some() {
                break;
            }
        }
        best.map(|(instant, _)| instant)
    }
}

fn to_timestamp(t: DateTime<Utc>) -> Option<jiff::Timestamp> {
    jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32).ok()
}

fn from_timestamp(ts: jiff::Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(ts.as_second(), ts.subsec_nanosecond().max(0) as u32)
}

fn to_civil(t: NaiveDateTime) -> Option<jiff::civil::DateTime> {
    use chrono::{Datelike, Timelike};
    jiff::civil::DateTime::new(
        i16::try_from(t.year()).ok()?,
        i8::try_from(t.month()).ok()?,
        i8::try_from(t.day()).ok()?,
        i8::try_from(t.hour()).ok()?,
        i8::try_from(t.minute()).ok()?,
        i8::try_from(t.second()).ok()?,
        i32::try_from(t.nanosecond()).ok()?,
    )
    .ok()
}

fn from_civil(dt: jiff::civil::DateTime) -> Option<NaiveDateTime> {
    chrono::NaiveDate::from_ymd_opt(i32::from(dt.year()), dt.month() as u32, dt.day() as u32)?
        .and_hms_nano_opt(
            dt.hour() as u32,
            dt.minute() as u32,
            dt.second() as u32,
            dt.subsec_nanosecond().max(0) as u32,
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone as _, Timelike as _};

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .expect("valid")
    }

    fn civil(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
        utc(y, mo, d, h, mi).naive_utc()
    }

    #[test]
    fn names_and_errors() {
        assert_eq!(Zone::parse("utc").expect("utc").name(), "UTC");
        assert_eq!(
            Zone::parse("Europe/Berlin").expect("berlin").name(),
            "Europe/Berlin"
        );
        let err = Zone::parse("Mars/Olympus").expect_err("unknown");
        assert!(
            err.contains("Mars/Olympus") && err.contains("IANA"),
            "{err}"
        );
    }

    /// Every second, from half an hour before New York falls back (06:00 UTC on
    /// 2026-11-01): the next second, found by looking at no more than the two hours of
    /// wall-clock seconds the overlap can reorder, and one slot away from a change.
    #[test]
    fn the_search_looks_only_as_far_as_an_offset_change_can_reorder() {
        let zone = Zone::parse("America/New_York").expect("a known zone");
        for (after, most) in [
            (utc(2026, 11, 1, 5, 30), 2 * 3600 + 2),
            (utc(2026, 7, 1, 12, 0), 1),
        ] {
            let looked = std::cell::Cell::new(0);
            let every_second = |c: NaiveDateTime| {
                looked.set(looked.get() + 1);
                Some(c.with_nanosecond(0)? + TimeDelta::seconds(1))
            };
            let next = zone.next_slot(after, false, every_second);
            assert_eq!(next, Some(after + TimeDelta::seconds(1)));
            assert!(
                looked.get() <= most,
                "{} slots looked at after {after}",
                looked.get()
            );
        }
    }

    /// New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    #[test]
    fn a_gap_runs_a_fixed_time_once_at_its_end_and_skips_other_slots() {
        let ny = Zone::parse("America/New_York").expect("zone");
        assert_eq!(
            ny.instants(civil(2026, 3, 8, 2, 30), true),
            [utc(2026, 3, 8, 7, 0)]
        );
        assert!(ny.instants(civil(2026, 3, 8, 2, 30), false).is_empty());
        assert_eq!(
            ny.instants(civil(2026, 3, 8, 3, 30), true),
            [utc(2026, 3, 8, 7, 30)]
        );
    }

    /// New York, 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens at 05:30
    /// and 06:30 UTC.
    #[test]
    fn an_overlap_runs_a_fixed_time_at_its_first_occurrence_and_other_slots_twice() {
        let ny = Zone::parse("America/New_York").expect("zone");
        let slot = civil(2026, 11, 1, 1, 30);
        assert_eq!(ny.instants(slot, true), [utc(2026, 11, 1, 5, 30)]);
        assert_eq!(
            ny.instants(slot, false),
            [utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30)]
        );
    }

    /// Lord Howe shifts by 30 minutes: 2026-10-04 02:00 LHST (+10:30) jumps to 02:30
    /// LHDT (+11:00), at 15:30 UTC the day before.
    #[test]
    fn a_half_hour_shift() {
        let lh = Zone::parse("Australia/Lord_Howe").expect("zone");
        assert_eq!(
            lh.instants(civil(2026, 10, 4, 2, 15), true),
            [utc(2026, 10, 3, 15, 30)]
        );
        assert!(lh.instants(civil(2026, 10, 4, 2, 15), false).is_empty());
    }

    #[test]
    fn the_search_finds_the_second_pass_of_an_overlap() {
        let ny = Zone::parse("America/New_York").expect("zone");
        // Every 15 minutes by the wall clock.
        let every_quarter = |c: NaiveDateTime| {
            use chrono::Timelike;
            let next = c + TimeDelta::minutes(1);
            let mut t = next.with_second(0).and_then(|t| t.with_nanosecond(0))?;
            while t.minute() % 15 != 0 {
                t += TimeDelta::minutes(1);
            }
            Some(t)
        };
        // 05:50 UTC is 01:50 EDT, the first pass: next 01:00 EST (06:00 UTC) of the
        // second pass, not 02:00 EST.
        assert_eq!(
            ny.next_slot(utc(2026, 11, 1, 5, 50), false, every_quarter),
            Some(utc(2026, 11, 1, 6, 0))
        );
        // A fixed 01:30 has run at 05:30 UTC: the second pass does not run it again.
        let daily_0130 = |c: NaiveDateTime| {
            let day = c.date();
            let today = day.and_hms_opt(1, 30, 0)?;
            Some(if today > c {
                today
            } else {
                day.succ_opt()?.and_hms_opt(1, 30, 0)?
            })
        };
        assert_eq!(
            ny.next_slot(utc(2026, 11, 1, 6, 10), true, daily_0130),
            Some(utc(2026, 11, 2, 6, 30))
        );
        assert_eq!(
            ny.next_slot(utc(2026, 11, 1, 5, 0), true, daily_0130),
            Some(utc(2026, 11, 1, 5, 30))
        );
    }
}
