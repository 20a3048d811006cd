//! `gatewayd serve --policy P [--socket S] [--audit F] [--group G] [--agent-cgroup PATH]...
//! [--no-watch] [--export KIND:TARGET]... [--anchor-every-s N] [--host-id ID]`: the daemon
//! for a host. SIGTERM or SIGINT stops it: in-flight requests are answered, every record
//! is written, the socket is removed (unless systemd passed it).
//! SIGHUP, and a change of the policy file, reload the policy (`daemon::reload`).
//!
//! Under systemd (packaging/): a socket passed by socket activation is served as it is,
//! `READY=1` is sent once it accepts connections, `WATCHDOG=1` every half `WATCHDOG_USEC`,
//! and `STOPPING=1` when shutdown begins.
use std::{path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::Context as _;
use gatewayd::{
    daemon::{
        self, ExportOptions, ExportSpec, ReloadOptions, ServeOptions, ServerOptions, socket,
        systemd,
    },
    protocol, shutdown,
};
use gatewayd_core::clock::SystemClock;

use super::{DEFAULT_SOCKET, out::errln};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Policy file (JSON).
    #[arg(long)]
    policy: PathBuf,
    /// The Unix socket to listen on (mode 0660; a stale one is replaced). With socket
    /// activation, the path of the socket systemd passed (checked, never re-bound).
    #[arg(long)]
    socket: Option<PathBuf>,
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
    /// Do not watch the policy file: reload it on SIGHUP only. Without this, a change of
    /// the file (an edit, a rename over it, a swapped symlink) reloads it too.
    #[arg(long)]
    no_watch: bool,
    #[command(flatten)]
    export: ExportArgs,
}

/// `--export`, `--anchor-every-s`, `--host-id`: the same for `serve` and `run`.
#[derive(Debug, clap::Args)]
pub(super) struct ExportArgs {
    /// Export every audit record, and the chain's head every --anchor-every-s and at each
    /// session's close (for `gatewayd audit verify LOG --anchors FILE`), to a sink; repeat
    /// for several. KIND:TARGET is one of `-` or `json:-` (stdout), `PATH` or `json:PATH`
    /// (JSON lines), `syslog` (/dev/log), `syslog:unix:PATH`, `syslog:udp:HOST:PORT`,
    /// `syslog:tcp:HOST:PORT`, `syslog:tls:HOST:PORT` (RFC 5424; TLS as RFC 5425, see
    /// --export-ca), `journal[:SOCKET]` (the systemd journal),
    /// `otlp:http[s]://HOST:PORT[/PATH]` (OTLP logs, HTTP/protobuf),
    /// `otlp-grpc:http[s]://HOST:PORT` (OTLP logs, gRPC). Never blocks a decision:
    /// a sink that is down is retried with back-off; past a queue of 4096 its records are
    /// dropped from that sink only, and counted in the chain (docs/FLEET.md).
    #[arg(long, value_name = "KIND:TARGET", value_parser = ExportSpec::parse)]
    export: Vec<ExportSpec>,
    /// Seconds between two exported heads (when the log grew); 0: only at session close
    /// (and, under `run`, at its end).
    #[arg(long, default_value_t = 60)]
    anchor_every_s: u64,
    /// This host's id in exported records and heads (default: /etc/machine-id, else the
    /// host name); under Kubernetes, the node's name.
    #[arg(long, value_name = "ID")]
    host_id: Option<String>,
    /// A PEM file of CA certificates that TLS sinks (`syslog:tls:`, `otlp:https:`,
    /// `otlp-grpc:https:`) trust
    /// besides the system's roots (a private CA's).
    #[arg(long, value_name = "FILE")]
    export_ca: Option<PathBuf>,
}

impl ExportArgs {
    /// What to export; None without `--export`.
    pub(super) fn options(self) -> Option<ExportOptions> {
        (!self.export.is_empty()).then(|| ExportOptions {
            sinks: self.export,
            anchor_every: std::time::Duration::from_secs(self.anchor_every_s),
            host_id: self.host_id,
            ca: self.export_ca,
        })
    }
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    settle_host();
    let gid = socket::group_id(&args.group)?;
    let inherited = systemd::inherited_listener()?;
    let socket = socket_path(args.socket, inherited.as_ref())?;
    let watchdog = systemd::watchdog_interval();
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
            systemd::notify_stopping();
            trigger.fire();
        });
        let pings = shutdown.clone();
        let activated = inherited.is_some();
        daemon::serve(
            ServeOptions {
                policy: args.policy,
                socket: socket.clone(),
                listener: inherited,
                audit: Some(args.audit),
                gid,
                agent_cgroups: args.agent_cgroups,
                clock: Arc::new(SystemClock),
                server: ServerOptions::default(),
                reload: ReloadOptions {
                    sighup: true,
                    watch: !args.no_watch,
                },
                export: args.export.options(),
            },
            shutdown,
            |gw| {
                for w in gw.engine().warnings() {
                    eprintln!("gatewayd: note: {w}");
                }
                let status = format!(
                    "serving on {}{} (protocol {})",
                    socket.display(),
                    if activated { ", passed by systemd" } else { "" },
                    protocol::PROTOCOL_VERSION
                );
                eprintln!("gatewayd: {status}");
                systemd::notify_ready(&status);
                // Pings start once the daemon is ready, as systemd expects.
                if let Some(every) = watchdog {
                    tokio::spawn(systemd::watchdog(every, pings));
                }
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

/// Before serving: enough descriptors, the OOM killer's last choice (the daemon holds every
/// session's decisions; lowering the score needs `CAP_SYS_RESOURCE`, and the systemd unit sets
/// `OOMScoreAdjust=` instead), and what `gatewayd run`s killed with SIGKILL left (their
/// cgroups and what still runs there; their entries in the pinned maps go at the next run's
/// start).
fn settle_host() {
    if let Some(root) = daemon::peer::cgroup_namespace_root() {
        errln!(
            "gatewayd: in a cgroup namespace rooted at {root} of the cgroup tree: callers' cgroups are read from there"
        );
    }
    daemon::raise_fd_limit();
    if let Err(e) = gatewayd_kernel::session_limits::protect_from_oom_killer() {
        errln!(
            "gatewayd: oom_score_adj stays as it was ({e}); the OOM killer may choose the daemon"
        );
    }
    if let Ok(mount) = gatewayd_kernel::cgroup::cgroup2_mount() {
        let parent = mount.join("gatewayd");
        if parent.is_dir() {
            gatewayd_kernel::cgroup::sweep_orphans(&parent);
        }
    }
}

/// The socket's path: the one systemd passed (which `--socket`, if given, must name), or
/// `--socket`, or the default.
fn socket_path(
    given: Option<PathBuf>,
    inherited: Option<&std::os::unix::net::UnixListener>,
) -> anyhow::Result<PathBuf> {
    let Some(l) = inherited else {
        return Ok(given.unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET)));
    };
    let addr = l.local_addr().context("the inherited socket's address")?;
    let passed = addr
        .as_pathname()
        .context(
            "systemd passed a socket without a path (abstract or unnamed); use ListenStream=/PATH",
        )?
        .to_owned();
    match given {
        Some(g) if g != passed => anyhow::bail!(
            "systemd passed the socket {} but --socket says {}",
            passed.display(),
            g.display()
        ),
        _ => Ok(passed),
    }
}
