//! `gatewayd mcp --policy P --server NAME [...] -- SERVER_CMD...`: a stdio MCP proxy between
//! an MCP client and a real tool server, the server in its own kernel profile (docs/MCP.md);
//! `--url URL` (or the server's `url` in the policy) instead of a command: a remote server
//! over Streamable HTTP.
use std::{collections::BTreeSet, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use gatewayd::mcp::{self, ProxyOptions};
use gatewayd_core::policy::Policy;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Policy file (JSON); the server's entry in its `mcp_servers` is required.
    #[arg(long)]
    policy: PathBuf,
    /// The server's name in the policy's `mcp_servers`.
    #[arg(long)]
    server: String,
    /// The daemon's socket [default: $`GATEWAYD_SOCKET`; unset: an engine of the proxy's own].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The proxy's audit log (every decision without a daemon; with one, the proxy's own
    /// records: server start/stop, refusals, the server's kernel denials).
    #[arg(long, default_value = "gatewayd-mcp-audit.jsonl")]
    audit: PathBuf,
    /// The session to use [default: $`GATEWAYD_SESSION`; unset: a new one].
    #[arg(long)]
    session: Option<String>,
    /// The session's user [default: $USER].
    #[arg(long)]
    user: Option<String>,
    /// A scope the session holds (repeatable). Default: every scope the policy names.
    #[arg(long = "scope")]
    scopes: Vec<String>,
    /// Write the server's latest complete tool listing here (for `policy pin --from`).
    #[arg(long)]
    listing: Option<PathBuf>,
    /// Seconds a request may wait for the server's answer (progress notifications extend it)
    /// [default: the server's `timeout_s` in the policy, else 120].
    #[arg(long)]
    request_timeout_s: Option<u64>,
    /// Largest message accepted from either side, in bytes [default: the server's
    /// `max_message_bytes` in the policy, else 16 MiB].
    #[arg(long)]
    max_message_bytes: Option<usize>,
    #[command(flatten)]
    learn: super::run::LearnArgs,
    /// A remote server's Streamable HTTP endpoint instead of a command [default: the
    /// server's `url` in the policy]; its host must pass the policy's egress allowlist.
    #[arg(long, conflicts_with = "command")]
    url: Option<String>,
    /// Serve clients over Streamable HTTP on this loopback address (`127.0.0.1:PORT`,
    /// endpoint `/mcp`) instead of stdio; a proxied session per client session, until
    /// SIGINT or SIGTERM.
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// The server's command line (none for a remote server).
    #[arg(last = true)]
    command: Vec<String>,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let policy = Policy::load(&args.policy)?;
    let scopes: Vec<String> = if args.scopes.is_empty() {
        let all: BTreeSet<String> = policy
            .tools
            .iter()
            .flat_map(|t| t.scopes.iter().cloned())
            .collect();
        all.into_iter().collect()
    } else {
        args.scopes
    };
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let entry = policy.mcp_servers.get(&args.server);
    let timeout_s = args
        .request_timeout_s
        .or_else(|| entry.and_then(|s| s.timeout_s))
        .unwrap_or(mcp::REQUEST_TIMEOUT_S);
    let max_message = args
        .max_message_bytes
        .or_else(|| entry.and_then(|s| s.max_message_bytes))
        .unwrap_or(mcp::MAX_MESSAGE);
    let url = if args.command.is_empty() {
        let url = args.url.or_else(|| entry.and_then(|s| s.url.clone()));
        if url.is_none() {
            anyhow::bail!(
                "give the server's command after `--`, or --url URL for a remote server (or set mcp_servers.{}.url)",
                args.server
            );
        }
        url
    } else {
        None
    };
    let opts = ProxyOptions {
        policy,
        policy_path: args.policy,
        server: args.server,
        command: args.command,
        url,
        socket: args
            .socket
            .or_else(|| env("GATEWAYD_SOCKET").map(PathBuf::from)),
        audit: args.audit,
        session: args
            .session
            .or_else(|| env("GATEWAYD_SESSION").map(|s| s.to_string_lossy().into_owned())),
        user: args
            .user
            .or_else(|| env("USER").map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "mcp".into()),
        scopes,
        listing: args.listing,
        request_timeout: Duration::from_secs(timeout_s.max(1)),
        max_message,
        learn: args.learn.mode(),
    };
    // Current-thread: the server dies with the thread that started it (PR_SET_PDEATHSIG).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let outcome = match args.listen {
        Some(addr) => rt.block_on(mcp::listen::serve(addr, opts))?,
        None => rt.block_on(mcp::run(opts, tokio::io::stdin(), tokio::io::stdout()))?,
    };
    eprintln!(
        "gatewayd mcp: session {} ended; server {}",
        outcome.session,
        outcome
            .server_status
            .map_or_else(|| "status unknown".into(), |s| s.to_string())
    );
    Ok(ExitCode::SUCCESS)
}
