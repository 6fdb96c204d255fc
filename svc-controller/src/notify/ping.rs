//! Health pings: each run of a job with a `ping_url` tells a health-check service
//! (healthchecks.io and its kin) that it started and how it ended, off the run path.
//!
//! The engine hands [`RunPing`]s to a bounded channel without waiting
//! ([`crate::engine::Engine::send_pings_to`]). Here one task takes them and sends them in
//! order per job (a start never arrives after its run's end, which would leave the
//! check "started" until its grace time ran out), one ping of a job at a time, jobs in
//! parallel; a job whose check is slow keeps at most [`MAX_WAITING_PER_JOB`] pings
//! waiting and drops the oldest beyond. Each ping is a POST, tried up to
//! [`super::backoff::ATTEMPTS`] times ([`with_retries`]), each attempt bounded by
//! [`PING_TIMEOUT`]; every failure is logged with the URL redacted (it carries the
//! check's secret). At shutdown what is under way gets the notifications' grace, then
//! is dropped, and the log says how much.
//!
//! What each event sends ([`ping_path`]): the start `<url>/start`; a success `<url>`;
//! a failure `<url>/<exit code>` when its last command exited with a code from 1 to
//! 255 (healthchecks reads it as a failure and shows the code), else `<url>/fail` (a
//! signal, a timeout, a JobHttp's error answer); a cancelled run `<url>/log`, which
//! records the cancel without alerting: the check still goes down when its grace time
//! passes without a later run ending, so a cancel that leaves the work undone is not
//! hidden, while a run replaced by a newer trigger (`on_busy = replace`) or ended by a
//! stop pages no one. The end's body is the end of the run's log.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument as _;

use proto::error_chain::describe;

use super::{
    Delivery, MadeOnce, Next, NotifyError, log_failed_attempt, make_http_client,
    send_expecting_success, stop_dispatcher, with_retries,
};
use crate::engine::{Kind, PingEvent, RunPing};
use crate::store::logstore::{LogStatus, last_lines};
use crate::store::state::RunStatus;

/// Pings the engine may hand over before the sender takes them; beyond, the engine
/// drops the next ones (and logs it).
pub const CHANNEL_SIZE: usize = 1024;

/// Pings of one job waiting behind the one under way; beyond, the oldest is dropped:
/// the newest say best how the job is now.
const MAX_WAITING_PER_JOB: usize = 8;

/// Attempts made at the same time, all jobs together.
const MAX_ATTEMPTS_AT_ONCE: usize = 16;

/// Longest one attempt may take (healthchecks.io's own advice for its clients).
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Most bytes of the run's log an end ping carries: its last lines, well below the
/// bodies health-check services keep (healthchecks.io: 100 KB).
pub const BODY_MAX: u64 = 10 * 1024;

/// A job, as its pings are ordered by.
type JobKey = (Kind, String);

/// The health-ping sender: the task that takes pings from the engine.
#[derive(Debug)]
pub struct Pinger {
    shared: Arc<Shared>,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
}

/// What every ping uses.
#[derive(Debug)]
struct Shared {
    /// Made at the first ping, so that a system without CA certificates starts, and only
    /// its pings fail, saying why.
    http: MadeOnce<reqwest::Client>,
    /// `Some(deadline)` once the service stops: no more waiting between attempts, and
    /// at the deadline whatever is still under way is dropped.
    stop: watch::Sender<Option<Instant>>,
    attempts: Semaphore,
}

impl Pinger {
    /// Starts the sender on the current runtime. Returns it and the channel to hand to
    /// the engine.
    pub fn start() -> (Pinger, mpsc::Sender<RunPing>) {
        let shared = Arc::new(Shared {
            http: MadeOnce::default(),
            stop: watch::Sender::new(None),
            attempts: Semaphore::new(MAX_ATTEMPTS_AT_ONCE),
        });
        let (tx, rx) = mpsc::channel(CHANNEL_SIZE);
        let dispatcher = tokio::spawn(dispatch(shared.clone(), rx));
        let pinger = Pinger {
            shared,
            dispatcher: Mutex::new(Some(dispatcher)),
        };
        (pinger, tx)
    }

    /// Gives what is under way or waiting until `grace` has passed (waits between
    /// attempts are cut short: one last attempt each), then drops the rest, saying how
    /// much. Returns by then.
    pub async fn shutdown(&self, grace: Duration) {
        stop_dispatcher(&self.shared.stop, &self.dispatcher, grace, "health-ping").await;
    }
}

/// The pings under way (one per job) and those waiting behind them.
#[derive(Default)]
struct Queues {
    /// For each job with a ping under way, the pings waiting behind it, oldest first.
    waiting: HashMap<JobKey, VecDeque<RunPing>>,
    /// Which job each task under way pings for.
    tasks: HashMap<tokio::task::Id, JobKey>,
    under_way: JoinSet<()>,
}

impl Queues {
    /// Sends `ping` now when its job has none under way, else puts it in line.
    fn accept(&mut self, shared: &Arc<Shared>, ping: RunPing) {
        let key = (ping.kind, ping.job_id.clone());
        match self.waiting.get_mut(&key) {
            Some(line) => {
                if line.len() >= MAX_WAITING_PER_JOB
                    && let Some(old) = line.pop_front()
                {
                    crate::metrics::ping_sent("dropped");
                    tracing::warn!(
                        job = old.job_id,
                        counter = old.counter,
                        ping = event_name(&old.event),
                        "health ping dropped: its check is slower than the job's runs"
                    );
                }
                line.push_back(ping);
            }
            None => {
                self.waiting.insert(key.clone(), VecDeque::new());
                self.spawn(shared, key, ping);
            }
        }
    }

    fn spawn(&mut self, shared: &Arc<Shared>, key: JobKey, ping: RunPing) {
        let task = self.under_way.spawn(send(shared.clone(), ping));
        self.tasks.insert(task.id(), key);
    }

    /// The task `id` ended: the next ping of its job, if one waits.
    fn done(&mut self, shared: &Arc<Shared>, id: tokio::task::Id) {
        let Some(key) = self.tasks.remove(&id) else {
            return;
        };
        match self.waiting.get_mut(&key).and_then(VecDeque::pop_front) {
            Some(next) => self.spawn(shared, key, next),
            None => {
                self.waiting.remove(&key);
            }
        }
    }

    /// Waits for the next task to end and starts what follows it; `false` when none is
    /// under way.
    async fn join_next(&mut self, shared: &Arc<Shared>) -> bool {
        let id = match self.under_way.join_next_with_id().await {
            None => return false,
            Some(Ok((id, ()))) => id,
            Some(Err(err)) => {
                if err.is_panic() {
                    tracing::error!("a health ping ended abnormally (a panic)");
                }
                err.id()
            }
        };
        self.done(shared, id);
        true
    }

    /// Pings not sent: under way and waiting.
    fn left(&self) -> usize {
        self.under_way.len() + self.waiting.values().map(VecDeque::len).sum::<usize>()
    }
}

/// Takes pings from the engine and sends them, until the service stops; then gives
/// those under way and waiting until the deadline.
async fn dispatch(shared: Arc<Shared>, mut pings: mpsc::Receiver<RunPing>) {
    let mut queues = Queues::default();
    let mut stop = shared.stop.subscribe();
    loop {
        tokio::select! {
            ping = pings.recv() => match ping {
                Some(ping) => queues.accept(&shared, ping),
                None => break,
            },
            _ = queues.join_next(&shared), if !queues.under_way.is_empty() => {}
            _ = stop.wait_for(Option::is_some) => break,
        }
    }
    // The ends of the runs the stop itself ended were handed over before it came here.
    while let Ok(ping) = pings.try_recv() {
        queues.accept(&shared, ping);
    }
    pings.close();
    let deadline = (*shared.stop.borrow()).unwrap_or_else(Instant::now);
    let all_done = async { while queues.join_next(&shared).await {} };
    if tokio::time::timeout_at(deadline, all_done).await.is_err() {
        let left = queues.left();
        for _ in 0..left {
            crate::metrics::ping_sent("failed");
        }
        tracing::warn!(
            pings = left,
            "health pings not sent: the service stopped before they could be"
        );
        queues.under_way.shutdown().await;
    }
}

/// `start`, `success`, `fail`, ...: how a ping is named in the log.
fn event_name(event: &PingEvent) -> &'static str {
    match event {
        PingEvent::Start => "start",
        PingEvent::End { status, .. } => status.as_str(),
    }
}

/// What is added to the check's URL for `event` (see the module's text).
fn ping_path(event: &PingEvent) -> String {
    let PingEvent::End { status, detail, .. } = event else {
        return "/start".into();
    };
    match status {
        RunStatus::Success => String::new(),
        RunStatus::Canceled => "/log".into(),
        RunStatus::Fail => match detail.exit_code {
            // 0 from a run that failed anyway (its runner was lost after the last
            // command) would read as a success.
            Some(code @ 1..=255) => format!("/{code}"),
            _ => "/fail".into(),
        },
        RunStatus::Timeout | RunStatus::Interrupted => "/fail".into(),
    }
}

/// `url` with `path` added to its path, before any query (`?rid=...`, `?create=1`) or
/// fragment; a `/` that ends the path is not doubled.
fn with_path(url: &str, path: &str) -> String {
    let split = url.find(['?', '#']).unwrap_or(url.len());
    let (base, rest) = url.split_at(split);
    if path.is_empty() {
        return url.to_string();
    }
    format!("{}{path}{rest}", base.trim_end_matches('/'))
}

/// The body of `ping`: the last lines of its run's log for an end (within
/// [`BODY_MAX`] bytes, a cut first line left out), nothing for a start. Blocking.
fn body(ping: &RunPing) -> String {
    let PingEvent::End {
        status, log_dir, ..
    } = &ping.event
    else {
        return String::new();
    };
    let log = LogStatus::Finished(status.result());
    match log_dir.read_tail(ping.counter, log, BODY_MAX) {
        Ok(tail) => {
            let mut text = last_lines(&tail, BODY_MAX, usize::MAX).join("\n");
            text.push('\n');
            text
        }
        // Retention may have removed it already, when later runs end quickly: the
        // ping is what counts.
        Err(err) => format!("(the run's log could not be read: {err})\n"),
    }
}

/// One ping ready to go.
struct Request {
    client: reqwest::Client,
    url: String,
    body: String,
}

/// Sends one ping, with retries, logging each failure (with the URL redacted).
async fn send(shared: Arc<Shared>, ping: RunPing) {
    let span = tracing::error_span!(
        "health_ping",
        job = ping.job_id.as_str(),
        kind = ping.kind.as_str(),
        counter = ping.counter,
        ping = event_name(&ping.event),
        url = ping.url.redacted(),
    );
    send_in_span(&shared, ping).instrument(span).await;
}

/// The attempts of [`send`], in its span.
async fn send_in_span(shared: &Arc<Shared>, ping: RunPing) {
    let prepared = {
        let shared = shared.clone();
        // The client's TLS set-up and the log read block.
        tokio::task::spawn_blocking(move || -> Result<Request, NotifyError> {
            let client = shared.http.get_or_make(make_http_client)?;
            Ok(Request {
                client,
                url: with_path(ping.url.expose(), &ping_path(&ping.event)),
                body: body(&ping),
            })
        })
        .await
    };
    let request = match prepared {
        Ok(Ok(request)) => request,
        Ok(Err(err)) => {
            crate::metrics::ping_sent("failed");
            tracing::error!(error = %describe(&err), "health ping not sent");
            return;
        }
        Err(err) => {
            crate::metrics::ping_sent("failed");
            tracing::error!(error = %err, "health ping not sent: its preparation ended abnormally");
            return;
        }
    };
    let attempt = |_: u32| async {
        let _permit = shared.attempts.acquire().await;
        attempt(&request).await
    };
    let failed = |attempt: u32, err: &NotifyError, next: Next| {
        log_failed_attempt("health ping", attempt, err, next);
    };
    match with_retries(attempt, shared.stop.subscribe(), failed).await {
        Delivery::Sent { attempts } => {
            crate::metrics::ping_sent("sent");
            tracing::debug!(attempt = attempts, "health ping sent");
        }
        Delivery::Failed { .. } => crate::metrics::ping_sent("failed"),
    }
}

/// One POST of `request`; a 2xx answer is a success.
async fn attempt(request: &Request) -> Result<(), NotifyError> {
    let post = request
        .client
        .post(&request.url)
        .timeout(PING_TIMEOUT)
        .header(reqwest::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(request.body.clone());
    send_expecting_success(post).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::exec::EndDetail;
    use crate::store::logstore::{LogDir, OutputKind};
    use crate::store::state::RunResult;

    fn end(status: RunStatus, exit_code: Option<i32>, signal: Option<i32>) -> PingEvent {
        PingEvent::End {
            status,
            detail: EndDetail {
                timed_out: status == RunStatus::Timeout,
                exit_code,
                signal,
                http_status: None,
                usage: None,
                oom: false,
            },
            log_dir: LogDir::new("/nonexistent".into(), "j"),
        }
    }

    #[test]
    fn each_event_has_its_path() {
        assert_eq!(ping_path(&PingEvent::Start), "/start");
        assert_eq!(ping_path(&end(RunStatus::Success, Some(0), None)), "");
        assert_eq!(ping_path(&end(RunStatus::Fail, Some(2), None)), "/2");
        assert_eq!(ping_path(&end(RunStatus::Fail, Some(255), None)), "/255");
        assert_eq!(
            ping_path(&end(RunStatus::Fail, Some(0), None)),
            "/fail",
            "a failed run never reads as a success"
        );
        assert_eq!(ping_path(&end(RunStatus::Fail, Some(-1), None)), "/fail");
        assert_eq!(ping_path(&end(RunStatus::Fail, None, Some(9))), "/fail");
        assert_eq!(ping_path(&end(RunStatus::Fail, None, None)), "/fail");
        assert_eq!(ping_path(&end(RunStatus::Timeout, None, Some(15))), "/fail");
        assert_eq!(ping_path(&end(RunStatus::Canceled, None, Some(15))), "/log");
        assert_eq!(ping_path(&end(RunStatus::Interrupted, None, None)), "/fail");
    }

    #[test]
    fn the_path_goes_before_the_query() {
        let uuid = "https://hc-ping.com/5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278";
        assert_eq!(with_path(uuid, "/start"), format!("{uuid}/start"));
        assert_eq!(with_path(uuid, ""), uuid);
        assert_eq!(
            with_path("https://hc-ping.com/key/db-backup?create=1", "/1"),
            "https://hc-ping.com/key/db-backup/1?create=1"
        );
        assert_eq!(
            with_path("http://h:8000/ping/abc/", "/fail"),
            "http://h:8000/ping/abc/fail"
        );
        assert_eq!(
            with_path("http://h/ping/abc/?rid=1", ""),
            "http://h/ping/abc/?rid=1",
            "the URL as configured on success"
        );
    }

    #[test]
    fn an_end_carries_the_last_lines_of_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = LogDir::new(dir.path().to_path_buf(), "j");
        let mut log = logs.create(3, "=== run 3 started").expect("create");
        for n in 0..2000 {
            log.output(OutputKind::Stdout, format!("line {n}\n").as_bytes())
                .expect("out");
        }
        log.output(OutputKind::Stderr, b"it broke\n").expect("out");
        log.finish(RunResult::Fail).expect("finish");
        let ping = RunPing {
            kind: Kind::Job,
            job_id: "j".into(),
            counter: 3,
            url: crate::config::PingUrl::new("http://h/p".into()),
            event: PingEvent::End {
                status: RunStatus::Fail,
                detail: EndDetail::default(),
                log_dir: logs.clone(),
            },
        };
        let text = body(&ping);
        assert!(text.len() as u64 <= BODY_MAX, "{}", text.len());
        assert!(text.ends_with(" 2> it broke\n"), "{text}");
        assert!(text.contains(" line 1999\n"), "{text}");
        assert!(!text.contains("run 3 started"), "only the end");
        let first = text.lines().next().expect("a first line");
        assert!(
            first.ends_with(char::is_numeric) && first.contains(" line "),
            "a whole first line: {first}"
        );

        let start = RunPing {
            event: PingEvent::Start,
            ..ping.clone()
        };
        assert_eq!(body(&start), "");
        let gone = RunPing { counter: 4, ..ping };
        assert!(body(&gone).starts_with("(the run's log could not be read"));
    }
}
