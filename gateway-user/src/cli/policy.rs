//! `gatewayd policy validate P`, `gatewayd policy pin P`
use std::{path::PathBuf, process::ExitCode};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Parse and check a policy file; errors carry line and column.
    Validate { policy: PathBuf },
}

pub fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Validate { policy } => {
            gatewayd::policy::Policy::load(&policy)?;
            println!("{}: valid", policy.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
