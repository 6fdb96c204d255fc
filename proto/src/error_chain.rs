//! How an error is told in a log line or a run's log: with its chain of causes. The
//! controller tells its notifications' failures this way and the runner its JobHttp
//! calls' failures; one rule for both, so the two sides tell an error alike.

/// `err` and its sources, `: `-joined, each said once: a cause whose text the error
/// already shows (many write `{0}` into their own message) is not repeated.
pub fn describe(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot connect")]
    struct Silent(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot connect: {0}")]
    struct Says(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("the call failed")]
    struct Outer(#[source] Silent);

    #[test]
    fn errors_are_described_with_their_causes_once() {
        let refused = || std::io::Error::other("connection refused");
        assert_eq!(describe(&refused()), "connection refused");
        assert_eq!(
            describe(&Silent(refused())),
            "cannot connect: connection refused"
        );
        assert_eq!(
            describe(&Says(refused())),
            "cannot connect: connection refused",
            "a cause already told is not told again"
        );
        assert_eq!(
            describe(&Outer(Silent(refused()))),
            "the call failed: cannot connect: connection refused",
            "every level of the chain"
        );
    }
}
