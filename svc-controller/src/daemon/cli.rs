//! The command line of `svc-controller`: the service, `--check` and the tools.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Command line of `svc-controller`.
///
/// Without a subcommand it starts the service (or checks the configuration with
/// `--check`). Further tools become variants of [`Command`]; `--config` and `--check` stay
/// top-level options, so `svc-controller --config FILE --check` keeps working.
#[derive(Debug, Parser)]
#[command(
    name = "svc-controller",
    version,
    about = "svc: job scheduler and webhook runner",
    long_about = "svc: job scheduler and webhook runner.\n\n\
        Runs commands on timers and on signed webhooks, calls URLs on timers, keeps the log \
        of every run and serves it all over a JSON API and a web UI. Each execution runs in \
        its own svc-runner process, as the job's user."
)]
pub struct Cli {
    /// Main configuration file (for `migrate`, the one to write).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/svc/svc.conf",
        global = true
    )]
    pub config: PathBuf,
    /// Validate the whole configuration (main file, job.d, job_http.d) and exit:
    /// 0 when valid, 78 with every problem listed otherwise.
    #[arg(long)]
    pub check: bool,
    /// A tool instead of the service.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands: tools that run instead of the service.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read a password (one line) on standard input and print its argon2id hash, for
    /// `password = ...` in user.conf.
    #[command(name = "hash-password")]
    HashPassword,
    /// Take over an upstream installation: its configuration, logs (every status, any
    /// case of directory) and state, into the layout of the configuration named by
    /// --config (<base>/etc/svc/svc.conf). Reads DIR only; prints every file written or
    /// renamed and everything not taken; overwrites nothing, so it can run again.
    Migrate {
        /// The upstream installation's base directory (holding etc/karajo/karajo.conf or
        /// etc/svc/svc.conf).
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
    },
    /// Print the upcoming slots of the timers of the configuration named by --config, one
    /// per line: the time in the job's zone and in UTC (RFC 3339), marking
    /// daylight-saving changes. With --job, only that job's lines (under a header when a
    /// Job and a JobHttp share the ID); otherwise each job's slots follow a
    /// `# job ID: TIMER` line.
    #[command(name = "next-runs")]
    NextRuns {
        /// One Job or JobHttp, by ID (any case).
        #[arg(long, value_name = "ID")]
        job: Option<String>,
        /// How many slots per job.
        #[arg(long, value_name = "N", default_value_t = 10)]
        count: usize,
        /// Start from this instant (RFC 3339) instead of now.
        #[arg(long, value_name = "RFC3339")]
        from: Option<String>,
    },
}
