//! `gatewayd approvals list|approve ID|deny ID [--socket S]`: held calls, decided by a
//! person. The daemon refuses these to callers inside an agent's cgroup.
use std::{path::PathBuf, process::ExitCode};

use gatewayd::daemon::client::Client;
use serde_json::json;

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
        id: String,
        #[command(flatten)]
        conn: super::Conn,
    },
    /// Reject a held call: repeating it with this id is denied.
    Deny {
        id: String,
        #[command(flatten)]
        conn: super::Conn,
    },
}

pub(super) fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::List { conn, json } => list(conn.socket(), json),
        Command::Approve { id, conn } => settle(conn.socket(), "approvals/approve", &id),
        Command::Deny { id, conn } => settle(conn.socket(), "approvals/deny", &id),
    }
}

fn list(socket: PathBuf, as_json: bool) -> anyhow::Result<ExitCode> {
    let r = Client::connect(&socket)?.call("approvals/list", json!({}))?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let list = r["approvals"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("no pending approvals");
    }
    for a in list {
        println!(
            "{}  session {}  tool {}  reasons {}  args sha256 {}  expires in {} s",
            a["id"].as_str().unwrap_or("?"),
            a["session"].as_str().unwrap_or("?"),
            a["tool"].as_str().unwrap_or("?"),
            a["reasons"]
                .as_array()
                .map(|v| v
                    .iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(","))
                .unwrap_or_default(),
            a["args_sha256"].as_str().unwrap_or("?"),
            a["expires_ms"]
                .as_u64()
                .map_or(0, |e| e.saturating_sub(now_ms()) / 1000),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn settle(socket: PathBuf, method: &str, id: &str) -> anyhow::Result<ExitCode> {
    let r = Client::connect(&socket)?.call(method, json!({"id": id}))?;
    println!(
        "{} {}",
        r["id"].as_str().unwrap_or(id),
        r["state"].as_str().unwrap_or("?")
    );
    Ok(ExitCode::SUCCESS)
}

fn now_ms() -> u64 {
    use gatewayd_core::clock::Clock as _;
    gatewayd_core::clock::SystemClock.now_ms()
}
