//! `gatewayd doctor`
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn exec(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("doctor: not implemented yet")
}
