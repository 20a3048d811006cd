//! `gatewayd approvals list|watch|approve ID|deny ID [--socket S]`: held calls, decided by a
//! person. The daemon refuses these to callers inside an agent's cgroup.
use std::{path::PathBuf, process::ExitCode, time::Duration};

use gatewayd::protocol::{ApprovalsApprove, ApprovalsDeny, ApprovalsList, Rpc, client::Client};
use gatewayd_core::engine::Legs;

mod notify;
mod terminal;
mod watch;

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
    /// A terminal prompt: each held call as it arrives (tool, arguments, reasons, the
    /// session's legs), decided with one key (a approve, d deny, n next, q quit).
    #[command(after_help = WATCH_EXAMPLES)]
    Watch {
        #[command(flatten)]
        conn: super::Conn,
        /// How often to ask the daemon for new held calls, in milliseconds.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(50..=60_000))]
        interval_ms: u64,
        /// No desktop notification (one is sent through `notify-send` for each call that
        /// arrives while watching, when `$DBUS_SESSION_BUS_ADDRESS` is set).
        #[arg(long)]
        no_notify: bool,
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

const WATCH_EXAMPLES: &str = "\
Examples:
  sudo gatewayd approvals watch                       # the daemon's held calls (/run/gatewayd/gatewayd.sock)
  sudo gatewayd approvals watch --socket /run/gatewayd/run-.../gatewayd.sock   # one `gatewayd run`'s

Keys: a approves the call shown, d denies it, n shows the next one, q (or ctrl-c) quits.
Keys that arrive together (a paste, an arrow key) are ignored. Stdin must be a terminal;
scripts use `approvals list --json` and `approvals approve|deny ID`.";

pub(super) fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::List { conn, json } => list(conn.socket(), json),
        Command::Watch {
            conn,
            interval_ms,
            no_notify,
        } => watch::run(&watch::Options {
            socket: conn.socket(),
            interval: Duration::from_millis(interval_ms),
            notify: !no_notify,
        }),
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
