//! The errors of the cluster store, sorted by what a caller does about them: an
//! unreachable database (answer 503 with `Retry-After`, try again later), a conflict
//! (another node changed the same rows), bad data, or a refused statement.

use sqlx::migrate::MigrateError;

/// Why a cluster store operation failed. Nothing of the operation was kept: each one is a
/// single transaction.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The database cannot be reached now (connection refused or lost, pool exhausted,
    /// server shutting down or starting): retry later.
    #[error("the cluster database is unreachable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// A concurrent change of the same rows won (a unique key, a serialization failure,
    /// a deadlock).
    #[error("a concurrent change in the cluster database won: {0}")]
    Conflict(#[source] sqlx::Error),
    /// A row does not hold what this release expects.
    #[error("unexpected data in the cluster database: {0}")]
    BadData(String),
    /// The node is not known to the cluster: it must register first.
    #[error("node {0:?} is not registered in the cluster")]
    UnknownNode(String),
    /// The database URL does not parse (the URL itself is not repeated: it may hold a
    /// password).
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// The schema could not be brought up to date.
    #[error("the cluster schema could not be applied: {0}")]
    Migrate(#[source] MigrateError),
    /// Another live node, not this one restarting, holds the node's name.
    #[error(
        "node_name {node:?} is in use by another live node (last heartbeat {heartbeat_at}, \
         {seconds_ago} s ago): give each node its own node_name in [cluster], or stop the \
         other one first"
    )]
    NodeNameInUse {
        node: String,
        /// RFC 3339, to the second.
        heartbeat_at: String,
        seconds_ago: u64,
    },
    /// None of the database's hosts takes the node's sessions now: each is unreachable or
    /// read-only (each host with its state; no secret).
    #[error("no host of the cluster database is usable now ({0})")]
    NoUsableHost(String),
    /// The database refused a statement for another reason.
    #[error("the cluster database refused a statement: {0}")]
    Database(#[source] sqlx::Error),
}

impl ClusterError {
    /// True when the database could not be reached: the caller answers 503 and retries.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            ClusterError::Unavailable(_) | ClusterError::NoUsableHost(_)
        )
    }
}

/// SQLSTATE classes and codes that mean "the server is not there now".
fn is_unavailable_code(code: &str) -> bool {
    // 08: connection exception; 57P01..57P03: admin shutdown, crash shutdown, cannot
    // connect now (starting or in recovery); 53300: too many connections.
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
}

/// SQLSTATE codes of a concurrent change: unique violation, serialization failure,
/// deadlock.
pub(super) fn is_conflict_code(code: &str) -> bool {
    matches!(code, "23505" | "40001" | "40P01")
}

/// True when `err` says the server could not be reached or is not serving now.
fn unreachable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| is_unavailable_code(&code)),
        _ => false,
    }
}

impl From<sqlx::Error> for ClusterError {
    fn from(err: sqlx::Error) -> ClusterError {
        if unreachable(&err) {
            return ClusterError::Unavailable(err);
        }
        match &err {
            sqlx::Error::Database(db) if db.code().is_some_and(|code| is_conflict_code(&code)) => {
                ClusterError::Conflict(err)
            }
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::TypeNotFound { .. }
            | sqlx::Error::RowNotFound => ClusterError::BadData(err.to_string()),
            _ => ClusterError::Database(err),
        }
    }
}

impl From<MigrateError> for ClusterError {
    fn from(err: MigrateError) -> ClusterError {
        // The migrator's statements failing for want of a server is an outage, not a
        // broken schema.
        match err {
            MigrateError::Execute(inner) | MigrateError::ExecuteMigration(inner, _)
                if unreachable(&inner) =>
            {
                ClusterError::Unavailable(inner)
            }
            other => ClusterError::Migrate(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_told_apart_from_a_conflict_and_bad_data() {
        for err in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        ] {
            assert!(ClusterError::from(err).is_unavailable());
        }
        for code in ["08006", "08001", "57P01", "57P03", "53300"] {
            assert!(is_unavailable_code(code), "{code}");
        }
        for code in ["23505", "40001", "40P01"] {
            assert!(
                !is_unavailable_code(code) && is_conflict_code(code),
                "{code}"
            );
        }
        assert!(matches!(
            ClusterError::from(sqlx::Error::RowNotFound),
            ClusterError::BadData(_)
        ));
        let migrate = MigrateError::Execute(sqlx::Error::PoolTimedOut);
        assert!(ClusterError::from(migrate).is_unavailable());
        assert!(matches!(
            ClusterError::from(MigrateError::VersionMissing(3)),
            ClusterError::Migrate(_)
        ));
    }
}
