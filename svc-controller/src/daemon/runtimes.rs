//! The service's two tokio runtimes: the engine's, at the service's priority, and the
//! HTTP front's, at a lower one; and how many blocking threads each keeps.

use std::time::Duration;

/// How long an idle blocking thread is kept (tokio's default: 10 s). tokio queues
/// blocking work for an idle or busy thread when it cannot start a new one, but panics
/// when its pool has no thread at all; a host whose task table a job filled (without
/// cgroups, [`crate::runner::cgroups`]) must not find the pool empty, so threads, once started,
/// stay, at most [`BLOCKING_THREADS`] of them.
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(24 * 3600);

/// The most blocking threads each runtime keeps (tokio's default: 512). Their work is
/// short file work (state, logs, the spend store), which queues when all are busy; the
/// bound keeps what a burst started, and kept for [`BLOCKING_KEEP_ALIVE`], small.
const BLOCKING_THREADS: usize = 64;

/// The engine's runtime: one thread (and its blocking threads) at the service's own
/// priority, above the HTTP threads (see [`HTTP_NICE`]). It runs the runs, the timers
/// and the runner connections, and starts the runners, which inherit its priority.
pub(super) fn engine_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("svc-engine")
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
}

/// How much lower than the rest of the service the threads that answer HTTP run (a nice
/// increment; unprivileged, since it only lowers).
///
/// Runs come first. A job's run is a chain of short steps across threads and processes
/// (the engine's thread, its blocking threads, the runner, the command), each of which
/// waits for a CPU when it wakes. A flood of requests (a code host's retries, a script
/// triggering a busy job in a loop) keeps every thread that answers busy; at the same
/// priority each step of a run then waits its turn behind them, and the runs slow to a
/// trickle while the flood is answered at full speed. At 5, a step that wakes takes the
/// CPU first; the answers get what the runs leave, which on an idle machine is all of it.
const HTTP_NICE: libc::c_int = 5;

/// The nice value of the HTTP threads: [`HTTP_NICE`] above the calling thread's (the
/// service's own). Read once, before the HTTP runtime starts any thread.
fn http_thread_nice() -> libc::c_int {
    // SAFETY: getpriority(2) only reads the calling thread's priority; -1 is a valid
    // answer, told from an error by errno, which is cleared before and read right after
    // on the same thread.
    let own = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    // SAFETY: as above.
    if own == -1 && unsafe { *libc::__errno_location() } != 0 {
        return HTTP_NICE;
    }
    own.saturating_add(HTTP_NICE).min(19)
}

/// Sets the calling thread's nice value to `nice`; absolute, not an increment: blocking
/// threads are started by threads that already run at it, and inherit it. Called as
/// each thread of the HTTP runtime starts.
fn set_thread_nice(nice: libc::c_int) {
    if let Err(error) = crate::util::set_thread_nice(nice) {
        tracing::debug!(%error, nice, "cannot lower the priority of an HTTP thread");
    }
}

/// The HTTP front's runtime: a worker per core at [`HTTP_NICE`] below the service.
pub(super) fn http_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let http_nice = http_thread_nice();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .max_blocking_threads(BLOCKING_THREADS)
        .on_thread_start(move || set_thread_nice(http_nice))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's nice value (errno is not checked: these threads are far from -1).
    fn own_nice() -> libc::c_int {
        // SAFETY: getpriority(2) only reads the calling thread's priority.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn http_threads_run_five_below_the_service_and_do_not_compound() {
        std::thread::spawn(|| {
            let base = own_nice();
            let target = http_thread_nice();
            assert_eq!(target, (base + HTTP_NICE).min(19));
            set_thread_nice(target);
            assert_eq!(own_nice(), target);
            // A thread started by an HTTP thread starts at its nice value and sets the
            // same one again (tokio's blocking threads): no further 5 below.
            std::thread::spawn(move || {
                set_thread_nice(target);
                assert_eq!(own_nice(), target);
            })
            .join()
            .expect("inner thread");
        })
        .join()
        .expect("thread");
    }
}
