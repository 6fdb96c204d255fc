//! Identical refusals in a burst become one audit line with a count.
//!
//! A client that repeats a refused request (a sender hammering a busy job gets 429 many
//! thousands of times a second) would otherwise write a line per answer: five rotated
//! files of 10 MiB in two minutes, people's actions pushed out of them, and the writer's
//! queue full, so that other entries are dropped. So a refusal whose entry (actor,
//! action, job, address, status, reason) equals one written less than [`WINDOW`] ago is
//! counted instead of written; when the window ends, one line says how many there were
//! (`repeated`, with the time of the last). Accepted actions and errors are always written
//! one by one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::audit::{Entry, Outcome};

/// Identical refusals within this time of the line written for the first are counted.
pub const WINDOW: Duration = Duration::from_secs(1);
/// Kinds of refusal followed at once at most; past it a new kind is written line by line
/// until a window ends (a client varying its requests gains nothing but lines).
const KINDS: usize = 256;

/// The refusals of one kind since its last line.
#[derive(Debug)]
struct Burst {
    /// When the line that opened the window was written.
    opened: Instant,
    /// Refusals counted since, not written.
    count: u64,
    /// The recording time of the last of them.
    last: DateTime<Utc>,
}

/// A count of identical refusals to write: the entry, how many, the time of the last.
pub type Summary = (Entry, u64, DateTime<Utc>);

/// The open windows, one per kind of refusal ([`Repeats::offer`]).
#[derive(Debug, Default)]
pub struct Repeats {
    bursts: HashMap<Entry, Burst>,
}

impl Repeats {
    /// Whether `entry`, recorded at `time` (`now` on the monotonic clock), is to be
    /// written (true) or was counted in an open window (false).
    pub fn offer(&mut self, entry: &Entry, time: DateTime<Utc>, now: Instant) -> bool {
        if entry.result != Outcome::Refused {
            return true;
        }
        if let Some(burst) = self.bursts.get_mut(entry) {
            if now.duration_since(burst.opened) < WINDOW {
                burst.count += 1;
                burst.last = time;
                return false;
            }
            // The window ended without its count being taken: the caller takes the due
            // summaries before each entry, so there is none left here.
            self.bursts.remove(entry);
        }
        if self.bursts.len() >= KINDS {
            return true;
        }
        self.bursts.insert(
            entry.clone(),
            Burst {
                opened: now,
                count: 0,
                last: time,
            },
        );
        true
    }

    /// The counts of the windows that ended by `now` (their kinds forgotten), oldest
    /// window first.
    pub fn due(&mut self, now: Instant) -> Vec<Summary> {
        self.take(|burst| now.duration_since(burst.opened) >= WINDOW)
    }

    /// The counts of every open window (before a flush or the writer's end).
    pub fn all(&mut self) -> Vec<Summary> {
        self.take(|_| true)
    }

    /// When the next window ends, if any is open.
    pub fn next_due(&self) -> Option<Instant> {
        self.bursts
            .values()
            .map(|burst| burst.opened + WINDOW)
            .min()
    }

    fn take(&mut self, ended: impl Fn(&Burst) -> bool) -> Vec<Summary> {
        let keys: Vec<Entry> = self
            .bursts
            .iter()
            .filter(|(_, burst)| ended(burst))
            .map(|(entry, _)| entry.clone())
            .collect();
        let mut summaries: Vec<(Instant, Summary)> = keys
            .into_iter()
            .filter_map(|entry| {
                let burst = self.bursts.remove(&entry)?;
                (burst.count > 0).then_some((burst.opened, (entry, burst.count, burst.last)))
            })
            .collect();
        summaries.sort_by_key(|(opened, _)| *opened);
        summaries.into_iter().map(|(_, summary)| summary).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::audit::{Action, Actor, JobRef};

    fn refusal(job: &str, status: u16) -> Entry {
        Entry::answered(
            Actor::Webhook { delivery: None },
            Action::Trigger,
            Some(JobRef {
                kind: "job_exec".into(),
                id: job.into(),
            }),
            Some("192.0.2.1".into()),
            status,
            "job is running and a run is already queued",
        )
    }

    #[test]
    fn a_burst_of_one_refusal_is_its_first_line_and_one_count() {
        let mut repeats = Repeats::default();
        let start = Instant::now();
        let time = Utc::now();
        let entry = refusal("a", 429);
        assert!(repeats.offer(&entry, time, start), "the first is written");
        for n in 1..=999u32 {
            let at = start + Duration::from_micros(u64::from(n) * 500);
            assert!(!repeats.offer(&entry, time, at), "repeat {n} is counted");
        }
        assert!(
            repeats.due(start + WINDOW / 2).is_empty(),
            "window still open"
        );
        assert_eq!(repeats.next_due(), Some(start + WINDOW));
        let due = repeats.due(start + WINDOW);
        assert_eq!(due.len(), 1);
        assert_eq!((&due[0].0, due[0].1), (&entry, 999));
        assert_eq!(repeats.next_due(), None, "the kind is forgotten");
        // After the window the next one is a line again and opens a new window.
        assert!(repeats.offer(&entry, time, start + WINDOW * 2));
    }

    #[test]
    fn other_kinds_and_accepted_actions_are_written_each() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        let time = Utc::now();
        assert!(repeats.offer(&refusal("a", 429), time, now));
        assert!(repeats.offer(&refusal("b", 429), time, now), "another job");
        assert!(
            repeats.offer(&refusal("a", 409), time, now),
            "another status"
        );
        let accepted = refusal("a", 200);
        for _ in 0..3 {
            assert!(
                repeats.offer(&accepted, time, now),
                "each accepted action is a line"
            );
        }
        let error = refusal("a", 503);
        assert!(repeats.offer(&error, time, now) && repeats.offer(&error, time, now));
        assert!(
            !repeats.offer(&refusal("b", 429), time, now),
            "a repeat is counted"
        );
        let all = repeats.all();
        assert_eq!(
            all.len(),
            1,
            "only windows with a count give a line: {all:?}"
        );
        assert_eq!(all[0].1, 1);
    }

    #[test]
    fn kinds_beyond_the_bound_are_written_line_by_line() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        let time = Utc::now();
        for n in 0..KINDS {
            assert!(repeats.offer(&refusal(&format!("j{n}"), 429), time, now));
        }
        let extra = refusal("extra", 429);
        assert!(repeats.offer(&extra, time, now) && repeats.offer(&extra, time, now));
        assert_eq!(repeats.bursts.len(), KINDS, "the bound holds");
    }
}
