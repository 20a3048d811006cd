//! `gatewayd run --policy P [--audit F] [--user NAME|UID] [--scope S]... [--runtime-dir D]
//! [--preserve-fd FD]... [--left-behind report|fail] [--export KIND:TARGET]... [--anchor-every-s N]
//! [--host-id ID] -- AGENT...`
use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use gatewayd::supervisor;
use gatewayd_core::{engine::Learn, policy::Policy};

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
    /// A scope of the agent's gateway session (docs/POLICY.md). Repeatable.
    #[arg(long = "scope")]
    scopes: Vec<String>,
    /// Where the session's socket directory is made. Default: `$GATEWAYD_RUNTIME_DIR`, else
    /// `/run/gatewayd` for root, else `$XDG_RUNTIME_DIR/gatewayd`.
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Pass this open descriptor (above 2) to the agent. Repeatable. Every other descriptor
    /// above 2 that gatewayd's caller left open is closed at the agent's exec.
    #[arg(long = "preserve-fd", value_name = "FD")]
    preserve_fds: Vec<i32>,
    /// What to do when the agent created, changed or removed files the user's own tools
    /// run later (git hooks and config, .envrc, editor tasks...): `report` them (a
    /// `left_behind` record and a line here), or also `fail`: end with exit code 125
    /// instead of the agent's, so a script or CI job stops before running git there.
    #[arg(long, value_enum, default_value_t = LeftBehind::Report)]
    left_behind: LeftBehind,
    #[command(flatten)]
    learn: LearnArgs,
    /// `--export` as for `serve`: every record of the session's log, its heads at the
    /// interval and at the end.
    #[command(flatten)]
    export: super::serve::ExportArgs,
    /// The agent command line.
    #[arg(last = true, required = true)]
    agent: Vec<String>,
}

/// `--learn` and `--learn-unsafe` (docs/POLICY.md, "Learn mode").
#[derive(Debug, Clone, Copy, clap::Args)]
pub(super) struct LearnArgs {
    /// Learn mode: the gateway allows the tool calls the policy would refuse or hold and
    /// records them `would_deny`, for `gatewayd policy suggest`. Protected paths and names,
    /// secret egress, rug pulls and the Rule of Two stay enforced. Under `gatewayd run` at
    /// tier 2 the kernel layer learns too (files outside the roots, programs outside
    /// sandbox.exec, destinations by address); elsewhere its refusals stay refusals.
    #[arg(long)]
    learn: bool,
    /// With --learn: let protected paths and names, secret egress, rug pulls and the Rule of
    /// Two through too (recorded `would_deny`). Only with throwaway secrets and data.
    #[arg(long, requires = "learn")]
    learn_unsafe: bool,
}

impl LearnArgs {
    /// The engine's learn mode; `--learn-unsafe` is announced loudly on the terminal.
    pub(super) fn mode(self) -> Learn {
        match (self.learn, self.learn_unsafe) {
            (false, _) => Learn::Off,
            (true, false) => {
                errln!(
                    "gatewayd: learn mode: the gateway (and under `gatewayd run` at tier 2 the kernel) allows and records (`would_deny`) what the policy would refuse; protected paths and names, secret egress, rug pulls and the Rule of Two stay enforced"
                );
                Learn::On
            }
            (true, true) => {
                errln!(
                    "gatewayd: WARNING: --learn-unsafe: protected paths and names, secrets on their way out, changed (rug-pulled) tools and the Rule of Two's lockdown are NOT enforced by the gateway in this session; they are only recorded (`would_deny`). The kernel layer still refuses protected paths and names. Use it only with throwaway secrets and data."
                );
                Learn::Unsafe
            }
        }
    }
}

/// `--left-behind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LeftBehind {
    /// Report them.
    Report,
    /// Report them and end with exit code 125.
    Fail,
}

/// The exit code of `--left-behind fail` when the agent left files behind.
const LEFT_BEHIND_EXIT: u8 = 125;

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        nix::unistd::geteuid().is_root(),
        "gatewayd run needs root: it makes the agent's cgroup, loads the kernel programs and sets up the agent's mount namespace. Run it with sudo: the agent runs as the user who called sudo (or --user NAME), without root's capabilities"
    );
    let policy = Policy::load(&args.policy)?;
    for w in super::policy::sandbox_warnings(&policy) {
        errln!("gatewayd: warning: {w}");
    }
    // Before the agent starts, and again after it ends: a full-screen agent clears the first.
    let advice = supervisor::nested_sandbox::advice(&args.agent);
    if let Some(a) = advice {
        errln!("gatewayd: note: {a}");
    }
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
        session_user: session_user(),
        scopes: args.scopes,
        runtime_dir: args
            .runtime_dir
            .unwrap_or_else(supervisor::agent_gateway::default_runtime_dir),
        preserve_fds: args.preserve_fds,
        learn: args.learn.mode(),
        export: args.export.options(),
    }))?;
    errln!(
        "gatewayd: agent exited with {}; tier {}; {} kernel denial(s) recorded in {}",
        outcome.exit_code,
        outcome.tier.as_str(),
        outcome.kernel_denials,
        args.audit.display()
    );
    if let Some(a) = advice {
        errln!("gatewayd: note: {a}");
    }
    if args.left_behind == LeftBehind::Fail && !outcome.left_behind.is_empty() {
        errln!(
            "gatewayd: --left-behind fail: the agent left files your own tools run later (above); exiting with {LEFT_BEHIND_EXIT} instead of the agent's {}",
            outcome.exit_code
        );
        return Ok(ExitCode::from(LEFT_BEHIND_EXIT));
    }
    Ok(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8))
}

/// The user the agent's gateway session acts for: the one who asked for the run (`SUDO_USER`
/// under sudo), else the name of the user running gatewayd (its uid when it has none).
fn session_user() -> String {
    if let Some(u) = std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    let uid = nix::unistd::getuid();
    super::uid_name(uid).unwrap_or_else(|| uid.to_string())
}
