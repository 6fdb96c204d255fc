//! Timers: fixed intervals (real elapsed time), and calendar schedules evaluated on the
//! wall clock of the job's time zone ([`Zone`], default UTC; daylight-saving rules in
//! [`crate::time::timezone`]).
//!
//! A schedule is a cron expression (5 fields, or 6 with seconds first; ranges, steps,
//! lists, names, `L`, `W`, `#`, and the nicknames `@yearly`, `@monthly`, `@weekly`,
//! `@daily`, `@hourly`; parsed by croner; day of month and day of week combine as in
//! Vixie cron, either matching) or upstream's grammar (keywords in any case, lists
//! comma-separated, blanks tolerated):
//!
//! | form | runs |
//! |---|---|
//! | `minutely` | at second 0 of every minute |
//! | `hourly[@M,...]` | at the given minutes (0-59, default 0) of every hour |
//! | `daily[@HH:MM,...]` | at the given times (default 00:00) every day |
//! | `weekly[@DAY,...][@HH:MM,...]` | on the given days (`sunday`..`saturday` or `sun`..`sat`, default sunday) at the given times |
//! | `monthly[@D,...][@HH:MM,...]` | on the given days of the month (1-31, default 1) at the given times; a month without that day is skipped, as in cron |
//!
//! For `weekly` and `monthly` a single `@` list is read as times when it contains `:`, as
//! days otherwise: `weekly@10:00` is Sundays at 10:00, `monthly@15` the 15th at 00:00.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Utc, Weekday};

pub use crate::time::cron::CronExpr;
use crate::time::duration::format_duration;
use crate::time::timezone::Zone;

/// When a job runs by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timer {
    /// Every `interval` (at least one second; a shorter one is treated as one second).
    /// It holds no zone: an interval counts real elapsed time, whatever the wall clock
    /// does.
    Interval(Duration),
    /// On the calendar, on the wall clock of the zone.
    Schedule(Schedule, Zone),
}

/// A time of day on the wall clock of the job's zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeOfDay {
    /// 0-23.
    pub hour: u8,
    /// 0-59.
    pub minute: u8,
}

impl TimeOfDay {
    /// 00:00.
    pub const MIDNIGHT: TimeOfDay = TimeOfDay { hour: 0, minute: 0 };

    /// Minutes since midnight.
    fn minutes(self) -> u32 {
        u32::from(self.hour) * 60 + u32::from(self.minute)
    }

    fn is_valid(self) -> bool {
        self.hour < 24 && self.minute < 60
    }
}

impl fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.hour, self.minute)
    }
}

/// A calendar schedule, on the wall clock of the job's zone (see the module
/// documentation for the grammar).
///
/// Values built by [`Schedule::from_str`] hold non-empty lists, sorted, without
/// duplicates and in range. [`Schedule::next_after`] also copes with values built by hand:
/// out-of-range entries are ignored and an empty list means the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A cron expression (boxed: a parsed expression is large, and a timer's task holds
    /// its schedule).
    Cron(Box<CronExpr>),
    /// `minutely`: every minute at second 0.
    Minutely,
    /// `hourly@M,...`: these minutes of every hour.
    Hourly {
        /// Minutes 0-59.
        minutes: Vec<u8>,
    },
    /// `daily@HH:MM,...`: these times every day.
    Daily {
        /// Times of day.
        times: Vec<TimeOfDay>,
    },
    /// `weekly@DAY,...@HH:MM,...`: these times on these weekdays.
    Weekly {
        /// Weekdays, in order from Sunday.
        days: Vec<Weekday>,
        /// Times of day.
        times: Vec<TimeOfDay>,
    },
    /// `monthly@D,...@HH:MM,...`: these times on these days of the month.
    Monthly {
        /// Days of the month 1-31; a day a month lacks is skipped in that month.
        days: Vec<u8>,
        /// Times of day.
        times: Vec<TimeOfDay>,
    },
}

/// A schedule expression that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

const FORMS: &str = "a cron expression (5 or 6 fields, or @hourly, @daily, ...), \
                     minutely, hourly[@M,...], daily[@HH:MM,...], \
                     weekly[@DAY,...][@HH:MM,...] or monthly[@D,...][@HH:MM,...]";

const WEEKDAY_NAMES: [(&str, &str, Weekday); 7] = [
    ("sunday", "sun", Weekday::Sun),
    ("monday", "mon", Weekday::Mon),
    ("tuesday", "tue", Weekday::Tue),
    ("wednesday", "wed", Weekday::Wed),
    ("thursday", "thu", Weekday::Thu),
    ("friday", "fri", Weekday::Fri),
    ("saturday", "sat", Weekday::Sat),
];

fn weekday_name(day: Weekday) -> &'static str {
    WEEKDAY_NAMES
        .iter()
        .find(|(_, _, d)| *d == day)
        .map_or("sunday", |(name, _, _)| name)
}

/// Splits a comma-separated list, trimming items; an empty item is an error.
fn list_items<'a>(list: &'a str, what: &str, text: &str) -> Result<Vec<&'a str>, ScheduleError> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().any(|item| item.is_empty()) {
        return Err(ScheduleError(format!("empty {what} in list in {text:?}")));
    }
    Ok(items)
}

fn parse_number(item: &str, what: &str, min: u8, max: u8, text: &str) -> Result<u8, ScheduleError> {
    if item.is_empty() || item.len() > 2 || !item.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ScheduleError(format!(
            "invalid {what} {item:?} (expected a number {min}-{max}) in {text:?}"
        )));
    }
    let n: u8 = item
        .parse()
        .map_err(|_| ScheduleError(format!("invalid {what} {item:?} in {text:?}")))?;
    if n < min || n > max {
        return Err(ScheduleError(format!(
            "{what} {n} out of range {min}-{max} in {text:?}"
        )));
    }
    Ok(n)
}

fn parse_times(list: &str, text: &str) -> Result<Vec<TimeOfDay>, ScheduleError> {
    let mut times = Vec::new();
    for item in list_items(list, "time", text)? {
        let Some((h, m)) = item.split_once(':') else {
            return Err(ScheduleError(format!(
                "invalid time {item:?} (expected HH:MM) in {text:?}"
            )));
        };
        let (h, m) = (h.trim(), m.trim());
        if m.len() != 2 {
            return Err(ScheduleError(format!(
                "invalid time {item:?} (expected HH:MM) in {text:?}"
            )));
        }
        let hour = parse_number(h, "hour", 0, 23, text)?;
        let minute = parse_number(m, "minute", 0, 59, text)?;
        times.push(TimeOfDay { hour, minute });
    }
    times.sort_unstable();
    times.dedup();
    Ok(times)
}

fn parse_weekdays(list: &str, text: &str) -> Result<Vec<Weekday>, ScheduleError> {
    let mut days = Vec::new();
    for item in list_items(list, "day", text)? {
        let lower = item.to_ascii_lowercase();
        let Some((_, _, day)) = WEEKDAY_NAMES
            .iter()
            .find(|(long, short, _)| *long == lower || *short == lower)
        else {
            return Err(ScheduleError(format!(
                "unknown weekday {item:?} (expected sunday..saturday or sun..sat) in {text:?}"
            )));
        };
        days.push(*day);
    }
    days.sort_unstable_by_key(|d| d.num_days_from_sunday());
    days.dedup();
    Ok(days)
}

fn parse_month_days(list: &str, text: &str) -> Result<Vec<u8>, ScheduleError> {
    let mut days = Vec::new();
    for item in list_items(list, "day", text)? {
        days.push(parse_number(item, "day", 1, 31, text)?);
    }
    days.sort_unstable();
    days.dedup();
    Ok(days)
}

/// For `weekly` and `monthly`: the day list and the time list from the `@` parts.
fn split_days_times<'a>(
    parts: &[&'a str],
    text: &str,
) -> Result<(Option<&'a str>, Option<&'a str>), ScheduleError> {
    match parts {
        [] => Ok((None, None)),
        [one] if one.contains(':') => Ok((None, Some(one))),
        [one] => Ok((Some(one), None)),
        [days, times] => {
            if days.contains(':') {
                return Err(ScheduleError(format!(
                    "days must come before times in {text:?}"
                )));
            }
            Ok((Some(days), Some(times)))
        }
        _ => Err(ScheduleError(format!(
            "too many '@' parts in {text:?} (expected at most @DAYS@TIMES)"
        ))),
    }
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    /// Parses the grammar described in the module documentation.
    fn from_str(text: &str) -> Result<Self, ScheduleError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(ScheduleError(format!("empty schedule; expected {FORMS}")));
        }
        // Upstream's grammar starts with its keyword; anything else is cron.
        let first_word = trimmed
            .split(|c: char| c == '@' || c.is_whitespace())
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let upstream = ["minutely", "hourly", "daily", "weekly", "monthly"];
        let cron_like = trimmed.starts_with('@') || trimmed.contains(char::is_whitespace);
        if !upstream.contains(&first_word.as_str()) && cron_like {
            return CronExpr::parse(trimmed).map(|cron| Schedule::Cron(Box::new(cron)));
        }
        let mut pieces = trimmed.split('@').map(str::trim);
        let keyword = pieces.next().unwrap_or_default().to_ascii_lowercase();
        let parts: Vec<&str> = pieces.collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(ScheduleError(format!(
                "empty list after '@' in {trimmed:?}"
            )));
        }
        let default_times = || vec![TimeOfDay::MIDNIGHT];
        match keyword.as_str() {
            "minutely" => {
                if !parts.is_empty() {
                    return Err(ScheduleError(format!(
                        "minutely takes no '@' list in {trimmed:?}"
                    )));
                }
                Ok(Schedule::Minutely)
            }
            "hourly" => match parts.as_slice() {
                [] => Ok(Schedule::Hourly { minutes: vec![0] }),
                [list] => {
                    let mut minutes = Vec::new();
                    for item in list_items(list, "minute", trimmed)? {
                        minutes.push(parse_number(item, "minute", 0, 59, trimmed)?);
                    }
                    minutes.sort_unstable();
                    minutes.dedup();
                    Ok(Schedule::Hourly { minutes })
                }
                _ => Err(ScheduleError(format!(
                    "hourly takes one '@' list of minutes in {trimmed:?}"
                ))),
            },
            "daily" => match parts.as_slice() {
                [] => Ok(Schedule::Daily {
                    times: default_times(),
                }),
                [list] => Ok(Schedule::Daily {
                    times: parse_times(list, trimmed)?,
                }),
                _ => Err(ScheduleError(format!(
                    "daily takes one '@' list of times in {trimmed:?}"
                ))),
            },
            "weekly" => {
                let (days, times) = split_days_times(&parts, trimmed)?;
                let days = match days {
                    Some(list) => parse_weekdays(list, trimmed)?,
                    None => vec![Weekday::Sun],
                };
                let times = match times {
                    Some(list) => parse_times(list, trimmed)?,
                    None => default_times(),
                };
                Ok(Schedule::Weekly { days, times })
            }
            "monthly" => {
                let (days, times) = split_days_times(&parts, trimmed)?;
                let days = match days {
                    Some(list) => parse_month_days(list, trimmed)?,
                    None => vec![1],
                };
                let times = match times {
                    Some(list) => parse_times(list, trimmed)?,
                    None => default_times(),
                };
                Ok(Schedule::Monthly { days, times })
            }
            _ => Err(ScheduleError(format!(
                "unknown schedule {trimmed:?}; expected {FORMS}"
            ))),
        }
    }
}

fn write_list<T>(
    f: &mut fmt::Formatter<'_>,
    items: &[T],
    mut one: impl FnMut(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        one(f, item)?;
    }
    Ok(())
}

impl fmt::Display for Schedule {
    /// The canonical form, which parses back to the same value: every list written out,
    /// times as `HH:MM`, weekdays in full, e.g. `weekly@monday,friday@08:00,20:30`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let time = |f: &mut fmt::Formatter<'_>, t: &TimeOfDay| write!(f, "{t}");
        match self {
            Schedule::Cron(cron) => f.write_str(cron.text()),
            Schedule::Minutely => f.write_str("minutely"),
            Schedule::Hourly { minutes } => {
                f.write_str("hourly@")?;
                write_list(f, minutes, |f, m| write!(f, "{m}"))
            }
            Schedule::Daily { times } => {
                f.write_str("daily@")?;
                write_list(f, times, time)
            }
            Schedule::Weekly { days, times } => {
                f.write_str("weekly@")?;
                write_list(f, days, |f, d| f.write_str(weekday_name(*d)))?;
                f.write_str("@")?;
                write_list(f, times, time)
            }
            Schedule::Monthly { days, times } => {
                f.write_str("monthly@")?;
                write_list(f, days, |f, d| write!(f, "{d}"))?;
                f.write_str("@")?;
                write_list(f, times, time)
            }
        }
    }
}

/// Sorted, in-range minutes-of-day; the default (midnight) when none is valid.
fn normal_times(times: &[TimeOfDay]) -> Vec<u32> {
    let mut out: Vec<u32> = times
        .iter()
        .filter(|t| t.is_valid())
        .map(|t| t.minutes())
        .collect();
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        out.push(0);
    }
    out
}

/// How many days `next_after` looks ahead; any valid day rule matches well within it.
const SEARCH_DAYS: u32 = 800;

impl Schedule {
    /// Whether its slots are fixed times of day (see [`crate::time::timezone`]): upstream's
    /// `daily`, `weekly` and `monthly`, and cron expressions whose minute and hour are not
    /// wildcards.
    pub fn is_fixed_time(&self) -> bool {
        match self {
            Schedule::Cron(cron) => cron.is_fixed_time(),
            Schedule::Minutely | Schedule::Hourly { .. } => false,
            Schedule::Daily { .. } | Schedule::Weekly { .. } | Schedule::Monthly { .. } => true,
        }
    }

    /// The first instant strictly after `after` that the schedule matches on the wall
    /// clock of `zone`; the far future when it never matches.
    pub fn next_in(&self, after: DateTime<Utc>, zone: &Zone) -> DateTime<Utc> {
        zone.next_slot(after, self.is_fixed_time(), |civil| {
            self.next_civil_after(civil)
        })
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// The last slot at or before `until`, from `slot`, a slot at or before it.
    fn last_slot_until(
        &self,
        slot: DateTime<Utc>,
        until: DateTime<Utc>,
        zone: &Zone,
    ) -> DateTime<Utc> {
        if self.next_in(slot, zone) > until {
            return slot;
        }
        // Bisection, as in `Timer::missed_slot`: kept,
        // next_in(low) <= until < next_in(high). Slots are whole seconds apart, so once
        // `low` and `high` are a second or less apart, one slot at most lies after `low`
        // up to `high`: the last one up to `until`.
        let (mut low, mut high) = (slot, until);
        while high - low > TimeDelta::seconds(1) {
            let middle = low + (high - low) / 2;
            if self.next_in(middle, zone) <= until {
                low = middle;
            } else {
                high = middle;
            }
        }
        self.next_in(low, zone)
    }

    /// The first wall-clock time strictly after `civil` the schedule matches.
    fn next_civil_after(&self, civil: NaiveDateTime) -> Option<NaiveDateTime> {
        match self {
            Schedule::Cron(cron) => cron.next_civil_after(civil),
            other => {
                let next = other.next_after(civil.and_utc());
                (next != DateTime::<Utc>::MAX_UTC).then(|| next.naive_utc())
            }
        }
    }

    /// The first instant strictly after `after` that the schedule matches in UTC.
    pub fn next_after(&self, after: DateTime<Utc>) -> DateTime<Utc> {
        // The first whole minute strictly after `after`.
        let base = after
            .with_second(0)
            .and_then(|t| t.with_nanosecond(0))
            .unwrap_or(after);
        let Some(start) = base.checked_add_signed(TimeDelta::minutes(1)) else {
            return DateTime::<Utc>::MAX_UTC;
        };
        match self {
            Schedule::Cron(cron) => cron
                .next_civil_after(after.naive_utc())
                .map_or(DateTime::<Utc>::MAX_UTC, |t| t.and_utc()),
            Schedule::Minutely => start,
            Schedule::Hourly { minutes } => {
                let mut valid: Vec<u32> = minutes
                    .iter()
                    .map(|m| u32::from(*m))
                    .filter(|m| *m < 60)
                    .collect();
                valid.sort_unstable();
                if valid.is_empty() {
                    valid.push(0);
                }
                let minute_times: Vec<TimeOfDay> = (0..24u8)
                    .flat_map(|hour| {
                        valid.iter().map(move |m| TimeOfDay {
                            hour,
                            minute: *m as u8,
                        })
                    })
                    .collect();
                next_on_days(start, &minute_times, |_| true)
            }
            Schedule::Daily { times } => next_on_days(start, times, |_| true),
            Schedule::Weekly { days, times } => {
                let days: Vec<Weekday> = if days.is_empty() {
                    vec![Weekday::Sun]
                } else {
                    days.clone()
                };
                next_on_days(start, times, |date| days.contains(&date.weekday()))
            }
            Schedule::Monthly { days, times } => {
                let mut days: Vec<u32> = days
                    .iter()
                    .map(|d| u32::from(*d))
                    .filter(|d| (1..=31).contains(d))
                    .collect();
                if days.is_empty() {
                    days.push(1);
                }
                next_on_days(start, times, |date| days.contains(&date.day()))
            }
        }
    }
}

/// The first time at or after `start` (a whole minute) that falls on a day accepted by
/// `day_ok`, at one of `times`.
fn next_on_days(
    start: DateTime<Utc>,
    times: &[TimeOfDay],
    day_ok: impl Fn(NaiveDate) -> bool,
) -> DateTime<Utc> {
    let times = normal_times(times);
    let mut date = start.date_naive();
    let start_minute = start.hour() * 60 + start.minute();
    for offset in 0..SEARCH_DAYS {
        if day_ok(date) {
            let from = if offset == 0 { start_minute } else { 0 };
            let found = times
                .iter()
                .find(|m| **m >= from)
                .and_then(|m| date.and_hms_opt(m / 60, m % 60, 0));
            if let Some(t) = found {
                return t.and_utc();
            }
        }
        match date.succ_opt() {
            Some(next) => date = next,
            None => break,
        }
    }
    // Unreachable for a valid day rule; the far future keeps a broken timer quiet.
    DateTime::<Utc>::MAX_UTC
}

/// How far past `now` [`Timer::longest_gap`] looks at a schedule's slots: a week, the
/// cycle of a weekday rule (whose weekend is its longest gap), plus a day, so that every
/// gap of a weekly pattern starts within it wherever in the week the walk begins.
const GAP_HORIZON: TimeDelta = TimeDelta::days(8);

/// The fewest slots [`Timer::longest_gap`] looks at, even past [`GAP_HORIZON`]: two
/// months of a monthly schedule (whose months differ in length), and the
/// daylight-saving changes of the next two months for a daily one.
const GAP_MIN_SLOTS: usize = 64;

/// The most slots [`Timer::longest_gap`] walks one by one, each a slot search: more
/// than a day of a schedule every minute (1,440 slots a day), so that its quiet times of
/// the day are measured one by one; a denser schedule jumps through the rest of the
/// horizon (see [`GAP_JUMP`]). A walk of the whole horizon would cost 11,520 searches
/// for a schedule every minute, at every start of every such job.
const GAP_WALK_SLOTS: usize = 2_000;

/// Past [`GAP_WALK_SLOTS`], how far [`Timer::longest_gap`] jumps at least: to the last
/// slot within this (or within the longest gap found so far, if longer) of the one
/// before, found by bisection, for about 15 slot searches a jump. The gaps passed over
/// are no longer than the jump, and every longer gap is still measured, so a dense
/// schedule's night or weekend is not missed; only a gap shorter than this that
/// happens no more often than the walk's span could be.
const GAP_JUMP: TimeDelta = TimeDelta::hours(1);

/// `t + d`, saturating at the end of representable time.
fn add(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl Timer {
    /// The interval, clamped to at least one second.
    fn effective_interval(iv: Duration) -> Duration {
        iv.max(Duration::from_secs(1))
    }

    /// The longest gap between two consecutive due times from `now` on: the interval,
    /// or for a schedule the longest gap between its slots of the next
    /// [`GAP_HORIZON`] (and at least its next [`GAP_MIN_SLOTS`] slots; `None` when it
    /// has fewer than two). It is what `svc_job_interval_seconds` exports, so that an
    /// alert can say "no success for N intervals" of a cron job too: the longest gap,
    /// not the usual one, so that the quiet night and weekend of an office-hours
    /// schedule do not read as missed runs. Bounded by time rather than by a count of
    /// slots: 64 slots of a schedule every half hour on weekdays end before its weekend.
    /// Bounded work all the same: at most [`GAP_WALK_SLOTS`] slot searches, then jumps
    /// of at least [`GAP_JUMP`] (at most 192 of them).
    pub fn longest_gap(&self, now: DateTime<Utc>) -> Option<Duration> {
        match self {
            Timer::Interval(iv) => Some(Self::effective_interval(*iv)),
            Timer::Schedule(schedule, zone) => {
                let next_in = |t: DateTime<Utc>| schedule.next_in(t, zone);
                let horizon = now
                    .checked_add_signed(GAP_HORIZON)
                    .unwrap_or(DateTime::<Utc>::MAX_UTC);
                let mut previous = next_in(now);
                let mut longest: Option<TimeDelta> = None;
                let mut walked = 1;
                // One slot after the other: every gap measured.
                while previous != DateTime::<Utc>::MAX_UTC
                    && (previous < horizon || walked < GAP_MIN_SLOTS)
                    && walked < GAP_WALK_SLOTS
                {
                    let next = next_in(previous);
                    if next == DateTime::<Utc>::MAX_UTC {
                        break;
                    }
                    longest = Some(longest.map_or(next - previous, |l| l.max(next - previous)));
                    previous = next;
                    walked += 1;
                }
                // Dense slots (the walk ended short of the horizon): jumps. Each measures the gap
                // after the slot it starts from, then goes to the last slot within `jump`
                // of the next one. The gaps it passes over are no longer than `jump`, so
                // every longer gap starts at a slot a jump starts from and is measured;
                // a jump no longer than the longest gap so far loses nothing.
                while previous != DateTime::<Utc>::MAX_UTC && previous < horizon {
                    let next = next_in(previous);
                    if next == DateTime::<Utc>::MAX_UTC {
                        break;
                    }
                    let gap = longest.map_or(next - previous, |l| l.max(next - previous));
                    longest = Some(gap);
                    let Some(reach) = next.checked_add_signed(gap.max(GAP_JUMP)) else {
                        break;
                    };
                    previous = schedule.last_slot_until(next, reach, zone);
                }
                longest.and_then(|gap| gap.to_std().ok())
            }
        }
    }

    /// When the first run is due after a start at `now`, given the last run.
    ///
    /// Interval: `last_run + interval` when that is still ahead, otherwise `now` (a job
    /// that never ran, or is overdue, runs at start). Schedule: the next matching time
    /// after `now`.
    pub fn first_due(&self, now: DateTime<Utc>, last_run: Option<DateTime<Utc>>) -> DateTime<Utc> {
        match self {
            Timer::Interval(iv) => match last_run {
                Some(last) => {
                    let due = add(last, Self::effective_interval(*iv));
                    if due > now { due } else { now }
                }
                None => now,
            },
            Timer::Schedule(schedule, zone) => schedule.next_in(now, zone),
        }
    }

    /// The first due time at or after `now` in cluster mode, where every node must offer
    /// the same slots: an interval's grid is counted from the Unix epoch (a node's start
    /// time or last run would give each node its own grid, and each slot would run once
    /// per node); a schedule's slots are the same everywhere already.
    pub fn first_due_on_grid(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Timer::Interval(iv) => {
                let step = Self::effective_interval(*iv).as_nanos() as i128;
                let Some(since_epoch) = now.timestamp_nanos_opt().map(i128::from) else {
                    return now;
                };
                // Rounded up to the next multiple of the interval.
                let grid = (since_epoch + step - 1).div_euclid(step) * step;
                i64::try_from(grid)
                    .map(DateTime::<Utc>::from_timestamp_nanos)
                    .unwrap_or(now)
            }
            Timer::Schedule(schedule, zone) => schedule.next_in(now, zone),
        }
    }

    /// The due time following `previous_due`, strictly after `now`.
    ///
    /// Interval: `previous_due + k * interval` for the smallest `k >= 1` that lies after
    /// `now`, so the timer stays on its grid and missed ticks are skipped. Schedule: the
    /// next matching time after the later of `previous_due` and `now`.
    pub fn next_due(&self, previous_due: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Timer::Interval(iv) => {
                let iv = Self::effective_interval(*iv);
                let first = add(previous_due, iv);
                if first > now {
                    return first;
                }
                let behind = (now - previous_due).num_nanoseconds().map(i128::from);
                let step = iv.as_nanos() as i128;
                match behind {
                    Some(behind) => {
                        let k = behind / step + 1;
                        let total = k.saturating_mul(step);
                        match u64::try_from(total) {
                            Ok(nanos) => add(previous_due, Duration::from_nanos(nanos)),
                            Err(_) => DateTime::<Utc>::MAX_UTC,
                        }
                    }
                    // More than ~292 years behind: restart the grid from now.
                    None => add(now, iv),
                }
            }
            Timer::Schedule(schedule, zone) => schedule.next_in(previous_due.max(now), zone),
        }
    }

    /// For `catch_up = once`: the latest slot of a schedule that fell after `last_run`
    /// and at or before `now`, within `window` of `now` (a slot missed while the service
    /// was down or the job paused). `None` for an interval (an overdue interval job runs
    /// at start anyway), a job that never ran, or nothing missed in the window.
    pub fn missed_slot(
        &self,
        last_run: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        window: Duration,
    ) -> Option<DateTime<Utc>> {
        let Timer::Schedule(schedule, zone) = self else {
            return None;
        };
        let window = TimeDelta::from_std(window).ok()?;
        let from = last_run?.max(now.checked_sub_signed(window)?);
        if schedule.next_in(from, zone) > now {
            return None;
        }
        // Bisection rather than a walk from slot to slot, which would cost one search per
        // slot (86,400 for a job due every second over a day's window): whether the next
        // slot after an instant is still at or before `now` turns from yes to no exactly
        // at the latest such slot. Kept: next_in(low) <= now < next_in(high). Slots are
        // whole seconds apart, so once `low` and `high` are a second or less apart, one
        // slot at most lies after `low` up to `high`: the one sought.
        let (mut low, mut high) = (from, now);
        while high - low > TimeDelta::seconds(1) {
            let middle = low + (high - low) / 2;
            if schedule.next_in(middle, zone) <= now {
                low = middle;
            } else {
                high = middle;
            }
        }
        Some(schedule.next_in(low, zone))
    }

    /// Text for people: `every 5m`, or the schedule's canonical form.
    pub fn describe(&self) -> String {
        match self {
            Timer::Interval(iv) => format!("every {}", format_duration(*iv)),
            Timer::Schedule(schedule, zone) if zone.is_utc() => schedule.to_string(),
            Timer::Schedule(schedule, zone) => format!("{schedule} ({zone})"),
        }
    }
}

impl fmt::Display for Timer {
    /// Same as [`Timer::describe`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .expect("valid test time")
    }

    fn schedule(text: &str) -> Schedule {
        text.parse().expect("a valid test schedule")
    }

    #[test]
    fn longest_gap_of_an_interval_is_the_interval() {
        let now = at(2026, 3, 2, 10, 0, 0);
        let timer = Timer::Interval(Duration::from_secs(90));
        assert_eq!(timer.longest_gap(now), Some(Duration::from_secs(90)));
        // Below one second counts as one second, as the timer does.
        let fast = Timer::Interval(Duration::from_millis(10));
        assert_eq!(fast.longest_gap(now), Some(Duration::from_secs(1)));
    }

    /// An office-hours schedule has its weekend as its longest gap, whatever the day and
    /// time of day the gap is computed at (explicit times, not the day the test runs).
    #[test]
    fn longest_gap_of_a_schedule_covers_its_quiet_hours() {
        // Every half hour from 09:00 to 17:30, on weekdays: the longest gap is the
        // weekend, Friday 17:30 to Monday 09:00 (the night, 15.5 h, is shorter).
        let office = Timer::Schedule(schedule("*/30 9-17 * * 1-5"), Zone::utc());
        let weekend = Duration::from_secs(63 * 3600 + 30 * 60);
        for now in [
            // Monday 2026-03-02, in office hours and at night.
            at(2026, 3, 2, 10, 0, 0),
            at(2026, 3, 2, 23, 0, 0),
            // Thursday: the weekend begins the next day.
            at(2026, 3, 5, 12, 0, 0),
            // Friday after the last slot, and Sunday: within the weekend, the next one
            // is still ahead within the horizon.
            at(2026, 3, 6, 18, 0, 0),
            at(2026, 3, 8, 12, 0, 0),
        ] {
            assert_eq!(office.longest_gap(now), Some(weekend), "from {now}");
        }
        let daily = Timer::Schedule(schedule("daily@04:00"), Zone::utc());
        assert_eq!(
            daily.longest_gap(at(2026, 3, 2, 10, 0, 0)),
            Some(Duration::from_secs(86_400))
        );
    }

    /// A schedule too dense to walk slot by slot up to the horizon still has its quiet
    /// times measured: every 5 seconds in office hours (6,480 slots a day) has the
    /// weekend, Friday 17:59:55 to Monday 09:00:00, as its longest gap, from a Monday
    /// and from a Thursday. One every second all the time has 1 s, at a bounded cost.
    #[test]
    fn longest_gap_of_a_dense_schedule_covers_its_quiet_hours() {
        let office = Timer::Schedule(schedule("*/5 * 9-17 * * 1-5"), Zone::utc());
        let weekend = Duration::from_secs(63 * 3600 + 5);
        for now in [at(2026, 3, 2, 10, 0, 0), at(2026, 3, 5, 12, 0, 0)] {
            assert_eq!(office.longest_gap(now), Some(weekend), "from {now}");
        }
        // Dense, with a one-hour gap past where the walk stops: measured by the jumps.
        let lunch = Timer::Schedule(schedule("* * 0-11,13-23 * * *"), Zone::utc());
        assert_eq!(
            lunch.longest_gap(at(2026, 3, 2, 13, 0, 0)),
            Some(Duration::from_secs(3601))
        );
        let every_second = Timer::Schedule(schedule("* * * * * *"), Zone::utc());
        assert_eq!(
            every_second.longest_gap(at(2026, 3, 2, 10, 0, 0)),
            Some(Duration::from_secs(1))
        );
    }

    /// The gap is real time: across a daylight-saving change a daily slot is 23 or
    /// 25 hours after the one before.
    #[test]
    fn longest_gap_follows_the_zone() {
        let berlin = Zone::parse("Europe/Berlin").expect("a known zone");
        let daily = Timer::Schedule(schedule("daily@04:00"), berlin);
        // The autumn change (2026-10-25) lies within the next 64 days.
        assert_eq!(
            daily.longest_gap(at(2026, 10, 1, 0, 0, 0)),
            Some(Duration::from_secs(25 * 3600))
        );
    }

    /// Slots are whole seconds, whatever fraction of a second the time asked after has
    /// (the engine asks with the clock's time, to the nanosecond).
    #[test]
    fn slots_are_whole_seconds_after_a_fractional_time() {
        let half = |t: DateTime<Utc>| t + chrono::Duration::milliseconds(500);
        // Berlin is an hour ahead in January.
        let berlin = Zone::parse("Europe/Berlin").expect("a known zone");
        for (text, after, slot) in [
            (
                "*/15 * * * *",
                at(2026, 1, 5, 0, 7, 0),
                at(2026, 1, 5, 0, 15, 0),
            ),
            (
                "*/15 * * * *",
                at(2026, 1, 5, 0, 15, 0),
                at(2026, 1, 5, 0, 30, 0),
            ),
            (
                "*/10 * * * * *",
                at(2026, 1, 5, 0, 7, 5),
                at(2026, 1, 5, 0, 7, 10),
            ),
            (
                "daily@00:15",
                at(2026, 1, 5, 0, 7, 0),
                at(2026, 1, 5, 0, 15, 0),
            ),
        ] {
            assert_eq!(
                sched(text).next_in(half(after), &Zone::utc()),
                slot,
                "{text}"
            );
            let hour = chrono::Duration::hours(1);
            assert_eq!(
                sched(text).next_in(half(after - hour), &berlin),
                slot - hour,
                "{text} in Berlin"
            );
        }
    }

    fn sched(text: &str) -> Schedule {
        text.parse().expect("schedule should parse")
    }

    fn err(text: &str) -> String {
        text.parse::<Schedule>()
            .expect_err("schedule should fail")
            .0
    }

    fn t(hour: u8, minute: u8) -> TimeOfDay {
        TimeOfDay { hour, minute }
    }

    #[test]
    fn parses_every_form_with_defaults() {
        assert_eq!(sched("minutely"), Schedule::Minutely);
        assert_eq!(sched(" MINUTELY "), Schedule::Minutely);
        assert_eq!(sched("hourly"), Schedule::Hourly { minutes: vec![0] });
        assert_eq!(
            sched("Hourly@ 45, 5 ,5"),
            Schedule::Hourly {
                minutes: vec![5, 45]
            }
        );
        assert_eq!(
            sched("daily"),
            Schedule::Daily {
                times: vec![t(0, 0)]
            }
        );
        assert_eq!(
            sched("daily@20:30, 8:05,08:05"),
            Schedule::Daily {
                times: vec![t(8, 5), t(20, 30)]
            }
        );
        assert_eq!(
            sched("weekly"),
            Schedule::Weekly {
                days: vec![Weekday::Sun],
                times: vec![t(0, 0)]
            }
        );
        assert_eq!(
            sched("weekly@FRI,monday,Mon"),
            Schedule::Weekly {
                days: vec![Weekday::Mon, Weekday::Fri],
                times: vec![t(0, 0)]
            }
        );
        assert_eq!(
            sched("weekly@10:00"),
            Schedule::Weekly {
                days: vec![Weekday::Sun],
                times: vec![t(10, 0)]
            }
        );
        assert_eq!(
            sched("weekly @ sat,sun @ 23:59,00:01"),
            Schedule::Weekly {
                days: vec![Weekday::Sun, Weekday::Sat],
                times: vec![t(0, 1), t(23, 59)]
            }
        );
        assert_eq!(
            sched("monthly"),
            Schedule::Monthly {
                days: vec![1],
                times: vec![t(0, 0)]
            }
        );
        assert_eq!(
            sched("monthly@31,15,1"),
            Schedule::Monthly {
                days: vec![1, 15, 31],
                times: vec![t(0, 0)]
            }
        );
        assert_eq!(
            sched("monthly@06:30"),
            Schedule::Monthly {
                days: vec![1],
                times: vec![t(6, 30)]
            }
        );
        assert_eq!(
            sched("MONTHLY@29@12:00"),
            Schedule::Monthly {
                days: vec![29],
                times: vec![t(12, 0)]
            }
        );
    }

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

    #[test]
    fn a_timer_describes_its_zone() {
        let timer = Timer::Schedule(sched("0 9 * * *"), zone("Europe/Berlin"));
        assert_eq!(timer.describe(), "0 9 * * * (Europe/Berlin)");
        let utc = Timer::Schedule(sched("0 9 * * *"), Zone::utc());
        assert_eq!(utc.describe(), "0 9 * * *");
    }

    #[test]
    fn errors_are_clear() {
        assert_eq!(
            err("daily@25:00"),
            "hour 25 out of range 0-23 in \"daily@25:00\""
        );
        assert_eq!(
            err("daily@10:60"),
            "minute 60 out of range 0-59 in \"daily@10:60\""
        );
        assert_eq!(
            err("hourly@60"),
            "minute 60 out of range 0-59 in \"hourly@60\""
        );
        assert_eq!(
            err("monthly@32"),
            "day 32 out of range 1-31 in \"monthly@32\""
        );
        assert_eq!(err("monthly@0"), "day 0 out of range 1-31 in \"monthly@0\"");
        assert!(err("weekly@funday").contains("unknown weekday \"funday\""));
        assert!(err("daily@8").contains("invalid time \"8\" (expected HH:MM)"));
        assert!(err("daily@8:5").contains("expected HH:MM"));
        assert!(err("daily@x:00").contains("invalid hour \"x\""));
        assert!(err("daily@-1:00").contains("invalid hour"));
        assert!(err("").contains("empty schedule"));
        assert!(err("yearly").contains("unknown schedule \"yearly\""));
        assert!(err("daily@").contains("empty list after '@'"));
        assert!(err("daily@08:00,").contains("empty time"));
        assert!(err("minutely@5").contains("minutely takes no"));
        assert!(err("hourly@1@2").contains("hourly takes one"));
        assert!(err("daily@08:00@09:00").contains("daily takes one"));
        assert!(err("weekly@10:00@mon").contains("days must come before times"));
        assert!(err("weekly@mon@10:00@x").contains("too many"));
        assert!(err("monthly@1@25:00").contains("hour 25 out of range"));
        assert!(err("hourly@123").contains("invalid minute"));
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for (input, canonical) in [
            ("minutely", "minutely"),
            ("hourly", "hourly@0"),
            ("HOURLY@30,5", "hourly@5,30"),
            ("daily", "daily@00:00"),
            ("daily@8:05,20:30", "daily@08:05,20:30"),
            ("weekly", "weekly@sunday@00:00"),
            ("weekly@fri,MON@10:00", "weekly@monday,friday@10:00"),
            ("monthly", "monthly@1@00:00"),
            ("monthly@31,15@6:00,18:00", "monthly@15,31@06:00,18:00"),
        ] {
            let s = sched(input);
            assert_eq!(s.to_string(), canonical);
            assert_eq!(sched(canonical), s);
        }
    }

    #[test]
    fn minutely_next_after() {
        let s = Schedule::Minutely;
        assert_eq!(
            s.next_after(at(2024, 1, 1, 10, 0, 0)),
            at(2024, 1, 1, 10, 1, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 1, 10, 0, 59)),
            at(2024, 1, 1, 10, 1, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 12, 31, 23, 59, 30)),
            at(2025, 1, 1, 0, 0, 0)
        );
    }

    #[test]
    fn hourly_next_after() {
        let s = sched("hourly@15,45");
        assert_eq!(
            s.next_after(at(2024, 1, 1, 10, 0, 0)),
            at(2024, 1, 1, 10, 15, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 1, 10, 15, 0)),
            at(2024, 1, 1, 10, 45, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 1, 10, 50, 0)),
            at(2024, 1, 1, 11, 15, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 31, 23, 46, 0)),
            at(2024, 2, 1, 0, 15, 0)
        );
        let top = sched("hourly");
        assert_eq!(
            top.next_after(at(2024, 1, 1, 10, 0, 0)),
            at(2024, 1, 1, 11, 0, 0)
        );
        // Sub-second precision is strictly after too.
        let just_after = at(2024, 1, 1, 10, 15, 0) + TimeDelta::nanoseconds(1);
        assert_eq!(s.next_after(just_after), at(2024, 1, 1, 10, 45, 0));
        let just_before = at(2024, 1, 1, 10, 15, 0) - TimeDelta::nanoseconds(1);
        assert_eq!(s.next_after(just_before), at(2024, 1, 1, 10, 15, 0));
    }

    #[test]
    fn daily_next_after() {
        let s = sched("daily@08:00,20:30");
        assert_eq!(
            s.next_after(at(2024, 3, 10, 7, 59, 59)),
            at(2024, 3, 10, 8, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 3, 10, 8, 0, 0)),
            at(2024, 3, 10, 20, 30, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 3, 10, 20, 30, 0)),
            at(2024, 3, 11, 8, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2023, 12, 31, 21, 0, 0)),
            at(2024, 1, 1, 8, 0, 0)
        );
        assert_eq!(
            sched("daily").next_after(at(2024, 2, 28, 0, 0, 0)),
            at(2024, 2, 29, 0, 0, 0)
        );
    }

    #[test]
    fn weekly_next_after() {
        // 2024-01-01 is a Monday.
        let s = sched("weekly@mon,fri@09:00");
        assert_eq!(
            s.next_after(at(2024, 1, 1, 8, 0, 0)),
            at(2024, 1, 1, 9, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 1, 9, 0, 0)),
            at(2024, 1, 5, 9, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 5, 9, 0, 0)),
            at(2024, 1, 8, 9, 0, 0)
        );
        let sunday = sched("weekly");
        assert_eq!(
            sunday.next_after(at(2023, 12, 30, 12, 0, 0)),
            at(2023, 12, 31, 0, 0, 0)
        );
        assert_eq!(
            sunday.next_after(at(2023, 12, 31, 0, 0, 0)),
            at(2024, 1, 7, 0, 0, 0)
        );
    }

    #[test]
    fn monthly_next_after_skips_short_months() {
        let s = sched("monthly@31");
        assert_eq!(
            s.next_after(at(2024, 1, 31, 0, 0, 0)),
            at(2024, 3, 31, 0, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 4, 1, 0, 0, 0)),
            at(2024, 5, 31, 0, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 12, 31, 0, 0, 0)),
            at(2025, 1, 31, 0, 0, 0)
        );
        let s = sched("monthly@30@12:00");
        assert_eq!(
            s.next_after(at(2023, 1, 30, 12, 0, 0)),
            at(2023, 3, 30, 12, 0, 0)
        );
        let first = sched("monthly");
        assert_eq!(
            first.next_after(at(2024, 12, 1, 0, 0, 0)),
            at(2025, 1, 1, 0, 0, 0)
        );
        let two = sched("monthly@1,15@06:00,18:00");
        assert_eq!(
            two.next_after(at(2024, 5, 1, 6, 0, 0)),
            at(2024, 5, 1, 18, 0, 0)
        );
        assert_eq!(
            two.next_after(at(2024, 5, 1, 18, 0, 0)),
            at(2024, 5, 15, 6, 0, 0)
        );
    }

    #[test]
    fn february_29() {
        let s = sched("monthly@29");
        assert_eq!(
            s.next_after(at(2023, 1, 29, 0, 0, 0)),
            at(2023, 3, 29, 0, 0, 0)
        );
        assert_eq!(
            s.next_after(at(2024, 1, 29, 0, 0, 0)),
            at(2024, 2, 29, 0, 0, 0)
        );
        // Leap years only: 2100 is not one.
        let d = sched("daily@12:00");
        assert_eq!(
            d.next_after(at(2024, 2, 28, 12, 0, 0)),
            at(2024, 2, 29, 12, 0, 0)
        );
        assert_eq!(
            d.next_after(at(2100, 2, 28, 12, 0, 0)),
            at(2100, 3, 1, 12, 0, 0)
        );
    }

    #[test]
    fn hand_built_values_do_not_break() {
        let s = Schedule::Monthly {
            days: vec![0, 40],
            times: vec![],
        };
        assert_eq!(
            s.next_after(at(2024, 1, 5, 0, 0, 0)),
            at(2024, 2, 1, 0, 0, 0)
        );
        let h = Schedule::Hourly { minutes: vec![] };
        assert_eq!(
            h.next_after(at(2024, 1, 5, 0, 0, 0)),
            at(2024, 1, 5, 1, 0, 0)
        );
        let w = Schedule::Weekly {
            days: vec![],
            times: vec![t(30, 0)],
        };
        assert_eq!(
            w.next_after(at(2024, 1, 1, 0, 0, 0)),
            at(2024, 1, 7, 0, 0, 0)
        );
    }

    #[test]
    fn interval_first_due() {
        let timer = Timer::Interval(Duration::from_secs(300));
        let now = at(2024, 1, 1, 12, 0, 0);
        assert_eq!(timer.first_due(now, None), now);
        assert_eq!(
            timer.first_due(now, Some(at(2024, 1, 1, 11, 58, 0))),
            at(2024, 1, 1, 12, 3, 0)
        );
        assert_eq!(timer.first_due(now, Some(at(2024, 1, 1, 11, 55, 0))), now);
        assert_eq!(timer.first_due(now, Some(at(2023, 1, 1, 0, 0, 0))), now);
        // A last run in the future (clock moved back) waits one interval from it.
        assert_eq!(
            timer.first_due(now, Some(at(2024, 1, 1, 12, 1, 0))),
            at(2024, 1, 1, 12, 6, 0)
        );
    }

    #[test]
    fn cluster_grid_is_the_same_on_every_node() {
        let timer = Timer::Interval(Duration::from_secs(300));
        // Two nodes started at different times offer the same slot.
        let slot = at(2024, 1, 1, 12, 5, 0);
        assert_eq!(timer.first_due_on_grid(at(2024, 1, 1, 12, 0, 1)), slot);
        assert_eq!(timer.first_due_on_grid(at(2024, 1, 1, 12, 4, 59)), slot);
        // A node that starts exactly on a slot offers that slot.
        assert_eq!(timer.first_due_on_grid(slot), slot);
        // Below a second, the interval is a second, as everywhere else.
        let fast = Timer::Interval(Duration::from_millis(10));
        assert_eq!(
            fast.first_due_on_grid(at(2024, 1, 1, 0, 0, 0) + TimeDelta::milliseconds(1)),
            at(2024, 1, 1, 0, 0, 1)
        );
        let cron = Timer::Schedule(schedule("hourly"), Zone::utc());
        assert_eq!(
            cron.first_due_on_grid(at(2024, 1, 1, 12, 0, 1)),
            cron.first_due(at(2024, 1, 1, 12, 0, 1), None)
        );
    }

    #[test]
    fn interval_next_due_stays_on_grid() {
        let timer = Timer::Interval(Duration::from_secs(300));
        let due = at(2024, 1, 1, 12, 0, 0);
        // On time.
        assert_eq!(timer.next_due(due, due), at(2024, 1, 1, 12, 5, 0));
        assert_eq!(
            timer.next_due(due, at(2024, 1, 1, 12, 0, 30)),
            at(2024, 1, 1, 12, 5, 0)
        );
        // Exactly on a later tick: strictly after now.
        assert_eq!(
            timer.next_due(due, at(2024, 1, 1, 12, 5, 0)),
            at(2024, 1, 1, 12, 10, 0)
        );
        // Missed ticks are skipped, the grid is kept.
        assert_eq!(
            timer.next_due(due, at(2024, 1, 1, 12, 17, 3)),
            at(2024, 1, 1, 12, 20, 0)
        );
        assert_eq!(
            timer.next_due(due, at(2024, 1, 2, 12, 0, 1)),
            at(2024, 1, 2, 12, 5, 0)
        );
        // now before previous_due: the next tick.
        assert_eq!(
            timer.next_due(due, at(2024, 1, 1, 11, 0, 0)),
            at(2024, 1, 1, 12, 5, 0)
        );
        // Sub-second intervals are clamped to one second.
        let fast = Timer::Interval(Duration::ZERO);
        assert_eq!(fast.next_due(due, due), at(2024, 1, 1, 12, 0, 1));
    }

    #[test]
    fn schedule_timer() {
        let timer = Timer::Schedule(sched("daily@08:00"), Zone::utc());
        let now = at(2024, 1, 1, 7, 0, 0);
        assert_eq!(timer.first_due(now, None), at(2024, 1, 1, 8, 0, 0));
        assert_eq!(
            timer.first_due(now, Some(at(2023, 12, 31, 8, 0, 0))),
            at(2024, 1, 1, 8, 0, 0)
        );
        // Fired late: next from now.
        assert_eq!(
            timer.next_due(at(2024, 1, 1, 8, 0, 0), at(2024, 1, 3, 9, 0, 0)),
            at(2024, 1, 4, 8, 0, 0)
        );
        // Fired early (clock skew): never the same due time twice.
        assert_eq!(
            timer.next_due(at(2024, 1, 1, 8, 0, 0), at(2024, 1, 1, 7, 59, 59)),
            at(2024, 1, 2, 8, 0, 0)
        );
    }

    #[test]
    fn timers_describe_themselves() {
        let iv = Timer::Interval(Duration::from_secs(300));
        assert_eq!(iv.describe(), "every 5m");
        assert_eq!(
            Timer::Interval(Duration::from_secs(5400)).to_string(),
            "every 1h30m"
        );
        let s = Timer::Schedule(sched("weekly@mon@9:00"), Zone::utc());
        assert_eq!(s.describe(), "weekly@monday@09:00");
    }
}
