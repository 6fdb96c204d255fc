//! Unit tests of `schedule.rs`.

use super::*;
use chrono::TimeZone;

pub(super) fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
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

pub(super) fn sched(text: &str) -> Schedule {
    text.parse().expect("schedule should parse")
}

pub(super) fn err(text: &str) -> String {
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
