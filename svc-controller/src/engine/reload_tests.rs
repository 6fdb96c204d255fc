//! In-process tests of a reload that keeps a job with an accepted trigger not begun yet:
//! queued behind the job's own run, or waiting for a permit of `max_job_running`. With
//! the fake executor and the manual clock of `testkit`, on tokio's paused clock like
//! `tests.rs`.

use bytes::Bytes;

use super::testkit::{Harness, settle};
use super::tests::pairs;
use super::{Accepted, DeliveryFacts, EngineError, Kind, Trigger, TriggerSource};

/// A reload that keeps a job: what its section becomes, and what that means for the
/// trigger it holds.
struct Variant {
    name: &'static str,
    /// The extra lines of the job's section (`STAGE` names the definition in force).
    keys: &'static str,
    /// `STAGE` of the run of the held trigger: it begins after the reload, so it runs by
    /// the definition in force then.
    stage: &'static str,
    /// What a further trigger gets while the held one has not begun.
    further: Result<Accepted, EngineError>,
}

/// The same section; then one key after another changed, the job kept.
const VARIANTS: [Variant; 4] = [
    Variant {
        name: "unchanged",
        keys: "env = STAGE=one\n",
        stage: "one",
        further: Err(EngineError::Busy),
    },
    Variant {
        name: "env changed",
        keys: "env = STAGE=two\n",
        stage: "two",
        further: Err(EngineError::Busy),
    },
    Variant {
        name: "timer added",
        keys: "env = STAGE=one\ninterval = 1h\n",
        stage: "one",
        further: Err(EngineError::Busy),
    },
    // An accepted trigger is kept whatever `on_busy` says later; a new one is dropped.
    Variant {
        name: "on_busy changed",
        keys: "env = STAGE=one\non_busy = skip\n",
        stage: "one",
        further: Ok(Accepted::Skipped),
    },
];

/// A webhook-only job `id` with `keys`.
fn job(id: &str, keys: &str) -> String {
    format!("[job \"{id}\"]\npath = /{id}\ncommand = true\n{keys}\n")
}

/// A webhook delivery whose facts the run must get.
fn delivery() -> Trigger {
    Trigger {
        source: TriggerSource::Webhook,
        body: Some(Bytes::from_static(b"{\"ref\":\"main\"}")),
        facts: DeliveryFacts {
            event: Some("push".into()),
            id: Some("delivery-9".into()),
            ..DeliveryFacts::default()
        },
        cause: None,
        attempt: 1,
    }
}

/// The ID the state file keeps the job's queued trigger under: it is on disk.
fn queued_on_disk(h: &Harness, id: &str) -> Option<u64> {
    let queued = h.state_file(id).queued.expect("the queued trigger on disk");
    assert_eq!(queued.source, "webhook");
    assert_eq!(queued.body.as_deref(), Some(&b"{\"ref\":\"main\"}"[..]));
    queued.id
}

/// `max_job_running = 1`: job `q` runs and a delivery waits in its queue; a reload keeps
/// `q`. When run 1 ends, the delivery runs once, as run 2, with its own data; nothing
/// else runs and nothing stays queued.
#[tokio::test(start_paused = true)]
async fn a_trigger_queued_behind_its_jobs_run_survives_a_reload_that_keeps_the_job() {
    for variant in VARIANTS {
        let name = variant.name;
        let mut h = Harness::new("max_job_running = 1", &job("q", "env = STAGE=one\n"));
        h.trigger_api("q").await.expect("run 1");
        let first = h.runs.next().await;
        assert_eq!(first.id(), ("q", 1), "{name}");
        let accepted = h.engine.trigger(Kind::Job, "q", delivery()).await;
        assert_eq!(accepted, Ok(Accepted::Queued), "{name}");
        let before = queued_on_disk(&h, "q");

        h.reload(&job("q", variant.keys));
        settle().await;
        assert_eq!(queued_on_disk(&h, "q"), before, "{name}: the same trigger");
        assert_eq!(h.trigger_api("q").await, variant.further, "{name}");
        assert!(h.runs.none().await, "{name}: it waits for run 1");

        first.finish(true, "ok");
        let second = h.runs.next().await;
        assert_eq!(second.id(), ("q", 2), "{name}");
        assert_eq!(second.env("STAGE"), Some(variant.stage), "{name}");
        assert_eq!(second.env("SVC_EVENT"), Some("push"), "{name}");
        assert_eq!(second.env("SVC_DELIVERY"), Some("delivery-9"), "{name}");
        second.finish(true, "ok");
        assert!(h.runs.none().await, "{name}: it ran once");
        assert!(h.idle("q"), "{name}");
        assert_eq!(h.executed(), pairs(&[("q", 1), ("q", 2)]), "{name}");
        assert_eq!(h.log_files("q"), ["q.1.success", "q.2.success"], "{name}");
        let state = h.state_file("q");
        assert_eq!((state.counter, state.queued), (2, None), "{name}");
    }
}

/// `max_job_running = 1`: job `a` holds the one permit and job `b`'s delivery waits for
/// it (its run task waits, the trigger in `b`'s state file); a reload keeps both. When
/// `a`'s run ends, `b`'s delivery runs once, as `b`'s run 1.
#[tokio::test(start_paused = true)]
async fn a_trigger_waiting_for_a_permit_survives_a_reload_that_keeps_its_job() {
    for variant in VARIANTS {
        let name = variant.name;
        let holder = job("a", "");
        let jobs = format!("{holder}{}", job("b", "env = STAGE=one\n"));
        let mut h = Harness::new("max_job_running = 1", &jobs);
        h.trigger_api("a").await.expect("a's run");
        let a = h.runs.next().await;
        assert_eq!(a.id(), ("a", 1), "{name}");
        let accepted = h.engine.trigger(Kind::Job, "b", delivery()).await;
        assert_eq!(
            accepted,
            Ok(Accepted::Queued),
            "{name}: waits for the permit"
        );
        settle().await;
        let before = queued_on_disk(&h, "b");
        assert!(!h.idle("b"), "{name}: its run task waits");

        h.reload(&format!("{holder}{}", job("b", variant.keys)));
        settle().await;
        assert_eq!(queued_on_disk(&h, "b"), before, "{name}: the same trigger");
        assert_eq!(h.trigger_api("b").await, variant.further, "{name}");
        assert!(h.runs.none().await, "{name}: it waits for the permit");

        a.finish(true, "ok");
        let b = h.runs.next().await;
        assert_eq!(b.id(), ("b", 1), "{name}");
        assert_eq!(b.env("STAGE"), Some(variant.stage), "{name}");
        assert_eq!(b.env("SVC_DELIVERY"), Some("delivery-9"), "{name}");
        b.finish(true, "ok");
        assert!(h.runs.none().await, "{name}: it ran once");
        assert!(h.idle("a") && h.idle("b"), "{name}");
        assert_eq!(h.executed(), pairs(&[("a", 1), ("b", 1)]), "{name}");
        assert_eq!(h.log_files("b"), ["b.1.success"], "{name}");
        let state = h.state_file("b");
        assert_eq!((state.counter, state.queued), (1, None), "{name}");
        assert_eq!(h.engine.inner.job_slots.available_permits(), 1, "{name}");
    }
}
