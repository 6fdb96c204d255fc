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

use std::collections::{HashMap, VecDeque};
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
    /// The kinds of `bursts`, oldest window first: windows open as time goes on, so they
    /// end in this order too, and the next to end is the first.
    order: VecDeque<Entry>,
}

impl Repeats {
    /// Offers `entry`, recorded at `time` (`now` on the monotonic clock): the counts of
    /// the windows that ended by `now`, to write first, and whether `entry` is to be
    /// written (true) or was counted in its open window (false).
    pub fn offer(
        &mut self,
        entry: &Entry,
        time: DateTime<Utc>,
        now: Instant,
    ) -> (Vec<Summary>, bool) {
        let due = self.due(now);
        if entry.result != Outcome::Refused {
            return (due, true);
        }
        // Open: the ended windows were just taken.
        if let Some(burst) = self.bursts.get_mut(entry) {
            burst.count += 1;
            burst.last = time;
            return (due, false);
        }
        if self.bursts.len() < KINDS {
            let burst = Burst {
                opened: now,
                count: 0,
                last: time,
            };
            self.bursts.insert(entry.clone(), burst);
            self.order.push_back(entry.clone());
        }
        (due, true)
    }

    /// The counts of the windows that ended by `now` (their kinds forgotten), oldest
    /// window first.
    pub fn due(&mut self, now: Instant) -> Vec<Summary> {
        let ended = |burst: &Burst| now.duration_since(burst.opened) >= WINDOW;
        let mut summaries = Vec::new();
        while self
            .order
            .front()
            .and_then(|entry| self.bursts.get(entry))
            .is_some_and(ended)
        {
            self.close_oldest(&mut summaries);
        }
        summaries
    }

    /// The counts of every open window (before a flush or the writer's end).
    pub fn all(&mut self) -> Vec<Summary> {
        let mut summaries = Vec::new();
        while !self.order.is_empty() {
            self.close_oldest(&mut summaries);
        }
        summaries
    }

    /// When the next window ends, if any is open.
    pub fn next_due(&self) -> Option<Instant> {
        let oldest = self.order.front()?;
        self.bursts.get(oldest).map(|burst| burst.opened + WINDOW)
    }

    /// Forgets the oldest window, adding its count to `summaries` when it has one.
    fn close_oldest(&mut self, summaries: &mut Vec<Summary>) {
        let Some(entry) = self.order.pop_front() else {
            return;
        };
        if let Some(burst) = self.bursts.remove(&entry)
            && burst.count > 0
        {
            summaries.push((entry, burst.count, burst.last));
        }
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

    /// Offers `entry` where no window has ended: whether it is written.
    fn written(repeats: &mut Repeats, entry: &Entry, time: DateTime<Utc>, now: Instant) -> bool {
        let (due, write) = repeats.offer(entry, time, now);
        assert!(due.is_empty(), "no window ended yet: {due:?}");
        write
    }

    #[test]
    fn a_burst_of_one_refusal_is_its_first_line_and_one_count() {
        let mut repeats = Repeats::default();
        let start = Instant::now();
        let time = Utc::now();
        let entry = refusal("a", 429);
        assert!(
            written(&mut repeats, &entry, time, start),
            "the first is written"
        );
        for n in 1..=999u32 {
            let at = start + Duration::from_micros(u64::from(n) * 500);
            assert!(
                !written(&mut repeats, &entry, time, at),
                "repeat {n} is counted"
            );
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
        assert!(written(&mut repeats, &entry, time, start + WINDOW * 2));
    }

    #[test]
    fn other_kinds_and_accepted_actions_are_written_each() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        let time = Utc::now();
        assert!(written(&mut repeats, &refusal("a", 429), time, now));
        assert!(
            written(&mut repeats, &refusal("b", 429), time, now),
            "another job"
        );
        assert!(
            written(&mut repeats, &refusal("a", 409), time, now),
            "another status"
        );
        let accepted = refusal("a", 200);
        for _ in 0..3 {
            assert!(
                written(&mut repeats, &accepted, time, now),
                "each accepted action is a line"
            );
        }
        let error = refusal("a", 503);
        assert!(
            written(&mut repeats, &error, time, now) && written(&mut repeats, &error, time, now)
        );
        assert!(
            !written(&mut repeats, &refusal("b", 429), time, now),
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
            assert!(written(
                &mut repeats,
                &refusal(&format!("j{n}"), 429),
                time,
                now
            ));
        }
        let extra = refusal("extra", 429);
        assert!(
            written(&mut repeats, &extra, time, now) && written(&mut repeats, &extra, time, now)
        );
        assert_eq!(repeats.bursts.len(), KINDS, "the bound holds");
    }

    fn anonymous_refusal(address: &str) -> Entry {
        Entry::answered(
            Actor::Anonymous,
            Action::Pause,
            None,
            Some(address.into()),
            403,
            "a signature or a session is needed",
        )
    }

    #[test]
    fn ended_windows_come_with_the_next_offer_oldest_first() {
        let mut repeats = Repeats::default();
        let start = Instant::now();
        let time = Utc::now();
        let (a, b) = (
            anonymous_refusal("192.0.2.1"),
            anonymous_refusal("192.0.2.2"),
        );
        assert!(repeats.offer(&a, time, start).1);
        assert!(repeats.offer(&b, time, start + WINDOW / 4).1);
        assert!(!repeats.offer(&b, time, start + WINDOW / 2).1);
        assert!(!repeats.offer(&a, time, start + WINDOW / 2).1);
        assert_eq!(
            repeats.next_due(),
            Some(start + WINDOW),
            "a's window ends first"
        );
        // Both windows ended: their counts come first, a's (the older) before b's, and
        // the entry offered opens a new window.
        let (due, write) = repeats.offer(&a, time, start + WINDOW * 2);
        let counted: Vec<(&Entry, u64)> = due.iter().map(|(e, n, _)| (e, *n)).collect();
        assert_eq!(counted, [(&a, 1), (&b, 1)]);
        assert!(write);
        assert_eq!(repeats.next_due(), Some(start + WINDOW * 3));
        assert!(repeats.all().is_empty(), "the new window has no count yet");
        assert_eq!(repeats.next_due(), None);
    }
}
