//! svc-controller: the privileged daemon of svc.
//!
//! It loads the configuration, keeps job state and logs, runs timers, serves the HTTP API,
//! and starts one `svc-runner` process per execution. See ARCHITECTURE.md for the map.

pub mod audit;
pub mod auth;
pub mod cgroups;
pub mod cluster;
pub mod config;
pub mod containment;
pub mod daemon;
pub mod delivery;
pub mod duration;
pub mod engine;
pub mod exec;
pub mod fdlimit;
pub mod forkserver;
pub mod fsutil;
pub mod history;
pub mod html;
pub mod http;
pub mod login;
pub mod logstore;
pub mod metrics;
pub mod migrate;
pub mod notify;
pub mod password;
pub mod preview;
pub mod proxies;
pub mod replay;
pub mod rights;
pub mod run_limits;
pub mod runtmp;
pub mod sandboxes;
pub mod schedule;
pub mod space_reserve;
pub mod spawner;
pub mod state;
pub mod statedir;
pub mod timezone;
