//! Entry point of `svc-runner`; everything lives in the library.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    // Read before anything else: the death signal set later is checked against it.
    let parent = nix::unistd::getppid();
    let cli = svc_runner::Cli::parse();
    svc_runner::apply_nofile(cli.nofile);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("svc-runner: cannot start the async runtime: {err}");
            return ExitCode::from(svc_runner::RunnerExit::NotDone.code());
        }
    };
    let exit = runtime.block_on(svc_runner::run(cli, parent));
    ExitCode::from(exit.code())
}
