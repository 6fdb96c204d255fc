//! A run's begin: its number, its log and the record of the queued trigger it takes,
//! made durable before its command starts; its files and the runner's request.

use std::path::PathBuf;
use std::sync::Arc;

use super::executor::{Runner, SpareStart};
use super::request::{self, RequestData};
use super::run::join_blocking;
use super::{Def, Engine, Kind, Trigger, TriggerSource};
use crate::store::logstore::{LogDir, RunLog};
use crate::util::fsutil::Durability;
use crate::util::lock::MutexExt as _;

/// What a run needs, copied out of the registry when it begins.
#[derive(Clone)]
pub(super) struct RunContext {
    pub(super) def: Def,
    pub(super) counter: u64,
    pub(super) log_dir: LogDir,
    /// When it began (the job's `last_run`).
    pub(super) started_at: chrono::DateTime<chrono::Utc>,
}

/// What a run's begin does on disk ([`begin_on_disk`]).
pub(super) type DiskBegun = (RunContext, Prepared, RunFiles);

/// The log, and the work or why it could not be made; an error when the log could not be
/// created (the work is then not made).
pub(super) type Prepared = std::io::Result<(RunLog, Result<Work, String>)>;

/// What a runner is sent for a run: the request, and the ruleset of its sandbox when the
/// engine built it (see [`crate::runner::sandboxes`]).
pub(super) struct Work {
    pub(super) request: proto::ExecRequest,
    pub(super) ruleset: Option<Arc<proto::sandbox::Prepared>>,
}

/// What [`Engine::begin_run`] hands on.
struct BeganRun {
    context: RunContext,
    /// The run's log, or why it could not be made.
    log: std::io::Result<RunLog>,
    /// The job's take record and the ID of the queued trigger the run took, for the
    /// caller to write before the command starts.
    taking: Option<(PathBuf, u64)>,
}

/// What a run's begin writes before its command starts ([`Engine::begin_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BeginWrite {
    Nothing,
    /// The state file, durably.
    State,
    /// The take record of the queued trigger with this ID.
    Taken(u64),
}

/// A run that has begun: its counter, its log, the runner's request (or why it could
/// not be made) and the runner that will do it.
pub(super) struct Begun {
    pub(super) context: RunContext,
    pub(super) prepared: Prepared,
    pub(super) files: RunFiles,
    pub(super) runner: Box<dyn Runner>,
}

impl Begun {
    /// Boxed: the run task holds it across its requeue's wait, and a task is as large
    /// as the largest state it waits in.
    pub(super) fn new(
        (context, prepared, files): DiskBegun,
        runner: Box<dyn Runner>,
    ) -> Box<Begun> {
        Box::new(Begun {
            context,
            prepared,
            files,
            runner,
        })
    }
}

/// Files made for one run and removed when it ends, even when it could not start.
#[derive(Clone, Default)]
pub(super) struct RunFiles {
    pub(super) body_file: Option<PathBuf>,
    pub(super) tmp_dir: Option<PathBuf>,
}

impl RunFiles {
    /// Removes them (the temporary directory is emptied and kept for a later run of the
    /// job, see [`crate::store::runtmp::retire`]). Blocking.
    pub(super) fn remove(&self) {
        if let Some(path) = &self.body_file
            && let Err(err) = std::fs::remove_file(path)
        {
            tracing::warn!(path = %path.display(), error = %err, "cannot remove a request body file");
        }
        if let Some(path) = &self.tmp_dir
            && let Err(err) = crate::store::runtmp::retire(path)
        {
            tracing::warn!(path = %path.display(), error = %err, "cannot remove a run's temporary directory");
        }
    }
}

/// Gets a run going, in one trip to the blocking pool ([`begin_on_disk`]): its counter,
/// what must be durable before its command starts, its log and its request. Meanwhile a
/// runner starts, unless one was started ahead (by a timer) and is still fresh; it gets
/// no work before all this is done. `None` when the run must not happen.
pub(super) async fn begin(
    engine: &Engine,
    kind: Kind,
    id: &str,
    trigger: &Trigger,
    started_ahead: Option<Box<dyn Runner>>,
) -> Option<Box<Begun>> {
    if engine.is_shutting_down() {
        return None;
    }
    let disk = {
        let (engine, id, trigger) = (engine.clone(), id.to_string(), trigger.clone());
        tokio::task::spawn_blocking(move || begin_on_disk(&engine, kind, &id, &trigger, false))
    };
    let runner = match started_ahead {
        Some(runner) if runner.is_fresh() => runner,
        _ => {
            engine
                .take_runner(kind, id, SpareStart::AfterCommandStart)
                .await
        }
    };
    Some(Begun::new(join_blocking(disk).await?, runner))
}

/// The disk part of a run's begin ([`begin`]): its counter, its log, the record of the
/// queued trigger it takes, its request. `None` when the run must not happen. `busy`:
/// the run follows another run of its job at once (its sandbox is then built here, for
/// this run and the next ones). Blocking.
pub(super) fn begin_on_disk(
    engine: &Engine,
    kind: Kind,
    id: &str,
    trigger: &Trigger,
    busy: bool,
) -> Option<DiskBegun> {
    let BeganRun {
        context,
        log,
        taking,
    } = engine.begin_run(kind, id, trigger)?;
    let mut files = RunFiles::default();
    // Once the log exists (when it could be made), so that a watcher can open it.
    engine.publish(|| super::events::EngineEvent::RunStarted {
        kind,
        job_id: id.to_string(),
        counter: context.counter,
        trigger: trigger.source,
        attempt: trigger.attempt,
        started_at: context.started_at,
    });
    // After the log exists: a controller killed before this runs the trigger again at
    // its next start (this run, which never started its command, shows as interrupted);
    // killed after it, the run shows as interrupted only.
    if let Some((path, queue_id)) = taking
        && let Err(err) = crate::store::state::write_taken(&path, queue_id)
    {
        tracing::error!(job = id, path = %path.display(), error = %err, "cannot record that the queued trigger was taken");
    }
    let prepared = log.map(|log| (log, prepare(engine, &context, trigger, busy, &mut files)));
    Some((context, prepared, files))
}

/// The first line of a run's log, written as the log is created: which run, and who or
/// what started it (a webhook with its event and delivery ID).
fn run_header(def: &Def, counter: u64, trigger: &Trigger) -> String {
    let (kind_word, id) = match def {
        Def::Job(job) => ("job", job.id.as_str()),
        Def::Http(job) => ("JobHttp", job.id.as_str()),
    };
    let by = match trigger.source {
        TriggerSource::Manual => "hand (run now, a signed request)".to_string(),
        TriggerSource::CatchUp => match &trigger.cause {
            Some(cause) => format!("catch-up ({cause})"),
            None => "catch-up".to_string(),
        },
        TriggerSource::Retry => {
            let attempts = match def {
                Def::Job(job) => job.retry + 1,
                Def::Http(_) => trigger.attempt,
            };
            let after = trigger.cause.as_deref().unwrap_or("a failed run");
            format!(
                "retry (attempt {} of {attempts}, after {after})",
                trigger.attempt
            )
        }
        TriggerSource::Chain => match &trigger.cause {
            Some(cause) => format!("chain, after {cause}"),
            None => "chain".to_string(),
        },
        TriggerSource::Webhook => {
            let facts = &trigger.facts;
            let mut text = "webhook".to_string();
            let details: Vec<String> = [("event", &facts.event), ("delivery", &facts.id)]
                .into_iter()
                .filter_map(|(what, value)| value.as_ref().map(|v| format!("{what} {v}")))
                .collect();
            if !details.is_empty() {
                text.push_str(&format!(" ({})", details.join(", ")));
            }
            text
        }
        other => other.as_str().to_string(),
    };
    format!("=== run {counter} of {kind_word} {id} started by {by}")
}

/// Resolves credentials, prepares the working directory, the run's temporary directory
/// and the request body file, and builds the runner request, with the ruleset of its
/// sandbox when one is kept for the job or it is `busy` ([`crate::runner::sandboxes`]). The
/// files it created are left in `files` for removal when the run ends, even on an
/// error. Blocking (user database, `chown`, file writes, `stat`).
fn prepare(
    engine: &Engine,
    context: &RunContext,
    trigger: &Trigger,
    busy: bool,
    files: &mut RunFiles,
) -> Result<Work, String> {
    let main = &engine.inner.main;
    match &context.def {
        Def::Job(job) => {
            let (user, group) =
                request::user_and_group(job.user.as_deref(), job.group.as_deref(), main);
            let run_as = request::resolve_run_as(user, group)?;
            let (dir_work, is_default) = request::dir_work(main, job);
            request::prepare_dir_work(&dir_work, is_default, &run_as)?;
            let tmp = crate::store::runtmp::create(
                main,
                &job.id,
                context.counter,
                run_as.credentials.as_ref(),
            )?;
            files.tmp_dir = Some(tmp.clone());
            let mut data = RequestData {
                body_path: None,
                tmp_dir: Some(tmp),
                facts: trigger.facts.clone(),
            };
            if let Some(body) = &trigger.body {
                let path = write_body_file(main, &job.id, context.counter, body, &run_as)?;
                data.body_path = Some(path.clone());
                files.body_file = Some(path);
            }
            let mut request =
                request::job_request(main, job, context.counter, &dir_work, &run_as, &data);
            // A timer's run: others are due with it, and no run of its job waits for its
            // end on its way (as a busy job's next does).
            request.end_yields = trigger.source == TriggerSource::Timer;
            let ruleset = match (&mut request.sandbox, engine.inner.executor.sandboxes()) {
                (Some(spec), Some(sandboxes)) => {
                    let ruleset = sandboxes.for_run(&job.id, spec, busy);
                    spec.attached = ruleset.as_ref().map(|built| built.summary.clone());
                    ruleset
                }
                _ => None,
            };
            Ok(Work { request, ruleset })
        }
        Def::Http(job) => {
            let (user, group) =
                request::user_and_group(job.user.as_deref(), job.group.as_deref(), main);
            let run_as = request::resolve_run_as(user, group)?;
            Ok(Work {
                request: request::http_request(job, context.counter, &run_as),
                ruleset: None,
            })
        }
    }
}

/// Saves a webhook body where only the job's user can read it.
fn write_body_file(
    main: &crate::config::MainConfig,
    id: &str,
    counter: u64,
    body: &[u8],
    run_as: &request::RunAs,
) -> Result<PathBuf, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // The job's directory (0711, the controller's) stays from one run to the next: its
    // sandbox grants reading the files below it. It is made, and checked, when it is
    // not there yet, not on every run.
    let dir = request::bodies_dir(main, id);
    let path = dir.join(format!("{counter}.body"));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
    };
    let created = match create() {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            crate::store::runtmp::prepare_passage(&main.dir_bodies())?;
            crate::store::runtmp::prepare_passage(&dir)?;
            create()
        }
        other => other,
    };
    let mut file = created.map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(body)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if let Some(creds) = &run_as.credentials
        && nix::unistd::Uid::effective().is_root()
    {
        std::os::unix::fs::chown(&path, Some(creds.uid), Some(creds.gid))
            .map_err(|e| format!("cannot hand {} to {}: {e}", path.display(), creds.user_name))?;
    }
    Ok(path)
}

impl Engine {
    /// Gives the run its number and its log, and marks the job started; `None` when the
    /// run must not happen (job paused or gone, or the service is stopping). Also
    /// returns, when the run takes the queued trigger the state file holds, the job's
    /// take record and the trigger's ID, for the caller to write
    /// ([`crate::store::state::write_taken`]) before the command starts.
    ///
    /// The log's name, durable before this returns, records the number: a start after
    /// any crash numbers the next run after the newest log (`Engine::state_on_disk`), so
    /// numbers neither repeat nor leave a gap. Nothing shows the number before: the save
    /// lock, held from the numbering to the log's sync, keeps state writes from naming
    /// it earlier, and the run is listed as started only then. A run without a log is
    /// recorded by a durable state write instead.
    ///
    /// Otherwise the state file is written before the command only when it holds the
    /// taken trigger without an ID (an earlier release's file); a run that takes the
    /// trigger the file holds has its take record written instead, so that it runs
    /// exactly once. The started mark lives in memory and in the run's log, from which a
    /// start after a crash repairs the state.
    fn begin_run(&self, kind: Kind, id: &str, trigger: &Trigger) -> Option<BeganRun> {
        if self.is_shutting_down() {
            return None;
        }
        let (save_lock, state_path) = {
            let mut registry = self.lock();
            let entry = registry.map(kind).get(id)?;
            (entry.saving.save_lock.clone(), entry.state_path.clone())
        };
        // Held to the end of the write, if any: no other write is in flight meanwhile,
        // so `queue_on_disk` tells what the file holds, and none names the new number
        // before its log exists.
        let _ordered = save_lock.locked();
        let (context, write, log_ahead) = {
            let mut registry = self.lock();
            let entry = registry.map(kind).get_mut(id)?;
            if entry.state.paused {
                return None;
            }
            let claimed = entry.slot.run.as_ref().and_then(|run| run.claim);
            entry.state.counter = match claimed {
                // The cluster numbers the runs; this node's counter follows (it was
                // raised to the cluster's at start, so it never goes back).
                Some(claim) => claim.counter.max(entry.state.counter),
                None => entry.state.counter + 1,
            };
            entry.state.started = true;
            let started_at = self.inner.clock.now();
            entry.state.last_run = Some(started_at);
            entry.resumed = false;
            let taking = entry.slot.run.as_ref().and_then(|run| run.queue_id);
            let log_ahead = entry.slot.log_ahead.take();
            let write = match (entry.saving.queue_on_disk, entry.saving.queue_on_disk_id) {
                (false, _) => BeginWrite::Nothing,
                // The file holds the trigger this run takes.
                (true, Some(on_disk)) if taking == Some(on_disk) => BeginWrite::Taken(on_disk),
                // It holds another one (queued after this run's trigger was taken), which
                // is not this run's to record.
                (true, Some(_)) => BeginWrite::Nothing,
                // Written by an earlier release, without IDs: the file is rewritten.
                (true, None) => BeginWrite::State,
            };
            let context = RunContext {
                def: entry.def.clone(),
                counter: entry.state.counter,
                log_dir: entry.log_dir.clone(),
                started_at,
            };
            registry.publish_queue_length();
            (context, write, log_ahead)
        };
        let header = run_header(&context.def, context.counter, trigger);
        let log = context
            .log_dir
            .create_with(context.counter, &header, log_ahead);
        if let Some(run) = self
            .lock()
            .map(kind)
            .get_mut(id)
            .and_then(|entry| entry.slot.run.as_mut())
        {
            run.counter = Some(context.counter);
        }
        // Without a log, the state file records the number; the new state leaves the
        // taken trigger out, so one write does both.
        let write = if log.is_err() {
            BeginWrite::State
        } else {
            write
        };
        let taking = match write {
            BeginWrite::Nothing => None,
            BeginWrite::State => {
                if let Err(err) = self.write_state(kind, id, &state_path, Durability::Durable) {
                    tracing::error!(job = id, error = %err, "cannot write the state file");
                }
                None
            }
            BeginWrite::Taken(queue_id) => {
                Some((crate::store::state::taken_path(&state_path), queue_id))
            }
        };
        self.changed();
        Some(BeganRun {
            context,
            log,
            taking,
        })
    }
}
