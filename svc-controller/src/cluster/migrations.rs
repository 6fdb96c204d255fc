//! The schema's migrations, embedded in the binary: `schema/NNNN_name.sql`, applied in
//! order by sqlx's migrator, which records them in `_sqlx_migrations`; and how the
//! database's schema stands against them.

use std::borrow::Cow;
use std::pin::Pin;

use sqlx::Connection as _;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use super::error::ClusterError;
use super::model::SchemaStatus;
use super::store::ClusterStore;

/// Version, description and SQL of each migration, oldest first. A migration is never
/// edited once released (the migrator refuses a changed checksum): changes are new files.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "cluster", include_str!("schema/0001_cluster.sql")),
    (
        2,
        "pause changes",
        include_str!("schema/0002_pause_changes.sql"),
    ),
    (
        3,
        "node instance",
        include_str!("schema/0003_node_instance.sql"),
    ),
    (
        4,
        "cancel requests",
        include_str!("schema/0004_cancel_requests.sql"),
    ),
    (
        5,
        "node defs digest",
        include_str!("schema/0005_node_defs_digest.sql"),
    ),
    (
        6,
        "slot outcome",
        include_str!("schema/0006_slot_outcome.sql"),
    ),
];

type Resolved = Result<Vec<Migration>, BoxDynError>;

/// The embedded migrations as a source for sqlx's migrator.
#[derive(Debug)]
struct Embedded;

impl<'s> MigrationSource<'s> for Embedded {
    // The trait's `BoxFuture`, spelled out (it is futures-core's alias).
    fn resolve(self) -> Pin<Box<dyn Future<Output = Resolved> + Send + 's>> {
        Box::pin(async {
            Ok(MIGRATIONS
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// The migrator over the embedded migrations. Its `locking` is on (the default): on
/// PostgreSQL it holds `pg_advisory_lock` on a key derived from the database's name while
/// it checks and applies, so nodes starting together apply each migration once.
pub(super) async fn migrator() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded).await
}

/// The embedded migrations themselves: versions and checksums, to compare with what a
/// database recorded.
pub(super) async fn embedded() -> Result<Vec<Migration>, sqlx::migrate::MigrateError> {
    Ok(migrator().await?.iter().cloned().collect())
}

impl ClusterStore {
    /// Brings the schema up to date. Nodes may call it together: sqlx's migrator holds a
    /// PostgreSQL advisory lock while it checks and applies, so each migration is applied
    /// once and the others wait, then find nothing to do.
    pub async fn migrate(&self) -> Result<(), ClusterError> {
        let migrator = migrator().await?;
        // A connection of its own, closed afterwards: the advisory lock belongs to the
        // session, and a migration failing half-way must not leave it held by a
        // connection that goes back to the pool.
        let mut conn = self.pool().acquire().await?.detach();
        let result = migrator.run_direct(&mut conn).await;
        let _ = conn.close().await;
        result.map_err(ClusterError::from)
    }

    /// How the schema stands against this binary's migrations, without changing anything
    /// (for `--check`): read from the migrator's own table, `_sqlx_migrations`.
    pub async fn schema_status(&self) -> Result<SchemaStatus, ClusterError> {
        let embedded = embedded().await?;
        let mut conn = self.pool().acquire().await?;
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&mut *conn)
            .await?;
        let applied: Vec<(i64, bool, Vec<u8>)> = if exists {
            sqlx::query_as(
                "SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version",
            )
            .fetch_all(&mut *conn)
            .await?
        } else {
            Vec::new()
        };
        Ok(compare_schema(&embedded, &applied))
    }
}

/// What [`ClusterStore::schema_status`] decides from the embedded migrations and the
/// applied ones (version, success, checksum).
fn compare_schema(
    embedded: &[sqlx::migrate::Migration],
    applied: &[(i64, bool, Vec<u8>)],
) -> SchemaStatus {
    for (version, success, checksum) in applied {
        if !success {
            return SchemaStatus::Broken {
                version: *version,
                reason: "it failed half-way",
            };
        }
        if let Some(known) = embedded.iter().find(|m| m.version == *version)
            && known.checksum.as_ref() != checksum.as_slice()
        {
            return SchemaStatus::Broken {
                version: *version,
                reason: "its content differs from this release's",
            };
        }
    }
    let newer: Vec<i64> = applied
        .iter()
        .map(|(version, _, _)| *version)
        .filter(|version| !embedded.iter().any(|m| m.version == *version))
        .collect();
    if !newer.is_empty() {
        return SchemaStatus::Newer(newer);
    }
    let pending: Vec<i64> = embedded
        .iter()
        .map(|m| m.version)
        .filter(|version| !applied.iter().any(|(v, _, _)| v == version))
        .collect();
    if pending.is_empty() {
        SchemaStatus::Current
    } else {
        SchemaStatus::Pending(pending)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use sqlx::migrate::{Migration, MigrationType};

    use super::*;

    fn migration(version: i64, sql: &'static str) -> Migration {
        Migration::new(
            version,
            Cow::Borrowed("m"),
            MigrationType::Simple,
            Cow::Borrowed(sql),
            false,
        )
    }

    fn applied(m: &Migration) -> (i64, bool, Vec<u8>) {
        (m.version, true, m.checksum.to_vec())
    }

    #[test]
    fn the_schema_is_compared_with_the_embedded_migrations() {
        let (one, two) = (migration(1, "SELECT 1"), migration(2, "SELECT 2"));
        let embedded = [one.clone(), two.clone()];
        assert_eq!(
            compare_schema(&embedded, &[applied(&one), applied(&two)]),
            SchemaStatus::Current
        );
        assert_eq!(
            compare_schema(&embedded, &[applied(&one)]),
            SchemaStatus::Pending(vec![2])
        );
        assert_eq!(
            compare_schema(&embedded, &[]),
            SchemaStatus::Pending(vec![1, 2])
        );
        let three = migration(3, "SELECT 3");
        assert_eq!(
            compare_schema(&embedded, &[applied(&one), applied(&two), applied(&three)]),
            SchemaStatus::Newer(vec![3])
        );
        let mut failed = applied(&two);
        failed.1 = false;
        assert!(matches!(
            compare_schema(&embedded, &[applied(&one), failed]),
            SchemaStatus::Broken { version: 2, .. }
        ));
        let edited = (1, true, migration(1, "SELECT 10").checksum.to_vec());
        assert!(matches!(
            compare_schema(&embedded, &[edited]),
            SchemaStatus::Broken { version: 1, .. }
        ));
    }
}
