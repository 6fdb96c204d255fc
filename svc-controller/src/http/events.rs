//! `GET /svc/api/events`: what happens in the engine (runs started and ended, pauses,
//! resumes, queued triggers, reloads) as server-sent events, so that the UI updates at
//! once instead of polling.
//!
//! Each event has an `id` (the engine's sequence number) and a `data` JSON object:
//!
//! - `ready`: `{"last"}`, first, once: the subscription is in place; every later event
//!   reaches this stream. A client refetches the whole picture here (it may have missed
//!   events before, or while it reconnected);
//! - `run_started`, `run_ended`, `queued`, `paused`, `resumed`, `reloaded`: see
//!   [`event_json`] and docs/api.md;
//! - `resync`: `{"missed"}`: this stream fell behind and lost events: refetch;
//! - `shutdown`: the service is stopping; the stream ends;
//! - `timeout`: the stream reached [`MAX_STREAM`] and ends (a browser reconnects).
//!
//! A keep-alive comment goes every [`KEEP_ALIVE`], so that proxies keep the stream open
//! and a client that went away is noticed at the next write. At most a share of the
//! connection limit serves these streams ([`stream_limit`]): past it, 503. Each stream
//! ends when the engine stops, so that the server's shutdown does not wait for it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::{ApiError, AppState};
use crate::engine::events::{EngineEvent, Published};

/// Period of the keep-alive comments.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Longest life of one stream: a browser's `EventSource` reconnects by itself, and a
/// connection forgotten by a proxy does not stay for ever.
pub const MAX_STREAM: Duration = Duration::from_secs(60 * 60);
/// How long a browser waits before it reconnects a stream that ended.
pub const RECONNECT: Duration = Duration::from_secs(3);
/// Most event streams at once, whatever the connection limit.
pub const MAX_STREAMS: usize = 1024;

/// How many event streams may be open at once with `connection_limit` connections: a
/// quarter of them (at least one), so that open streams, which keep their connections
/// busy for good, never take the room other requests need.
pub fn stream_limit(connection_limit: usize) -> usize {
    (connection_limit / 4).clamp(1, MAX_STREAMS)
}

/// The permits of open event streams.
#[derive(Debug, Clone)]
pub struct EventStreams(Arc<Semaphore>);

impl EventStreams {
    pub fn new(limit: usize) -> EventStreams {
        EventStreams(Arc::new(Semaphore::new(limit.max(1))))
    }
}

impl Default for EventStreams {
    /// The limit for the smallest connection limit the server has.
    fn default() -> EventStreams {
        EventStreams::new(stream_limit(super::server::MIN_CONNECTIONS))
    }
}

/// The event name and data of an engine event.
pub fn event_json(event: &EngineEvent) -> (&'static str, Value) {
    match event {
        EngineEvent::RunStarted {
            kind,
            job_id,
            counter,
            trigger,
            attempt,
            started_at,
        } => (
            "run_started",
            json!({
                "kind": kind.as_str(),
                "job_id": job_id,
                "counter": counter,
                "trigger": trigger.as_str(),
                "attempt": attempt,
                "started_at": started_at,
            }),
        ),
        EngineEvent::RunEnded {
            kind,
            job_id,
            counter,
            status,
            started_at,
            ended_at,
            duration_ms,
            exit_code,
            signal,
            http_status,
        } => (
            "run_ended",
            json!({
                "kind": kind.as_str(),
                "job_id": job_id,
                "counter": counter,
                "status": status.as_str(),
                // As the log's name and the job's status say it.
                "result": status.result().log_status(),
                "started_at": started_at,
                "ended_at": ended_at,
                "duration_ms": duration_ms,
                "exit_code": exit_code,
                "signal": signal,
                "http_status": http_status,
            }),
        ),
        EngineEvent::Queued {
            kind,
            job_id,
            trigger,
        } => (
            "queued",
            json!({ "kind": kind.as_str(), "job_id": job_id, "trigger": trigger.as_str() }),
        ),
        EngineEvent::Paused { kind, job_id } => {
            ("paused", json!({ "kind": kind.as_str(), "job_id": job_id }))
        }
        EngineEvent::Resumed { kind, job_id } => (
            "resumed",
            json!({ "kind": kind.as_str(), "job_id": job_id }),
        ),
        EngineEvent::Reloaded => ("reloaded", json!({})),
        EngineEvent::Stopping => ("shutdown", json!({})),
    }
}

/// The server-sent event of a published engine event.
fn sse_event(published: &Published) -> Event {
    let (name, data) = event_json(&published.event);
    Event::default()
        .event(name)
        .id(published.seq.to_string())
        .data(data.to_string())
}

/// State carried from one step of the event stream to the next.
struct StreamState {
    receiver: broadcast::Receiver<Published>,
    pending: VecDeque<Event>,
    /// Set once the stream must end after its pending events.
    ending: bool,
    deadline: Instant,
    /// Held while the stream lives.
    _permit: OwnedSemaphorePermit,
}

/// One step: the next pending event, else waits for the engine's next one.
async fn next_event(mut state: StreamState) -> Option<(Result<Event, Infallible>, StreamState)> {
    loop {
        if let Some(event) = state.pending.pop_front() {
            return Some((Ok(event), state));
        }
        if state.ending {
            return None;
        }
        let received = tokio::select! {
            received = state.receiver.recv() => received,
            () = tokio::time::sleep_until(state.deadline) => {
                state.pending.push_back(Event::default().event("timeout").data("{}"));
                state.ending = true;
                continue;
            }
        };
        match received {
            Ok(published) => {
                state.ending = published.event == EngineEvent::Stopping;
                state.pending.push_back(sse_event(&published));
            }
            Err(RecvError::Lagged(missed)) => {
                // The oldest events are lost: say so rather than leave a silent gap.
                let data = json!({ "missed": missed });
                state
                    .pending
                    .push_back(Event::default().event("resync").data(data.to_string()));
            }
            // The engine is gone.
            Err(RecvError::Closed) => return None,
        }
    }
}

/// The handler: 503 when the service is stopping or too many streams are open, else
/// the event stream. A `Last-Event-ID` (a browser reconnecting) that is not the last
/// event published gets a `resync` at once.
pub(super) async fn stream(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Ok(permit) = state.event_streams.0.clone().try_acquire_owned() else {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many event streams are open: retry later",
        )
        .into_response();
    };
    let (receiver, last) = match state.engine.subscribe() {
        Ok(subscribed) => subscribed,
        Err(err) => return ApiError::from(err).into_response(),
    };
    let mut pending = VecDeque::new();
    pending.push_back(
        Event::default()
            .event("ready")
            .id(last.to_string())
            .retry(RECONNECT)
            .data(json!({ "last": last }).to_string()),
    );
    let seen = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .map(|text| text.trim().parse::<u64>().ok());
    if let Some(seen) = seen
        && seen != Some(last)
    {
        pending.push_back(Event::default().event("resync").data("{}"));
    }
    let initial = StreamState {
        receiver,
        pending,
        ending: false,
        deadline: Instant::now() + MAX_STREAM,
        _permit: permit,
    };
    Sse::new(stream::unfold(initial, next_event))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Kind, TriggerSource};
    use crate::store::state::RunStatus;
    use chrono::TimeZone as _;

    fn time(secs: i64) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc
            .timestamp_opt(secs, 0)
            .single()
            .expect("a valid time")
    }

    #[test]
    fn a_started_run_names_its_job_counter_trigger_and_start() {
        let (name, data) = event_json(&EngineEvent::RunStarted {
            kind: Kind::Job,
            job_id: "build".into(),
            counter: 7,
            trigger: TriggerSource::Manual,
            attempt: 1,
            started_at: time(1_700_000_000),
        });
        assert_eq!(name, "run_started");
        assert_eq!(
            data,
            json!({
                "kind": "job", "job_id": "build", "counter": 7, "trigger": "manual",
                "attempt": 1, "started_at": "2023-11-14T22:13:20Z",
            })
        );
    }

    #[test]
    fn an_ended_run_says_how_with_its_result_and_times() {
        let (name, data) = event_json(&EngineEvent::RunEnded {
            kind: Kind::Http,
            job_id: "ping".into(),
            counter: 3,
            status: RunStatus::Timeout,
            started_at: time(100),
            ended_at: time(102),
            duration_ms: 2000,
            exit_code: None,
            signal: Some(9),
            http_status: None,
        });
        assert_eq!(name, "run_ended");
        assert_eq!(data["kind"], "job_http");
        assert_eq!(data["status"], "timeout");
        assert_eq!(data["result"], "fail");
        assert_eq!(data["ended_at"], "1970-01-01T00:01:42Z");
        assert_eq!(data["duration_ms"], 2000);
        assert_eq!(data["exit_code"], Value::Null);
        assert_eq!(data["signal"], 9);
        assert_eq!(data["http_status"], Value::Null);
        let (_, success) = event_json(&EngineEvent::RunEnded {
            kind: Kind::Job,
            job_id: "a".into(),
            counter: 1,
            status: RunStatus::Success,
            started_at: time(0),
            ended_at: time(0),
            duration_ms: 0,
            exit_code: Some(0),
            signal: None,
            http_status: None,
        });
        assert_eq!(
            (&success["result"], &success["exit_code"]),
            (&json!("success"), &json!(0))
        );
    }

    #[test]
    fn the_other_events_name_their_job() {
        let job = || "deploy".to_string();
        let cases = [
            (
                EngineEvent::Queued {
                    kind: Kind::Job,
                    job_id: job(),
                    trigger: TriggerSource::Webhook,
                },
                "queued",
                json!({ "kind": "job", "job_id": "deploy", "trigger": "webhook" }),
            ),
            (
                EngineEvent::Paused {
                    kind: Kind::Job,
                    job_id: job(),
                },
                "paused",
                json!({ "kind": "job", "job_id": "deploy" }),
            ),
            (
                EngineEvent::Resumed {
                    kind: Kind::Http,
                    job_id: job(),
                },
                "resumed",
                json!({ "kind": "job_http", "job_id": "deploy" }),
            ),
            (EngineEvent::Reloaded, "reloaded", json!({})),
            (EngineEvent::Stopping, "shutdown", json!({})),
        ];
        for (event, name, data) in cases {
            assert_eq!(event_json(&event), (name, data), "{event:?}");
        }
    }

    #[test]
    fn the_stream_limit_is_a_share_of_the_connections() {
        assert_eq!(stream_limit(16), 4);
        assert_eq!(stream_limit(3), 1);
        assert_eq!(stream_limit(1 << 20), MAX_STREAMS);
    }

    /// A stream over `receiver`, with `pending` first.
    fn state(receiver: broadcast::Receiver<Published>) -> StreamState {
        let permit = Arc::new(Semaphore::new(1))
            .try_acquire_owned()
            .expect("a permit");
        StreamState {
            receiver,
            pending: VecDeque::new(),
            ending: false,
            deadline: Instant::now() + MAX_STREAM,
            _permit: permit,
        }
    }

    #[tokio::test]
    async fn the_stream_tells_a_lag_and_ends_at_shutdown() {
        use futures_util::StreamExt as _;
        let (sender, receiver) = broadcast::channel(2);
        for seq in 1..=3 {
            sender
                .send(Published {
                    seq,
                    event: EngineEvent::Reloaded,
                })
                .expect("send");
        }
        sender
            .send(Published {
                seq: 4,
                event: EngineEvent::Stopping,
            })
            .expect("send");
        // The stream ends at `shutdown` although the sender is still there.
        let events: Vec<_> = stream::unfold(state(receiver), next_event).collect().await;
        let text: Vec<String> = events
            .into_iter()
            .map(|event| format!("{:?}", event.expect("infallible")))
            .collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(text[0].contains("resync"), "{text:?}");
        assert!(text[1].contains("reloaded"), "{text:?}");
        assert!(text[2].contains("shutdown"), "{text:?}");
    }
}
