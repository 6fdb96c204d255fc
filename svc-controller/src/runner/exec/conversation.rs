//! One execution in a launched runner: the runner's connection checked, the work sent,
//! its events passed on, cancel and the backstop timer, and every way it can end.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use proto::sandbox::Prepared;
use proto::{ControllerCodec, ControllerMessage, ExecRequest, PROTOCOL_VERSION, RunnerMessage};
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::codec::Framed;

use super::{
    BACKSTOP_MARGIN, CONNECT_TIMEOUT, EXIT_WAIT, EndDetail, LaunchedRunner, Outcome, RunEvent,
    RunnerProcess, SpareOrder,
};
use crate::runner::cgroups::RunCgroup;
use crate::store::logstore::OutputKind;

/// The runner's connection, as the conversation uses it.
type Connection = Framed<UnixStream, ControllerCodec>;

impl LaunchedRunner {
    /// Performs `request` in this runner, sending `ruleset` with it when the controller
    /// built the run's sandbox ([`proto::Sandbox::attached`]). `cancel` ends the work
    /// early when it receives a reason. Events go to `sink` as they happen.
    pub async fn execute(
        mut self,
        mut request: ExecRequest,
        ruleset: Option<Arc<Prepared>>,
        cancel: &mut watch::Receiver<Option<String>>,
        sink: &mut (dyn FnMut(RunEvent<'_>) + Send),
    ) -> Outcome {
        let cgroups = self.cgroups.take();
        // Held until the run's first command has started (see [`SpareOrder`]).
        let spare = self.spare_after_start.take();
        let (mut child, framed, ahead) = match self.connected(cancel).await {
            Ok(connected) => connected,
            Err(outcome) => return outcome,
        };
        let applied = crate::runner::run_limits::apply(cgroups.as_ref(), &mut request, ahead);
        let cgroup = match applied.await {
            Ok(cgroup) => cgroup,
            Err(why) => {
                kill_runner(&mut child).await;
                return Outcome::fail(why);
            }
        };
        let limits = request.limits;
        let mut outcome =
            execute_in_runner(child, framed, request, ruleset, cancel, sink, spare).await;
        if let Some(cgroup) = cgroup {
            crate::runner::run_limits::conclude(cgroup, &limits, &mut outcome, sink).await;
        }
        outcome
    }

    /// Waits for the runner's connection (bounded, cancellable) and checks that it comes
    /// from the runner started and speaks this protocol; else the failed outcome.
    async fn connected(
        self,
        cancel: &mut watch::Receiver<Option<String>>,
    ) -> Result<(RunnerProcess, Connection, Option<RunCgroup>), Outcome> {
        let LaunchedRunner {
            _guard,
            runner_path,
            spawned,
            accepted_rx,
            ..
        } = self;
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) => {
                return Err(Outcome::fail(format!(
                    "cannot start the runner {}: {err}",
                    runner_path.display()
                )));
            }
        };
        let accepted = tokio::select! {
            accepted = accepted_rx => match accepted {
                Ok(accepted) => accepted,
                Err(_) => return Err(Outcome::fail("internal error: runner registration dropped")),
            },
            status = child.wait() => {
                return Err(Outcome::fail(format!("the runner exited ({status}) before completing the handshake (it did not connect, or sent something other than a valid hello)")));
            }
            _ = sleep(CONNECT_TIMEOUT) => {
                kill_runner(&mut child).await;
                return Err(Outcome::fail(format!(
                    "the runner did not connect within {}s", CONNECT_TIMEOUT.as_secs()
                )));
            }
            _ = cancelled(cancel) => {
                kill_runner(&mut child).await;
                return Err(Outcome::fail(format!("cancelled before the runner started: {}", reason(cancel))));
            }
        };
        let mut framed = accepted.framed;
        let refusal = if accepted.peer_pid.is_none() || accepted.peer_pid != child.id() {
            Some((
                "connection is not from the runner that was started".to_string(),
                "a process other than the runner presented its token".to_string(),
            ))
        } else if accepted.version != PROTOCOL_VERSION {
            Some((
                format!("controller speaks protocol version {PROTOCOL_VERSION}"),
                format!(
                    "the runner speaks protocol version {}, the controller {PROTOCOL_VERSION}: install matching svc-controller and svc-runner",
                    accepted.version
                ),
            ))
        } else {
            None
        };
        if let Some((told, summary)) = refusal {
            let _ = framed
                .send(ControllerMessage::Reject { reason: told })
                .await;
            kill_runner(&mut child).await;
            return Err(Outcome::fail(summary));
        }
        Ok((child, framed, accepted.ahead))
    }
}

/// The runner connected and checked: the work sent, the conversation to its end.
async fn execute_in_runner(
    mut child: RunnerProcess,
    mut framed: Connection,
    request: ExecRequest,
    ruleset: Option<Arc<Prepared>>,
    cancel: &mut watch::Receiver<Option<String>>,
    sink: &mut (dyn FnMut(RunEvent<'_>) + Send),
    spare: Option<SpareOrder>,
) -> Outcome {
    let backstop = Instant::now()
        + request
            .timeout_ms
            .map_or(Duration::from_secs(365 * 24 * 3600), |ms| {
                Duration::from_millis(ms.saturating_add(request.kill_grace_ms))
            })
        + BACKSTOP_MARGIN;
    if let Err(err) = send_work(&mut framed, request, ruleset.as_deref()).await {
        kill_runner(&mut child).await;
        return Outcome::fail(format!("cannot send the work to the runner: {err}"));
    }
    let talk = Conversation {
        framed,
        command_group: None,
        detail: EndDetail::default(),
        spare,
    };
    talk.until_the_end(child, backstop, cancel, sink).await
}

/// Sends the work. Welcomed at its hello (the checks of [`LaunchedRunner::connected`] are
/// the ones the handshake made before it welcomed the runner): only the work is left to
/// send, with the sandbox's ruleset as a descriptor when the controller built it.
async fn send_work(
    framed: &mut Connection,
    request: ExecRequest,
    ruleset: Option<&Prepared>,
) -> Result<(), proto::ProtoError> {
    let execute = ControllerMessage::Execute(Box::new(request));
    match ruleset.and_then(Prepared::ruleset) {
        Some(fd) => {
            framed.flush().await?;
            proto::fdpass::send_message_with_fd(framed.get_ref(), execute, fd).await
        }
        None => framed.send(execute).await,
    }
}

/// A run under way in its runner: what it said so far.
struct Conversation {
    framed: Connection,
    /// Process group of the command running now, to end it if the runner cannot.
    command_group: Option<u32>,
    detail: EndDetail,
    /// The spare to start once the first command has started (dropped then).
    spare: Option<SpareOrder>,
}

impl Conversation {
    /// Passes the runner's events on until it reports the end, dies, sends garbage or
    /// outlives `backstop`; asks it to cancel when `cancel` says so.
    async fn until_the_end(
        mut self,
        mut child: RunnerProcess,
        backstop: Instant,
        cancel: &mut watch::Receiver<Option<String>>,
        sink: &mut (dyn FnMut(RunEvent<'_>) + Send),
    ) -> Outcome {
        let mut outcome = None;
        let mut cancel_sent = false;
        loop {
            tokio::select! {
                frame = self.framed.next() => match frame {
                    Some(Ok(message)) => {
                        if matches!(message, RunnerMessage::CommandStarted { .. }) {
                            drop(self.spare.take());
                        }
                        if let Some(end) = handle_message(message, sink, &mut self.command_group, &mut self.detail) {
                            outcome = Some(end);
                        }
                    }
                    Some(Err(err)) => {
                        return self.runner_lost(&mut child, format!("the runner sent an invalid frame: {err}")).await;
                    }
                    None => break,
                },
                _ = cancelled(cancel), if !cancel_sent => {
                    cancel_sent = true;
                    let why = reason(cancel);
                    if self.framed.send(ControllerMessage::Cancel { reason: why }).await.is_err() {
                        break;
                    }
                }
                _ = sleep_until(backstop) => {
                    self.detail.timed_out = true;
                    return self.runner_lost(&mut child, "the runner did not end the work in time and was killed".to_string()).await;
                }
            }
        }
        match outcome {
            Some(mut outcome) => {
                outcome.detail = self.detail;
                reap_in_background(child);
                outcome
            }
            None => self.runner_died(child).await,
        }
    }

    /// The runner is killed and its commands ended: a failed outcome saying `why`.
    async fn runner_lost(self, child: &mut RunnerProcess, why: String) -> Outcome {
        kill_runner(child).await;
        end_orphaned_commands(self.command_group);
        Outcome {
            detail: self.detail,
            ..Outcome::fail(why)
        }
    }

    /// The connection closed without an end reported: how the runner ended, and its
    /// commands, which may live on, ended.
    async fn runner_died(self, mut child: RunnerProcess) -> Outcome {
        let status = match timeout(EXIT_WAIT, child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                kill_runner(&mut child).await;
                "killed: it did not exit".to_string()
            }
        };
        end_orphaned_commands(self.command_group);
        Outcome {
            detail: self.detail,
            ..Outcome::fail(format!(
                "the runner died before reporting the end of the run ({status})"
            ))
        }
    }
}

/// The runner reported the end after it ended whatever the commands left behind; all it
/// has left to do is exit. The run does not wait for that: the runner is reaped (or
/// killed, if it lingers) in the background.
fn reap_in_background(mut child: RunnerProcess) {
    let child_pid = child.id();
    tokio::spawn(async move {
        if timeout(EXIT_WAIT, child.wait()).await.is_err() {
            tracing::warn!(pid = ?child_pid, "a runner did not exit after its run ended; killed");
            kill_runner(&mut child).await;
        }
    });
}

/// Ends the process group of the command a runner was running, when the runner itself
/// can no longer do it (it died, sent garbage, or hung). The command was started in a
/// group of its own whose id is its pid, as `CommandStarted` reported.
fn end_orphaned_commands(command_group: Option<u32>) {
    let Some(pgid) = command_group.and_then(|pid| i32::try_from(pid).ok()) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    match nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    ) {
        Ok(()) => tracing::warn!(pgid, "ended the commands of a runner that died"),
        Err(nix::errno::Errno::ESRCH) => {}
        Err(err) => {
            tracing::error!(pgid, error = %err, "cannot end the commands of a runner that died")
        }
    }
}

/// Turns one runner message into log events; returns the outcome when the run is over.
fn handle_message(
    message: RunnerMessage,
    sink: &mut (dyn FnMut(RunEvent<'_>) + Send),
    command_group: &mut Option<u32>,
    detail: &mut EndDetail,
) -> Option<Outcome> {
    match message {
        RunnerMessage::Log { line } => sink(RunEvent::Line(format!("--- {line}"))),
        RunnerMessage::CommandStarted { command, pid, .. } => {
            *command_group = Some(pid);
            sink(RunEvent::Line(format!("$ {command}")));
        }
        RunnerMessage::Output { stream, data } => {
            let kind = match stream {
                proto::OutputStream::Stdout => OutputKind::Stdout,
                proto::OutputStream::Stderr => OutputKind::Stderr,
                proto::OutputStream::Body => OutputKind::Body,
            };
            sink(RunEvent::Output(kind, &data));
        }
        RunnerMessage::CommandExited { exit, .. } => {
            *command_group = None;
            detail.exit_code = exit.code;
            detail.signal = exit.signal;
            detail.timed_out |= exit.timed_out;
            let seconds = exit.duration_ms as f64 / 1000.0;
            let how = match (exit.code, exit.signal) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => "ended".to_string(),
            };
            let why = if exit.timed_out {
                " (time limit reached)"
            } else if exit.cancelled {
                " (cancelled)"
            } else {
                ""
            };
            sink(RunEvent::Line(format!(
                "--- {how} after {seconds:.3}s{why}"
            )));
        }
        RunnerMessage::HttpResponse {
            status,
            body_bytes,
            truncated,
        } => {
            detail.http_status = Some(status);
            sink(RunEvent::HttpStatus(status));
            if truncated {
                sink(RunEvent::Line(format!(
                    "--- response body of {body_bytes} bytes was cut"
                )));
            }
        }
        RunnerMessage::Finished {
            success,
            summary,
            timed_out,
            usage,
        } => {
            detail.timed_out |= timed_out;
            detail.usage = usage.map(Box::new);
            return Some(Outcome {
                success,
                summary,
                detail: EndDetail::default(),
            });
        }
        RunnerMessage::Error { message } => {
            return Some(Outcome::fail(format!(
                "the runner could not do the work: {message}"
            )));
        }
        RunnerMessage::Hello { .. } => {
            sink(RunEvent::Line(
                "--- the runner sent a second hello; ignored".into(),
            ));
        }
    }
    None
}

/// Resolves when `cancel` holds a reason (at once if it already does).
async fn cancelled(cancel: &mut watch::Receiver<Option<String>>) {
    loop {
        if cancel.borrow_and_update().is_some() {
            return;
        }
        if cancel.changed().await.is_err() {
            // The sender is gone: nobody can cancel any more.
            std::future::pending::<()>().await;
        }
    }
}

fn reason(cancel: &watch::Receiver<Option<String>>) -> String {
    cancel.borrow().clone().unwrap_or_default()
}

async fn kill_runner(child: &mut RunnerProcess) {
    child.start_kill();
    let _ = timeout(EXIT_WAIT, child.wait()).await;
}
