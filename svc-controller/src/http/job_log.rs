//! One run's log as a JobLog (`GET /svc/api/job_exec/log`, `/svc/api/job_http/log`),
//! streamed: the wrapper is written around base64 that is encoded chunk by chunk as the
//! file is read, so a log of any size costs one chunk of memory, never the whole file
//! (and its base64, and the JSON string holding that).
//!
//! The bytes are exactly those of the wrapper built from
//! `json!({"job_id", "name", "status", "counter", "content"})`: the keys in the order
//! `serde_json`'s map writes them (`content` first). A log still being written is read
//! to the length it had when the answer started.
//!
//! In cluster mode, a log this node does not have (another node ran the run) is read
//! from the shared table the same way, a chunk at a time.

use std::io::Read as _;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures_util::{StreamExt as _, stream};

use super::query::{job_id, param, params};
use super::{ApiError, AppState};
use crate::engine::cluster_logs::shared_log_status;
use crate::engine::{Kind, OpenLog};

/// Bytes of log read and encoded at a time: a multiple of 3, so that the base64 of the
/// chunks joined is the base64 of the whole.
const CHUNK: usize = 48 * 1024;

/// The JobLog of `id` and `counter` from the query, streamed.
pub(super) async fn log_of(
    state: &AppState,
    kind: Kind,
    query: Option<String>,
) -> Result<Response, ApiError> {
    let pairs = params(query.unwrap_or_default().as_bytes());
    let id = job_id(param(&pairs, "id"))?.to_owned();
    let counter: u64 = param(&pairs, "counter")
        .ok_or_else(|| ApiError::bad_request("missing log counter"))?
        .parse()
        .map_err(|_| ApiError::bad_request("invalid log counter"))?;
    let engine = state.engine.clone();
    let opened = {
        let id = id.clone();
        super::blocking(move || {
            let opened = engine.open_log(kind, &id, counter)?;
            // The length now: what the answer carries.
            Ok::<_, crate::engine::EngineError>(opened.map(|log| {
                let len = log.file.metadata().map(|m| m.len()).unwrap_or(0);
                (log, len)
            }))
        })
        .await??
    };
    if let Some((log, len)) = opened {
        return Ok(streamed(&id, counter, log, len));
    }
    // Not this node's run: in cluster mode, the copy in the shared table, read and sent
    // a chunk at a time like a file.
    let first = state
        .engine
        .cluster_log(kind, &id, counter, 0, CHUNK)
        .await?
        .ok_or_else(ApiError::log_not_found)?;
    if first.bytes.is_empty() && first.state != crate::cluster::SharedRunState::Running {
        // A run whose log was never copied (it did not begin) or was trimmed.
        return Err(ApiError::log_not_found());
    }
    let status = shared_log_status(first.state);
    let name = format!("{id}.{counter}.{status}");
    let reader = SharedChunks {
        engine: state.engine.clone(),
        kind,
        id: id.clone(),
        counter,
        offset: 0,
        next: Some(first.bytes),
    };
    let content = stream::unfold(reader, SharedChunks::next_encoded);
    Ok(wrapped(&id, counter, &name, status, content))
}

/// A log in the cluster's shared table, read [`CHUNK`] bytes at a time: a read shorter
/// than that is the end.
struct SharedChunks {
    engine: crate::engine::Engine,
    kind: Kind,
    id: String,
    counter: u64,
    offset: u64,
    /// The chunk to send next; `None` once the end was sent.
    next: Option<Vec<u8>>,
}

impl SharedChunks {
    async fn next_encoded(mut self) -> Option<(std::io::Result<Bytes>, SharedChunks)> {
        let chunk = self.next.take()?;
        self.offset += chunk.len() as u64;
        if chunk.len() == CHUNK {
            let read = self
                .engine
                .cluster_log(self.kind, &self.id, self.counter, self.offset, CHUNK)
                .await;
            match read {
                Ok(Some(log)) => self.next = Some(log.bytes),
                Ok(None) => {}
                Err(err) => {
                    tracing::error!(job = %self.id, error = %err, "cannot read a shared log");
                    return Some((
                        Err(std::io::Error::other("reading the shared log failed")),
                        self,
                    ));
                }
            }
        }
        let encoded = base64::engine::general_purpose::STANDARD.encode(&chunk);
        Some((Ok(Bytes::from(encoded)), self))
    }
}

/// The wrapper around the streamed base64 of `log`'s first `len` bytes.
fn streamed(id: &str, counter: u64, log: OpenLog, len: u64) -> Response {
    let reader = Chunks {
        file: Some(log.file.take(len)),
        job: id.to_owned(),
    };
    let content = stream::unfold(reader, |mut reader| async move {
        let file = reader.file.take()?;
        let read = tokio::task::spawn_blocking(move || read_chunk(file)).await;
        match read {
            Ok(Ok((file, chunk))) if chunk.is_empty() => {
                drop(file);
                None
            }
            Ok(Ok((file, chunk))) => {
                reader.file = Some(file);
                let encoded = base64::engine::general_purpose::STANDARD.encode(&chunk);
                Some((Ok(Bytes::from(encoded)), reader))
            }
            Ok(Err(err)) => {
                tracing::error!(job = %reader.job, error = %err, "cannot read a log");
                Some((Err(err), reader))
            }
            Err(err) => {
                tracing::error!(job = %reader.job, error = %err, "log: reading task failed");
                Some((Err(std::io::Error::other("reading task failed")), reader))
            }
        }
    });
    wrapped(id, counter, &log.name, log.status.as_str(), content)
}

/// The JobLog wrapper around `content`, the log's base64 in pieces.
fn wrapped(
    id: &str,
    counter: u64,
    name: &str,
    status: &str,
    content: impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static,
) -> Response {
    let head = Bytes::from("{\"code\":200,\"data\":{\"content\":\"");
    let tail = format!(
        "\",\"counter\":{counter},\"job_id\":{},\"name\":{},\"status\":{}}},\"message\":\"\"}}",
        json_string(id),
        json_string(name),
        json_string(status),
    );
    let body = stream::iter([Ok::<_, std::io::Error>(head)])
        .chain(content)
        .chain(stream::iter([Ok(Bytes::from(tail))]));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response()
}

/// What the stream reads from.
struct Chunks {
    /// `None` once read to its end (or after an error).
    file: Option<std::io::Take<std::fs::File>>,
    /// For the log lines of a failed read.
    job: String,
}

/// Reads up to [`CHUNK`] bytes, a full chunk unless the file ends first (a short read
/// in the middle would break the base64 joins). Blocking.
fn read_chunk(
    mut file: std::io::Take<std::fs::File>,
) -> std::io::Result<(std::io::Take<std::fs::File>, Vec<u8>)> {
    let mut chunk = vec![0u8; CHUNK];
    let mut filled = 0;
    while filled < CHUNK {
        match file.read(&mut chunk[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    chunk.truncate(filled);
    Ok((file, chunk))
}

fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::logstore::LogStatus;
    use crate::store::state::RunResult;
    use serde_json::json;

    async fn answer(content: &[u8], status: LogStatus) -> (Vec<u8>, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("j\"1.7.success");
        std::fs::write(&path, content).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        let log = OpenLog {
            name: "j\"1.7.success".to_string(),
            status,
            file,
        };
        let response = streamed("j\"1", 7, log, content.len() as u64);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body")
            .to_vec();
        let expected = serde_json::to_vec(&json!({
            "code": 200,
            "message": "",
            "data": {
                "job_id": "j\"1",
                "name": "j\"1.7.success",
                "status": status.as_str(),
                "counter": 7,
                "content": base64::engine::general_purpose::STANDARD.encode(content),
            },
        }))
        .expect("json");
        (body, expected)
    }

    #[tokio::test]
    async fn the_stream_has_the_bytes_of_the_json_wrapper() {
        let status = LogStatus::Finished(RunResult::Success);
        // Empty, shorter than a chunk, and over several chunks with a ragged end (so
        // that chunk joins and base64 padding are both exercised).
        for len in [0, 1, 2, 3, 1000, CHUNK, CHUNK + 1, 3 * CHUNK + 2] {
            let content: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let (body, expected) = answer(&content, status).await;
            assert_eq!(body, expected, "length {len}");
        }
    }

    #[tokio::test]
    async fn a_growing_log_is_read_to_its_length_at_the_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("g.1.started");
        std::fs::write(&path, b"first\n").expect("write");
        let log = OpenLog {
            name: "g.1.started".to_string(),
            status: LogStatus::Started,
            file: std::fs::File::open(&path).expect("open"),
        };
        let response = streamed("g", 1, log, 6);
        let mut more = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("append");
        std::io::Write::write_all(&mut more, b"second\n").expect("append");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let value: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(value["data"]["content"], "Zmlyc3QK");
    }
}
