//! Where the engine's runs execute: the [`Executor`] seam between the engine and
//! whatever performs a run's request.
//!
//! The service's executor is [`RunnerHub`], which starts one `svc-runner` process per
//! run; the engine's tests put an in-process fake in its place, so that scheduling,
//! queueing and recording are tested without processes. The seam costs one allocation
//! per runner and per execution (boxed runner and futures); the traffic of a run (its
//! output, event by event) crosses it through the same `&mut dyn FnMut` sink as before,
//! with nothing boxed per event.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use proto::sandbox::Prepared;
use proto::{ExecRequest, PrivateDir};
use tokio::sync::watch;

pub use crate::runner::exec::SpareStart;
use crate::runner::exec::{LaunchedRunner, Outcome, RunEvent, RunnerHub, RunnerWork};
use crate::runner::sandboxes::Sandboxes;

/// Starts runners for the engine's runs.
pub trait Executor: Send + Sync {
    /// A runner for a run that begins now, to do `work`, with the run's `private_dirs`
    /// when its job is known. It may have been started earlier (the spare of a burst of
    /// runs, which may have made the run's namespaces while it waited); it does one
    /// execution. `spare_start`: when the spare for the run after it starts.
    fn take(
        &self,
        work: RunnerWork,
        private_dirs: Option<Vec<PrivateDir>>,
        spare_start: SpareStart,
    ) -> BoxFuture<'_, Box<dyn Runner>>;

    /// Starts a runner now for a run that begins a little later (a timer's, shortly
    /// before its due time), so that its start-up is done by then; with the run's
    /// `private_dirs` when its job is known, so that it makes the run's namespaces
    /// meanwhile too (see `ControllerMessage::Welcome`).
    fn launch(
        &self,
        work: RunnerWork,
        private_dirs: Option<Vec<PrivateDir>>,
    ) -> BoxFuture<'_, Box<dyn Runner>>;

    /// Where the engine keeps the rulesets it builds for busy jobs, to send with their
    /// requests; `None` when this executor takes none (every sandbox is then the
    /// runner's to build).
    fn sandboxes(&self) -> Option<&Sandboxes> {
        None
    }
}

/// A runner started ahead of its work, ready for one execution. Dropping it unused ends
/// it.
pub trait Runner: Send + std::fmt::Debug {
    /// Whether it can still be handed work (a runner waits for its work a limited time
    /// only).
    fn is_fresh(&self) -> bool;

    /// Performs `request`, with `ruleset` when the engine built the run's sandbox
    /// ([`proto::Sandbox::attached`]). A reason received on `cancel` ends the work early;
    /// events go to `sink` as they happen. Every failure ends as a failed [`Outcome`]
    /// with a reason.
    fn execute<'a>(
        self: Box<Self>,
        request: ExecRequest,
        ruleset: Option<Arc<Prepared>>,
        cancel: &'a mut watch::Receiver<Option<String>>,
        sink: &'a mut (dyn FnMut(RunEvent<'_>) + Send),
    ) -> BoxFuture<'a, Outcome>;
}

impl Executor for RunnerHub {
    fn take(
        &self,
        work: RunnerWork,
        private_dirs: Option<Vec<PrivateDir>>,
        spare_start: SpareStart,
    ) -> BoxFuture<'_, Box<dyn Runner>> {
        Box::pin(async move {
            Box::new(RunnerHub::take(self, work, private_dirs, spare_start).await)
                as Box<dyn Runner>
        })
    }

    fn launch(
        &self,
        work: RunnerWork,
        private_dirs: Option<Vec<PrivateDir>>,
    ) -> BoxFuture<'_, Box<dyn Runner>> {
        Box::pin(async move {
            Box::new(RunnerHub::launch_for(self, work, private_dirs).await) as Box<dyn Runner>
        })
    }

    fn sandboxes(&self) -> Option<&Sandboxes> {
        Some(RunnerHub::sandboxes(self))
    }
}

impl Runner for LaunchedRunner {
    fn is_fresh(&self) -> bool {
        LaunchedRunner::is_fresh(self)
    }

    fn execute<'a>(
        self: Box<Self>,
        request: ExecRequest,
        ruleset: Option<Arc<Prepared>>,
        cancel: &'a mut watch::Receiver<Option<String>>,
        sink: &'a mut (dyn FnMut(RunEvent<'_>) + Send),
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(LaunchedRunner::execute(
            *self, request, ruleset, cancel, sink,
        ))
    }
}
