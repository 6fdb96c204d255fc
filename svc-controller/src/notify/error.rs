//! What can go wrong when a notification is sent. The log tells it with its causes by
//! [`proto::error_chain::describe`], the rule the runner tells its errors by too.

/// Why a notification could not be sent (one attempt, or all of them).
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The HTTP client for webhooks could not be made.
    #[error("cannot make the HTTP client (are the system's CA certificates installed?): {0}")]
    Client(#[source] reqwest::Error),
    /// The e-mail could not be put together.
    #[error("cannot make the message: {0}")]
    Message(#[source] lettre::error::Error),
    /// TLS could not be set up for the mail server.
    #[error("cannot set up TLS: {0}")]
    Tls(#[source] lettre::transport::smtp::Error),
    /// The SMTP conversation took longer than this in all.
    #[error("the mail server took more than {} in all", crate::time::duration::format_duration(*.0))]
    TimedOut(std::time::Duration),
    /// The SMTP conversation failed (connection, TLS, authentication, refusal).
    #[error("{0}")]
    Smtp(#[source] lettre::transport::smtp::Error),
    /// The webhook request failed before an answer came.
    #[error("{0}")]
    Http(#[source] reqwest::Error),
    /// The webhook's receiver answered with this status, not a 2xx.
    #[error("the receiver answered HTTP {0}")]
    Status(u16),
    /// The job names a notif that a reload removed meanwhile.
    #[error("no [notif {0:?}] section any more")]
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::error_chain::describe;

    #[test]
    fn notify_errors_are_described_as_they_read() {
        assert_eq!(
            describe(&NotifyError::Status(503)),
            "the receiver answered HTTP 503"
        );
        assert_eq!(
            describe(&NotifyError::Unknown("mail".into())),
            "no [notif \"mail\"] section any more"
        );
    }
}
