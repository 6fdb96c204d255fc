//! In-process tests of the engine: timers, the one-slot queue, pause, cancel, the
//! `max_job_running` permits, log retention and shutdown, with the fake executor and the
//! manual clock of `testkit`. No test here starts a process or waits for real time:
//! each runs on tokio's paused clock, so waiting for the engine to settle is free.

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::read::{JobRef, JobStatus};
use super::run::tests::{ABANDONED_REASON, PANIC_PREFIX, PAUSE_RACE_PAUSED, PAUSE_RACE_PREFIX};
use super::testkit::{Harness, Origin, settle, t0};
use super::{DeliveryFacts, EngineError, Kind, Trigger, TriggerSource};
use crate::store::state::{QueuedTrigger, RunResult};

const HOUR: Duration = Duration::from_secs(3600);

pub(super) fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("a valid time")
}

pub(super) fn pairs(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(id, n)| (id.to_string(), *n)).collect()
}

/// A webhook-only job (no timer) per ID.
pub(super) fn webhook_jobs(ids: &[&str]) -> String {
    ids.iter()
        .map(|id| format!("[job \"{id}\"]\npath = /{id}\ncommand = true\n\n"))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_interval_timer_fires_at_its_due_times_and_next_run_is_exact() {
    let mut h = Harness::new("", "[job \"tick\"]\ninterval = 1h\ncommand = true\n");
    h.engine.start_timers();

    // Never ran: due at once, with no time to start a runner ahead.
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("tick", 1));
    assert_eq!(run.origin, Origin::Taken);
    settle().await;
    assert_eq!(h.last_run("tick"), Some(t0()));
    assert_eq!(h.next_run("tick"), Some(t0() + HOUR));
    assert_eq!(h.status("tick"), JobStatus::Started);
    run.finish(true, "ok");
    settle().await;
    assert_eq!(h.status("tick"), JobStatus::Finished(RunResult::Success));

    // A second before the due time nothing happens; within the launch-ahead time a
    // runner is started, but gets no work before the due time.
    h.clock.set(t0() + HOUR - Duration::from_secs(1));
    assert!(h.runs.none().await);
    assert_eq!(h.seen().launched, 0);
    h.clock.advance(Duration::from_millis(900));
    assert!(h.runs.none().await);
    assert_eq!(h.seen().launched, 1);

    h.clock.advance(Duration::from_millis(100));
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("tick", 2));
    assert_eq!(
        run.origin,
        Origin::Launched,
        "the runner started ahead did it"
    );
    settle().await;
    assert_eq!(h.last_run("tick"), Some(t0() + HOUR));
    assert_eq!(h.next_run("tick"), Some(t0() + 2 * HOUR));
    run.finish(true, "ok");
    settle().await;

    // The clock jumps past two due times: one run, and the timer stays on its grid.
    h.clock.set(t0() + 4 * HOUR + Duration::from_secs(1800));
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("tick", 3));
    settle().await;
    assert_eq!(h.next_run("tick"), Some(t0() + 5 * HOUR));
    run.finish(false, "exit code 1");
    assert!(
        h.runs.none().await,
        "missed ticks are skipped, not caught up"
    );
    assert_eq!(h.status("tick"), JobStatus::Finished(RunResult::Fail));
    assert_eq!(
        h.executed(),
        pairs(&[("tick", 1), ("tick", 2), ("tick", 3)])
    );
    let state = h.state_file("tick");
    assert_eq!(state.counter, 3);
    assert_eq!(
        state.last_run,
        Some(t0() + 4 * HOUR + Duration::from_secs(1800))
    );
}

#[tokio::test(start_paused = true)]
async fn a_clock_stepped_back_does_not_fire_a_timer_early() {
    let mut h = Harness::new(
        "",
        "[job \"hourly\"]\nschedule = hourly@0\ncommand = true\n",
    );
    h.engine.start_timers();
    settle().await;
    assert_eq!(h.next_run("hourly"), Some(t0() + HOUR));

    // Inside the launch-ahead time, then stepped back an hour: the runner started ahead
    // waits, and nothing runs until the due time really comes.
    h.clock.set(t0() + HOUR - Duration::from_millis(200));
    assert!(h.runs.none().await);
    h.clock.set(t0());
    assert!(h.runs.none().await);
    h.clock.set(t0() + HOUR - Duration::from_millis(1));
    assert!(h.runs.none().await);
    h.clock.set(t0() + HOUR);
    let run = h.runs.next().await;
    assert_eq!((run.id(), run.origin), (("hourly", 1), Origin::Launched));
    run.finish(true, "ok");
    settle().await;
    assert_eq!(h.seen().launched, 1);
    assert_eq!(h.next_run("hourly"), Some(t0() + 2 * HOUR));
}

#[tokio::test(start_paused = true)]
async fn calendar_schedules_fire_at_their_next_matching_times() {
    let mut h = Harness::new(
        "",
        "[job \"weekly\"]\nschedule = weekly@fri@09:15\ncommand = true\n\n\
         [job \"twice\"]\nschedule = daily@06:00,18:30\ncommand = true\n",
    );
    h.engine.start_timers();
    settle().await;
    // Monday 10:00: Friday 09:15 of the same week; today 18:30.
    assert_eq!(h.next_run("weekly"), Some(at("2026-01-09T09:15:00Z")));
    assert_eq!(h.next_run("twice"), Some(at("2026-01-05T18:30:00Z")));

    h.clock.set(at("2026-01-05T18:29:59Z"));
    assert!(h.runs.none().await);
    h.clock.set(at("2026-01-05T18:30:00Z"));
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("twice", 1));
    run.finish(true, "ok");
    settle().await;
    assert_eq!(h.next_run("twice"), Some(at("2026-01-06T06:00:00Z")));
    assert_eq!(h.last_run("twice"), Some(at("2026-01-05T18:30:00Z")));

    h.clock.set(at("2026-01-06T06:00:00Z"));
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("twice", 2));
    run.finish(true, "ok");
    settle().await;
    assert_eq!(h.next_run("twice"), Some(at("2026-01-06T18:30:00Z")));
    assert_eq!(h.next_run("weekly"), Some(at("2026-01-09T09:15:00Z")));
    assert_eq!(h.last_run("weekly"), None);

    // Friday: the weekly job runs, and so does the daily one, once for all the times it
    // missed since Tuesday morning.
    // With one `max_job_running` permit, one after the other.
    h.clock.set(at("2026-01-09T09:15:00Z"));
    let first = h.runs.next().await;
    let first_id = first.id().0.to_string();
    first.finish(true, "ok");
    let second = h.runs.next().await;
    let mut ids = [first_id, second.id().0.to_string()];
    second.finish(true, "ok");
    ids.sort();
    assert_eq!(ids, ["twice", "weekly"]);
    assert!(h.runs.none().await);
    assert_eq!(h.next_run("weekly"), Some(at("2026-01-16T09:15:00Z")));
    assert_eq!(h.next_run("twice"), Some(at("2026-01-09T18:30:00Z")));
    assert_eq!(h.last_run("weekly"), Some(at("2026-01-09T09:15:00Z")));
}

/// The syncer writes the state at a run's end unless a snapshot taken after that end
/// was written meanwhile (in a flood, the next run's start writes it at once): that
/// file holds the end already.
#[tokio::test(start_paused = true)]
async fn the_state_at_a_runs_end_is_not_written_again_once_a_later_one_was() {
    let mut h = Harness::new("", &webhook_jobs(&["hook"]));
    h.trigger_api("hook").await.expect("a run starts");
    h.runs.next().await.finish(true, "ok");
    settle().await;
    assert_eq!(h.state_file("hook").last_result, Some(RunResult::Success));
    let path = h.engine.main().dir_job_state().join("hook");
    let snapshots = |h: &Harness| {
        h.engine
            .lock()
            .get(Kind::Job, "hook")
            .map(|entry| (entry.saving.snapshots, entry.saving.saved))
            .expect("the job")
    };
    let (at_end, saved) = snapshots(&h);
    assert_eq!(saved, at_end, "the end was written");

    // A later write, then the syncer's write of that end: skipped.
    h.engine
        .persist(Kind::Job, "hook", crate::util::fsutil::Durability::Atomic);
    assert_eq!(snapshots(&h), (at_end + 1, at_end + 1));
    std::fs::remove_file(&path).expect("remove the state file");
    h.engine.persist_after(Kind::Job, "hook", at_end);
    assert!(!path.exists(), "not written again");

    // The end of a run after the last write is written.
    h.engine.persist_after(Kind::Job, "hook", at_end + 1);
    assert!(path.exists(), "written");
    assert_eq!(snapshots(&h), (at_end + 2, at_end + 2));
}

/// What a controller that died while a run that took the queued trigger went on left:
/// the state file still holds the trigger (with `id`) and the take record names
/// `taken`. Returns the harness after the start.
fn after_a_crash_with_take_record(id: u64, taken: Option<u64>) -> Harness {
    Harness::new_after("", &webhook_jobs(&["hook"]), |main| {
        let state = main.dir_job_state().join("hook");
        std::fs::write(
            &state,
            format!(
                "last_run = 2026-01-01T00:00:00Z\nstatus = started\ncounter = 7\n\
                 paused = false\nqueued = api\nqueued_id = {id:016x}\n"
            ),
        )
        .expect("write the state file");
        if let Some(taken) = taken {
            crate::store::state::write_taken(&crate::store::state::taken_path(&state), taken)
                .expect("write the take record");
        }
    })
}

/// The run that took a queued trigger recorded it before its command started; a
/// controller killed during that run does not run the trigger again at its next start.
#[tokio::test(start_paused = true)]
async fn a_queued_trigger_whose_taking_was_recorded_is_not_run_again_after_a_crash() {
    let mut h = after_a_crash_with_take_record(0xabc, Some(0xabc));
    h.engine.start_timers();
    assert!(h.runs.none().await, "not run again");
    let state = h.state_file("hook");
    assert_eq!(state.queued, None, "and no longer queued");
    assert_eq!(state.counter, 7, "no number is skipped");
}

/// A take record of another trigger (an earlier one) leaves the queued one to run.
#[tokio::test(start_paused = true)]
async fn a_queued_trigger_with_no_record_of_its_taking_runs_after_a_crash() {
    for taken in [None, Some(0xabb)] {
        let mut h = after_a_crash_with_take_record(0xabc, taken);
        h.engine.start_timers();
        let run = h.runs.next().await;
        assert_eq!(run.id(), ("hook", 8), "with the record {taken:?}");
        run.finish(true, "ok");
        settle().await;
        assert_eq!(h.state_file("hook").queued, None);
    }
}

#[tokio::test(start_paused = true)]
async fn a_trigger_while_busy_takes_the_one_queue_slot_and_runs_after() {
    let mut h = Harness::new("", &webhook_jobs(&["hook"]));

    h.trigger_api("hook")
        .await
        .expect("the first trigger starts a run");
    let first = h.runs.next().await;
    assert_eq!(first.id(), ("hook", 1));
    assert_eq!(first.env("SVC_EVENT"), None);

    let webhook = Trigger {
        source: TriggerSource::Webhook,
        body: Some(Bytes::from_static(b"{\"ref\":\"main\"}")),
        facts: DeliveryFacts {
            event: Some("push".into()),
            id: Some("delivery-7".into()),
            git_ref: Some("refs/heads/main".into()),
            commit: Some("0d1a26e".into()),
        },
        cause: None,
        attempt: 1,
    };
    h.engine
        .trigger(Kind::Job, "hook", webhook)
        .await
        .expect("the second trigger is queued");
    // Queued means saved: the state file holds it when the trigger is answered, with
    // the ID that the record of its taking names.
    let queued = h.state_file("hook").queued.expect("the queued trigger");
    assert!(queued.id.is_some(), "{queued:?}");
    assert_eq!(
        QueuedTrigger {
            id: None,
            ..queued.clone()
        },
        QueuedTrigger {
            source: "webhook".into(),
            facts: DeliveryFacts {
                event: Some("push".into()),
                id: Some("delivery-7".into()),
                git_ref: Some("refs/heads/main".into()),
                commit: Some("0d1a26e".into()),
            },
            body: Some(b"{\"ref\":\"main\"}".to_vec()),
            id: None,
        }
    );
    assert_eq!(h.trigger_api("hook").await, Err(EngineError::Busy));
    assert!(h.runs.none().await, "the queued trigger waits for the run");

    first.finish(true, "ok");
    let second = h.runs.next().await;
    assert_eq!(second.id(), ("hook", 2));
    // Its taking was recorded before it started.
    let taken = crate::store::state::taken_path(&h.engine.main().dir_job_state().join("hook"));
    assert_eq!(
        crate::store::state::read_taken(&taken).expect("read the take record"),
        queued.id
    );
    // The webhook's data reached the run: its facts, and its body in a file.
    assert_eq!(second.env("SVC_EVENT"), Some("push"));
    assert_eq!(second.env("SVC_DELIVERY"), Some("delivery-7"));
    assert_eq!(second.env("SVC_REF"), Some("refs/heads/main"));
    assert_eq!(second.env("SVC_COMMIT"), Some("0d1a26e"));
    let body_path = second
        .env("SVC_REQUEST_BODY")
        .expect("a body file")
        .to_owned();
    assert_eq!(
        std::fs::read(&body_path).expect("the body file"),
        b"{\"ref\":\"main\"}"
    );
    settle().await;
    assert_eq!(h.status("hook"), JobStatus::Started);

    // The slot is free again while the second run goes on.
    h.trigger_api("hook")
        .await
        .expect("queued behind the second run");
    second.finish(false, "exit code 2");
    let third = h.runs.next().await;
    assert_eq!(third.id(), ("hook", 3));
    // The syncer clears a run's files after its end, off the run path: wait for it.
    h.engine.inner.syncer.flush();
    assert!(
        !std::path::Path::new(&body_path).exists(),
        "the body file goes with its run"
    );
    third.finish(true, "ok");
    assert!(h.runs.none().await);
    assert!(h.idle("hook"));
    assert_eq!(
        h.executed(),
        pairs(&[("hook", 1), ("hook", 2), ("hook", 3)])
    );
    assert_eq!(
        h.log_files("hook"),
        ["hook.1.success", "hook.2.fail", "hook.3.success"]
    );
}

#[tokio::test(start_paused = true)]
async fn pause_refuses_triggers_and_skips_the_timer_until_resume() {
    let mut h = Harness::new(
        "",
        "[job \"p\"]\nschedule = hourly@0\npath = /p\ncommand = true\n",
    );
    h.engine.start_timers();
    settle().await;
    assert_eq!(h.next_run("p"), Some(t0() + HOUR));

    h.engine.pause(Kind::Job, "p").expect("pause");
    assert_eq!(h.status("p"), JobStatus::Paused);
    assert!(h.state_file("p").paused, "the pause is saved");
    assert_eq!(h.trigger_api("p").await, Err(EngineError::Paused));

    // The due time passes: no runner is even started, and the timer moves on.
    h.clock.set(t0() + HOUR);
    assert!(h.runs.none().await);
    let seen = h.seen();
    assert_eq!((seen.launched, seen.taken.len()), (0, 0));
    assert_eq!(h.next_run("p"), Some(t0() + 2 * HOUR));

    h.engine.resume(Kind::Job, "p").expect("resume");
    assert!(!h.state_file("p").paused);
    h.trigger_api("p").await.expect("triggers are taken again");
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("p", 1));
    h.trigger_api("p").await.expect("queued");

    // Paused while running: the run goes on, the queued trigger waits for the resume.
    h.engine.pause(Kind::Job, "p").expect("pause while running");
    run.finish(true, "ok");
    assert!(h.runs.none().await);
    assert!(h.idle("p"));
    assert_eq!(h.status("p"), JobStatus::Paused);
    assert!(h.state_file("p").queued.is_some(), "kept for the resume");

    h.engine.resume(Kind::Job, "p").expect("resume");
    let run = h.runs.next().await;
    assert_eq!(run.id(), ("p", 2));
    run.finish(true, "ok");
    settle().await;

    // The timer fires again.
    h.clock.set(t0() + 2 * HOUR);
    let run = h.runs.next().await;
    assert_eq!((run.id(), run.origin), (("p", 3), Origin::Launched));
    run.finish(true, "ok");
    assert!(h.runs.none().await);
    assert_eq!(h.next_run("p"), Some(t0() + 3 * HOUR));
    assert_eq!(h.executed(), pairs(&[("p", 1), ("p", 2), ("p", 3)]));
}

#[tokio::test(start_paused = true)]
async fn cancel_delivers_its_reason_to_the_executor_and_drops_the_queued_trigger() {
    let mut h = Harness::new("", &webhook_jobs(&["c"]));
    assert_eq!(h.engine.cancel(Kind::Job, "c", "too early"), Ok(false));
    assert_eq!(
        h.engine.cancel(Kind::Job, "nope", "no such job"),
        Err(EngineError::NotFound)
    );

    h.trigger_api("c").await.expect("run");
    let run = h.runs.next().await;
    run.line("--- working");
    h.trigger_api("c").await.expect("queued");
    settle().await;

    assert_eq!(
        h.engine.cancel(Kind::Job, "C", "stopped by the operator"),
        Ok(true),
        "found in any case"
    );
    assert!(
        h.runs.none().await,
        "the queued trigger went with the cancel"
    );
    assert_eq!(
        h.seen().cancelled,
        [("c".to_string(), 1, "stopped by the operator".to_string())]
    );
    assert!(h.idle("c"));
    assert_eq!(h.status("c"), JobStatus::Finished(RunResult::Fail));
    assert_eq!(h.state_file("c").queued, None);
    assert_eq!(h.log_files("c"), ["c.1.fail"]);
    let log = h.log("c", "c.1.fail");
    assert!(log.contains("--- working"), "{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.ends_with("=== run 1 finished: fail: cancelled: stopped by the operator"),
        "{log}"
    );
    assert_eq!(h.engine.cancel(Kind::Job, "c", "again"), Ok(false));
    assert_eq!(h.log_files("c"), ["c.1.fail"], "nothing changed");
    drop(run);
}

#[tokio::test(start_paused = true)]
async fn max_job_running_permits_serialise_runs_of_different_jobs_in_arrival_order() {
    let mut h = Harness::new("max_job_running = 2", &webhook_jobs(&["a", "b", "c", "d"]));
    // Arrival order: d, b, c, a (not the order of the IDs).
    for id in ["d", "b", "c", "a"] {
        h.trigger_api(id).await.expect("accepted");
        settle().await;
    }
    let d = h.runs.next().await;
    let b = h.runs.next().await;
    assert_eq!((d.id(), b.id()), (("d", 1), ("b", 1)));
    assert!(h.runs.none().await, "two permits, two runs");
    assert_eq!(h.status("d"), JobStatus::Started);
    assert_eq!(h.status("b"), JobStatus::Started);
    // The waiting ones have no counter yet.
    assert_eq!(h.status("c"), JobStatus::Never);
    assert_eq!(h.status("a"), JobStatus::Never);
    assert!(!h.idle("c") && !h.idle("a"));

    // A waiting job's accepted trigger is in its state file, where it holds the job's
    // one queue slot until its run begins: a second trigger is refused as busy (were it
    // queued, the file's one slot could keep only one of the two).
    for id in ["c", "a"] {
        assert!(
            h.state_file(id).queued.is_some(),
            "{id}'s trigger is on disk"
        );
    }
    assert_eq!(h.trigger_api("c").await, Err(EngineError::Busy));

    b.finish(true, "ok");
    let c = h.runs.next().await;
    assert_eq!(c.id(), ("c", 1), "the first to wait gets the permit");
    assert!(h.runs.none().await);
    d.finish(true, "ok");
    let a = h.runs.next().await;
    assert_eq!(a.id(), ("a", 1));
    // Begun, c takes a trigger into its queue again.
    h.trigger_api("c")
        .await
        .expect("queued behind a run that began");
    c.finish(true, "ok");
    // c's queued trigger asks for a permit again, behind nobody: a holds the other.
    let c2 = h.runs.next().await;
    assert_eq!(c2.id(), ("c", 2));
    a.finish(true, "ok");
    c2.finish(true, "ok");
    assert!(h.runs.none().await);
    assert_eq!(
        h.executed(),
        pairs(&[("d", 1), ("b", 1), ("c", 1), ("a", 1), ("c", 2)])
    );
    for id in ["a", "b", "c", "d"] {
        assert!(
            h.state_file(id).queued.is_none(),
            "{id}: nothing left queued"
        );
    }
    assert_eq!(h.engine.inner.job_slots.available_permits(), 2);
}

/// A run whose job has a trigger queued keeps its permit for that trigger's run (its
/// end and the next begin are one trip), but not while another job waits for one.
#[tokio::test(start_paused = true)]
async fn a_queued_run_follows_at_once_unless_another_job_waits_for_the_permit() {
    let mut h = Harness::new("max_job_running = 1", &webhook_jobs(&["x", "y"]));
    h.trigger_api("x").await.expect("run");
    let x1 = h.runs.next().await;
    h.trigger_api("x").await.expect("queued");
    h.trigger_api("y").await.expect("waits");
    settle().await;
    // y waits for the permit: x hands it back and its queued run waits behind y.
    x1.finish(true, "ok");
    let y1 = h.runs.next().await;
    assert_eq!(y1.id(), ("y", 1), "the job that waited first goes first");
    assert!(h.runs.none().await);
    h.trigger_api("y").await.expect("queued");
    y1.finish(true, "ok");
    let x2 = h.runs.next().await;
    assert_eq!(x2.id(), ("x", 2));
    x2.finish(true, "ok");
    let y2 = h.runs.next().await;
    assert_eq!(y2.id(), ("y", 2));
    // Nobody waits now: y's next queued run follows at once, on the same permit.
    h.trigger_api("y").await.expect("queued");
    y2.finish(true, "ok");
    let y3 = h.runs.next().await;
    assert_eq!(y3.id(), ("y", 3));
    assert_eq!(h.engine.inner.job_slots.available_permits(), 0);
    y3.finish(true, "ok");
    settle().await;
    assert!(h.runs.none().await);
    assert!(h.idle("x") && h.idle("y"));
    assert_eq!(h.engine.inner.job_slots.available_permits(), 1);
    assert_eq!(
        h.engine
            .inner
            .permit_waiters
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert_eq!(
        h.executed(),
        pairs(&[("x", 1), ("y", 1), ("x", 2), ("y", 2), ("y", 3)])
    );
    // Only the run that followed another at once wants the next spare at once; the
    // others start it once their own command has started.
    use super::executor::SpareStart::{AfterCommandStart, Now};
    assert_eq!(
        h.seen().taken,
        [
            AfterCommandStart,
            AfterCommandStart,
            AfterCommandStart,
            AfterCommandStart,
            Now
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn log_retention_keeps_the_newest_logs() {
    let mut h = Harness::new(
        "",
        "[job \"r\"]\npath = /r\ncommand = true\nlog_retention = 2\n",
    );
    for n in 1..=4u64 {
        h.trigger_api("r").await.expect("run");
        let run = h.runs.next().await;
        assert_eq!(run.id(), ("r", n));
        run.output(format!("output of run {n}\n").as_bytes());
        run.finish(n % 2 == 0, "exit code 1");
        settle().await;
        let kept: Vec<u64> = (n.saturating_sub(1).max(1)..=n).collect();
        assert_eq!(h.engine.log_counters(Kind::Job, "r"), Ok(kept));
    }
    assert_eq!(h.log_files("r"), ["r.3.fail", "r.4.success"]);
    let log = h.log("r", "r.4.success");
    assert!(log.contains("output of run 4"), "{log}");
    assert!(
        log.lines()
            .last()
            .unwrap_or_default()
            .ends_with("=== run 4 finished: success")
    );
    let state = h.state_file("r");
    assert_eq!(state.counter, 4);
    assert_eq!(state.last_result, Some(RunResult::Success));
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_runs_and_keeps_accepted_triggers() {
    let mut h = Harness::new("", &webhook_jobs(&["a", "b"]));
    h.trigger_api("a").await.expect("run");
    let run = h.runs.next().await;
    h.trigger_api("a").await.expect("queued");
    h.trigger_api("b").await.expect("waits for the permit");
    settle().await;

    let started = tokio::time::Instant::now();
    h.engine.shutdown(Duration::from_secs(30)).await;
    assert!(started.elapsed() < Duration::from_secs(30));

    // The running one was ended with the reason, and recorded.
    assert_eq!(
        h.seen().cancelled,
        [(
            "a".to_string(),
            1,
            "the service is shutting down".to_string()
        )]
    );
    assert_eq!(h.executed(), pairs(&[("a", 1)]), "nothing else began");
    assert_eq!(h.log_files("a"), ["a.1.fail"]);
    assert_eq!(h.state_file("a").last_result, Some(RunResult::Fail));
    // Accepted triggers stay in the state files for the next start: a's queued one, and
    // b's, which was waiting for a permit.
    assert!(h.state_file("a").queued.is_some());
    assert_eq!(
        h.state_file("b").queued.map(|q| q.source),
        Some("api".to_string())
    );
    assert_eq!(h.log_files("b"), Vec::<String>::new());
    assert_eq!(h.state_file("a").counter, 1);
    assert_eq!(h.trigger_api("a").await, Err(EngineError::ShuttingDown));
    drop(run);
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_runs_up_to_its_limit() {
    let mut h = Harness::new("max_job_running = 2", &webhook_jobs(&["late", "stuck"]));
    h.fake.ignore_cancel();
    h.trigger_api("late").await.expect("run");
    h.trigger_api("stuck").await.expect("run");
    // Both begin at once, in no set order.
    let mut runs = [h.runs.next().await, h.runs.next().await];
    runs.sort_by(|a, b| a.id().cmp(&b.id()));
    let [late, stuck] = runs;
    assert_eq!((late.id(), stuck.id()), (("late", 1), ("stuck", 1)));

    let engine = h.engine.clone();
    let started = tokio::time::Instant::now();
    let shutdown = tokio::spawn(async move {
        engine.shutdown(Duration::from_secs(30)).await;
        started.elapsed()
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!shutdown.is_finished(), "waits while runs go on");
    assert_eq!(h.seen().cancelled.len(), 2, "both were asked to end");

    late.finish(false, "ended late");
    settle().await;
    assert!(!shutdown.is_finished(), "one run still goes on");
    assert_eq!(h.log_files("late"), ["late.1.fail"]);

    let waited = shutdown.await.expect("the shutdown");
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(31)).contains(&waited),
        "gave up at the limit: {waited:?}"
    );
    assert!(!h.idle("stuck"));
    drop(stuck);
}

#[tokio::test(start_paused = true)]
async fn a_stale_runner_started_ahead_is_replaced_and_ended() {
    let mut h = Harness::new("", "[job \"s\"]\nschedule = hourly@30\ncommand = true\n");
    h.fake.stale_launches();
    h.engine.start_timers();
    settle().await;
    h.clock.set(t0() + HOUR / 2);
    let run = h.runs.next().await;
    assert_eq!((run.id(), run.origin), (("s", 1), Origin::Taken));
    run.finish(true, "ok");
    settle().await;
    let seen = h.seen();
    assert_eq!((seen.launched, seen.taken.len(), seen.unused), (1, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_run_task_that_panics_fails_its_run_and_frees_the_job() {
    let mut h = Harness::new("", &webhook_jobs(&[PANIC_PREFIX]));

    h.trigger_api(PANIC_PREFIX)
        .await
        .expect("the first trigger is accepted");
    assert!(h.runs.none().await, "the task panicked before executing");
    assert!(h.idle(PANIC_PREFIX));
    let log_1 = format!("{PANIC_PREFIX}.1.fail");
    assert_eq!(h.log_files(PANIC_PREFIX), std::slice::from_ref(&log_1));
    let content = h.log(PANIC_PREFIX, &log_1);
    let last = content.lines().last().unwrap_or_default();
    assert!(
        last.ends_with(&format!("=== run 1 finished: fail: {ABANDONED_REASON}")),
        "{content}"
    );
    assert_eq!(h.status(PANIC_PREFIX), JobStatus::Finished(RunResult::Fail));
    assert_eq!(
        h.engine.inner.job_slots.available_permits(),
        1,
        "the max_job_running permit is back"
    );
    assert_eq!(h.state_file(PANIC_PREFIX).counter, 1);
    let history = h
        .engine
        .run_history(Kind::Job, PANIC_PREFIX, 10, None)
        .expect("the job's history");
    assert_eq!(
        history
            .iter()
            .map(|run| (run.counter, run.status))
            .collect::<Vec<_>>(),
        [(1, crate::store::state::RunStatus::Fail)],
        "the abandoned run is in the history"
    );
    let seen = h.seen();
    assert_eq!(
        (seen.taken.len(), seen.unused),
        (1, 1),
        "its runner was ended"
    );

    // The job takes triggers again, and each runs (and panics, and is recorded).
    for _ in 0..2 {
        h.trigger_api(PANIC_PREFIX)
            .await
            .expect("the job takes a new trigger");
        settle().await;
    }
    assert!(h.runs.none().await);
    assert!(h.idle(PANIC_PREFIX));
    assert_eq!(
        h.log_files(PANIC_PREFIX),
        [
            log_1,
            format!("{PANIC_PREFIX}.2.fail"),
            format!("{PANIC_PREFIX}.3.fail")
        ]
    );
}

/// An accepted trigger whose job is paused and resumed while its run task is about to
/// start still runs: the resume finds the job busy with that task, so the task must
/// start the run itself instead of dropping the trigger.
#[tokio::test(start_paused = true)]
async fn a_trigger_paused_and_resumed_before_its_start_still_runs() {
    let mut h = Harness::new("", &webhook_jobs(&[PAUSE_RACE_PREFIX]));

    h.trigger_api(PAUSE_RACE_PREFIX)
        .await
        .expect("the trigger is accepted");
    let run = h.runs.next().await;
    assert_eq!(run.id(), (PAUSE_RACE_PREFIX, 1));
    assert!(PAUSE_RACE_PAUSED.load(std::sync::atomic::Ordering::SeqCst));
    run.finish(true, "ok");
    assert!(h.runs.none().await);
    assert!(h.idle(PAUSE_RACE_PREFIX));
    assert_eq!(
        h.status(PAUSE_RACE_PREFIX),
        JobStatus::Finished(RunResult::Success),
        "ran, and is not paused"
    );
    assert_eq!(h.executed(), pairs(&[(PAUSE_RACE_PREFIX, 1)]));
    assert_eq!(h.state_file(PAUSE_RACE_PREFIX).queued, None);
}

/// A pause's or resume's answer is the job as that change left it, looked at under the
/// same lock: a resumed JobHttp is `started` (endpoint 8), whatever its timer begins and
/// ends while the change is saved.
#[tokio::test(start_paused = true)]
async fn a_pause_or_resume_is_seen_as_the_change_left_the_job() {
    let h = Harness::new(
        "",
        "[job.http \"ping\"]\nhttp_url = http://127.0.0.1:9/\ninterval = 1h\n",
    );
    let status = |job: JobRef<'_>| job.status();
    let engine = &h.engine;
    assert_eq!(
        engine.set_paused(Kind::Http, "ping", true, status),
        Ok(JobStatus::Paused)
    );
    assert_eq!(
        engine.set_paused(Kind::Http, "ping", false, status),
        Ok(JobStatus::Started)
    );
    assert_eq!(
        engine.set_paused(Kind::Job, "nope", true, status),
        Err(EngineError::NotFound)
    );
}
