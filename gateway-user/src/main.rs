//! The `gatewayd` binary: parse the command line and dispatch to one file per subcommand.
mod cli;

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    cli::dispatch(cli::Cli::parse())
}
