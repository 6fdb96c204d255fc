//! The schema's migrations, embedded in the binary: `schema/NNNN_name.sql`, applied in
//! order by sqlx's migrator, which records them in `_sqlx_migrations`.

use std::borrow::Cow;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// Version, description and SQL of each migration, oldest first. A migration is never
/// edited once released (the migrator refuses a changed checksum): changes are new files.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "cluster", include_str!("schema/0001_cluster.sql")),
    (
        2,
        "pause changes",
        include_str!("schema/0002_pause_changes.sql"),
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
