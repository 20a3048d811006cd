//! `gatewayd serve --policy P --socket S [--audit F] [--group G] [--agent-cgroup PATH]...`:
//! the daemon for a host. SIGTERM or SIGINT stops it: in-flight requests are answered,
//! every record is written, the socket is removed.
use std::{path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::Context as _;
use gatewayd::{
    clock::SystemClock,
    daemon::{self, ServeOptions, ServerOptions, socket},
    shutdown,
};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Policy file (JSON).
    #[arg(long)]
    policy: PathBuf,
    /// The Unix socket to listen on (mode 0660; a stale one is replaced).
    #[arg(long)]
    socket: PathBuf,
    /// Audit log (JSON Lines, hash-chained); appended to if it exists.
    #[arg(long, default_value = "gatewayd-audit.jsonl")]
    audit: PathBuf,
    /// The socket's group (name or gid): its members and root are operators.
    #[arg(long, default_value = "root")]
    group: String,
    /// A cgroup v2 path (as in /proc/PID/cgroup) under which agents run: no approvals
    /// from inside it, no credentials handed out to it. Repeatable; /gatewayd always is.
    #[arg(long = "agent-cgroup")]
    agent_cgroups: Vec<String>,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    daemon::raise_fd_limit();
    let gid = socket::group_id(&args.group)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let head = rt.block_on(async {
        let (trigger, shutdown) = shutdown::channel();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("SIGTERM handler")?;
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            trigger.fire();
        });
        let socket = args.socket.clone();
        daemon::serve(
            ServeOptions {
                policy: args.policy,
                socket: args.socket,
                audit: Some(args.audit),
                gid,
                agent_cgroups: args.agent_cgroups,
                clock: Arc::new(SystemClock),
                server: ServerOptions::default(),
            },
            shutdown,
            |gw| {
                for w in gw.engine().warnings() {
                    eprintln!("gatewayd: note: {w}");
                }
                eprintln!(
                    "gatewayd: serving on {} (protocol {})",
                    socket.display(),
                    daemon::protocol::PROTOCOL_VERSION
                );
            },
        )
        .await
        .map_err(anyhow::Error::from)
    })?;
    eprintln!(
        "gatewayd: stopped; audit head seq {} {}",
        head.seq,
        head.hash.as_deref().unwrap_or("(empty log)")
    );
    Ok(ExitCode::SUCCESS)
}
