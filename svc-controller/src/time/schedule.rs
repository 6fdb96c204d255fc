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
#[path = "schedule_cron_tests.rs"]
mod cron_tests;
#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
