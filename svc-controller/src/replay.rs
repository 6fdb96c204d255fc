//! Replay protection for webhooks: delivery IDs (codehost) and nonces (patchhost) that
//! were already accepted, kept on disk so that a restart does not forget them.
//!
//! PLACEHOLDER: being written (issue 3, item 3).

use std::path::Path;

/// Both stores. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct ReplayStores {}

/// The stores could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the replay store in {dir}: {message}")]
pub struct ReplayError {
    pub dir: String,
    pub message: String,
}

impl ReplayStores {
    /// Opens (or creates) the stores in `dir`.
    pub fn open(_dir: &Path) -> Result<ReplayStores, ReplayError> {
        Ok(ReplayStores {})
    }
}
