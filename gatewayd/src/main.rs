//! The `gatewayd` binary: parse the command line and dispatch to one file per subcommand.
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
#![warn(unreachable_pub)]
mod cli;

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    match cli::Cli::try_parse() {
        Ok(c) => cli::dispatch(c),
        Err(e) => cli::parse_error(&e),
    }
}
