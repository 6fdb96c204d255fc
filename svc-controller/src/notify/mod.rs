//! Notifications: when a run ends, the `[notif]` sections its job names for the result
//! (`notif_on_success`, `notif_on_failed`) are told, by e-mail or webhook, off the run
//! path.
//!
//! The engine only hands a [`RunEnded`] to a bounded channel, without waiting
//! ([`crate::engine::Engine::announce_run_ends_to`]). Here one task takes them: for each,
//! a task of its own reads the last lines of the run's log and makes one
//! [`message::Report`] and a sender per notification, in one trip to the blocking pool,
//! then sends the report to every notification the run names, each with up to
//! [`backoff::ATTEMPTS`] attempts a growing wait apart ([`backoff`]). Every attempt is
//! logged (which notif, which job and run, which attempt, what failed); no password, no
//! secret, no URL with its token. A run never waits for any of it, and no lock of the
//! engine is taken. At shutdown what is under way gets a short grace, then is dropped,
//! and the log says how much.
//!
//! `ping.rs`, the health pings of jobs with a `ping_url`, is a sender of its own
//! ([`ping::Pinger`]) that shares the retries and the lazily made HTTP client's recipe.

mod backoff;
mod email;
mod error;
mod message;
pub mod ping;
mod webhook;

use crate::util::lock::{MutexExt as _, RwLockExt as _};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument as _;

use proto::error_chain::describe;

use crate::config::{NotifConfig, NotifKind};
use crate::engine::RunEnded;
pub use error::NotifyError;
use message::Report;

/// Run ends the engine may hand over before the sender takes them; beyond, the engine
/// drops the next ones (and logs it).
pub const CHANNEL_SIZE: usize = 256;

/// Run ends whose notifications are under way at once; beyond, new ones are dropped
/// (and logged): with every receiver down, five attempts over three minutes each.
const MAX_RUNS_UNDER_WAY: usize = 1024;

/// Attempts made at the same time, all notifications together.
const MAX_ATTEMPTS_AT_ONCE: usize = 8;

/// Longest one webhook request may take.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The notification sender: the task that takes run ends from the engine, and what its
/// deliveries share.
#[derive(Debug)]
pub struct Notifier {
    shared: Arc<Shared>,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
}

/// What every delivery uses.
#[derive(Debug)]
struct Shared {
    /// The service's `name`, which subjects and payloads carry.
    service: String,
    /// This host's name for `EHLO` and message IDs.
    hello: String,
    /// For every webhook (connections are kept between messages): made at the first
    /// webhook notification, so that a system without CA certificates (a minimal
    /// install) starts, and only its webhook notifications fail, saying why.
    http: MadeOnce<reqwest::Client>,
    /// The `[notif]` sections by name; replaced by a reload.
    notifs: RwLock<Arc<HashMap<String, Arc<Notif>>>>,
    /// `Some(deadline)` once the service stops: no more waiting between attempts, and
    /// at the deadline whatever is still under way is dropped.
    stop: watch::Sender<Option<Instant>>,
    attempts: Semaphore,
}

/// A `[notif]` section, and what all its messages use.
#[derive(Debug)]
struct Notif {
    config: NotifConfig,
    /// For `kind = email`, made at its first message: setting up TLS reads the system's
    /// certificates, once per notif rather than once per message.
    smtp: MadeOnce<email::Transport>,
}

impl Notifier {
    /// Starts the sender on the current runtime, with the `[notif]` sections `notifs`.
    /// Returns it and the channel to hand to the engine.
    pub fn start(service: &str, notifs: &[NotifConfig]) -> (Notifier, mpsc::Sender<RunEnded>) {
        let shared = Arc::new(Shared {
            service: service.to_string(),
            hello: email::hello_name(),
            http: MadeOnce::default(),
            notifs: RwLock::new(Arc::new(by_name(notifs))),
            stop: watch::Sender::new(None),
            attempts: Semaphore::new(MAX_ATTEMPTS_AT_ONCE),
        });
        let (tx, rx) = mpsc::channel(CHANNEL_SIZE);
        let dispatcher = tokio::spawn(dispatch(shared.clone(), rx));
        let notifier = Notifier {
            shared,
            dispatcher: Mutex::new(Some(dispatcher)),
        };
        (notifier, tx)
    }

    /// Takes the `[notif]` sections of a reloaded configuration; messages already under
    /// way keep the ones they started with.
    pub fn reload(&self, notifs: &[NotifConfig]) {
        let notifs = Arc::new(by_name(notifs));
        *self.shared.notifs.writing() = notifs;
    }

    /// Gives what is under way until `grace` has passed (waits between attempts are cut
    /// short: one last attempt each), then drops the rest, saying how much. Returns by
    /// then.
    pub async fn shutdown(&self, grace: Duration) {
        stop_dispatcher(&self.shared.stop, &self.dispatcher, grace, "notification").await;
    }
}

/// Ends a sender (notifications, health pings): tells everything that watches `stop`
/// to be done by `grace` from now, then waits for its dispatcher until then.
async fn stop_dispatcher(
    stop: &watch::Sender<Option<Instant>>,
    dispatcher: &Mutex<Option<JoinHandle<()>>>,
    grace: Duration,
    what: &str,
) {
    let deadline = Instant::now() + grace;
    stop.send_replace(Some(deadline));
    let dispatcher = dispatcher.locked().take();
    if let Some(dispatcher) = dispatcher {
        // It ends by the deadline on its own; the margin is for its last steps.
        let margin = Duration::from_millis(200);
        if tokio::time::timeout_at(deadline + margin, dispatcher)
            .await
            .is_err()
        {
            tracing::warn!("the {what} sender did not stop in time");
        }
    }
}

/// Logs an attempt to send a `what` ("notification", "health ping") that failed, and
/// what comes of it: another attempt, none because the service stops, or none left.
fn log_failed_attempt(what: &str, attempt: u32, err: &NotifyError, next: Next) {
    let error = describe(err);
    match next {
        Next::RetryIn(wait) => tracing::warn!(
            attempt,
            retry_in_s = wait.as_secs(),
            error,
            "{what} failed; trying again"
        ),
        Next::Stopping => {
            tracing::warn!(attempt, error, "{what} not sent: the service is stopping")
        }
        Next::GiveUp => tracing::error!(attempt, error, "{what} not sent: its last attempt failed"),
    }
}

/// Sends one request to a notification or ping URL; a 2xx answer is a success. The URL
/// may hold a token: errors never show it.
async fn send_expecting_success(request: reqwest::RequestBuilder) -> Result<(), NotifyError> {
    let response = request
        .send()
        .await
        .map_err(|err| NotifyError::Http(err.without_url()))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(NotifyError::Status(status.as_u16()))
    }
}

fn by_name(notifs: &[NotifConfig]) -> HashMap<String, Arc<Notif>> {
    notifs
        .iter()
        .map(|config| {
            let notif = Notif {
                config: config.clone(),
                smtp: MadeOnce::default(),
            };
            (config.name.clone(), Arc::new(notif))
        })
        .collect()
}

/// Takes run ends from the engine and starts their notifications, until the service
/// stops; then waits for those under way until the deadline.
async fn dispatch(shared: Arc<Shared>, mut ends: mpsc::Receiver<RunEnded>) {
    let mut under_way = JoinSet::new();
    let mut stop = shared.stop.subscribe();
    loop {
        tokio::select! {
            ended = ends.recv() => match ended {
                Some(ended) => start_report(&shared, &mut under_way, ended),
                None => break,
            },
            Some(joined) = under_way.join_next(), if !under_way.is_empty() => {
                if let Err(err) = joined
                    && err.is_panic()
                {
                    tracing::error!("a run's notifications ended abnormally (a panic)");
                }
            }
            _ = stop.wait_for(Option::is_some) => break,
        }
    }
    // Runs ended by the stop itself were handed over before it came here.
    while let Ok(ended) = ends.try_recv() {
        start_report(&shared, &mut under_way, ended);
    }
    ends.close();
    if under_way.is_empty() {
        return;
    }
    let deadline = (*shared.stop.borrow()).unwrap_or_else(Instant::now);
    let all_done = async { while under_way.join_next().await.is_some() {} };
    if tokio::time::timeout_at(deadline, all_done).await.is_err() {
        tracing::warn!(
            runs = under_way.len(),
            "notifications not sent: the service stopped before they could be"
        );
        under_way.shutdown().await;
    }
}

/// Starts the notifications of one run end, unless too many are under way already.
fn start_report(shared: &Arc<Shared>, under_way: &mut JoinSet<()>, ended: RunEnded) {
    if under_way.len() >= MAX_RUNS_UNDER_WAY {
        tracing::warn!(
            job = ended.job_id,
            counter = ended.counter,
            "the run's notifications are dropped: too many are being sent"
        );
        return;
    }
    under_way.spawn(report_run(shared.clone(), ended));
}

/// Reads the run's log, then sends its report to every notification it names, at once.
async fn report_run(shared: Arc<Shared>, ended: RunEnded) {
    let (job, counter) = (ended.job_id.clone(), ended.counter);
    let prepared = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || prepare(&shared, ended)).await
    };
    let Ok((report, senders)) = prepared else {
        tracing::error!(
            job,
            counter,
            "the run's notifications ended abnormally (a panic)"
        );
        return;
    };
    let deliveries = senders
        .into_iter()
        .map(|prepared| deliver(&shared, prepared, &report));
    futures_util::future::join_all(deliveries).await;
}

/// One notification a run names, ready to be sent.
struct Prepared {
    /// The notif's name.
    name: String,
    /// Its kind; empty when there is no such notif.
    kind: &'static str,
    /// Its sender of the run's report, or why there is none.
    sender: Result<Sender, NotifyError>,
}

/// The report of `ended`, and a sender of it for each notification the run names.
/// Blocking: reads the run's log, and a first message of a notif reads the system's
/// certificates for its TLS.
fn prepare(shared: &Shared, ended: RunEnded) -> (Report, Vec<Prepared>) {
    let report = Report::read(&shared.service, ended);
    let notifs = shared.notifs.reading().clone();
    let senders = report
        .run
        .notifs
        .iter()
        .map(|name| match notifs.get(name) {
            None => Prepared {
                name: name.clone(),
                kind: "",
                sender: Err(NotifyError::Unknown(name.clone())),
            },
            Some(notif) => Prepared {
                name: name.clone(),
                kind: notif.config.kind.as_str(),
                sender: Sender::new(shared, notif, &report),
            },
        })
        .collect();
    (report, senders)
}

/// The sender of one message to one notification.
enum Sender {
    Email(Box<email::EmailSender>),
    Webhook(webhook::WebhookSender),
}

impl Sender {
    /// The sender of `report` to `notif`. Blocking (see [`prepare`]).
    fn new(shared: &Shared, notif: &Notif, report: &Report) -> Result<Sender, NotifyError> {
        match &notif.config.kind {
            NotifKind::Email(config) => {
                let transport = notif
                    .smtp
                    .get_or_make(|| email::transport(config, &shared.hello))?;
                let sender = email::EmailSender::new(transport, config, report, &shared.hello)?;
                Ok(Sender::Email(Box::new(sender)))
            }
            NotifKind::Webhook(config) => {
                let client = shared.http.get_or_make(make_http_client)?;
                Ok(Sender::Webhook(webhook::WebhookSender::new(
                    client, config, report,
                )))
            }
        }
    }

    async fn attempt(&self) -> Result<(), NotifyError> {
        match self {
            Sender::Email(sender) => sender.attempt().await,
            Sender::Webhook(sender) => sender.attempt(chrono::Utc::now().timestamp()).await,
        }
    }
}

/// A value made when first needed, then kept and handed out in copies; a failure is not
/// kept, so the next need tries again.
#[derive(Debug)]
struct MadeOnce<T>(Mutex<Option<T>>);

impl<T> Default for MadeOnce<T> {
    fn default() -> Self {
        MadeOnce(Mutex::new(None))
    }
}

impl<T: Clone> MadeOnce<T> {
    fn get_or_make<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let mut kept = self.0.locked();
        if let Some(value) = kept.as_ref() {
            return Ok(value.clone());
        }
        let made = make()?;
        *kept = Some(made.clone());
        Ok(made)
    }
}

/// The webhooks' HTTP client. Blocking: its TLS set-up reads the system's certificates.
fn make_http_client() -> Result<reqwest::Client, NotifyError> {
    reqwest::Client::builder()
        .timeout(WEBHOOK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .referer(false)
        .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(NotifyError::Client)
}

/// Sends `report` to one notification, with retries, logging each attempt. Every line
/// it logs names the notif, its kind, the job and the run: the fields of its span.
async fn deliver(shared: &Shared, prepared: Prepared, report: &Report) {
    // At the level of the most severe line in it: a span below the log level is left
    // out, and with it the fields that say which notification failed.
    let span = tracing::error_span!(
        "notification",
        notif = prepared.name.as_str(),
        kind = prepared.kind,
        job = report.run.job_id.as_str(),
        counter = report.run.counter,
    );
    deliver_in_span(shared, prepared.sender)
        .instrument(span)
        .await;
}

/// The attempts of [`deliver`], in its span.
async fn deliver_in_span(shared: &Shared, sender: Result<Sender, NotifyError>) {
    let sender = match sender {
        Ok(sender) => sender,
        Err(err) => {
            tracing::error!(error = %describe(&err), "notification not sent");
            return;
        }
    };
    let attempt = |_: u32| async {
        let _permit = shared.attempts.acquire().await;
        sender.attempt().await
    };
    let failed = |attempt: u32, err: &NotifyError, next: Next| {
        log_failed_attempt("notification", attempt, err, next);
    };
    if let Delivery::Sent { attempts } =
        with_retries(attempt, shared.stop.subscribe(), failed).await
    {
        tracing::info!(attempt = attempts, "notification sent");
    }
}

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Another attempt after this wait.
    RetryIn(Duration),
    /// None: the service is stopping.
    Stopping,
    /// None: that was the last one.
    GiveUp,
}

/// How the attempts of one notification ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Sent { attempts: u32 },
    Failed { attempts: u32 },
}

/// Calls `attempt` (with its 1-based number) until it succeeds, the schedule of
/// [`backoff`] is over, or the service stops (`stop` becomes `Some`): a wait under way
/// then ends at once for one last attempt. `failed` is told of every failed attempt and
/// what follows it.
async fn with_retries<A, F>(
    mut attempt: A,
    mut stop: watch::Receiver<Option<Instant>>,
    mut failed: impl FnMut(u32, &NotifyError, Next),
) -> Delivery
where
    A: FnMut(u32) -> F,
    F: Future<Output = Result<(), NotifyError>>,
{
    let mut number = 1;
    loop {
        let err = match attempt(number).await {
            Ok(()) => return Delivery::Sent { attempts: number },
            Err(err) => err,
        };
        let next = match backoff::wait_after(number) {
            _ if stop.borrow().is_some() => Next::Stopping,
            Some(wait) => Next::RetryIn(wait),
            None => Next::GiveUp,
        };
        failed(number, &err, next);
        let Next::RetryIn(wait) = next else {
            return Delivery::Failed { attempts: number };
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(Option::is_some) => {}
        }
        number += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// An attempt that fails `failures` times, then succeeds; counts the calls.
    fn flaky(
        failures: u32,
        calls: &AtomicU32,
    ) -> impl FnMut(u32) -> std::future::Ready<Result<(), NotifyError>> + '_ {
        move |number| {
            let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
            assert_eq!(number, call, "attempts are numbered from 1");
            std::future::ready(if call <= failures {
                Err(NotifyError::Status(500))
            } else {
                Ok(())
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_attempt_is_tried_again_after_the_schedules_wait() {
        let (_stop, stop_rx) = watch::channel(None);
        let calls = AtomicU32::new(0);
        let mut told = Vec::new();
        let start = Instant::now();
        let delivery = with_retries(flaky(2, &calls), stop_rx, |n, err, next| {
            told.push((n, err.to_string(), next));
        })
        .await;
        assert_eq!(delivery, Delivery::Sent { attempts: 3 });
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(2 + 8),
            "the paused clock"
        );
        assert_eq!(
            told,
            vec![
                (
                    1,
                    "the receiver answered HTTP 500".into(),
                    Next::RetryIn(Duration::from_secs(2))
                ),
                (
                    2,
                    "the receiver answered HTTP 500".into(),
                    Next::RetryIn(Duration::from_secs(8))
                ),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_are_bounded() {
        let (_stop, stop_rx) = watch::channel(None);
        let calls = AtomicU32::new(0);
        let mut told = Vec::new();
        let start = Instant::now();
        let delivery = with_retries(flaky(u32::MAX, &calls), stop_rx, |n, _, next| {
            told.push((n, next));
        })
        .await;
        assert_eq!(
            delivery,
            Delivery::Failed {
                attempts: backoff::ATTEMPTS
            }
        );
        assert_eq!(calls.load(Ordering::SeqCst), backoff::ATTEMPTS);
        assert_eq!(start.elapsed(), backoff::total_wait());
        assert_eq!(told.last(), Some(&(backoff::ATTEMPTS, Next::GiveUp)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_cuts_the_wait_short_for_one_last_attempt() {
        let (stop, stop_rx) = watch::channel(None);
        let calls = AtomicU32::new(0);
        let mut told = Vec::new();
        let start = Instant::now();
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            stop.send_replace(Some(Instant::now() + Duration::from_secs(2)));
        };
        let (delivery, ()) = tokio::join!(
            with_retries(flaky(u32::MAX, &calls), stop_rx, |n, _, next| told
                .push((n, next))),
            stopper
        );
        assert_eq!(delivery, Delivery::Failed { attempts: 2 });
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1),
            "no wait after the stop"
        );
        assert_eq!(
            told,
            vec![
                (1, Next::RetryIn(Duration::from_secs(2))),
                (2, Next::Stopping)
            ]
        );
    }
}
