//! Layer `security`: the rules that need no configuration: password hashes, the rights of
//! each role, which proxies are trusted, the key of a Standard Webhooks secret, what a run's sandbox
//! refused in the words of the configuration. Uses [`crate::util`] and [`crate::time`] only.

pub mod password;
pub mod proxies;
pub mod rights;
pub mod sandbox_hint;
pub mod standard_secret;
