//! A server-sent events client for the tests: opens a stream with reqwest, reads it
//! chunk by chunk as it comes, and hands out whole events (`event:`, `id:`, `data:`
//! lines up to a blank line), each with a bounded wait.

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// One event as it came over the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field (`message` when absent, as browsers do).
    pub name: String,
    /// The `id:` field, when there was one.
    pub id: Option<String>,
    /// The `data:` lines, joined with newlines.
    pub data: String,
}

impl SseEvent {
    /// `data` as JSON; panics when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|err| {
            panic!(
                "event {} has no JSON data ({err}): {}",
                self.name, self.data
            )
        })
    }
}

/// An open event stream.
#[derive(Debug)]
pub struct SseStream {
    response: reqwest::Response,
    /// Bytes after the last complete line.
    buffer: Vec<u8>,
    /// The event whose lines are being read.
    building: SseEvent,
    ready: VecDeque<SseEvent>,
    /// Comment lines read (keep-alives).
    pub comments: usize,
    ended: bool,
}

impl SseStream {
    /// `GET url` with `Accept: text/event-stream` (and `headers`); an error unless the
    /// answer is 200 with that content type.
    pub async fn open(url: &str, headers: &[(&str, &str)]) -> anyhow::Result<SseStream> {
        // No overall timeout: the stream is meant to stay open; each read is bounded.
        let client = reqwest::Client::builder()
            .build()
            .context("build the HTTP client")?;
        let mut request = client.get(url).header("accept", "text/event-stream");
        for (key, value) in headers {
            request = request.header(*key, *value);
        }
        let response = request.send().await.with_context(|| format!("GET {url}"))?;
        let status = response.status();
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if status != 200 || !kind.starts_with("text/event-stream") {
            let body = response.text().await.unwrap_or_default();
            bail!("GET {url}: {status} ({kind}): {body}");
        }
        Ok(SseStream {
            response,
            buffer: Vec::new(),
            building: SseEvent::default(),
            ready: VecDeque::new(),
            comments: 0,
            ended: false,
        })
    }

    /// The next event, waiting at most `timeout` for it; `Ok(None)` when the stream ended
    /// first; an error when the wait ran out or the read failed.
    pub async fn next(&mut self, timeout: Duration) -> anyhow::Result<Option<SseEvent>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .with_context(|| format!("no event within {timeout:?}"))?
                .context("reading the event stream")?;
            match chunk {
                Some(bytes) => self.feed(&bytes),
                None => self.ended = true,
            }
        }
    }

    /// Events up to and including the first named `name`, waiting at most `timeout` in
    /// all; panics when it does not come.
    pub async fn until(&mut self, name: &str, timeout: Duration) -> Vec<SseEvent> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Ok(Some(event)) => {
                    let done = event.name == name;
                    seen.push(event);
                    if done {
                        return seen;
                    }
                }
                Ok(None) => panic!("the stream ended before event {name}; got {seen:?}"),
                Err(err) => panic!("waiting for event {name}: {err:#}; got {seen:?}"),
            }
        }
    }

    /// Splits `bytes` into lines and lines into events, as the SSE format says.
    fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..line.len() - 1]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                let mut event = std::mem::take(&mut self.building);
                if event.name.is_empty() && event.data.is_empty() && event.id.is_none() {
                    continue;
                }
                if event.name.is_empty() {
                    event.name = "message".into();
                }
                self.ready.push_back(event);
                continue;
            }
            if line.starts_with(':') {
                self.comments += 1;
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.building.name = value.to_string(),
                "id" => self.building.id = Some(value.to_string()),
                "data" => {
                    if !self.building.data.is_empty() {
                        self.building.data.push('\n');
                    }
                    self.building.data.push_str(value);
                }
                _ => {}
            }
        }
    }
}
