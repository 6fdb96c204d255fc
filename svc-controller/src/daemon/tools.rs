//! The tools that run instead of the service: `hash-password`, `migrate` and
//! `next-runs`.

use std::path::Path;
use std::process::ExitCode;

use super::EXIT_CONFIG;
use super::check::report_config_error;
use super::cli::Command;
use crate::config;

/// Runs one tool on the configuration named by `--config`; the exit status.
pub(super) fn run_tool(command: Command, config_file: &Path) -> ExitCode {
    match command {
        Command::HashPassword => match crate::security::password::hash_password_from_stdin() {
            Ok(hash) => {
                println!("{hash}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::FAILURE
            }
        },
        Command::Migrate { from } => match crate::daemon::migrate::migrate(&from, config_file) {
            Ok(report) => {
                for line in &report.lines {
                    println!("{line}");
                }
                println!(
                    "migrated into {}; {} thing(s) not taken (listed above). Check with: \
                     svc-controller --config {} --check",
                    config_file.display(),
                    report.skipped,
                    config_file.display()
                );
                ExitCode::SUCCESS
            }
            Err(crate::daemon::migrate::MigrateError::Config(err)) => {
                eprintln!("error: the migrated configuration does not load; fix it and run again");
                report_config_error(&err);
                ExitCode::from(EXIT_CONFIG)
            }
            Err(err) => {
                eprintln!("error: {err}");
                ExitCode::FAILURE
            }
        },
        Command::NextRuns { job, count, from } => {
            next_runs(config_file, job.as_deref(), count, from.as_deref())
        }
    }
}

/// `svc-controller next-runs`.
fn next_runs(config_file: &Path, job: Option<&str>, count: usize, from: Option<&str>) -> ExitCode {
    let from = match from.map(chrono::DateTime::parse_from_rfc3339) {
        None => chrono::Utc::now(),
        Some(Ok(t)) => t.with_timezone(&chrono::Utc),
        Some(Err(err)) => {
            eprintln!("error: --from: not an RFC 3339 time ({err}), such as 2026-03-29T00:00:00Z");
            return ExitCode::from(2);
        }
    };
    let config = match config::load(config_file) {
        Ok(config) => config,
        Err(err) => {
            report_config_error(&err);
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let timers = crate::daemon::preview::job_timers(&config);
    let selected: Vec<_> = match job {
        Some(id) => timers
            .iter()
            .filter(|t| t.id.eq_ignore_ascii_case(id))
            .collect(),
        None => timers.iter().collect(),
    };
    if let (Some(id), true) = (job, selected.is_empty()) {
        eprintln!(
            "error: no job or http job has the ID {id:?} in {}",
            config_file.display()
        );
        return ExitCode::FAILURE;
    }
    // One job asked for and found once: its slots alone. Otherwise (every job, or a Job
    // and a JobHttp sharing the ID) each job's slots under a line naming it.
    let headed = job.is_none() || selected.len() > 1;
    for entry in selected {
        let Some(timer) = entry.timer else {
            println!(
                "# {} {}: no timer (runs when started by hand or by a webhook)",
                entry.kind.as_str(),
                entry.id
            );
            continue;
        };
        if headed {
            println!(
                "# {} {}: {}",
                entry.kind.as_str(),
                entry.id,
                timer.describe()
            );
        }
        let slots = crate::daemon::preview::upcoming(timer, from, count);
        for line in crate::daemon::preview::slot_lines(&slots, entry.zone, from) {
            println!("{line}");
        }
    }
    ExitCode::SUCCESS
}

/// For the tools (`--check`, `next-runs`, ...), whose output goes to a person or a pipe:
/// a reader that stops early (`| head`, `| grep -q`) ends the process as it ends any
/// Unix tool, by SIGPIPE, instead of a panic of `println!` on the broken pipe. Rust
/// ignores SIGPIPE by default; the service keeps it ignored (its sockets report EPIPE).
pub(super) fn end_quietly_when_stdout_closes() {
    // SAFETY: restoring a signal's default disposition touches no memory, and the tools
    // run it before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
