//! `gatewayd hook --host claude|codex|gemini [--policy P | --socket S]`: one agent-host
//! event on stdin, answered in the host's format (docs/HOOKS.md).
//!
//! Fail closed against the hosts' own fail-open (a hook that crashes or times out lets the
//! tool run there): a panic and a decision that does not come within `--deadline-ms` both
//! answer with exit 2 and a reason on stderr, which every host reads as a deny.
use std::{
    io::{Read as _, Write as _},
    os::unix::fs::DirBuilderExt as _,
    path::PathBuf,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use gatewayd::{
    backend::Backend,
    hook::{self, Answer, Gate, Host, Identity},
    protocol::client::Client,
};
use gatewayd_core::{clock::SystemClock, policy::Policy};

/// Largest event read from stdin.
const MAX_EVENT: u64 = 16 << 20;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    event: EventArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Merge gatewayd's hook into an agent host's settings (for Codex, trusted too); with
    /// --check, report whether it is there, enabled, trusted and given time.
    Install(super::hook_install::InstallArgs),
}

/// One hook event on stdin.
#[derive(Debug, clap::Args)]
struct EventArgs {
    /// The agent host: claude, codex or gemini.
    #[arg(long, required = true)]
    host: Option<Host>,
    /// Policy file; needed without a daemon (each event then has a session of its own).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The daemon's socket. Under `gatewayd run`, `$GATEWAYD_SOCKET` (the session's own
    /// gateway) is asked first, before this and before --policy.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Audit log, without a daemon [default: $XDG_STATE_HOME/gatewayd/hook-audit.jsonl, else
    /// ~/.local/state/gatewayd/hook-audit.jsonl: outside the agent's workspace].
    #[arg(long)]
    audit: Option<PathBuf>,
    /// Answer a gateway allow with an explicit allow, which skips the host's own permission
    /// step. By default an allow says nothing and the host asks as it would without gatewayd.
    #[arg(long)]
    authoritative: bool,
    /// The session's user [default: $USER, else the name of this process's uid].
    #[arg(long)]
    user: Option<String>,
    /// A scope the session holds (repeatable).
    #[arg(long = "scope")]
    scopes: Vec<String>,
    /// Answer (a deny) within this many milliseconds whatever happens; keep it below the
    /// host's hook timeout.
    #[arg(long, default_value_t = 4000)]
    deadline_ms: u64,
}

/// Writes the answer once: the deadline and the decision race for it.
fn emit(done: &AtomicBool, a: &Answer) -> bool {
    if done.swap(true, Ordering::SeqCst) {
        return false;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(a.stdout.as_bytes());
    let _ = out.flush();
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(a.stderr.as_bytes());
    let _ = err.flush();
    true
}

fn gate(args: &EventArgs) -> Result<Gate, String> {
    // The session's gateway first: under `gatewayd run` it holds the session's taint and
    // counters, and the host sockets are out of the agent's reach.
    let socket = std::env::var_os("GATEWAYD_SOCKET")
        .map(PathBuf::from)
        .or_else(|| args.socket.clone())
        .filter(|p| !p.as_os_str().is_empty());
    if let Some(s) = socket {
        return Client::connect(&s)
            .map(Gate::Daemon)
            .map_err(|e| e.to_string());
    }
    let path = args
        .policy
        .as_ref()
        .ok_or("no daemon ($GATEWAYD_SOCKET) and no --policy")?;
    let policy = Policy::load(path).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let audit = match &args.audit {
        Some(a) => a.clone(),
        None => default_audit()?,
    };
    let backend = Backend::local(
        policy,
        vec![path.clone(), audit.clone()],
        Some(&audit),
        Arc::new(SystemClock),
        gatewayd_core::engine::Learn::Off,
    )
    .map_err(|e| e.to_string())?;
    Ok(Gate::Local { rt, backend })
}

/// The hook's audit log without `--audit`: in the user's state directory, never relative
/// (a relative file would land in the agent's workspace, where the agent can rewrite it).
/// The directory is made (mode 0700) when missing.
pub(super) fn default_audit() -> Result<PathBuf, String> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/state"))
        })
        .ok_or("no --audit, and neither $XDG_STATE_HOME nor $HOME is an absolute path")?;
    let dir = state.join("gatewayd");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    Ok(dir.join("hook-audit.jsonl"))
}

#[allow(clippy::unnecessary_wraps)] // every subcommand's `exec` has this signature (cli/mod.rs)
pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Some(Action::Install(a)) => super::hook_install::exec(a),
        None => event(args.event),
    }
}

fn event(args: EventArgs) -> anyhow::Result<ExitCode> {
    let Some(host) = args.host else {
        anyhow::bail!("--host is required");
    };
    let done = Arc::new(AtomicBool::new(false));
    {
        let done = done.clone();
        std::panic::set_hook(Box::new(move |_| {
            emit(&done, &Answer::fail("internal error in the hook; refused"));
            std::process::exit(2);
        }));
    }
    {
        let done = done.clone();
        let ms = args.deadline_ms;
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            if emit(
                &done,
                &Answer::fail(&format!("no decision within {ms} ms; refused")),
            ) {
                std::process::exit(2);
            }
        });
    }
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_EVENT).read_to_end(&mut input) {
        emit(&done, &Answer::fail(&format!("cannot read the event: {e}")));
        return Ok(ExitCode::from(2));
    }
    let who = Identity {
        user: args
            .user
            .clone()
            .or_else(super::user_name)
            .unwrap_or_else(|| "agent".into()),
        scopes: args.scopes.clone(),
        authoritative: args.authoritative,
    };
    let answer = match gate(&args) {
        Ok(mut g) => {
            let a = hook::handle(host, &input, &mut g, &who);
            g.close();
            a
        }
        Err(e) => Answer::fail(&format!("the gateway is unavailable ({e}); refused")),
    };
    if !emit(&done, &answer) {
        // The deadline answered first (and is exiting the process).
        std::thread::sleep(Duration::from_secs(1));
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::from(answer.code))
}
