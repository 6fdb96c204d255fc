//! Replay protection: webhook delivery IDs (codehost, or their signature when a delivery
//! has no ID), what patchhost signatures cover (body and nonce), and the signatures of
//! signed control requests (one-time), kept on disk so that a restart does not forget
//! them.
//!
//! Each store is a map `(job id, value) -> time first seen` in memory, mirrored by an
//! append-only file with one line per change, fsynced per append:
//!
//! ```text
//! + <unix seconds> <hex job id> <hex value>     recorded
//! - <unix seconds> <hex job id> <hex value>     forgotten (the trigger was refused)
//! ```
//!
//! On open the file is replayed (a torn last line left by a crash, or any line that does
//! not parse, is ignored), expired entries are dropped, and the live entries are written
//! back atomically ([`crate::util::fsutil::atomic_write`]). The same compaction runs whenever
//! the file holds more than twice as many lines as there are live entries. Entries expire
//! after the store's time to live, checked as requests come; the number of live entries
//! is capped, the oldest being dropped first when the cap is reached, so memory and disk
//! stay bounded.
//!
//! All work happens under a std mutex with short synchronous file I/O; callers in async
//! code run it on a blocking thread and never hold anything across an `.await`.

use std::io;
use std::path::Path;

mod service;
mod store;

pub use service::{Ledger, Replay, ReplayFault};
pub use store::ReplayStore;

use store::{Limits, unix_now};

/// How long a codehost delivery ID is remembered: 24 hours.
pub const DELIVERY_TTL_SECS: i64 = 24 * 60 * 60;
/// How long a patchhost nonce is remembered: 90 days.
pub const NONCE_TTL_SECS: i64 = 90 * 24 * 60 * 60;
/// How long the signature of a control request is remembered: 24 hours (far beyond the
/// `_svc_epoch` window of 5 minutes; requests without an epoch are one-time that long).
pub const SIGNATURE_TTL_SECS: i64 = 24 * 60 * 60;
/// Most live entries per store; beyond it the oldest are dropped.
pub const MAX_ENTRIES: usize = 100_000;
/// Longest delivery ID or nonce accepted, in bytes.
pub const MAX_VALUE_LEN: usize = 256;
/// The file is not compacted while it has fewer lines than this.
const COMPACT_MIN_LINES: usize = 1024;

/// Both stores. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct ReplayStores {
    deliveries: ReplayStore,
    nonces: ReplayStore,
    signatures: ReplayStore,
}

/// The stores could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the replay store in {dir}: {message}")]
pub struct ReplayError {
    /// Directory of the stores.
    pub dir: String,
    /// What went wrong.
    pub message: String,
}

/// A change could not be made durable. Nothing was recorded.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the replay store {path}: {source}")]
pub struct StoreError {
    /// The store's file.
    pub path: String,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

/// Result of [`ReplayStore::check_and_record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not seen within the time to live: now recorded.
    New,
    /// Seen before and still remembered: nothing changed.
    Replay,
}

/// Result of [`ReplayStore::claim`], the spend store's check of a signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Never spent within the time to live: now spent by the route that asked.
    New,
    /// Spent before by the same route, which accepts repeats: accepted, nothing changed.
    Repeat,
    /// Spent before: by a route of the other class, by another control route, or by
    /// this route, which does not accept repeats.
    Spent,
}

/// What kind of route spends a signature: a signature one kind accepted is refused by
/// the other. Two webhook routes (two jobs' paths) do not refuse each other's: a code
/// host sends the same body to each hook of a repository, and two jobs that share a
/// secret accept each other's deliveries by design (give each its own `secret`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteClass {
    /// Pause, resume, cancel, run now, reload, the JobHttp actions.
    Control,
    /// A job's webhook path.
    Webhook,
}

impl RouteClass {
    /// The store's scope of the entry that says a key was spent by this class.
    pub(crate) fn marker(self) -> &'static str {
        match self {
            RouteClass::Control => "class:control",
            RouteClass::Webhook => "class:webhook",
        }
    }

    pub(crate) fn other(self) -> RouteClass {
        match self {
            RouteClass::Control => RouteClass::Webhook,
            RouteClass::Webhook => RouteClass::Control,
        }
    }
}

impl ReplayStores {
    /// Opens (or creates) the stores in `dir` (created with mode 0700 when missing):
    /// `deliveries.log`, `nonces.log` and `signatures.log`.
    pub fn open(dir: &Path) -> Result<ReplayStores, ReplayError> {
        let error = |message: String| ReplayError {
            dir: dir.display().to_string(),
            message,
        };
        if !dir.is_dir() {
            crate::util::fsutil::create_dir_with_mode(dir, 0o700)
                .map_err(|err| error(format!("cannot create the directory: {err}")))?;
        }
        let now = unix_now();
        let open = |name: &str, ttl: i64| {
            ReplayStore::open_at(
                &dir.join(name),
                Limits::new(ttl, MAX_ENTRIES, COMPACT_MIN_LINES),
                now,
            )
            .map_err(|err| error(format!("{name}: {err}")))
        };
        Ok(ReplayStores {
            deliveries: open("deliveries.log", DELIVERY_TTL_SECS)?,
            nonces: open("nonces.log", NONCE_TTL_SECS)?,
            signatures: open("signatures.log", SIGNATURE_TTL_SECS)?,
        })
    }

    /// Stores that live in memory only (for tests of code that needs an `AppState`).
    pub fn in_memory() -> ReplayStores {
        ReplayStores {
            deliveries: ReplayStore::in_memory(Limits::new(
                DELIVERY_TTL_SECS,
                MAX_ENTRIES,
                COMPACT_MIN_LINES,
            )),
            nonces: ReplayStore::in_memory(Limits::new(
                NONCE_TTL_SECS,
                MAX_ENTRIES,
                COMPACT_MIN_LINES,
            )),
            signatures: ReplayStore::in_memory(Limits::new(
                SIGNATURE_TTL_SECS,
                MAX_ENTRIES,
                COMPACT_MIN_LINES,
            )),
        }
    }

    /// Codehost delivery IDs (`X-GitHub-Delivery`), remembered 24 hours.
    pub fn deliveries(&self) -> &ReplayStore {
        &self.deliveries
    }

    /// Patchhost deliveries, keyed on the SHA-256 of what their signature covers (body
    /// then `X-Payload-Nonce`), remembered 90 days.
    pub fn nonces(&self) -> &ReplayStore {
        &self.nonces
    }

    /// Signatures of signed control requests (pause, resume, cancel, run-now), one store
    /// for every endpoint (job ""), remembered 24 hours.
    pub fn signatures(&self) -> &ReplayStore {
        &self.signatures
    }
}

impl Default for ReplayStores {
    fn default() -> Self {
        ReplayStores::in_memory()
    }
}
