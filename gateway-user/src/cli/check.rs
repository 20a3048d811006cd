//! `gatewayd check --policy P --call JSON`
use std::{path::PathBuf, process::ExitCode};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long)]
    policy: PathBuf,
    /// The tool call as JSON: {"tool": "...", "arguments": {...}}
    #[arg(long)]
    call: String,
}

pub fn exec(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("check: not implemented yet")
}
