//! `gatewayd run --policy P [--audit F] -- AGENT...`
use std::{path::PathBuf, process::ExitCode};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long)]
    policy: PathBuf,
    #[arg(long)]
    audit: Option<PathBuf>,
    #[arg(last = true, required = true)]
    agent: Vec<String>,
}

pub fn exec(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("run: not implemented yet")
}
