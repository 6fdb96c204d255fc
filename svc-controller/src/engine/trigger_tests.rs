//! In-process tests of triggers: [`Engine::trigger`](super::Engine::trigger) when its
//! caller stops waiting for it (an HTTP client gone), and what a trigger's source sets in
//! its run's request; with the fake executor and the manual clock of `testkit`, on
//! tokio's paused clock like `tests.rs`.

use futures_util::FutureExt as _;

use super::testkit::{Harness, settle};
use super::tests::{pairs, webhook_jobs};
use super::{Accepted, EngineError, Kind, Trigger, TriggerSource};

/// `max_job_running = 1`: `a` holds the permit and `b` is triggered by a caller that
/// drops the call after its first step (the trigger accepted, its save under way). The
/// trigger is saved all the same, and its run waits for the permit and begins once `a`
/// ends: the job is not left with a queued trigger that nothing begins, refusing every
/// later trigger as busy.
#[tokio::test(start_paused = true)]
async fn a_trigger_whose_caller_stops_waiting_is_saved_and_runs() {
    let mut h = Harness::new("max_job_running = 1", &webhook_jobs(&["a", "b"]));
    h.trigger_api("a").await.expect("a's run");
    let a = h.runs.next().await;
    let call = h
        .engine
        .trigger(Kind::Job, "b", Trigger::new(TriggerSource::Webhook));
    assert!(call.now_or_never().is_none(), "the save had to wait");
    settle().await;
    assert!(h.state_file("b").queued.is_some(), "saved");
    assert!(!h.idle("b"), "its run task waits for the permit");
    assert_eq!(h.trigger_api("b").await, Err(EngineError::Busy));

    a.finish(true, "ok");
    let b = h.runs.next().await;
    assert_eq!(b.id(), ("b", 1));
    b.finish(true, "ok");
    assert!(h.runs.none().await, "it ran once");
    assert_eq!(h.executed(), pairs(&[("a", 1), ("b", 1)]));
    assert_eq!(h.state_file("b").queued, None);
    // Free again: the next trigger starts at once.
    assert_eq!(h.trigger_api("b").await, Ok(Accepted::Started));
    h.runs.next().await.finish(true, "ok");
}

/// The same for a trigger queued behind its own job's run: saved, and run once after it.
#[tokio::test(start_paused = true)]
async fn a_trigger_queued_by_a_caller_that_stops_waiting_runs_after_the_run() {
    let mut h = Harness::new("", &webhook_jobs(&["q"]));
    h.trigger_api("q").await.expect("run 1");
    let first = h.runs.next().await;
    let call = h
        .engine
        .trigger(Kind::Job, "q", Trigger::new(TriggerSource::Webhook));
    assert!(call.now_or_never().is_none(), "the save had to wait");
    settle().await;
    assert!(h.state_file("q").queued.is_some(), "saved");
    first.finish(true, "ok");
    let second = h.runs.next().await;
    assert_eq!(second.id(), ("q", 2));
    second.finish(true, "ok");
    assert!(h.runs.none().await, "it ran once");
    assert_eq!(h.state_file("q").queued, None);
}

/// A SIGTERM while a request is being accepted: the shutdown begins (its flag set) after
/// the request passed everything but before its trigger reached the registry. The
/// trigger is refused as the service stopping (503), never answered 200: accepted there,
/// its run could start after the shutdown had found no run left to wait for, and the
/// process would end with the trigger neither run nor on disk.
#[tokio::test(start_paused = true)]
async fn a_trigger_reaching_the_registry_after_the_stop_began_is_refused() {
    let mut h = Harness::new("", &webhook_jobs(&["stop_race"]));
    assert_eq!(
        h.trigger_api("stop_race").await,
        Err(EngineError::ShuttingDown)
    );
    h.engine.shutdown(std::time::Duration::from_secs(30)).await;
    assert!(h.runs.none().await, "nothing ran");
    assert_eq!(h.state_file("stop_race").queued, None, "nothing kept");
    assert_eq!(h.log_files("stop_race"), Vec::<String>::new());
}

/// A timer's run is sent with `end_yields` (its init ends the namespaces at the lowest
/// priority, behind the runs due with it); a run begun by a signed trigger, which a
/// queued next run may wait for, is not.
#[tokio::test(start_paused = true)]
async fn only_a_timers_run_lets_its_end_yield() {
    let mut h = Harness::new("", "[job \"tick\"]\ninterval = 1h\ncommand = true\n");
    h.engine.start_timers();
    let timed = h.runs.next().await;
    assert_eq!(timed.id(), ("tick", 1));
    assert!(timed.request.end_yields, "a timer's run");
    timed.finish(true, "ok");
    settle().await;
    h.trigger_api("tick").await.expect("run now");
    let by_hand = h.runs.next().await;
    assert_eq!(by_hand.id(), ("tick", 2));
    assert!(!by_hand.request.end_yields, "a run by hand");
    by_hand.finish(true, "ok");
}
