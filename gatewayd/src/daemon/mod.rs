//! `gatewayd serve`: the daemon that holds the sessions of many agents and decides their
//! tool calls over a Unix socket (protocol: docs/PROTOCOL.md).
//!
//! Module map:
//! - [`peer`]     — who is calling: `SO_PEERCRED`, groups, the cgroup v2 path
//! - [`sessions`] — open sessions (one async mutex each) and the agent-cgroup registry
//! - [`gateway`]  — [`Gateway`]: every method as an async function of (caller, params);
//!   the Rule-of-Two hook ([`TripHook`])
//! - [`canary`]   — a supervisor's decoy credentials looked for in every call ([`CanaryCheck`])
//! - [`operator`] — the operator's methods: approvals, the session list
//! - [`suspicion`] — kernel denials of protected files feed the sessions' Rule of Two
//! - [`kernel_lock`] — the trip hook: lockdown of the kernel session a tripped session runs in
//!   (one hook; what it locks differs for `serve` and `run`)
//! - [`dispatch`] — one request line to one response line; [`dispatch::Serve`], each
//!   method run against the gateway (the protocol's types: [`crate::protocol`])
//! - [`server`]   — accept loop, connections, graceful shutdown
//! - [`poll`]     — bounded, adaptive polling for the next message (server and client)
//! - [`socket`]   — the socket file: stale ones replaced, live ones refused, 0660 + group
//! - [`systemd`]  — socket activation, readiness and watchdog notifications
//! - [`reload`]   — a new policy validated whole, then swapped in; a bad one refused
//! - [`policy_watch`] — what starts a reload: SIGHUP, inotify on the policy's directory
//! - [`export`]   — every record and the chain's heads exported to JSON lines, syslog, the
//!   journal or OTLP, each sink behind a bounded queue that never blocks a decision
//!
//! [`serve`] puts them together with the audit writer ([`gatewayd_core::audit::writer`]).
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::json;

pub mod canary;
pub(crate) mod dispatch;
pub mod export;
pub(crate) mod gateway;
pub(crate) mod kernel_lock;
pub mod line_budget;
pub(crate) mod operator;
pub mod peer;
pub mod policy_watch;
pub mod poll;
pub mod reload;
pub(crate) mod server;
pub(crate) mod sessions;
pub mod socket;
pub(crate) mod suspicion;
pub mod systemd;

pub use canary::{CanaryCheck, CanaryFuture};
pub use export::{ExportOptions, ExportSpec, ExporterStats};
pub use gateway::{Gateway, GatewayConfig, HookFuture, TripHook, TrippedSession};
pub use policy_watch::ReloadOptions;
pub use reload::{Reload, ReloadFuture, ReloadHook, policy_digest};
pub use server::ServerOptions;

use crate::shutdown::Shutdown;
use gatewayd_core::{
    audit::{
        AuditError, AuditLog, Decision, Entry,
        writer::{AuditWriter, Head},
    },
    clock::Clock,
    engine::EngineError,
    policy::{Policy, PolicyError},
};

/// Why the daemon could not start (or stop cleanly).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The policy could not be loaded.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The engine could not be built from the policy.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The socket could not be bound.
    #[error(transparent)]
    Socket(#[from] socket::SocketError),
    /// The audit writer thread could not be spawned.
    #[error("cannot start the audit writer thread: {0}")]
    Thread(std::io::Error),
    /// The audit writer failed while serving; carries its error.
    #[error("the audit log failed while the daemon ran: {0}")]
    AuditFailed(String),
    /// The socket systemd passed could not be served.
    #[error("the inherited socket: {0}")]
    Inherited(std::io::Error),
    /// The export sink could not be opened, or its thread started.
    #[error("the export sink: {0}")]
    Export(std::io::Error),
}

/// What `gatewayd serve` runs with.
pub struct ServeOptions {
    /// The policy file.
    pub policy: PathBuf,
    /// The socket's path: bound by the daemon, or only named when `listener` is given.
    pub socket: PathBuf,
    /// A socket already listening (systemd socket activation:
    /// [`systemd::inherited_listener`]). The daemon then neither binds, changes nor removes
    /// the socket file.
    pub listener: Option<std::os::unix::net::UnixListener>,
    /// The audit log; None only for benchmarks and tests (decisions are then not recorded).
    pub audit: Option<PathBuf>,
    /// The socket's group (operators).
    pub gid: u32,
    /// Extra agent cgroup subtrees (besides `/gatewayd`).
    pub agent_cgroups: Vec<String>,
    /// The clock every decision and record reads.
    pub clock: Arc<dyn Clock>,
    /// Connection limits and timeouts of the socket server.
    pub server: ServerOptions,
    /// What reloads the policy while the daemon runs.
    pub reload: ReloadOptions,
    /// Where the records and the chain's heads are exported (None: nowhere).
    pub export: Option<ExportOptions>,
}

/// Runs the daemon until `shutdown` fires: loads the policy, opens the audit log (its chain
/// continues), binds the socket (or takes the one systemd passed), serves, then drains connections, writes every queued
/// record, and removes the socket. `ready` is called with the gateway once the socket
/// accepts connections. Returns the audit head at exit.
pub async fn serve(
    opts: ServeOptions,
    shutdown: Shutdown,
    ready: impl FnOnce(&Arc<Gateway>),
) -> Result<Head, DaemonError> {
    let (policy, digest) = load_policy(&opts.policy)?;
    let writer = match &opts.audit {
        Some(p) => Some(
            AuditWriter::start(AuditLog::open(p, opts.clock.clone())?)
                .map_err(DaemonError::Thread)?,
        ),
        None => None,
    };
    let gw = gateway(&opts, policy, &digest, writer.as_ref())?;
    let activated = opts.listener.is_some();
    let listener = match opts.listener {
        Some(l) => {
            l.set_nonblocking(true).map_err(DaemonError::Inherited)?;
            tokio::net::UnixListener::from_std(l).map_err(DaemonError::Inherited)?
        }
        None => socket::bind(&opts.socket, opts.gid)?,
    };
    let exporter = match &opts.export {
        Some(e) => {
            let x = export::Export::start(
                e,
                opts.audit.clone(),
                writer.as_ref().map(AuditWriter::handle),
            )
            .map_err(DaemonError::Export)?;
            x.attach(&gw, shutdown.clone());
            Some(x)
        }
        None => None,
    };
    note(
        writer.as_ref(),
        "daemon_start",
        json!({"pid": std::process::id(),
        "policy": opts.policy, "policy_digest": digest, "socket": opts.socket, "socket_activated": activated,
        "agent_cgroups": gw.agent_cgroups().list()}),
    );
    // The watch first: a change made once the daemon says it is ready is seen.
    let reloads = policy_watch::spawn(
        gw.clone(),
        opts.policy.clone(),
        opts.reload,
        shutdown.clone(),
    );
    ready(&gw);
    server::run(listener, gw.clone(), shutdown, opts.server).await;
    let _ = reloads.await;
    if !activated {
        remove_socket(&opts.socket);
    }
    note(
        writer.as_ref(),
        "daemon_stop",
        json!({"pid": std::process::id()}),
    );
    if let Some(x) = exporter {
        x.finish();
    }
    close_audit(writer)
}

/// Writes every queued record and closes the log; the head at exit.
fn close_audit(writer: Option<AuditWriter>) -> Result<Head, DaemonError> {
    match writer {
        Some(w) => w
            .close()
            .map_err(|e| DaemonError::AuditFailed(e.to_string())),
        None => Ok(Head::default()),
    }
}

/// The gateway the daemon serves: its policy and own files, its agents' cgroups, and the
/// Rule of Two's lockdown of the kernel session a caller runs in.
fn gateway(
    opts: &ServeOptions,
    policy: Policy,
    digest: &str,
    writer: Option<&AuditWriter>,
) -> Result<Arc<Gateway>, DaemonError> {
    let mut protect = vec![opts.policy.clone(), opts.socket.clone()];
    protect.extend(opts.audit.clone());
    let gw = Arc::new(Gateway::new(GatewayConfig {
        policy,
        protect,
        audit: writer.map(AuditWriter::handle),
        clock: opts.clock.clone(),
        operator_gid: opts.gid,
        learn: gatewayd_core::engine::Learn::Off,
        policy_digest: Some(digest.to_owned()),
        loopback_by_kernel: false,
    })?);
    for c in &opts.agent_cgroups {
        gw.agent_cgroups().add(c);
    }
    gw.set_trip_hook(Arc::new(kernel_lock::LockdownHook {
        lock: kernel_lock::EnclosingSession,
        audit: writer.map(AuditWriter::handle),
    }));
    Ok(gw)
}

/// The policy at `path`, parsed, and the digest of its bytes.
fn load_policy(path: &std::path::Path) -> Result<(Policy, String), DaemonError> {
    let bytes = std::fs::read(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| PolicyError::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    Ok((Policy::parse(text, path)?, policy_digest(&bytes)))
}

fn note(writer: Option<&AuditWriter>, reason: &str, detail: serde_json::Value) {
    if let Some(w) = writer {
        let _ = w
            .handle()
            .append(Entry::gateway("-", Decision::Info, reason, detail));
    }
}

fn remove_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

/// Many clients need many descriptors: the soft limit goes up to the hard one.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a local struct; failure leaves the limit as it was.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim);
        }
    }
}
