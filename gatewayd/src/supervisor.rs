//! `gatewayd run`: one agent, in a fresh cgroup, under both layers.
//!
//! Order: open the audit log → create the cgroup → open the host's shared kernel program set
//! (loading and pinning it when the host has none) and add this session's entries to it
//! (refusing to start when the policy requires a piece this kernel lacks) → record the
//! session start and the tier reached → spawn the agent, which before exec moves into a PID
//! namespace of its own below a small init and into the cgroup, drops root's powers and takes
//! its seccomp filter ([`crate::agent_privileges`]); the init and everything in the namespace
//! die with gatewayd (`PR_SET_PDEATHSIG`) → forward SIGINT/SIGTERM/SIGHUP/
//! SIGQUIT; SIGUSR1 turns all of the agent's egress off for the rest of the session (the
//! kernel's lockdown switch, the same one the Rule of Two uses) → on exit: drain kernel
//! events, kill what is left in the cgroup, remove the session's entries (the programs stay,
//! pinned, for the next session), remove the cgroup, record the session end. The agent's
//! exit code passes through (128 + signal when it was killed by one).
//!
//! The agent also gets the daemon's protocol on a socket of its own, with its session open
//! ([`agent_gateway`]): a session that trips the Rule of Two locks the cgroup's egress, and
//! a kernel denial of a protected file counts toward its Rule of Two (`suspicion`).
//!
//! One audit log: kernel denials and the gateway's decisions go through one group-commit
//! writer thread ([`AuditWriter`]); the runtime that forwards signals never waits on a disk.
//!
//! Phases, one module each: `prepare` (privileges, the session's `/tmp`, the confinement:
//! `gatewayd_kernel::confinement`), `start` (the `session_start` record, the kernel task, the
//! agent's gateway; then the agent itself), `teardown`.
//!
//! Module map: [`agent_gateway`] (the agent's gateway, its socket, the lockdown hook),
//! `agent_process` (spawn, signals, SIGUSR1), `records` (run's own records, kernel records
//! to the writer), [`egress_hosts`] (the egress allowlist's host names, resolved into the
//! kernel and kept current with their TTL), `egress_proxy` (egress by name: the proxy and
//! resolver the kernel sends the agent's connections and DNS to), `landlock_records` (tier
//! 2's Landlock denials, read from the kernel's audit subsystem), `policy_reload` (the
//! policy file watched; the kernel's egress allowlist follows a reload).
use std::{path::PathBuf, sync::Arc};

use serde_json::json;

use gatewayd_core::{
    audit::{
        AuditLog, Decision, Entry,
        writer::{AuditWriter, WriteError},
    },
    clock::{Clock, SystemClock},
    policy::Policy,
};
use gatewayd_kernel::{
    agent_privileges::{PrivilegesError, private_tmp},
    kernel::{self, Tier},
};

pub mod agent_gateway;
mod agent_process;
pub(crate) mod canary;
pub(crate) mod egress_hosts;
pub(crate) mod egress_proxy;
mod landlock_records;
pub(crate) mod left_behind;
pub mod nested_sandbox;
mod policy_reload;
mod prepare;
mod records;
mod start;
mod teardown;

use records::append;

/// Why `gatewayd run` did not start the agent, or lost track of it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The audit log could not be opened or written.
    #[error("audit log: {0}")]
    Audit(#[from] gatewayd_core::audit::AuditError),
    /// The audit writer failed to make a record durable.
    #[error("audit log: {0}")]
    AuditWrite(#[from] WriteError),
    /// The audit writer thread could not be started.
    #[error("cannot start the audit writer thread: {0}")]
    AuditThread(std::io::Error),
    /// The agent's gateway (its socket and session) could not be set up.
    #[error("refusing to start the agent: {0}")]
    Gateway(#[from] agent_gateway::AgentGatewayError),
    /// The agent's cgroup could not be created.
    #[error("agent cgroup: {0}")]
    Cgroup(#[from] gatewayd_kernel::cgroup::CgroupError),
    /// A kernel program the policy requires did not load or attach.
    #[error("refusing to start the agent")]
    Kernel(#[from] kernel::KernelError),
    /// An `--export` sink could not be opened (a file) or its thread started.
    #[error("{0}")]
    Export(std::io::Error),
    /// The agent process could not be spawned.
    #[error("cannot start the agent `{agent}`: {error}")]
    Spawn {
        /// The program, as given.
        agent: String,
        /// The spawn error.
        error: std::io::Error,
    },
    /// Waiting for the agent to exit failed.
    #[error("waiting for the agent: {0}")]
    Wait(std::io::Error),
    /// The session's own `/tmp` could not be made (`sandbox.private_tmp`).
    #[error("refusing to start the agent: {0}")]
    PrivateTmp(#[from] private_tmp::PrivateTmpError),
    /// The agent command line is empty.
    #[error("no agent command given")]
    NoAgent,
    /// The tier-2 Landlock ruleset could not be built.
    #[error("refusing to start the agent: {0}")]
    Landlock(#[from] gatewayd_kernel::landlock::LandlockError),
    /// `sandbox.protected_names` cannot be enforced at tier 2 here and the policy says
    /// `kernel: "require"`.
    #[error("refusing to start the agent (the policy says kernel: require): {0}")]
    NamesNotEnforced(gatewayd_kernel::name_guard::NameGuardError),
    /// The session's egress proxy or resolver could not start (egress by name).
    #[error("refusing to start the agent: the session's egress proxy: {0}")]
    EgressProxy(String),
    /// The policy's canary credentials could not be placed.
    #[error("refusing to start the agent: {0}")]
    Canary(String),
    /// `--learn` at tier 2, but the agent's files cannot be watched here; nothing was started.
    #[error(
        "refusing to start the agent in learn mode: {0}. Next: run without --learn (the kernel then refuses what the policy does not allow, one refusal per run)"
    )]
    Learn(#[from] gatewayd_kernel::fs_learn::FsLearnError),
    /// A step found what another step should have made (a bug).
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// The agent's user or privileges could not be settled; nothing was started.
    #[error("refusing to start the agent: {0}")]
    Privileges(#[from] PrivilegesError),
    /// The policy's exec allowlist does not contain the agent's own program; nothing was started.
    #[error(
        "refusing to start the agent: `{agent}` ({resolved}) is not in the policy's exec allowlist (sandbox.exec), so the kernel would refuse to run it"
    )]
    AgentNotInExec {
        /// The program, as given.
        agent: String,
        /// Its canonical path (looked up in `PATH` for a bare name), or `not found`.
        resolved: String,
    },
}

/// What `gatewayd run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The policy, already loaded.
    pub policy: Policy,
    /// The policy file (protected from the agent).
    pub policy_path: PathBuf,
    /// The audit log file (protected from the agent).
    pub audit_path: PathBuf,
    /// The agent's command line: program and arguments.
    pub agent: Vec<String>,
    /// `--user`: whom the agent runs as (a name, a uid or `root`); `None`: the policy's
    /// `agent.user`, else the user who ran `sudo`.
    pub user: Option<String>,
    /// The user the agent's gateway session acts for when the agent's own user has no name
    /// (recorded; docs/PROTOCOL.md).
    pub session_user: String,
    /// The gateway session's scopes (docs/POLICY.md).
    pub scopes: Vec<String>,
    /// Where the session's socket directory is made
    /// ([`agent_gateway::default_runtime_dir`]).
    pub runtime_dir: PathBuf,
    /// `--preserve-fd`: descriptors above 2 passed to the agent; every other is closed at
    /// its exec.
    pub preserve_fds: Vec<i32>,
    /// Learn mode of the agent's gateway (the kernel layer enforces as usual).
    pub learn: gatewayd_core::engine::Learn,
    /// `--export`: where every record of the session's log and its heads go (docs/FLEET.md).
    pub export: Option<crate::daemon::ExportOptions>,
}

/// How the session went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// The agent's exit code (128 + signal number when a signal ended it).
    pub exit_code: i32,
    /// Enforcement tier reached.
    pub tier: Tier,
    /// Kernel denials recorded.
    pub kernel_denials: u64,
    /// The watched files the agent created, changed or removed (`left_behind`).
    pub left_behind: Vec<PathBuf>,
}

/// Runs the agent to completion: prepare → start → run the agent → tear down (each phase in
/// a module of its own). Must be called on a current-thread runtime from the main thread:
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the agent exits.
pub async fn run(opts: RunOptions) -> Result<RunOutcome, RunError> {
    let started = std::time::Instant::now();
    let program = opts.agent.first().ok_or(RunError::NoAgent)?.clone();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let writer = AuditWriter::start(AuditLog::open(&opts.audit_path, clock.clone())?)
        .map_err(RunError::AuditThread)?;
    // Before the first record of the session: the exporters see all of them.
    let export = opts
        .export
        .as_ref()
        .map(|e| {
            crate::daemon::export::Export::start(
                e,
                Some(opts.audit_path.clone()),
                Some(writer.handle()),
            )
        })
        .transpose()
        .map_err(RunError::Export)?;
    let ctx = prepare::Ctx {
        opts: &opts,
        session: format!("run-{}-{}", std::process::id(), clock.now_ms()),
        program,
        audit: writer.handle(),
        clock,
        export: export.as_ref(),
    };
    let prepared = prepare::prepare(&ctx).await?;
    let mut live = start::start(&ctx, prepared, started).await?;
    let status = live.run_agent(&ctx).await;
    let outcome = teardown::teardown(&ctx, live, status).await;
    if let Some(x) = &export {
        x.finish();
    }
    writer.close()?;
    outcome
}

/// The watched files the agent created, changed or removed (`left_behind`): a record and a
/// line on the terminal, for the user to review before their own tools run them.
async fn report_left_behind(
    audit: &gatewayd_core::audit::writer::WriterHandle,
    session: &str,
    snap: &left_behind::Snapshot,
) -> Result<Vec<PathBuf>, RunError> {
    let changed = snap.changed();
    if changed.is_empty() {
        return Ok(changed);
    }
    let shown: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "gatewayd: the agent created or changed files that your own tools run later; review them before running git or opening an editor here: {}",
        shown.join(", ")
    );
    let detail = json!({"paths": shown,
        "message": "the agent created, changed or removed files that git, direnv, editors or hook managers run or load later"});
    append(
        audit,
        Entry::gateway(session, Decision::Info, "left_behind", detail),
    )
    .await?;
    Ok(changed)
}
