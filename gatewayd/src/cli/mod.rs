//! Command line: one module per subcommand, each with its `Args` and an `exec` function
//! returning the process exit code.
use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

mod approvals;
mod audit;
mod check;
mod doctor;
mod explain;
mod hook;
mod hook_install;
mod man;
mod mcp;
mod out;
mod policy;
mod policy_diff;
mod policy_mcp;
mod policy_suggest;
mod run;
mod serve;
mod sessions;
mod test;

/// gatewayd: an AI agent behind two doors — a tool-call gateway and kernel enforcement.
#[derive(Debug, Parser)]
#[command(
    name = "gatewayd",
    version,
    about = "An AI agent behind two doors: a tool-call gateway and kernel enforcement",
    after_help = EXAMPLES
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start an agent in a fresh cgroup under both layers; its exit code passes through.
    Run(run::Args),
    /// Print which enforcement pieces work on this kernel (found by loading probe programs).
    Doctor(doctor::Args),
    /// Audit log tools.
    #[command(subcommand)]
    Audit(audit::Command),
    /// Every refusal of an audit log in plain words: the policy line that decided it and
    /// the smallest change that would allow it.
    Explain(explain::Args),
    /// One decision, dry run, explained.
    Check(check::Args),
    /// Policy tools.
    #[command(subcommand)]
    Policy(policy::Command),
    /// The daemon for a host: many agents' sessions over a Unix socket.
    Serve(serve::Args),
    /// A stdio MCP proxy: a client on stdin/stdout, the tool server under its own profile.
    Mcp(mcp::Args),
    /// One agent-host hook event (Claude Code, Codex, Gemini CLI), answered in its format.
    Hook(hook::Args),
    /// Held calls waiting for a person (talks to the daemon).
    #[command(subcommand)]
    Approvals(approvals::Command),
    /// The daemon's open sessions.
    #[command(subcommand)]
    Sessions(sessions::Command),
    /// Run policy scenarios (tests as data) on the real engine.
    Test(test::Args),
    /// Write the man pages (made from this command line) into a directory.
    #[command(hide = true)]
    Man(man::Args),
}

/// The end of `gatewayd --help`: what a first hour needs.
const EXAMPLES: &str = "\
Examples:
  gatewayd policy init --host claude --out policy.json   # a starter policy for Claude Code's workspace
  gatewayd policy validate policy.json
  sudo gatewayd run --policy policy.json -- claude        # the agent under both layers
  gatewayd hook install --host claude --policy policy.json
  gatewayd check --policy policy.json --call '{\"tool\": \"read_file\", \"arguments\": {\"path\": \".env\"}}'
  sudo gatewayd doctor                                    # what this kernel enforces
  gatewayd explain gatewayd-audit.jsonl --policy policy.json   # every refusal, and what would allow it
  gatewayd policy suggest gatewayd-audit.jsonl --policy policy.json --out next.json   # refusals as a reviewed policy diff
  sudo gatewayd approvals watch                           # decide held calls as they arrive, one key each

`run` needs root (the agent's cgroup, kernel programs and mount namespace; the agent itself
runs as the user who called sudo); `doctor` needs it to probe; `check`, `test`, `policy`, `explain`,
`audit` and `hook` do not.
Docs: /usr/share/doc/gatewayd/ (the package; INDEX.md lists them), docs/ in the source
(README.md lists them): CONCEPTS.md, POLICY.md, KERNEL.md, HOOKS.md, MCP.md, PROTOCOL.md,
OPERATIONS.md (systemd, logs, troubleshooting), LIMITS.md (every known limit, per tier).";

/// Where `gatewayd serve` listens unless told otherwise (packaging/gatewayd.socket too).
pub(crate) const DEFAULT_SOCKET: &str = "/run/gatewayd/gatewayd.sock";

/// Where the operator commands find the daemon.
#[derive(Debug, clap::Args)]
pub(crate) struct Conn {
    #[arg(
        long,
        help = "The daemon's socket [default: $GATEWAYD_SOCKET, else /run/gatewayd/gatewayd.sock]"
    )]
    socket: Option<PathBuf>,
}

impl Conn {
    fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .or_else(|| std::env::var_os("GATEWAYD_SOCKET").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
    }
}

/// The name of the user running gatewayd: `$USER`, else the name of its uid (a hook run
/// from a host started without `USER`, as in a container, still knows whose `~` it is).
pub(crate) fn user_name() -> Option<String> {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| uid_name(nix::unistd::getuid()))
}

/// The name the user database gives `uid`.
pub(crate) fn uid_name(uid: nix::unistd::Uid) -> Option<String> {
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
}

/// Prints a command-line error as clap does (help and version too, with exit 0), and for
/// `run` with an argument it does not know, where the agent's command line goes.
pub(crate) fn parse_error(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    let run = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .as_deref()
        == Some("run");
    if run && e.kind() == clap::error::ErrorKind::UnknownArgument {
        out::errln!(
            "tip: the agent's command line goes after `--`: gatewayd run --policy POLICY -- PROGRAM [ARGS...]"
        );
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Runs the chosen subcommand. Errors are printed as one chain of causes; exit code 2
/// means gatewayd itself failed (bad input, refused start), distinct from an agent's code.
/// Output never panics: a reader that goes away early ends the output quietly ([`out`]).
pub(crate) fn dispatch(cli: Cli) -> ExitCode {
    let res = match cli.command {
        Command::Run(a) => run::exec(a),
        Command::Doctor(a) => doctor::exec(a),
        Command::Audit(c) => audit::exec(c),
        Command::Explain(a) => explain::exec(a),
        Command::Check(a) => check::exec(a),
        Command::Policy(c) => policy::exec(c),
        Command::Serve(a) => serve::exec(a),
        Command::Mcp(a) => mcp::exec(a),
        Command::Hook(a) => hook::exec(a),
        Command::Approvals(c) => approvals::exec(c),
        Command::Sessions(c) => sessions::exec(c),
        Command::Test(a) => test::exec(a),
        Command::Man(a) => man::exec(a),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            out::errln!("gatewayd: error: {}", out::chain(&e));
            ExitCode::from(2)
        }
    }
}
