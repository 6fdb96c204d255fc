//! `kind = email`: a plain-text message over SMTP with TLS, from the first byte
//! (`smtps://`) or after STARTTLS (`smtp+starttls://`, which must succeed: there is no
//! fall-back to plain text), authenticated when the notif has credentials.

use std::time::Duration;

use lettre::message::Message;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Tokio1Executor};

use super::error::NotifyError;
use super::message::Report;
use crate::config::{EmailNotif, SmtpSecurity};

/// Longest an SMTP conversation may stall (each command's answer; connecting too).
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest one attempt may take, all its commands together: a server that answers each
/// just before [`SMTP_TIMEOUT`] would otherwise keep one of the few attempts that run at
/// once for as long as it likes, and hold up every other notification.
const ATTEMPT_LIMIT: Duration = Duration::from_secs(120);

/// The connection settings of one e-mail notification, TLS included: made once per
/// notif, as its TLS set-up reads the system's certificates, and shared by its messages.
pub type Transport = AsyncSmtpTransport<Tokio1Executor>;

/// Sends one message to one e-mail notification.
pub struct EmailSender {
    transport: Transport,
    message: Message,
    /// [`ATTEMPT_LIMIT`] (shorter in tests).
    limit: Duration,
}

impl std::fmt::Debug for EmailSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSender").finish_non_exhaustive()
    }
}

impl EmailSender {
    /// The message of `report` for `config`, to send over `transport`; `hello` is the
    /// name this host gives in `EHLO`.
    pub fn new(
        transport: Transport,
        config: &EmailNotif,
        report: &Report,
        hello: &str,
    ) -> Result<EmailSender, NotifyError> {
        Ok(EmailSender {
            transport,
            message: message(config, report, hello)?,
            limit: ATTEMPT_LIMIT,
        })
    }

    /// One attempt: connect, authenticate, send, quit; at most [`ATTEMPT_LIMIT`] in all.
    pub async fn attempt(&self) -> Result<(), NotifyError> {
        tokio::time::timeout(self.limit, self.transport.send(self.message.clone()))
            .await
            .map_err(|_| NotifyError::TimedOut(self.limit))?
            .map(|_| ())
            .map_err(NotifyError::Smtp)
    }
}

/// The message: `From`, every `To`, the subject and the plain-text body of `report`.
pub fn message(config: &EmailNotif, report: &Report, hello: &str) -> Result<Message, NotifyError> {
    let mut builder = Message::builder()
        .from(config.from.clone())
        .subject(report.subject())
        .message_id(Some(format!(
            "<svc.{}.{}.{}@{hello}>",
            report.run.job_id,
            report.run.counter,
            rand::random::<u64>()
        )))
        .header(ContentType::TEXT_PLAIN);
    for to in &config.to {
        builder = builder.to(to.clone());
    }
    builder.body(report.text()).map_err(NotifyError::Message)
}

/// The connection to `config.server`: TLS as its scheme says, the certificate verified
/// (by the platform's verifier) unless `smtp_insecure`. Blocking: reads the system's
/// certificates.
pub fn transport(config: &EmailNotif, hello: &str) -> Result<Transport, NotifyError> {
    let server = &config.server;
    let tls = TlsParameters::builder(server.host.clone())
        .dangerous_accept_invalid_certs(config.insecure)
        .dangerous_accept_invalid_hostnames(config.insecure)
        .build_rustls()
        .map_err(NotifyError::Tls)?;
    let tls = match server.security {
        SmtpSecurity::Tls => Tls::Wrapper(tls),
        SmtpSecurity::StartTls => Tls::Required(tls),
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server.host.clone())
        .port(server.port)
        .tls(tls)
        .timeout(Some(SMTP_TIMEOUT))
        .hello_name(ClientId::Domain(hello.to_string()));
    if let Some(credentials) = &config.credentials {
        builder = builder.credentials(Credentials::new(
            credentials.user.clone(),
            credentials.password.clone(),
        ));
    }
    Ok(builder.build())
}

/// This host's name for `EHLO` and message IDs: its host name when that is a valid
/// domain name, else `localhost`.
pub fn hello_name() -> String {
    let name = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_default();
    if is_domain_name(&name) {
        name
    } else {
        "localhost".to_string()
    }
}

/// Whether `name` may stand in `EHLO` as a domain: dot-separated labels of letters,
/// digits and hyphens, each 1 to 63 long, 253 in all.
fn is_domain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::super::message::tests::ended;
    use super::*;
    use crate::config::{SmtpCredentials, SmtpServer};
    use crate::store::state::RunResult;

    fn config() -> EmailNotif {
        EmailNotif {
            server: SmtpServer {
                security: SmtpSecurity::StartTls,
                host: "127.0.0.1".into(),
                port: 2525,
            },
            credentials: Some(SmtpCredentials {
                user: "u".into(),
                password: "p".into(),
            }),
            from: "svc <svc@example.org>".parse().expect("mailbox"),
            to: vec![
                "a@example.org".parse().expect("mailbox"),
                "\"Doe, Jane\" <jane@example.org>".parse().expect("mailbox"),
            ],
            insecure: true,
        }
    }

    fn report(dir: &std::path::Path) -> Report {
        Report {
            service: "svc".into(),
            run: ended(dir, RunResult::Fail),
            log: vec!["2026-01-05 10:01:30 exit code 1".into()],
            log_missing: None,
        }
    }

    #[test]
    fn the_message_has_its_addresses_subject_and_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let message =
            message(&config(), &report(dir.path()), "builder.example.org").expect("message");
        let envelope = message.envelope();
        assert_eq!(
            envelope.from().map(ToString::to_string).as_deref(),
            Some("svc@example.org")
        );
        let to: Vec<String> = envelope.to().iter().map(ToString::to_string).collect();
        assert_eq!(to, vec!["a@example.org", "jane@example.org"]);
        let text = String::from_utf8(message.formatted()).expect("ASCII here");
        assert!(
            text.contains("Subject: svc: job deploy_site run 12 failed\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Content-Type: text/plain; charset=utf-8\r\n"),
            "{text}"
        );
        assert!(text.contains("Message-ID: <svc.deploy_site.12."), "{text}");
        assert!(text.contains("@builder.example.org>\r\n"), "{text}");
        assert!(text.contains("Status:  failed"), "{text}");
        assert!(text.contains("exit code 1"), "{text}");
    }

    /// A server that keeps each answer within [`SMTP_TIMEOUT`] but never finishes (here
    /// a greeting of endless continuation lines) is cut off at the attempt's limit.
    #[tokio::test]
    async fn an_attempt_ends_at_its_limit_however_the_server_trickles() {
        use tokio::io::AsyncWriteExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen");
        let port = listener.local_addr().expect("address").port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            while socket.write_all(b"220-still greeting\r\n").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let mut config = config();
        config.server.port = port;
        let dir = tempfile::tempdir().expect("tempdir");
        let sender = EmailSender {
            transport: transport(&config, "h").expect("transport"),
            message: message(&config, &report(dir.path()), "h").expect("message"),
            limit: Duration::from_millis(300),
        };
        // Bounded, so that a missing limit fails the test rather than hangs it.
        let err = tokio::time::timeout(Duration::from_secs(60), sender.attempt())
            .await
            .expect("the attempt's own limit ends it")
            .expect_err("never finishes");
        assert!(matches!(err, NotifyError::TimedOut(_)), "{err}");
        assert_eq!(
            err.to_string(),
            "the mail server took more than 300ms in all"
        );
        server.abort();
    }

    #[test]
    fn a_transport_is_made_for_either_scheme() {
        let mut config = config();
        transport(&config, "h").expect("starttls");
        config.server.security = SmtpSecurity::Tls;
        config.insecure = false;
        config.credentials = None;
        transport(&config, "h").expect("tls");
    }

    #[test]
    fn only_a_domain_name_is_said_in_ehlo() {
        for good in ["localhost", "builder-2.example.org", &"a".repeat(63)] {
            assert!(is_domain_name(good), "{good}");
        }
        let long_label = "a".repeat(64);
        let long_name = vec!["a".repeat(63); 4].join(".") + ".ab";
        for bad in [
            "",
            "a..b",
            ".a",
            "x_y",
            "host name",
            "h\u{e9}te",
            &long_label,
            &long_name,
        ] {
            assert!(!is_domain_name(bad), "{bad}");
        }
        assert!(is_domain_name(&hello_name()), "this host's, or localhost");
    }
}
