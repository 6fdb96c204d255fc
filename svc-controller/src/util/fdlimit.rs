//! The open-file limit (`RLIMIT_NOFILE`): raised to its hard value at start, so that
//! connections are not capped by the soft limit of 1024 that systemd and most shells
//! set, and given back to what runs jobs, whose programs may still use `select(2)`.

use std::sync::OnceLock;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// The soft and hard limits the controller was started with.
static ORIGINAL: OnceLock<(u64, u64)> = OnceLock::new();

/// The controller's open-file limit after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit the controller was started with (what runners get back).
    pub original_soft: u64,
    /// The soft limit now in force.
    pub soft: u64,
}

/// Raises the soft open-file limit to the hard one and remembers the original for
/// [`original_for_children`]. Failing to raise keeps the original and says so.
pub fn raise() -> FdLimit {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the open-file limit");
            return FdLimit {
                original_soft: 1024,
                soft: 1024,
            };
        }
    };
    let _ = ORIGINAL.set((soft, hard));
    if soft >= hard {
        return FdLimit {
            original_soft: soft,
            soft,
        };
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => FdLimit {
            original_soft: soft,
            soft: hard,
        },
        Err(err) => {
            tracing::warn!(error = %err, soft, hard, "cannot raise the open-file limit");
            FdLimit {
                original_soft: soft,
                soft,
            }
        }
    }
}

/// The soft and hard limits runners get back (they set them themselves, given on their
/// command line), once [`raise`] has run.
pub fn original_for_children() -> Option<(u64, u64)> {
    ORIGINAL.get().copied()
}
