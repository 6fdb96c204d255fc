//! svc-controller: the privileged daemon of svc.
//!
//! It loads the configuration, keeps job state and logs, runs timers, serves the HTTP API,
//! and starts one `svc-runner` process per execution. See ARCHITECTURE.md for the map.
//!
//! The modules are layers, listed here from the bottom up: each may use the layers above
//! it in this list and none below (`tests/tests/it/tidy.rs` checks every `crate::` path).
//!
//! | layer | holds |
//! |---|---|
//! | [`util`] | files written to survive a crash, the disk's space reserve, HTML escaping, the open-file limit, locks that survive poisoning |
//! | [`time`] | durations, time zones, schedules |
//! | [`security`] | passwords, rights of roles, trusted proxies |
//! | [`config`] | the configuration: its syntax, values, sections and checks |
//! | [`store`] | what is kept on disk: job state, logs, run history, the state directory, runs' temporary directories, deliveries |
//! | [`metrics`] | the Prometheus metrics |
//! | [`cluster`] | the shared PostgreSQL store of a cluster |
//! | [`runner`] | starting runners and talking to them: the runner hub, fork server, spawner, sandboxes, containment, cgroups |
//! | [`access`] | who may do what: signatures, logins, the audit log, spent signatures |
//! | [`engine`] | jobs, triggers, timers, runs |
//! | [`notify`] | notifications and health pings of run ends |
//! | [`http`] | the HTTP API and UI |
//! | [`daemon`] | the command line, start-up, `--check`, signals, reload, migration, previews |
//!
//! A layer is `pub` only when another crate (tests, bench, fuzz) uses it; the others are
//! `pub(crate)`, so that rustc reports what in them nothing uses.

pub(crate) mod util;

pub mod time;

pub mod security;

pub mod config;

pub mod store;

pub(crate) mod metrics;

pub mod cluster;

pub mod runner;

pub mod access;

pub mod engine;

pub(crate) mod notify;

pub(crate) mod http;

pub mod daemon;
