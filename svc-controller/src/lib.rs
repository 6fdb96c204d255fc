//! svc-controller: the privileged daemon of svc.
//!
//! It loads the configuration, keeps job state and logs, runs timers, serves the HTTP API,
//! and starts one `svc-runner` process per execution. See ARCHITECTURE.md for the map.

pub mod config;
pub mod schedule;
