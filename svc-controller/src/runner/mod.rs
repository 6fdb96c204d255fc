//! Layer `runner`: starting `svc-runner` processes and talking to them: the runner hub
//! and its conversation with each runner, the fork server, the spawner thread, the
//! sandboxes kept for busy jobs, the host's containment and each run's cgroup and limits.
//! Uses the layers up to [`crate::cluster`].

pub mod cgroups;
pub mod containment;
pub mod exec;
pub mod forkserver;
pub mod run_limits;
pub mod sandboxes;
pub mod spawner;
