//! Layer `security`: the rules that need no configuration: password hashes, the rights of
//! each role, which proxies are trusted, the key of a Standard Webhooks secret. Uses [`crate::util`] and [`crate::time`] only.

pub mod password;
pub mod proxies;
pub mod rights;
pub mod standard_secret;
