//! Entry point of `svc-controller`; everything lives in the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    svc_controller::daemon::main_with_args(svc_controller::daemon::Cli::parse())
}
