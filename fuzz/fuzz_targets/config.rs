//! The configuration loader on arbitrary files.
//!
//! `config::load` reads files, and its line parser (`config/syntax.rs`) is private, so
//! each input is written as a configuration tree in a private directory of this process
//! and loaded from there. The input holds up to four files separated by lines `%%`: the
//! main file (after a fixed `[svc]` line and `dir_base` pointing at the tree),
//! `job.d/a.conf`, `job_http.d/a.conf` and `user.conf`.
//!
//! Checked: no panic; a failure lists at least one problem and renders; a success has
//! unique job IDs that follow the ID rule, and unique trigger paths.
#![no_main]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use svc_controller::config::{job_id_from_name, load};

fn tree() -> &'static PathBuf {
    static TREE: OnceLock<PathBuf> = OnceLock::new();
    TREE.get_or_init(|| {
        let root = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = root.join(format!("svc-fuzz-config-{}", std::process::id()));
        for sub in ["etc/svc/job.d", "etc/svc/job_http.d"] {
            std::fs::create_dir_all(dir.join(sub)).expect("create the configuration tree");
        }
        dir
    })
}

fn put(path: PathBuf, contents: Option<&[u8]>) {
    match contents {
        Some(bytes) => std::fs::write(&path, bytes).expect("write a configuration file"),
        None => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() < 3 {
        match rest.windows(4).position(|w| w == b"\n%%\n") {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + 4..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

fuzz_target!(|data: &[u8]| {
    let dir = tree();
    let parts = split(data);
    let mut main = format!("[svc]\ndir_base = {}\n", dir.display()).into_bytes();
    main.extend_from_slice(parts[0]);
    let main_path = dir.join("etc/svc/svc.conf");
    put(main_path.clone(), Some(&main));
    put(dir.join("etc/svc/job.d/a.conf"), parts.get(1).copied());
    put(dir.join("etc/svc/job_http.d/a.conf"), parts.get(2).copied());
    put(dir.join("etc/svc/user.conf"), parts.get(3).copied());

    match load(&main_path) {
        Ok(config) => {
            let mut ids = HashSet::new();
            let mut paths = HashSet::new();
            for job in &config.jobs {
                assert_eq!(job.id, job_id_from_name(&job.name), "job ID rule");
                assert!(
                    ids.insert(job.id.clone()),
                    "duplicate job ID {:?} accepted",
                    job.id
                );
                assert!(!job.commands.is_empty(), "a job without commands accepted");
                if let Some(path) = &job.path {
                    assert!(
                        paths.insert(path.clone()),
                        "duplicate path {path:?} accepted"
                    );
                }
            }
            let mut http_ids = HashSet::new();
            for job in &config.http_jobs {
                assert_eq!(job.id, job_id_from_name(&job.name), "JobHttp ID rule");
                assert!(
                    http_ids.insert(job.id.clone()),
                    "duplicate JobHttp ID accepted"
                );
            }
        }
        Err(err) => {
            assert!(!err.issues.is_empty(), "a failure without a problem");
            let _ = err.to_string();
        }
    }
});
