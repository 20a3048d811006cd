//! `gatewayd run --policy P [--audit F] [--user NAME|UID] -- AGENT...`
use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use gatewayd::{policy::Policy, supervisor};

use super::out::errln;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Policy file (JSON).
    #[arg(long)]
    policy: PathBuf,
    /// Audit log (JSON Lines, hash-chained); appended to if it exists.
    #[arg(long, default_value = "gatewayd-audit.jsonl")]
    audit: PathBuf,
    /// Run the agent as this user (name or uid). Default: the policy's `agent.user`, else
    /// the user who ran sudo. `root` keeps uid 0 but no capability
    /// (unless the policy's `agent.capabilities` lists some).
    #[arg(long)]
    user: Option<String>,
    /// The agent command line.
    #[arg(last = true, required = true)]
    agent: Vec<String>,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let policy = Policy::load(&args.policy)?;
    // Current-thread runtime on the main thread: the agent's PR_SET_PDEATHSIG is tied to the
    // thread that forked it, which must live as long as gatewayd does.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let outcome = rt.block_on(supervisor::run(supervisor::RunOptions {
        policy,
        policy_path: args.policy,
        audit_path: args.audit.clone(),
        agent: args.agent,
        user: args.user,
    }))?;
    errln!(
        "gatewayd: agent exited with {}; tier {}; {} kernel denial(s) recorded in {}",
        outcome.exit_code,
        outcome.tier.as_str(),
        outcome.kernel_denials,
        args.audit.display()
    );
    Ok(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8))
}
