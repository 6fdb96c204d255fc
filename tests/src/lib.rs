//! Test harness: starts the real `svc-controller` binary on a temporary `dir_base`.
