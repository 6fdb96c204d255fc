//! Layer `access`: who may do what: the signature rules of webhooks and signed requests,
//! logins and sessions, the audit log, and the store of spent signatures. Uses the layers
//! up to [`crate::runner`].

pub mod audit;
mod audit_repeats;
pub mod auth;
pub mod login;
pub mod replay;
