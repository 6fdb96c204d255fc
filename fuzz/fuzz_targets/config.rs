//! The configuration loader on arbitrary files; the check is `checks::config` (shared with
//! tests/tests/fuzz_regressions.rs). `config::load` reads files, so each input is written
//! as a configuration tree in a private directory of this process, reused between inputs.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

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

fuzz_target!(|data: &[u8]| checks::config(data, tree()));
