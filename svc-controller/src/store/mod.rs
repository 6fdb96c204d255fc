//! Layer `store`: what the service keeps on disk, each written so that a crash leaves it
//! whole: job state, run logs, the run history, the state directory, runs' temporary
//! directories, webhook deliveries. Uses [`crate::util`], [`crate::time`],
//! [`crate::security`] and [`crate::config`].

pub mod delivery;
pub mod history;
pub mod logstore;
pub mod runtmp;
pub mod state;
pub mod statedir;
