//! Starting runner processes (`svc-runner`, afresh or as the fork server) from one thread
//! that outlives them, with the command line and environment every runner gets.
//!
//! A process's parent-death signal follows the *thread* that started it, not the
//! process. Started from a thread of the engine's runtime, which hands its work to a new
//! thread when a run does file work in place (`block_in_place`) and lets the old one end
//! when idle, a runner got SIGTERM in the middle of a long run. The [`Spawner`]'s thread
//! lives as long as any handle on it: the runner hub keeps one, and so does every process
//! started through it (a runner started afresh, the fork server).

use crate::util::lock::MutexExt as _;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// `PATH` of the runner process itself (the commands get their own).
pub(crate) const RUNNER_PATH_ENV: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What the spawner's thread is asked: a command to start, and where its child goes.
type SpawnRequest = (Command, oneshot::Sender<io::Result<Child>>);

/// Starts processes from a thread of its own; see the module's documentation.
pub struct Spawner {
    requests: Mutex<std::sync::mpsc::Sender<SpawnRequest>>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner").finish_non_exhaustive()
    }
}

impl Spawner {
    /// Starts the thread, in the runtime of the caller (a child's exit is watched there).
    pub fn start() -> io::Result<Arc<Spawner>> {
        let runtime = tokio::runtime::Handle::current();
        let (requests, incoming) = std::sync::mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("svc-spawner".into())
            .spawn(move || {
                let _inside = runtime.enter();
                // Ends when every handle on the spawner is gone. The command (and what
                // it holds for the child, such as a socket's end) is dropped here.
                while let Ok((mut command, spawned)) = incoming.recv() {
                    let _ = spawned.send(command.spawn());
                }
            })?;
        Ok(Arc::new(Spawner {
            requests: Mutex::new(requests),
        }))
    }

    /// Starts `command` from the spawner's thread.
    pub async fn spawn(&self, command: Command) -> io::Result<Child> {
        let ended = || io::Error::other("the thread that starts runners has ended");
        let (spawned_tx, spawned_rx) = oneshot::channel();
        self.requests
            .locked()
            .send((command, spawned_tx))
            .map_err(|_| ended())?;
        spawned_rx.await.map_err(|_| ended())?
    }
}

/// The command line every runner starts with: `runner_path --socket SOCKET`, a clean
/// environment with the runner's own `PATH`, no standard output, standard error to the
/// service's, and `--nofile` with the open-file limit the service was started with
/// (which the runner sets itself: with no `pre_exec`, the standard library starts it
/// with `posix_spawn`, a `vfork`-style clone, instead of copying the page tables of this
/// large, many-threaded process with `fork`). The caller adds standard input and the
/// rest.
///
/// Each starts in a process group of its own (`posix_spawn` sets it too): a Ctrl-C at
/// the terminal the service was started from reaches the service alone, which then
/// stops its runs as a SIGTERM would, instead of reaching every runner and the fork
/// server at once and ending them behind its back.
pub fn runner_command(runner_path: &Path, socket: &Path) -> Command {
    let mut command = Command::new(runner_path);
    command
        .process_group(0)
        .arg("--socket")
        .arg(socket)
        .env_clear()
        .env("PATH", RUNNER_PATH_ENV)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if let Some((soft, hard)) = crate::util::fdlimit::original_for_children() {
        command.arg("--nofile").arg(format!("{soft}:{hard}"));
    }
    command
}
