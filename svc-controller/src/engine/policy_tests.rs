//! In-process tests of what surrounds a run: announcements and notifications,
//! `on_busy`, retries, catch-up of missed slots and random delays; with the fake executor
//! and the manual clock of `testkit`, on tokio's paused clock like `tests.rs`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Kind;
use super::read::JobStatus;
use super::testkit::{Harness, settle, t0};
use super::tests::pairs;
use crate::store::state::RunResult;

const HOUR: Duration = Duration::from_secs(3600);

/// Notifications named by the jobs of [`announcing_jobs`].
const NOTIFS: &str = "[notif \"ok\"]\nkind = webhook\nurl = http://127.0.0.1:9/\nsecret = s\n\
                      [notif \"bad\"]\nkind = webhook\nurl = http://127.0.0.1:9/\nsecret = s\n";

/// `told` announces both results, `quiet` none, `failures` only failures.
fn announcing_jobs() -> String {
    format!(
        "{NOTIFS}[job \"told\"]\npath = /told\ncommand = true\nnotif_on_success = ok\n\
         notif_on_failed = bad, ok\n\
         [job \"quiet\"]\npath = /quiet\ncommand = true\n\
         [job \"failures\"]\npath = /failures\ncommand = true\nnotif_on_failed = bad\n"
    )
}

#[tokio::test(start_paused = true)]
async fn the_end_of_a_run_is_announced_with_its_notifications() {
    let mut h = Harness::new("", &announcing_jobs());
    let (tx, mut ends) = tokio::sync::mpsc::channel(8);
    h.engine.announce_run_ends_to(tx);

    h.trigger_api("told").await.expect("run");
    let run = h.runs.next().await;
    h.clock.advance(Duration::from_secs(90));
    run.output(b"built\n");
    run.finish(true, "ok");
    settle().await;
    let ended = ends.try_recv().expect("announced");
    assert_eq!(h.status("told"), JobStatus::Finished(RunResult::Success));
    assert_eq!((ended.kind, ended.job_id.as_str()), (Kind::Job, "told"));
    assert_eq!((ended.job_name.as_str(), ended.counter), ("told", 1));
    assert_eq!(ended.result, RunResult::Success);
    assert_eq!(ended.notifs, vec!["ok"]);
    assert_eq!(ended.started_at, t0());
    assert_eq!(h.last_run("told"), Some(ended.started_at));
    assert_eq!(ended.ended_at, t0() + Duration::from_secs(90));
    // The log is finished and named by then, where the event says.
    let log = ended
        .log_dir
        .read_end(1, 4096)
        .expect("readable")
        .expect("present");
    assert!(String::from_utf8_lossy(&log).contains("built"));
    assert_eq!(h.log_files("told"), vec!["told.1.success"]);

    h.trigger_api("told").await.expect("run");
    h.runs.next().await.finish(false, "exit code 1");
    settle().await;
    let ended = ends.try_recv().expect("announced");
    assert_eq!((ended.counter, ended.result), (2, RunResult::Fail));
    assert_eq!(ended.notifs, vec!["bad", "ok"]);

    // Nothing for a job without notifications, nor for a result its job does not list.
    h.trigger_api("quiet").await.expect("run");
    h.runs.next().await.finish(false, "exit code 1");
    h.trigger_api("failures").await.expect("run");
    h.runs.next().await.finish(true, "ok");
    settle().await;
    assert!(ends.try_recv().is_err());
    h.trigger_api("failures").await.expect("run");
    h.runs.next().await.finish(false, "exit code 2");
    settle().await;
    let ended = ends.try_recv().expect("announced");
    assert_eq!((ended.job_id.as_str(), ended.counter), ("failures", 2));
}

#[tokio::test(start_paused = true)]
async fn a_full_announcement_channel_never_holds_a_run_back() {
    let mut h = Harness::new("", &announcing_jobs());
    // Room for one, and nobody reads it.
    let (tx, mut ends) = tokio::sync::mpsc::channel(1);
    h.engine.announce_run_ends_to(tx);
    for counter in 1..=3 {
        h.trigger_api("told").await.expect("run");
        let run = h.runs.next().await;
        assert_eq!(run.id(), ("told", counter));
        run.finish(true, "ok");
        settle().await;
        assert!(h.idle("told"), "run {counter} ended at once");
    }
    assert_eq!(h.state_file("told").counter, 3);
    assert_eq!(ends.try_recv().expect("the first").counter, 1);
    assert!(ends.try_recv().is_err(), "the others were dropped");
}

#[tokio::test(start_paused = true)]
async fn without_a_listener_nothing_is_announced_or_kept() {
    let mut h = Harness::new("", &announcing_jobs());
    h.trigger_api("told").await.expect("run");
    h.runs.next().await.finish(true, "ok");
    settle().await;
    assert_eq!(h.status("told"), JobStatus::Finished(RunResult::Success));
    // Set later: runs from then on are announced.
    let (tx, mut ends) = tokio::sync::mpsc::channel(4);
    h.engine.announce_run_ends_to(tx);
    h.trigger_api("told").await.expect("run");
    h.runs.next().await.finish(true, "ok");
    settle().await;
    assert_eq!(ends.try_recv().expect("announced").counter, 2);
}

#[tokio::test(start_paused = true)]
async fn on_busy_skip_drops_what_finds_the_job_running() {
    let mut h = Harness::new(
        "",
        "[job \"s\"]\npath = /s\ninterval = 1h\non_busy = skip\ncommand = true\n",
    );
    h.engine.start_timers();
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("s", 1));
    settle().await;
    // A trigger while it runs: dropped, nothing queued, no 429.
    assert_eq!(h.trigger_api("s").await, Ok(super::Accepted::Skipped));
    assert_eq!(h.state_file("s").queued, None);
    // The next timer slot while it still runs: dropped too.
    h.clock.set(t0() + HOUR);
    settle().await;
    run.finish(true, "ok");
    assert!(h.runs.none().await, "nothing was kept for later");
    assert_eq!(h.executed(), pairs(&[("s", 1)]));
}

#[tokio::test(start_paused = true)]
async fn on_busy_replace_cancels_the_running_run_and_runs_the_new_one() {
    let mut h = Harness::new(
        "",
        "[job \"r\"]\npath = /r\non_busy = replace\ncommand = true\n",
    );
    h.trigger_api("r").await.expect("run");
    let first = h.runs.next().await;
    assert_eq!(first.id(), ("r", 1));
    settle().await;
    // A trigger while it runs: the running run is cancelled, the new one queued (and
    // saved), never 429.
    assert_eq!(h.trigger_api("r").await, Ok(super::Accepted::Queued));
    let second = h.runs.next().await;
    assert_eq!(
        second.id(),
        ("r", 2),
        "the new trigger runs once the old run ended"
    );
    let reason = "replaced by a newer trigger (on_busy = replace)".to_string();
    assert_eq!(h.seen().cancelled, [("r".to_string(), 1, reason.clone())]);
    let log = h.log("r", "r.1.fail");
    assert!(
        log.contains("cancelled: replaced by a newer trigger"),
        "{log}"
    );
    drop(first);
    settle().await;
    // And again, while the second runs.
    assert_eq!(h.trigger_api("r").await, Ok(super::Accepted::Queued));
    let third = h.runs.next().await;
    assert_eq!(third.id(), ("r", 3));
    assert_eq!(
        h.seen().cancelled,
        [
            ("r".to_string(), 1, reason.clone()),
            ("r".to_string(), 2, reason)
        ]
    );
    drop(second);
    third.finish(true, "ok");
    assert!(h.runs.none().await);
    assert_eq!(h.state_file("r").queued, None);
    // The history tells the replaced runs (their fake runner saw a plain failure) from
    // the one that ran to its end, and what started each.
    let history = h
        .engine
        .run_history(Kind::Job, "r", 10, None)
        .expect("the job's history");
    let seen: Vec<_> = history
        .iter()
        .map(|run| (run.counter, run.status, run.trigger.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (3, crate::store::state::RunStatus::Success, "api"),
            (2, crate::store::state::RunStatus::Canceled, "api"),
            (1, crate::store::state::RunStatus::Canceled, "api"),
        ]
    );
    assert!(history.iter().all(|run| run.started_at <= run.ended_at));
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_is_retried_with_doubling_waits_until_the_attempts_run_out() {
    let mut h = Harness::new(
        "",
        "[job \"flaky\"]\npath = /f\nretry = 2\nretry_delay = 10s\ncommand = false\n",
    );
    h.trigger_api("flaky").await.expect("run");
    let first = h.runs.next().await;
    assert_eq!(first.id(), ("flaky", 1));
    let started = tokio::time::Instant::now();
    first.finish(false, "exit code 1");
    let second = h.runs.next().await;
    assert_eq!(second.id(), ("flaky", 2));
    assert_eq!(started.elapsed(), Duration::from_secs(10), "the first wait");
    second.finish(false, "exit code 1");
    let third = h.runs.next().await;
    assert_eq!(third.id(), ("flaky", 3));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(30),
        "the wait doubled"
    );
    third.finish(false, "exit code 1");
    assert!(h.runs.none().await, "three attempts in all");
    let log = h.log("flaky", "flaky.3.fail");
    let first_line = log.lines().next().unwrap_or_default();
    assert!(
        first_line.ends_with("started by retry (attempt 3 of 3, after run 2 failed)"),
        "{log}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_succeeds_ends_the_attempts() {
    let mut h = Harness::new(
        "",
        "[job \"flaky\"]\npath = /f\nretry = 5\nretry_delay = 1s\ncommand = false\n",
    );
    h.trigger_api("flaky").await.expect("run");
    h.runs.next().await.finish(false, "exit code 1");
    h.runs.next().await.finish(true, "ok");
    assert!(h.runs.none().await, "a success is the outcome");
    assert_eq!(h.status("flaky"), JobStatus::Finished(RunResult::Success));
}

#[test]
fn retry_waits_double_and_stop_at_an_hour() {
    let text = "[job \"j\"]\npath = /j\nretry = 20\nretry_delay = 1m\ncommand = true\n";
    let h = crate::config::JobConfig {
        retry_delay: Duration::from_secs(60),
        ..test_job(text)
    };
    assert_eq!(h.retry_wait(2), Duration::from_secs(60));
    assert_eq!(h.retry_wait(3), Duration::from_secs(120));
    assert_eq!(h.retry_wait(4), Duration::from_secs(240));
    assert_eq!(h.retry_wait(8), Duration::from_secs(3600), "capped");
    assert_eq!(h.retry_wait(40), Duration::from_secs(3600));
}

fn test_job(text: &str) -> crate::config::JobConfig {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let main = dir.path().join("etc/svc/svc.conf");
    std::fs::create_dir_all(dir.path().join("etc/svc/job.d")).expect("mkdir");
    std::fs::write(
        &main,
        format!("[svc]\ndir_base = {}\n", dir.path().display()),
    )
    .expect("main");
    std::fs::write(dir.path().join("etc/svc/job.d/j.conf"), text).expect("job");
    crate::config::load(&main).expect("loads").jobs.remove(0)
}

#[tokio::test(start_paused = true)]
async fn notifications_wait_for_the_last_attempt() {
    let mut h = Harness::new(
        "",
        &format!(
            "{NOTIFS}[job \"flaky\"]\npath = /f\nretry = 1\nretry_delay = 1s\n\
             command = false\nnotif_on_failed = bad\n"
        ),
    );
    let (tx, mut ends) = tokio::sync::mpsc::channel(8);
    h.engine.announce_run_ends_to(tx);
    h.trigger_api("flaky").await.expect("run");
    h.runs.next().await.finish(false, "exit code 1");
    settle().await;
    assert!(
        ends.try_recv().is_err(),
        "a retry follows: not the outcome yet"
    );
    h.runs.next().await.finish(false, "exit code 1");
    settle().await;
    let ended = ends.try_recv().expect("the last attempt is announced");
    assert_eq!(ended.counter, 2);
    assert!(ends.try_recv().is_err(), "once");
}

/// A daily 03:00 job whose last run was two days before `t0()` (2026-01-05 10:00).
fn write_last_run(main: &crate::config::MainConfig, id: &str, last_run: DateTime<Utc>) {
    let state = crate::store::state::JobState {
        last_run: Some(last_run),
        last_result: Some(RunResult::Success),
        counter: 1,
        ..Default::default()
    };
    std::fs::write(main.dir_job_state().join(id), state.to_text()).expect("write the state");
}

#[tokio::test(start_paused = true)]
async fn catch_up_once_runs_one_missed_slot_at_start_and_says_so() {
    let jobs = "[job \"d\"]\nschedule = 0 3 * * *\ncatch_up = once\ncommand = true\n\
                [job \"n\"]\nschedule = 0 3 * * *\ncommand = true\n\
                [job \"w\"]\nschedule = 0 3 * * *\ncatch_up = once\ncatch_up_window = 1h\n\
                command = true\n";
    let mut h = Harness::new_after("", jobs, |main| {
        for id in ["d", "n", "w"] {
            write_last_run(main, id, t0() - Duration::from_secs(2 * 86_400));
        }
    });
    h.engine.start_timers();
    // Slots at 03:00 on the 4th and the 5th were missed; one run, for the latest.
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("d", 2));
    run.finish(true, "ok");
    assert!(
        h.runs.none().await,
        "once, and not for catch_up = none or a 1h window"
    );
    let log = h.log("d", "d.2.success");
    assert!(
        log.lines()
            .next()
            .unwrap_or_default()
            .ends_with("started by catch-up (missed slot 2026-01-05T03:00:00Z)"),
        "{log}"
    );
    assert_eq!(
        h.next_run("d"),
        Some("2026-01-06T03:00:00Z".parse().expect("time"))
    );
}

#[tokio::test(start_paused = true)]
async fn catch_up_once_runs_a_slot_missed_while_paused_at_resume() {
    let jobs = "[job \"d\"]\nschedule = 0 11 * * *\ncatch_up = once\ncommand = true\n";
    let mut h = Harness::new_after("", jobs, |main| {
        write_last_run(main, "d", t0() - Duration::from_secs(3600));
    });
    h.engine.start_timers();
    h.engine.pause(Kind::Job, "d").expect("pause");
    // 11:00 passes while paused: skipped.
    h.clock.set(t0() + Duration::from_secs(2 * 3600));
    assert!(h.runs.none().await);
    h.engine.resume(Kind::Job, "d").expect("resume");
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("d", 2));
    run.finish(true, "ok");
    assert!(h.runs.none().await);
}

#[tokio::test(start_paused = true)]
async fn random_delay_moves_each_slot_within_its_bound() {
    let jobs: String = (0..20)
        .map(|n| {
            format!("[job \"r{n}\"]\nschedule = 0 11 * * *\nrandom_delay = 10m\ncommand = true\n")
        })
        .collect();
    let h = Harness::new("", &jobs);
    h.engine.start_timers();
    settle().await;
    let slot: DateTime<Utc> = "2026-01-05T11:00:00Z".parse().expect("time");
    let mut moved = 0;
    for n in 0..20 {
        let next = h.next_run(&format!("r{n}")).expect("a next run");
        assert!(
            next >= slot && next <= slot + Duration::from_secs(600),
            "{next}"
        );
        moved += usize::from(next != slot);
    }
    // Each delay is one of 600,001 milliseconds: all twenty at zero means none is drawn.
    assert!(moved > 0, "no slot was moved");
}

#[test]
fn missed_slots_are_found_within_the_window() {
    use crate::time::schedule::{Schedule, Timer};
    use crate::time::timezone::Zone;
    let timer = Timer::Schedule("0 3 * * *".parse::<Schedule>().expect("cron"), Zone::utc());
    let now = t0();
    let day = Duration::from_secs(86_400);
    let at = |s: &str| s.parse::<DateTime<Utc>>().expect("time");
    assert_eq!(
        timer.missed_slot(Some(now - 3 * day), now, day),
        Some(at("2026-01-05T03:00:00Z"))
    );
    assert_eq!(
        timer.missed_slot(Some(at("2026-01-05T03:30:00Z")), now, day),
        None
    );
    assert_eq!(timer.missed_slot(None, now, day), None, "never ran");
    assert_eq!(
        timer.missed_slot(Some(now - 3 * day), now, Duration::from_secs(3600)),
        None,
        "outside the window"
    );
    let interval = Timer::Interval(Duration::from_secs(60));
    assert_eq!(interval.missed_slot(Some(now - day), now, day), None);
    // A slot every second, thirty days missed: 2.6 million slots, the latest one found.
    let every_second = Timer::Schedule(
        "* * * * * *".parse::<Schedule>().expect("cron"),
        Zone::utc(),
    );
    let now = at("2026-01-06T00:00:00.250Z");
    assert_eq!(
        every_second.missed_slot(Some(now - 30 * day), now, 30 * day),
        Some(at("2026-01-06T00:00:00Z"))
    );
    // In a zone, across New York's fall-back (06:00 UTC): the latest is still the latest.
    let new_york = Zone::parse("America/New_York").expect("a known zone");
    let hourly = Timer::Schedule("0 * * * *".parse::<Schedule>().expect("cron"), new_york);
    let now = at("2026-11-01T06:30:00Z");
    assert_eq!(
        hourly.missed_slot(Some(now - day), now, day),
        Some(at("2026-11-01T06:00:00Z"))
    );
}
