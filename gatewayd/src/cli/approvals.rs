//! `gatewayd approvals list|approve ID|deny ID [--socket S]`: held calls, decided by a
//! person. The daemon refuses these to callers inside an agent's cgroup.
use std::{path::PathBuf, process::ExitCode};

use gatewayd::protocol::{ApprovalsApprove, ApprovalsDeny, ApprovalsList, Rpc, client::Client};
use gatewayd_core::engine::Legs;

#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    /// Pending approvals, oldest first.
    List {
        #[command(flatten)]
        conn: super::Conn,
        /// Print the daemon's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a held call: the agent may then repeat exactly that call, once.
    Approve {
        /// The held call's id (`gatewayd approvals list`).
        id: String,
        #[command(flatten)]
        conn: super::Conn,
    },
    /// Reject a held call: repeating it with this id is denied.
    Deny {
        /// The held call's id (`gatewayd approvals list`).
        id: String,
        #[command(flatten)]
        conn: super::Conn,
    },
}

pub(super) fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::List { conn, json } => list(conn.socket(), json),
        Command::Approve { id, conn } => settle(conn.socket(), ApprovalsApprove { id }),
        Command::Deny { id, conn } => settle(conn.socket(), ApprovalsDeny { id }),
    }
}

fn list(socket: PathBuf, as_json: bool) -> anyhow::Result<ExitCode> {
    let r = Client::connect(&socket)?.request(&ApprovalsList {})?;
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&r)?)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if r.approvals.is_empty() {
        println!("no pending approvals");
    }
    for p in r.approvals {
        let a = p.approval;
        println!(
            "{}  session {}  tool {}  reasons {}  legs {}  args sha256 {}  expires in {} s",
            a.id,
            a.session,
            a.tool,
            a.reasons.join(","),
            p.legs.map_or_else(|| "(session closed)".into(), legs_short),
            a.args_sha256,
            a.expires_ms.saturating_sub(now_ms()) / 1000,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The legs held, e.g. `untrusted+private`, or `none`.
fn legs_short(l: Legs) -> String {
    let held: Vec<&str> = [
        (l.untrusted, "untrusted"),
        (l.private, "private"),
        (l.egress, "egress"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if held.is_empty() {
        "none".into()
    } else {
        held.join("+")
    }
}

fn settle<R>(socket: PathBuf, request: R) -> anyhow::Result<ExitCode>
where
    R: Rpc<Reply = gatewayd::protocol::Settled>,
{
    let r = Client::connect(&socket)?.request(&request)?;
    let state = serde_json::to_value(r.state)?;
    println!("{} {}", r.id, state.as_str().unwrap_or("?"));
    Ok(ExitCode::SUCCESS)
}

fn now_ms() -> u64 {
    use gatewayd_core::clock::Clock as _;
    gatewayd_core::clock::SystemClock.now_ms()
}
