//! Command line: one module per subcommand, each with its `Args` and an `exec` function
//! returning the process exit code.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit;
mod check;
mod doctor;
mod out;
mod policy;
mod run;

/// gatewayd: an AI agent behind two doors — a tool-call gateway and kernel enforcement.
#[derive(Debug, Parser)]
#[command(name = "gatewayd", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start an agent in a fresh cgroup under both layers; its exit code passes through.
    Run(run::Args),
    /// Print which enforcement pieces work on this kernel (found by loading probe programs).
    Doctor(doctor::Args),
    /// Audit log tools.
    #[command(subcommand)]
    Audit(audit::Command),
    /// One decision, dry run, explained.
    Check(check::Args),
    /// Policy tools.
    #[command(subcommand)]
    Policy(policy::Command),
}

/// Runs the chosen subcommand. Errors are printed as one chain of causes; exit code 2
/// means gatewayd itself failed (bad input, refused start), distinct from an agent's code.
/// Output never panics: a reader that goes away early ends the output quietly ([`out`]).
pub(crate) fn dispatch(cli: Cli) -> ExitCode {
    let res = match cli.command {
        Command::Run(a) => run::exec(a),
        Command::Doctor(a) => doctor::exec(a),
        Command::Audit(c) => audit::exec(c),
        Command::Check(a) => check::exec(a),
        Command::Policy(c) => policy::exec(c),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            out::errln!("gatewayd: error: {}", out::chain(&e));
            ExitCode::from(2)
        }
    }
}
