//! Upcoming slots of the configured timers, for people: `svc-controller next-runs`, which
//! writes each slot in the job's zone and in UTC (RFC 3339 with offset) and marks a slot
//! whose offset differs from the one before it as a daylight-saving change, and the
//! three next slots `--check` shows for each schedule, in the job's zone.

use chrono::{DateTime, FixedOffset, Offset as _, SecondsFormat, Utc};

use crate::config::Config;
use crate::engine::Kind;
use crate::time::schedule::Timer;
use crate::time::timezone::{Zone, utc_text};

/// One job's timer, as the preview needs it.
#[derive(Debug)]
pub struct JobTimer<'a> {
    pub kind: Kind,
    pub id: &'a str,
    pub timer: Option<&'a Timer>,
    pub zone: &'a Zone,
}

/// Every job and JobHttp of `config` with its timer, Jobs first, each in file order.
pub fn job_timers(config: &Config) -> Vec<JobTimer<'_>> {
    let jobs = config.jobs.iter().map(|job| JobTimer {
        kind: Kind::Job,
        id: &job.id,
        timer: job.timer.as_ref(),
        zone: &job.timezone,
    });
    let http = config.http_jobs.iter().map(|job| JobTimer {
        kind: Kind::Http,
        id: &job.id,
        timer: job.timer.as_ref(),
        zone: &job.timezone,
    });
    jobs.chain(http).collect()
}

/// The next `count` slots of `timer` strictly after `from`. An interval's are `from`
/// plus whole intervals (a running job's grid starts at its last run instead); a
/// schedule's follow its zone's wall clock. Grown as found: `count` is what a person
/// typed, and may be far more than there are slots.
pub fn upcoming(timer: &Timer, from: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut due = timer.next_due(from, from);
    while out.len() < count && due != DateTime::<Utc>::MAX_UTC {
        out.push(due);
        due = timer.next_due(due, due);
    }
    out
}

/// The offset of `zone` at `t` (UTC's, for an offset chrono cannot hold).
fn offset_at(zone: &Zone, t: DateTime<Utc>) -> FixedOffset {
    FixedOffset::east_opt(zone.offset_seconds(t)).unwrap_or_else(|| Utc.fix())
}

/// `t` in `zone`, RFC 3339 with the zone's offset at that instant.
pub fn local_text(t: DateTime<Utc>, zone: &Zone) -> String {
    t.with_timezone(&offset_at(zone, t))
        .to_rfc3339_opts(SecondsFormat::Secs, false)
}

/// The lines of `slots`: `<local>  <UTC>`, and `  (daylight-saving change: A -> B)` on
/// a slot whose offset differs from that of the instant before it (`from` for the
/// first).
pub fn slot_lines(slots: &[DateTime<Utc>], zone: &Zone, from: DateTime<Utc>) -> Vec<String> {
    let mut previous = offset_at(zone, from);
    slots
        .iter()
        .map(|t| {
            let offset = offset_at(zone, *t);
            let local = t
                .with_timezone(&offset)
                .to_rfc3339_opts(SecondsFormat::Secs, false);
            let mut line = format!("{local}  {}", utc_text(*t));
            if offset != previous {
                line.push_str(&format!(
                    "  (daylight-saving change: {previous} -> {offset})"
                ));
            }
            previous = offset;
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .expect("valid")
    }

    #[test]
    fn slots_in_the_zone_and_in_utc_with_changes_marked() {
        let zone = Zone::parse("Europe/Berlin").expect("zone");
        let timer = Timer::Schedule("0 12 * * *".parse().expect("cron"), zone.clone());
        let from = at(2026, 3, 27, 0, 0);
        let slots = upcoming(&timer, from, 3);
        let lines = slot_lines(&slots, &zone, from);
        assert_eq!(
            lines,
            [
                "2026-03-27T12:00:00+01:00  2026-03-27T11:00:00Z",
                "2026-03-28T12:00:00+01:00  2026-03-28T11:00:00Z",
                "2026-03-29T12:00:00+02:00  2026-03-29T10:00:00Z  \
                 (daylight-saving change: +01:00 -> +02:00)",
            ]
        );
    }

    #[test]
    fn intervals_count_from_the_start() {
        let timer = Timer::Interval(std::time::Duration::from_secs(90));
        let from = at(2026, 1, 1, 0, 0);
        let slots = upcoming(&timer, from, 2);
        assert_eq!(
            slots,
            [
                at(2026, 1, 1, 0, 0) + chrono::TimeDelta::seconds(90),
                at(2026, 1, 1, 0, 3)
            ]
        );
    }

    #[test]
    fn offsets_are_written_with_sign_hours_and_minutes() {
        let text = |seconds| FixedOffset::east_opt(seconds).map(|o| o.to_string());
        assert_eq!(text(37_800).as_deref(), Some("+10:30"));
        assert_eq!(text(-18_000).as_deref(), Some("-05:00"));
        assert_eq!(text(0).as_deref(), Some("+00:00"));
    }
}
