//! `svc-man DIR`: writes `svc-controller.8` and `svc-runner.8` into DIR, generated from the
//! command-line definitions of both programs and completed with the sections clap knows
//! nothing about. Run by `packaging/build-packages`; not installed, and not linked into
//! either program.

mod controller;
mod page;
mod runner;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: svc-man DIR");
        return ExitCode::from(2);
    };
    for (name, text) in [
        ("svc-controller.8", controller::page()),
        ("svc-runner.8", runner::page()),
    ] {
        let path = dir.join(name);
        if let Err(err) = text.and_then(|text| std::fs::write(&path, text)) {
            eprintln!("svc-man: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
