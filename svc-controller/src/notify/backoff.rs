//! When a notification that failed is tried again: a bounded number of attempts, each
//! wait four times the one before (2 s, 8 s, 32 s, 128 s: five attempts within three
//! minutes). Pure functions, so the schedule is tested without waiting.

use std::time::Duration;

/// Attempts per notification, the first one included.
pub const ATTEMPTS: u32 = 5;

/// The wait after the first failed attempt.
const FIRST_WAIT: Duration = Duration::from_secs(2);

/// Each wait is this many times the one before.
const FACTOR: u32 = 4;

/// The wait before the attempt after attempt `attempt` (1-based) failed; `None` when
/// that was the last one.
pub fn wait_after(attempt: u32) -> Option<Duration> {
    if attempt == 0 || attempt >= ATTEMPTS {
        return None;
    }
    Some(FIRST_WAIT * FACTOR.pow(attempt - 1))
}

/// The time from the first attempt to the start of the last one, all waits together.
#[cfg(test)]
pub fn total_wait() -> Duration {
    (1..ATTEMPTS).filter_map(wait_after).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_attempts_each_wait_four_times_the_one_before() {
        let waits: Vec<Option<Duration>> = (1..=ATTEMPTS + 1).map(wait_after).collect();
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(
            waits,
            vec![secs(2), secs(8), secs(32), secs(128), None, None]
        );
        assert_eq!(wait_after(0), None);
        assert_eq!(wait_after(u32::MAX), None);
    }

    #[test]
    fn all_attempts_fit_in_a_few_minutes() {
        assert_eq!(total_wait(), Duration::from_secs(170));
    }
}
