//! `gatewayd audit verify F [--anchor H]`
use std::{path::PathBuf, process::ExitCode};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check the hash chain; names the first broken record.
    Verify {
        file: PathBuf,
        /// Head hash kept elsewhere: catches truncation and a full rewrite.
        #[arg(long)]
        anchor: Option<String>,
    },
}

pub fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Verify { .. } => anyhow::bail!("audit verify: not implemented yet"),
    }
}
