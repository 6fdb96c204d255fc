//! Entry point of `svc-runner`; everything lives in the library.

use std::future::Future;
use std::process::ExitCode;

use clap::Parser as _;
use svc_runner::RunnerExit;
use svc_runner::fork_server::{self, Served};

fn main() -> ExitCode {
    // Read before anything else: the death signal set later is checked against it.
    let parent = nix::unistd::getppid();
    let cli = svc_runner::Cli::parse();
    svc_runner::apply_nofile(cli.nofile);
    if cli.probe_containment {
        return in_runtime(async {
            println!("{}", svc_runner::namespaces::probe().await);
            RunnerExit::Reported
        });
    }
    let Some(socket) = cli.socket else {
        eprintln!("svc-runner: --socket is required");
        return ExitCode::from(RunnerExit::NotDone.code());
    };
    if cli.fork_server {
        // The server has no runtime (it forks); each forked runner starts its own.
        match fork_server::serve(parent, cli.protect) {
            Ok(Served::Forked {
                connection,
                parent,
                walk,
            }) => in_runtime(svc_runner::run_forked(connection, parent, walk)),
            Ok(Served::Ended) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("svc-runner: fork server: {err}");
                ExitCode::from(RunnerExit::NotDone.code())
            }
        }
    } else {
        in_runtime(svc_runner::run(&socket, parent))
    }
}

/// Runs a runner's life on a one-thread runtime and turns its end into the exit code.
fn in_runtime(life: impl Future<Output = RunnerExit>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("svc-runner: cannot start the async runtime: {err}");
            return ExitCode::from(RunnerExit::NotDone.code());
        }
    };
    let exit = runtime.block_on(life);
    ExitCode::from(exit.code())
}
