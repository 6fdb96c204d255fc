//! The integration tests of svc, in one binary: each module is the tests of one part,
//! started through the real binaries (`svc_tests::TestService`) or in process. One
//! binary links the controller once, where one per file linked it 58 times (the build
//! and `.ci/run` took that much longer). Run one part with
//! `cargo test -p svc-tests --test it -- crash::`.

mod api;
mod api_common;
mod api_job_http;
mod api_limits;
mod api_reference;
mod body_budget;
mod browser;
mod cluster;
mod cluster_check;
mod cluster_drift;
mod cluster_start;
mod cluster_store;
mod cluster_views;
mod code_hosts;
mod config_check;
mod connections;
mod containment;
mod counters;
mod crash;
mod engine;
mod events;
mod faults;
mod fuzz_regressions;
mod hash_password;
mod history;
mod host_check;
mod hostile_http;
mod hostile_http_more;
mod inherited_fds;
mod lifecycle;
mod load;
mod log_limit;
mod login;
mod metrics;
mod migrate;
mod notify;
mod origin;
mod pings;
mod properties;
mod public_dir;
mod queue_durability;
mod redaction;
mod replay;
mod rights;
mod rlimits;
mod root_jobs;
mod run_cgroups;
mod run_namespaces;
mod run_now;
mod run_output;
mod run_usage;
mod runner_failures;
mod runner_hub;
mod sandbox;
mod scale;
mod scheduling;
mod state_dir;
mod tidy;
mod ui_docs;
mod webhooks;
mod work_dir;
