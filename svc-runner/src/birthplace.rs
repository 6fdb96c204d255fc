//! The thread that starts a run's commands from inside the run's cgroup (v1): it joins
//! the cgroup while the runner waits for its work, so that each command is born there
//! instead of moving there as it starts.
//!
//! A move into a cgroup takes the kernel's thread-group lock for writing, which waits for
//! an RCU grace period (10 to 20 ms) when no other move happened just before: paid by
//! every run of commands when each command moved itself, and most of a short run's
//! time. On cgroup v1 a single thread may move, and a process is born in the cgroups of
//! the thread that forks it: so this thread moves once, early, and forks the commands.
//! It leaves the cgroup by ending ([`Birthplace::end`]) before the run is reported, so
//! that the controller finds in the cgroup only what the run left.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Work run on the thread.
type Job = Box<dyn FnOnce() + Send>;

/// Whether the thread is in the cgroup: its answer awaited, or known (`Err`: why not).
#[derive(Debug)]
enum Joined {
    Waiting(tokio::sync::oneshot::Receiver<Result<(), String>>),
    Known(Result<(), String>),
}

/// The thread, once started; see the module's documentation.
#[derive(Debug)]
pub struct Birthplace {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    joined: Joined,
    /// The cgroup's directory in each hierarchy.
    dirs: Vec<PathBuf>,
    /// The runner's OOM score adjustment before [`Birthplace::shield_from_oom`], which
    /// each command gets back.
    oom_score_adj: Option<Vec<u8>>,
}

impl Birthplace {
    /// Starts the thread, which moves itself into the cgroup of each of `tasks` (the
    /// `tasks` files of its directories) and then waits for work.
    pub fn start(tasks: Vec<String>) -> io::Result<Birthplace> {
        let dirs = tasks
            .iter()
            .map(|file| Path::new(file).parent().map(Path::to_path_buf))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "a tasks file has no directory")
            })?;
        let (joined_tx, joined_rx) = tokio::sync::oneshot::channel();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("svc-birthplace".into())
            .spawn(move || {
                // Its own file-system attributes, so that it may join the run's mount
                // namespace alone (`setns` refuses a thread that shares them).
                // SAFETY: unshare with a flag only.
                let own_fs = match unsafe { libc::unshare(libc::CLONE_FS) } {
                    0 => Ok(()),
                    _ => Err(format!(
                        "cannot unshare the file-system attributes: {}",
                        io::Error::last_os_error()
                    )),
                };
                let _ = joined_tx.send(own_fs.and_then(|()| join(&tasks)));
                for job in jobs_rx {
                    job();
                }
            })?;
        Ok(Birthplace {
            jobs: Some(jobs_tx),
            thread: Some(thread),
            joined: Joined::Waiting(joined_rx),
            dirs,
            oom_score_adj: None,
        })
    }

    /// Waits until the thread is in the cgroup (at once when that is known already);
    /// `Err`: it could not move, and why (the thread is then of no use).
    pub async fn joined(&mut self) -> Result<(), String> {
        let outcome = match &mut self.joined {
            Joined::Known(outcome) => return outcome.clone(),
            Joined::Waiting(answer) => answer
                .await
                .unwrap_or_else(|_| Err("the thread ended".to_string())),
        };
        self.joined = Joined::Known(outcome.clone());
        outcome
    }

    /// Whether the run's cgroup, given by its `cgroup.procs` files, is the one this
    /// thread joined.
    pub fn is_for(&self, procs_files: &[String]) -> bool {
        let dirs: Vec<PathBuf> = procs_files
            .iter()
            .filter_map(|file| Path::new(file).parent().map(Path::to_path_buf))
            .collect();
        !dirs.is_empty() && dirs.len() == procs_files.len() && dirs == self.dirs
    }

    /// Runs `work` on the thread and returns what it returned; the caller waits.
    /// `Err`: the thread is gone.
    pub fn run<R: Send>(&self, work: &(dyn Fn() -> R + Sync)) -> io::Result<R> {
        let gone = || io::Error::other("the thread that starts the commands is gone");
        let jobs = self.jobs.as_ref().ok_or_else(gone)?;
        let (done_tx, done_rx) = mpsc::sync_channel::<R>(1);
        let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
            let _ = done_tx.send(work());
        });
        // SAFETY: the job borrows `work` (and owns `done_tx`) only until it has run; this
        // function returns only once the job has answered, or once it is known to be
        // dropped unrun (the send failed, or the thread ended and dropped the channel's
        // jobs, which closes `done_rx`): no borrow is used after it ends.
        let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
        jobs.send(job).map_err(|_| gone())?;
        done_rx.recv().map_err(|_| gone())
    }

    /// Keeps the OOM killer from choosing the runner: with this thread in the run's
    /// cgroup, the runner is one of the processes it chooses from when the run reaches
    /// its `limit_memory`, and could be the largest. Each command gets the runner's
    /// previous value back ([`Birthplace::restore_oom_score`]). Needs the runner's
    /// privileges (before the switch to the job's user).
    pub fn shield_from_oom(&mut self) -> io::Result<()> {
        let previous = std::fs::read(OOM_SCORE_ADJ)?;
        std::fs::write(OOM_SCORE_ADJ, b"-1000")?;
        self.oom_score_adj = Some(previous.trim_ascii().to_vec());
        Ok(())
    }

    /// In a command's process before it executes: the OOM score adjustment the runner
    /// had before [`Birthplace::shield_from_oom`] (a process started with `vfork` has
    /// its own). Async-signal-safe: no allocation.
    pub fn restore_oom_score(&self) -> io::Result<()> {
        let Some(previous) = &self.oom_score_adj else {
            return Ok(());
        };
        // SAFETY: open, write and close of a static path and of bytes prepared before.
        unsafe {
            let fd = libc::open(
                c"/proc/self/oom_score_adj".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let written = libc::write(fd, previous.as_ptr().cast(), previous.len());
            let error = io::Error::last_os_error();
            libc::close(fd);
            if usize::try_from(written).ok() != Some(previous.len()) {
                return Err(error);
            }
        }
        Ok(())
    }

    /// Ends the thread and waits for it: it leaves the run's cgroup as it ends.
    pub fn end(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Birthplace {
    fn drop(&mut self) {
        self.stop();
    }
}

const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// Moves the calling thread into the cgroup of each of `tasks` (`0` written to a `tasks`
/// file is the writer).
fn join(tasks: &[String]) -> Result<(), String> {
    for file in tasks {
        std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .and_then(|mut tasks| tasks.write_all(b"0"))
            .map_err(|err| format!("cannot join the run's cgroup {file}: {err}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_on_the_thread_and_borrows_the_callers_data() {
        let place = Birthplace::start(Vec::new()).expect("start");
        let caller = std::thread::current().id();
        let borrowed = String::from("borrowed");
        let (len, on) = place
            .run(&|| (borrowed.len(), std::thread::current().id()))
            .expect("run");
        assert_eq!(len, 8);
        assert_ne!(on, caller, "the work ran on the birthplace thread");
        place.end();
    }

    #[test]
    fn the_cgroup_is_recognised_by_its_directories() {
        let place = Birthplace::start(vec![
            "/sys/fs/cgroup/pids/r/ahead.1/tasks".into(),
            "/sys/fs/cgroup/memory/r/ahead.1/tasks".into(),
        ])
        .expect("start");
        assert!(place.is_for(&[
            "/sys/fs/cgroup/pids/r/ahead.1/cgroup.procs".into(),
            "/sys/fs/cgroup/memory/r/ahead.1/cgroup.procs".into(),
        ]));
        assert!(!place.is_for(&["/sys/fs/cgroup/pids/r/ahead.1/cgroup.procs".into()]));
        assert!(!place.is_for(&[
            "/sys/fs/cgroup/pids/r/job.1.0/cgroup.procs".into(),
            "/sys/fs/cgroup/memory/r/job.1.0/cgroup.procs".into(),
        ]));
        assert!(!place.is_for(&[]));
    }

    #[tokio::test]
    async fn a_cgroup_that_cannot_be_joined_is_said() {
        let mut place = Birthplace::start(vec!["/nonexistent/cgroup/tasks".into()]).expect("start");
        let why = place.joined().await.expect_err("cannot join");
        assert!(why.contains("/nonexistent/cgroup/tasks"), "{why}");
        // Asked again (the namespaces made ahead ask first, the run later): the same
        // reason, not a second wait.
        assert_eq!(place.joined().await, Err(why));
    }

    #[tokio::test]
    async fn a_join_is_awaited_once_and_then_known() {
        let dir = tempfile::tempdir().expect("temp dir");
        let tasks = dir.path().join("tasks");
        std::fs::write(&tasks, "").expect("a tasks file");
        let mut place = Birthplace::start(vec![tasks.display().to_string()]).expect("start");
        assert_eq!(place.joined().await, Ok(()));
        assert_eq!(place.joined().await, Ok(()), "known once joined");
        place.end();
    }
}
