//! `kind = webhook`: a JSON POST signed as Standard Webhooks sign theirs
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` of HMAC-SHA-256
//! over `{id}.{timestamp}.{body}`), so that a receiver checks it with any of that
//! specification's libraries. Any answer but a 2xx is a failed attempt.

use std::sync::Arc;

use bytes::Bytes;
use rand::Rng as _;

use super::error::NotifyError;
use super::message::Report;
use super::send_expecting_success;
use crate::access::auth::standard_signature;
use crate::config::WebhookNotif;
use crate::time::timezone::utc_text;

/// The `type` of a run's end: `run.success` or `run.failed`.
fn event_type(report: &Report) -> String {
    format!("run.{}", report.status())
}

/// The JSON body: what ran and how it ended, and the last lines of its log.
pub fn payload(report: &Report) -> Bytes {
    let body = serde_json::json!({
        "type": event_type(report),
        "service": report.service,
        "job_kind": report.run.kind.as_str(),
        "job_id": report.run.job_id,
        "job_name": report.run.job_name,
        "counter": report.run.counter,
        "status": report.status(),
        "started_at": utc_text(report.run.started_at),
        "ended_at": utc_text(report.run.ended_at),
        "log": report.log,
    });
    Bytes::from(body.to_string())
}

/// A new message ID: `msg_` and 24 random letters and digits. One per message: its
/// retries keep it, so that a receiver can tell a repeat.
pub fn message_id() -> String {
    let random: String = rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    format!("msg_{random}")
}

/// Sends one message to one webhook notification.
pub struct WebhookSender {
    client: reqwest::Client,
    /// The notif's, shared by every message to it.
    config: Arc<WebhookNotif>,
    id: String,
    body: Bytes,
}

/// The URL as [`proto::redact::redact_url`] shows it: it may carry a token.
impl std::fmt::Debug for WebhookSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSender")
            .field("url", &proto::redact::redact_url(&self.config.url))
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl WebhookSender {
    /// The message of `report` for `config`, with a new ID.
    pub fn new(
        client: reqwest::Client,
        config: &Arc<WebhookNotif>,
        report: &Report,
    ) -> WebhookSender {
        WebhookSender {
            client,
            config: config.clone(),
            id: message_id(),
            body: payload(report),
        }
    }

    /// One attempt, signed with the time it is made (Unix seconds).
    pub async fn attempt(&self, timestamp: i64) -> Result<(), NotifyError> {
        let signature =
            standard_signature(self.config.key.bytes(), &self.id, timestamp, &self.body);
        let request = self
            .client
            .post(&self.config.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &self.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(self.body.clone());
        send_expecting_success(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::message::tests::ended;
    use super::*;
    use crate::engine::Kind;
    use crate::store::state::RunResult;

    #[test]
    fn message_ids_are_new_each_time() {
        let (a, b) = (message_id(), message_id());
        assert_ne!(a, b);
        assert!(a.starts_with("msg_") && a.len() == 28, "{a}");
        assert!(a[4..].bytes().all(|b| b.is_ascii_alphanumeric()), "{a}");
    }

    /// The sender of a message shows its URL without the token it may carry.
    #[test]
    fn a_sender_is_shown_without_the_urls_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        let report = Report {
            service: "svc".into(),
            run: ended(dir.path(), RunResult::Success),
            log: Vec::new(),
            log_missing: None,
        };
        let config = Arc::new(WebhookNotif {
            url: "https://hooks.example.org/services/T0AB12CD/B3EF45GH/Xy9zAbCdEfGhIjKlMnOpQrSt\
                  ?token=tok-4e1d"
                .into(),
            key: crate::config::WebhookKey::new(b"key-9b2c".to_vec()),
        });
        let client = super::super::make_http_client().expect("the HTTP client");
        let sender = WebhookSender::new(client, &config, &report);
        let shown = format!("{sender:?}");
        for hidden in ["Xy9zAbCdEfGhIjKlMnOpQrSt", "tok-4e1d", "key-9b2c"] {
            assert!(!shown.contains(hidden), "{hidden} in {shown}");
        }
        assert!(shown.contains("hooks.example.org"), "{shown}");
        assert!(Arc::ptr_eq(&sender.config, &config), "shared, not copied");
    }

    #[test]
    fn payload_shape() {
        let dir = tempfile::tempdir().expect("tempdir");
        let report = Report {
            service: "svc".into(),
            run: ended(dir.path(), RunResult::Fail),
            log: vec!["one".into(), "two \"quoted\"".into()],
            log_missing: None,
        };
        let body: serde_json::Value =
            serde_json::from_slice(&payload(&report)).expect("valid JSON");
        assert_eq!(
            body,
            serde_json::json!({
                "type": "run.failed",
                "service": "svc",
                "job_kind": "job",
                "job_id": "deploy_site",
                "job_name": "deploy site",
                "counter": 12,
                "status": "failed",
                "started_at": "2026-01-05T10:00:00Z",
                "ended_at": "2026-01-05T10:01:30Z",
                "log": ["one", "two \"quoted\""],
            })
        );
        let mut success = report;
        success.run.result = RunResult::Success;
        success.run.kind = Kind::Http;
        let body: serde_json::Value =
            serde_json::from_slice(&payload(&success)).expect("valid JSON");
        assert_eq!(body["type"], "run.success");
        assert_eq!(body["status"], "success");
        assert_eq!(body["job_kind"], "job_http");
    }
}
