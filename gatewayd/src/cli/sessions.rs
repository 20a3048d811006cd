//! `gatewayd sessions list [--socket S]`: the daemon's open sessions (operators only).
use std::process::ExitCode;

use gatewayd::daemon::client::Client;
use serde_json::json;

#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    /// Open sessions, oldest first: owner cgroup, user, Rule-of-Two legs, budget spent.
    List {
        #[command(flatten)]
        conn: super::Conn,
        /// Print the daemon's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    let Command::List { conn, json } = cmd;
    let r = Client::connect(&conn.socket())?.call("session/list", json!({}))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let list = r["sessions"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("no open sessions");
    }
    for s in list {
        let leg = |k: &'static str| if s["legs"][k] == true { k } else { "-" };
        println!(
            "{}  user {}  cgroup {}  pid {}  legs {}/{}/{}{}  spent {}",
            s["session"].as_str().unwrap_or("?"),
            s["user"].as_str().unwrap_or("?"),
            s["cgroup"].as_str().unwrap_or("?"),
            s["pid"],
            leg("untrusted"),
            leg("private"),
            leg("egress"),
            if s["tripped"] == true {
                "  TRIPPED"
            } else {
                ""
            },
            s["spent"],
        );
    }
    Ok(ExitCode::SUCCESS)
}
