//! Test doubles of the engine's seams and a harness around them: an in-process executor
//! whose runs the test plays step by step, a clock that moves only when the test moves
//! it, and an engine over a temporary `dir_base`.
//!
//! Nothing here starts a process or waits for real time. The tests run on tokio's paused
//! clock, which moves only while every task waits on a timer and no blocking work is in
//! flight: [`settle`] therefore returns once the engine has done all it can, at no cost in
//! real time.

use crate::util::lock::MutexExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use proto::ExecRequest;
use tokio::sync::{mpsc, watch};

use super::clock::Clock;
use super::executor::{Executor, Runner};
use super::{Engine, Kind};
use crate::config::Config;
use crate::runner::exec::{Outcome, RunEvent, RunnerWork};
use crate::store::logstore::OutputKind;
use crate::store::state::JobState;

/// Lets every task of the engine run until it waits on something outside it (the test's
/// fake runs, the manual clock): on tokio's paused clock this sleep ends only when the
/// runtime is idle, blocking work included.
pub async fn settle() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A clock that stands still until the test moves it.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock {
            now: watch::Sender::new(start),
        }
    }

    /// Sets the time, forward or back (a clock step).
    pub fn set(&self, now: DateTime<Utc>) {
        self.now.send_replace(now);
    }

    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).expect("a representable step");
        self.now.send_modify(|now| *now += by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    fn sleep_until(&self, due: DateTime<Utc>) -> BoxFuture<'_, ()> {
        let mut now = self.now.subscribe();
        Box::pin(async move {
            while *now.borrow_and_update() < due {
                if now.changed().await.is_err() {
                    // The clock is gone, and time with it.
                    std::future::pending::<()>().await;
                }
            }
        })
    }
}

/// How the runner of an execution was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// From [`Executor::take`], as the run began.
    Taken,
    /// From [`Executor::launch`], ahead of a timer's due time.
    Launched,
}

/// What the fake executor was asked, for the tests' assertions.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Runners handed out by `take`, each with when it was to start the next run's
    /// spare.
    pub taken: Vec<super::executor::SpareStart>,
    /// Runners started ahead by `launch`.
    pub launched: usize,
    /// Runners dropped without executing anything.
    pub unused: usize,
    /// Executions, in the order they began: job ID, counter, the runner's origin.
    pub executed: Vec<(String, u64, Origin)>,
    /// Cancel reasons received during executions: job ID, counter, reason.
    pub cancelled: Vec<(String, u64, String)>,
}

/// State shared by the fake executor and its runners.
#[derive(Debug)]
struct Shared {
    seen: Mutex<Seen>,
    runs: mpsc::UnboundedSender<FakeRun>,
    /// Whether an execution ends as soon as it is cancelled (as a runner does), or only
    /// when the test ends it.
    end_on_cancel: AtomicBool,
    /// Whether runners started by `launch` are already too old to use.
    stale_launches: AtomicBool,
}

impl Shared {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.locked()
    }
}

/// An executor that starts no process: each execution is handed to the test as a
/// [`FakeRun`] through [`FakeRuns`], and lasts until the test ends it (or it is
/// cancelled).
#[derive(Debug)]
pub struct FakeExecutor {
    shared: Arc<Shared>,
}

/// The test's end of the fake executor: the executions, as they begin.
#[derive(Debug)]
pub struct FakeRuns {
    runs: mpsc::UnboundedReceiver<FakeRun>,
}

impl FakeExecutor {
    pub fn new() -> (Arc<FakeExecutor>, FakeRuns) {
        let (runs_tx, runs) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            seen: Mutex::default(),
            runs: runs_tx,
            end_on_cancel: AtomicBool::new(true),
            stale_launches: AtomicBool::new(false),
        });
        (Arc::new(FakeExecutor { shared }), FakeRuns { runs })
    }

    pub fn seen(&self) -> Seen {
        self.shared.seen().clone()
    }

    /// Cancelled executions go on until the test ends them.
    pub fn ignore_cancel(&self) {
        self.shared.end_on_cancel.store(false, Ordering::SeqCst);
    }

    /// Runners started ahead are too old to use by the time they would be.
    pub fn stale_launches(&self) {
        self.shared.stale_launches.store(true, Ordering::SeqCst);
    }

    fn runner(&self, origin: Origin) -> Box<dyn Runner> {
        let fresh = match origin {
            Origin::Taken => true,
            Origin::Launched => !self.shared.stale_launches.load(Ordering::SeqCst),
        };
        Box::new(FakeRunner {
            shared: self.shared.clone(),
            origin,
            fresh,
            executed: false,
        })
    }
}

impl Executor for FakeExecutor {
    fn take(
        &self,
        _work: RunnerWork,
        _private_dirs: Option<Vec<proto::PrivateDir>>,
        spare_start: super::executor::SpareStart,
    ) -> BoxFuture<'_, Box<dyn Runner>> {
        self.shared.seen().taken.push(spare_start);
        Box::pin(std::future::ready(self.runner(Origin::Taken)))
    }

    fn launch(
        &self,
        _work: RunnerWork,
        _private_dirs: Option<Vec<proto::PrivateDir>>,
    ) -> BoxFuture<'_, Box<dyn Runner>> {
        self.shared.seen().launched += 1;
        Box::pin(std::future::ready(self.runner(Origin::Launched)))
    }
}

#[derive(Debug)]
struct FakeRunner {
    shared: Arc<Shared>,
    origin: Origin,
    fresh: bool,
    executed: bool,
}

impl Drop for FakeRunner {
    fn drop(&mut self) {
        if !self.executed {
            self.shared.seen().unused += 1;
        }
    }
}

/// What the test makes an execution do next.
#[derive(Debug)]
enum Step {
    Line(String),
    Output(Vec<u8>),
    End(Outcome),
}

impl Runner for FakeRunner {
    fn is_fresh(&self) -> bool {
        self.fresh
    }

    fn execute<'a>(
        mut self: Box<Self>,
        request: ExecRequest,
        _ruleset: Option<std::sync::Arc<proto::sandbox::Prepared>>,
        cancel: &'a mut watch::Receiver<Option<String>>,
        sink: &'a mut (dyn FnMut(RunEvent<'_>) + Send),
    ) -> BoxFuture<'a, Outcome> {
        self.executed = true;
        Box::pin(async move {
            let (job, counter) = (request.job_id.clone(), request.counter);
            self.shared
                .seen()
                .executed
                .push((job.clone(), counter, self.origin));
            let (steps_tx, mut steps) = mpsc::unbounded_channel();
            let run = FakeRun {
                request,
                origin: self.origin,
                steps: steps_tx,
            };
            if self.shared.runs.send(run).is_err() {
                return Outcome::fail("no test plays the runs");
            }
            let mut cancel_seen = false;
            loop {
                tokio::select! {
                    step = steps.recv() => match step {
                        Some(Step::Line(text)) => sink(RunEvent::Line(text)),
                        Some(Step::Output(data)) => sink(RunEvent::Output(OutputKind::Stdout, &data)),
                        Some(Step::End(outcome)) => return outcome,
                        None => {
                            return Outcome::fail("the test dropped the run");
                        }
                    },
                    reason = cancelled(cancel), if !cancel_seen => {
                        cancel_seen = true;
                        self.shared.seen().cancelled.push((job.clone(), counter, reason.clone()));
                        if self.shared.end_on_cancel.load(Ordering::SeqCst) {
                            return Outcome::fail(format!("cancelled: {reason}"));
                        }
                    }
                }
            }
        })
    }
}

/// The reason, once `cancel` holds one.
async fn cancelled(cancel: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(reason) = cancel.borrow_and_update().clone() {
            return reason;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// One execution in progress, played by the test.
#[derive(Debug)]
pub struct FakeRun {
    pub request: ExecRequest,
    pub origin: Origin,
    steps: mpsc::UnboundedSender<Step>,
}

impl FakeRun {
    /// The run's job ID and counter.
    pub fn id(&self) -> (&str, u64) {
        (&self.request.job_id, self.request.counter)
    }

    /// The value of `name` in the commands' environment.
    pub fn env(&self, name: &str) -> Option<&str> {
        match &self.request.action {
            proto::Action::Commands { env, .. } => env
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str()),
            proto::Action::Http(_) => None,
        }
    }

    /// A line of svc's own text for the log.
    pub fn line(&self, text: &str) {
        // A run that already ended takes no more steps; the test's assertions tell.
        let _ = self.steps.send(Step::Line(text.into()));
    }

    /// Command output for the log.
    pub fn output(&self, data: &[u8]) {
        let _ = self.steps.send(Step::Output(data.to_vec()));
    }

    /// Ends the execution so.
    pub fn finish(self, success: bool, summary: &str) {
        let _ = self.steps.send(Step::End(Outcome {
            success,
            summary: summary.into(),
            detail: crate::runner::exec::EndDetail::default(),
        }));
    }
}

impl FakeRuns {
    /// The next execution to begin. Fails the test when the engine settles without one
    /// (the paused clock then jumps the day ahead at once).
    pub async fn next(&mut self) -> FakeRun {
        match tokio::time::timeout(Duration::from_secs(24 * 3600), self.runs.recv()).await {
            Ok(Some(run)) => run,
            _ => panic!("no execution began"),
        }
    }

    /// Lets the engine settle; true when no execution began meanwhile.
    pub async fn none(&mut self) -> bool {
        settle().await;
        self.runs.try_recv().is_err()
    }
}

/// Monday 5 January 2026, 10:00 UTC: where the tests' manual clocks start.
pub fn t0() -> DateTime<Utc> {
    "2026-01-05T10:00:00Z".parse().expect("a valid time")
}

/// An engine over a temporary `dir_base`, with the fake executor and a manual clock at
/// [`t0`]. Timers are not started.
#[derive(Debug)]
pub struct Harness {
    pub engine: Engine,
    pub fake: Arc<FakeExecutor>,
    pub runs: FakeRuns,
    pub clock: Arc<ManualClock>,
    config: Config,
    /// The extra lines of the `[svc]` section it was made with, for [`Harness::reload`].
    svc: String,
    /// Holds the directory for as long as the harness lives.
    _dir: tempfile::TempDir,
}

/// Stops what could still write below the temporary directory once it is removed: a run
/// task dropped with the test's runtime records its run as abandoned unless the engine
/// is stopping, and the syncer may hold state writes. Without this, such a late write
/// made its directories again and left them behind.
impl Drop for Harness {
    fn drop(&mut self) {
        self.engine
            .inner
            .shutting_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.engine.inner.syncer.flush();
    }
}

impl Harness {
    /// A trigger of Job `id` as upstream's trigger call makes it (`api`).
    pub async fn trigger_api(&self, id: &str) -> Result<super::Accepted, super::EngineError> {
        self.engine
            .trigger(
                Kind::Job,
                id,
                super::Trigger::new(super::TriggerSource::Api),
            )
            .await
    }

    /// The configuration the engine was made from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `svc` holds extra lines of the `[svc]` section, `jobs` the job sections.
    pub fn new(svc: &str, jobs: &str) -> Harness {
        Harness::new_after(svc, jobs, |_| {})
    }

    /// Like [`Harness::new`], with `before` called on the configuration once its
    /// directories exist and before the engine starts: for files an earlier run of the
    /// service left (state files, logs).
    pub fn new_after(
        svc: &str,
        jobs: &str,
        before: impl FnOnce(&crate::config::MainConfig),
    ) -> Harness {
        Harness::build(svc, jobs, &[], before)
    }

    /// Like [`Harness::new`], with `files` (path below `dir_base`, text) written before
    /// the configuration is loaded, readable by their owner only: `etc/svc/user.conf`.
    pub fn with_files(svc: &str, jobs: &str, files: &[(&str, &str)]) -> Harness {
        Harness::build(svc, jobs, files, |_| {})
    }

    fn build(
        svc: &str,
        jobs: &str,
        files: &[(&str, &str)],
        before: impl FnOnce(&crate::config::MainConfig),
    ) -> Harness {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical");
        for (path, text) in files {
            let path = base.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(&path, text).expect("write a file of the tree");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let main_file = base.join("svc.conf");
        std::fs::write(
            &main_file,
            format!("[svc]\ndir_base = {}\n{svc}\n\n{jobs}", base.display()),
        )
        .expect("write the configuration");
        let config = crate::config::load(&main_file).expect("load the configuration");
        let main = &config.main;
        for dir in [
            main.dir_job_logs(),
            main.dir_job_state(),
            main.dir_job_http_logs(),
            main.dir_job_http_state(),
        ] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        before(main);
        let (fake, runs) = FakeExecutor::new();
        let clock = Arc::new(ManualClock::new(t0()));
        let engine = Engine::new(&config, fake.clone(), clock.clone(), None);
        Harness {
            engine,
            fake,
            runs,
            clock,
            config,
            svc: svc.to_string(),
            _dir: dir,
        }
    }

    /// Reloads the engine with `jobs` as the job sections, and the `[svc]` section it was
    /// made with, as a SIGHUP reloads the daemon.
    pub fn reload(&self, jobs: &str) {
        let base = &self.config.main.dir_base;
        let main_file = base.join("svc.conf");
        std::fs::write(
            &main_file,
            format!(
                "[svc]\ndir_base = {}\n{}\n\n{jobs}",
                base.display(),
                self.svc
            ),
        )
        .expect("write the configuration");
        let config = crate::config::load(&main_file).expect("load the configuration");
        self.engine.reload(&config);
    }

    pub fn seen(&self) -> Seen {
        self.fake.seen()
    }

    /// Job IDs and counters of the executions so far, in the order they began.
    pub fn executed(&self) -> Vec<(String, u64)> {
        self.seen()
            .executed
            .into_iter()
            .map(|(job, counter, _)| (job, counter))
            .collect()
    }

    pub fn next_run(&self, id: &str) -> Option<DateTime<Utc>> {
        self.engine
            .with_job(Kind::Job, id, |job| job.next_run())
            .expect("the job")
    }

    pub fn last_run(&self, id: &str) -> Option<DateTime<Utc>> {
        self.engine
            .with_job(Kind::Job, id, |job| job.last_run())
            .expect("the job")
    }

    pub fn status(&self, id: &str) -> super::read::JobStatus {
        self.engine
            .with_job(Kind::Job, id, |job| job.status())
            .expect("the job")
    }

    /// Whether the job has no run, going on or waiting.
    pub fn idle(&self, id: &str) -> bool {
        self.engine
            .lock()
            .get(Kind::Job, id)
            .is_some_and(|entry| entry.slot.run.is_none())
    }

    /// The job's state file as on disk once the syncer has written what the ends of
    /// runs queued (it writes the state file off the run path).
    pub fn state_file(&self, id: &str) -> JobState {
        self.engine.inner.syncer.flush();
        JobState::load(&self.state_path(id))
            .expect("a readable state file")
            .expect("a state file")
    }

    pub fn state_path(&self, id: &str) -> PathBuf {
        self.config.main.dir_job_state().join(id)
    }

    pub fn log_dir(&self, id: &str) -> PathBuf {
        self.config.main.dir_job_logs().join(id)
    }

    /// The names of the job's log files, sorted; none when it has no log directory.
    pub fn log_files(&self, id: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.log_dir(id)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .map(|entry| {
                entry
                    .expect("a directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    pub fn log(&self, id: &str, name: &str) -> String {
        std::fs::read_to_string(self.log_dir(id).join(name)).expect("the log")
    }
}
