//! The memory a timer's task and a run's task take while they wait (tests only).
//!
//! A task's future is as large as the largest state it can be in, and it is allocated
//! whole when the task is spawned. Every job with a timer keeps its timer's task for
//! ever (10,000 jobs, 10,000 tasks), and 1,000 jobs due at the same second spawn 1,000
//! run tasks at once, whose first page faults made that second's timers late. Large,
//! rare states (a runner's spawn, a run's execution) are boxed so that they do not set
//! the size; these bounds keep it so.

use super::{Engine, Kind, Trigger, TriggerSource, run, timer};
use crate::time::schedule::Timer;

#[tokio::test]
async fn waiting_timer_and_run_tasks_stay_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let main_file = dir.path().join("svc.conf");
    std::fs::write(
        &main_file,
        format!("[svc]\ndir_base = {}\n", dir.path().display()),
    )
    .expect("write the configuration");
    let config = crate::config::load(&main_file).expect("load");
    let hub = crate::runner::exec::RunnerHub::start(
        &config.main.dir_runtime(),
        dir.path().join("none"),
        Vec::new(),
    )
    .expect("runner hub");
    let engine = Engine::new(
        &config,
        std::sync::Arc::new(hub),
        std::sync::Arc::new(super::clock::SystemClock),
        None,
    );
    let timer_task = timer::timer_task(
        engine.clone(),
        Kind::Job,
        "job".into(),
        Timer::Interval(std::time::Duration::from_secs(1)),
    );
    let (_cancel, cancel_rx) = tokio::sync::watch::channel(None);
    let run_task = run::run_task(
        engine,
        Kind::Job,
        "job".into(),
        Trigger::new(TriggerSource::Timer),
        None,
        cancel_rx,
    );
    let (timer_size, run_size) = (
        std::mem::size_of_val(&timer_task),
        std::mem::size_of_val(&run_task),
    );
    assert!(timer_size <= 512, "a timer's task takes {timer_size} bytes");
    assert!(run_size <= 2048, "a run's task takes {run_size} bytes");
}
