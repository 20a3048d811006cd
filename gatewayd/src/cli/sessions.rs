//! `gatewayd sessions list [--socket S]`: the daemon's open sessions (operators only).
use std::process::ExitCode;

use gatewayd::protocol::{SessionList, client::Client};

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
    let r = Client::connect(&conn.socket())?.request(&SessionList {})?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&r)?)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if r.sessions.is_empty() {
        println!("no open sessions");
    }
    for s in r.sessions {
        let leg = |held: bool, name: &'static str| if held { name } else { "-" };
        println!(
            "{}  user {}  cgroup {}  pid {}  legs {}/{}/{}{}  spent {}",
            s.session,
            s.user,
            s.cgroup,
            s.pid,
            leg(s.legs.untrusted, "untrusted"),
            leg(s.legs.private, "private"),
            leg(s.legs.egress, "egress"),
            if s.tripped { "  TRIPPED" } else { "" },
            s.spent,
        );
    }
    Ok(ExitCode::SUCCESS)
}
