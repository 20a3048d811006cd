//! `gatewayd mcp`: an MCP proxy between a client and a real tool server (docs/MCP.md): stdio,
//! or Streamable HTTP to a remote server (`--url`) or for the client (`--listen`).
//!
//! - [`jsonrpc`] — stdio framing with a size limit, message kinds, the proxy's own errors
//! - `proxy`     — the router: pass-through, strict framing, `tools/call` and resource
//!   decisions, `roots/list` clamping, timeouts, a server that exits
//! - `listing`   — `tools/list` answers registered and filtered; the proxy's own listings
//! - `outputs`   — what the server sends that the model reads, checked as its output;
//!   elicitation and sampling requests
//! - `checks`    — the proxy's own decisions: resource URIs, elicitations, text slots
//! - `refusals`  — those decisions and strict framing's refusals recorded and answered
//! - `tools`     — the listing filter and the call results the proxy writes
//! - [`roots`]   — client roots clamped to the server's trees
//! - [`server`]  — the server's program pin (SHA-256) and its start
//! - [`http`]    — a remote server over Streamable HTTP (`--url`), carried as lines
//! - [`listen`]  — a loopback Streamable HTTP endpoint for the client (`--listen`)
//! - [`confine`] — the server's own kernel profile: cgroup, kernel programs, Landlock
//! - [`discover`] — listing a server's tools once (`gatewayd policy add-mcp`)
//!
//! Decisions go through [`crate::backend::Backend`]: the daemon when `GATEWAYD_SOCKET` is set
//! (the agent's session, shared with its other tool paths), else an engine of the proxy's
//! own.
use std::{
    collections::BTreeSet,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};

use crate::backend::{Backend, BackendError};
use gatewayd_core::{
    audit::{
        AuditLog, Decision, Entry,
        writer::{AuditWriter, WriterHandle},
    },
    clock::{Clock, SystemClock},
    engine::{Learn, with_next},
    policy::{Label, Policy},
};

mod checks;
pub(crate) mod confine;
pub mod discover;
pub mod http;
pub(crate) mod jsonrpc;
pub mod listen;
mod listing;
mod outputs;
mod proxy;
mod refusals;
pub(crate) mod roots;
pub mod server;
mod tools;

/// Largest message accepted from either side by default (bytes, newline excluded).
pub const MAX_MESSAGE: usize = 16 << 20;
/// How long a request may wait for the server's answer by default (seconds).
pub const REQUEST_TIMEOUT_S: u64 = 120;

/// Why the proxy stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server's name is not a key of the policy's `mcp_servers`.
    #[error(
        "server `{0}` is not in the policy's `mcp_servers`; add it there (its kernel profile and pin) first"
    )]
    UnknownServer(String),
    /// The gateway could not be reached or could not answer.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The proxy's own audit log (beside a daemon) could not be opened.
    #[error("audit log: {0}")]
    Audit(#[from] gatewayd_core::audit::AuditError),
    /// The writer thread of the proxy's own audit log could not be spawned.
    #[error("cannot start the audit writer thread: {0}")]
    Thread(std::io::Error),
    /// The server was not started (missing program, pin mismatch, profile, spawn).
    #[error(transparent)]
    Server(#[from] server::ServerError),
    /// Learn mode was asked for with a daemon's socket: the daemon's engine decides.
    #[error(
        "--learn needs the proxy's own engine; with a daemon (--socket or GATEWAYD_SOCKET) the daemon decides, and it does not learn"
    )]
    LearnWithDaemon,
    /// The remote server's URL was refused (egress policy, or not the policy's `url`).
    #[error("{0}")]
    Refused(String),
    /// The loopback endpoint could not be set up.
    #[error(transparent)]
    Listen(#[from] listen::ListenError),
    /// The remote server's connection could not be set up.
    #[error(transparent)]
    Http(#[from] http::HttpError),
}

/// What `gatewayd mcp` was asked to do.
pub struct ProxyOptions {
    /// The loaded policy.
    pub policy: Policy,
    /// The policy's file, protected from the server like the audit log.
    pub policy_path: PathBuf,
    /// The server's name in `mcp_servers`.
    pub server: String,
    /// The server's command line (empty with `url`).
    pub command: Vec<String>,
    /// A remote server's Streamable HTTP endpoint, instead of a command.
    pub url: Option<String>,
    /// The daemon's socket; None: an engine of the proxy's own.
    pub socket: Option<PathBuf>,
    /// The proxy's audit log: every record without a daemon; with one, the proxy's own
    /// records (server start and stop, refusals, the server's kernel denials).
    pub audit: PathBuf,
    /// The session to use (attached to when the daemon already has it).
    pub session: Option<String>,
    /// The session's user.
    pub user: String,
    /// The scopes the session holds.
    pub scopes: Vec<String>,
    /// Where to write the server's latest complete tool listing (for `policy pin --from`).
    pub listing: Option<PathBuf>,
    /// How long a request may wait for the server's answer.
    pub request_timeout: Duration,
    /// Largest message accepted from either side (bytes, newline excluded).
    pub max_message: usize,
    /// Learn mode of the proxy's own engine (refused with a daemon, which decides itself).
    pub learn: Learn,
}

/// How the proxy ended.
#[derive(Debug)]
pub struct ProxyOutcome {
    /// The session the proxy's calls were decided in.
    pub session: String,
    /// The server's exit status, if it exited (None for a remote server).
    pub server_status: Option<std::process::ExitStatus>,
}

/// Runs the proxy until the client's input ends. Must run on a current-thread runtime on the
/// main thread (the server dies with the thread that started it, `PR_SET_PDEATHSIG`).
/// Phases: connect to the gateway, start the server, route until the client is done, stop.
pub async fn run<R, W>(opts: ProxyOptions, input: R, output: W) -> Result<ProxyOutcome, McpError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    checked(&opts)?;
    let gateway = Gateway::connect(&opts, &own_files(&opts))?;
    let gateway = gateway.open(&opts).await?;
    let status = proxy_session(&opts, &gateway, None, input, output).await?;
    let session = gateway.close()?;
    Ok(ProxyOutcome {
        session,
        server_status: status,
    })
}

/// The server's entry, once the options are known to go together.
fn checked(opts: &ProxyOptions) -> Result<gatewayd_core::policy::McpServer, McpError> {
    if opts.learn.is_on() && opts.socket.is_some() {
        return Err(McpError::LearnWithDaemon);
    }
    opts.policy
        .mcp_servers
        .get(&opts.server)
        .cloned()
        .ok_or_else(|| McpError::UnknownServer(opts.server.clone()))
}

/// The files no server may touch: the policy and the proxy's audit log.
fn own_files(opts: &ProxyOptions) -> Vec<PathBuf> {
    vec![opts.policy_path.clone(), opts.audit.clone()]
}

/// One proxied session in `gateway`'s session: its own server (process or remote session)
/// and router, until the client's input ends; the server's exit status. `client_auth`: a
/// `--listen` client's own authorization, for a remote server the policy binds none to.
async fn proxy_session<R, W>(
    opts: &ProxyOptions,
    gateway: &Gateway,
    client_auth: Option<Arc<http::ClientAuth>>,
    input: R,
    output: W,
) -> Result<Option<std::process::ExitStatus>, McpError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let server = checked(opts)?;
    let own = own_files(opts);
    let (upstream, server_in, server_out): (Upstream, ServerIn, ServerOut) =
        if let Some(url) = &opts.url {
            let remote = remote(opts, &server, url, gateway, client_auth.clone())?;
            let (i, o, c) = http::boxed(remote);
            (Upstream::Remote(c), i, o)
        } else {
            let s = start_server(opts, &server, &own, gateway)?;
            (
                Upstream::Process(Box::new(s.running)),
                Box::new(s.stdin),
                Box::new(s.stdout),
            )
        };
    let (to_client, client_rx) = tokio::sync::mpsc::channel(1024);
    let (to_server, server_rx) = tokio::sync::mpsc::channel(1024);
    let router = Arc::new(proxy::Router {
        backend: gateway.backend.clone(),
        session: gateway.session.clone(),
        server: opts.server.clone(),
        recorder: gateway.recorder.clone(),
        untrusted: untrusted_tools(&opts.policy),
        trees: server.readable_trees(),
        listing: opts.listing.clone(),
        timeout: opts.request_timeout,
        max_message: opts.max_message,
        learn: opts.learn.is_on(),
        sandbox: agent_sandbox(&opts.policy, &own),
        egress: gatewayd_core::engine::sandbox::EgressView::new(&opts.policy.network),
        schemes: server.resource_schemes.clone(),
        listed: tokio::sync::Mutex::new(false),
        to_client,
        to_server,
        state: Mutex::new(proxy::State::default()),
        client_auth,
    });
    let client_writer = tokio::spawn(proxy::writer(output, client_rx));
    let server_writer = tokio::spawn(proxy::writer(server_in, server_rx));
    let sweeper = tokio::spawn(router.clone().sweep());
    let from_server = {
        let router = router.clone();
        tokio::spawn(async move {
            router.clone().server_loop(BufReader::new(server_out)).await;
            router
                .server_gone("the MCP server closed its output (it exited or crashed)".into())
                .await;
        })
    };
    router.clone().client_loop(BufReader::new(input)).await;

    // The client is done: answers still due are awaited (up to the request timeout), then
    // the server's input is closed and it may exit.
    router.drain(opts.request_timeout).await;
    sweeper.abort();
    drop(router);
    server_writer.abort();
    let status = upstream.stop().await;
    let _ = from_server.await;
    let _ = client_writer.await;
    gateway.record(
        Decision::Info,
        "mcp_server_stop",
        json!({"server": opts.server, "status": status.map(|s| s.to_string())}),
    );
    Ok(status)
}

type ServerIn = Box<dyn AsyncWrite + Unpin + Send>;
type ServerOut = Box<dyn tokio::io::AsyncRead + Unpin + Send>;

/// What the router talks to: a process of its own, or a remote server.
enum Upstream {
    Process(Box<server::Running>),
    Remote(http::Connection),
}

impl Upstream {
    /// Stops it: the process's exit status; a remote session is ended (no status).
    async fn stop(self) -> Option<std::process::ExitStatus> {
        match self {
            Upstream::Process(r) => r.stop().await,
            Upstream::Remote(c) => {
                c.stop().await;
                None
            }
        }
    }
}

/// A remote server: its URL checked against the policy (the server's bound `url`, the
/// top-level egress allowlist), its credential taken from the proxy's environment, the
/// connection recorded (`mcp_server_start` with the URL; refusals as `mcp_server_refused`
/// or `sandbox`).
fn remote(
    opts: &ProxyOptions,
    server: &gatewayd_core::policy::McpServer,
    url: &str,
    gateway: &Gateway,
    client_auth: Option<Arc<http::ClientAuth>>,
) -> Result<http::Connected, McpError> {
    let refuse = |(reason, message, extra): Refusal| {
        eprintln!("gatewayd mcp: {message}");
        let mut detail = json!({"server": opts.server, "url": url, "message": message});
        if let (Some(d), Some(e)) = (detail.as_object_mut(), extra.as_object()) {
            d.extend(e.clone());
        }
        gateway.record(Decision::Deny, reason, detail);
        McpError::Refused(message)
    };
    check_remote_url(opts, server, url).map_err(refuse)?;
    let var = server.url.as_ref().and(server.authorization_env.as_ref());
    let auth = bound_credential(&opts.server, var).map_err(refuse)?;
    // A bound credential replaces the client's; without one, a `--listen` client's own
    // header passes through.
    let (auth, authorization) = match (auth, client_auth) {
        (Some(a), _) => (http::Auth::Bound(a), "bound"),
        (None, Some(c)) => (http::Auth::Client(c), "client"),
        (None, None) => (http::Auth::None, "none"),
    };
    let connected = http::connect(url, auth, opts.max_message)
        .map_err(|e| refuse(("mcp_server_refused", e.to_string(), json!({}))))?;
    gateway.record(
        Decision::Info,
        "mcp_server_start",
        json!({"server": opts.server, "url": url, "transport": "streamable_http",
               "authorization_env": var, "authorization": authorization,
               "learn": opts.learn.detail(false)}),
    );
    Ok(connected)
}

/// A refusal to connect to a remote server: its reason code, its message and extra detail.
type Refusal = (&'static str, String, serde_json::Value);

/// The remote server's URL against the policy: the server's bound `url`, then the
/// top-level egress allowlist.
fn check_remote_url(
    opts: &ProxyOptions,
    server: &gatewayd_core::policy::McpServer,
    url: &str,
) -> Result<(), Refusal> {
    if let Some(bound) = &server.url
        && bound != url
    {
        let m = with_next(
            &format!(
                "mcp_servers.{} is bound to {bound}; --url {url} is another server, so the proxy did not connect",
                opts.server
            ),
            "use the policy's URL (leave --url out), or ask the user to change the policy",
        );
        return Err(("mcp_server_refused", m, json!({})));
    }
    let dest = gatewayd_core::engine::sandbox::parse_url(url).map_err(|e| {
        let m = with_next(
            &format!("the remote MCP server's URL {url} is refused: {e}"),
            "ask the user for the server's https:// URL",
        );
        ("sandbox", m, json!({}))
    })?;
    if !gatewayd_core::engine::sandbox::EgressView::new(&opts.policy.network).allows(&dest) {
        let m = with_next(
            &format!(
                "the remote MCP server {url}: {}:{} is not in the policy's egress allowlist (network.egress), so the proxy did not connect",
                dest.host, dest.port
            ),
            "ask the user whether this server should be reached; they can add its host to network.egress",
        );
        return Err(("sandbox", m, json!({"host": dest.host, "port": dest.port})));
    }
    Ok(())
}

/// The credential the policy binds to the server (`authorization_env`), from the proxy's
/// environment: `None` when none is bound, refused when the variable is unset or blank.
fn bound_credential(server: &str, var: Option<&String>) -> Result<Option<String>, Refusal> {
    let Some(var) = var else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(token) if !token.trim().is_empty() => Ok(Some(token)),
        _ => {
            let e = http::HttpError::Credential {
                server: server.to_string(),
                var: var.clone(),
            };
            Err(("mcp_server_refused", e.to_string(), json!({})))
        }
    }
}

/// The agent's sandbox as the engine sees it, gatewayd's own files protected: a `file://`
/// resource is read as the agent would read the file.
fn agent_sandbox(policy: &Policy, own: &[PathBuf]) -> gatewayd_core::engine::sandbox::SandboxView {
    let mut v = gatewayd_core::engine::sandbox::SandboxView::new(&policy.sandbox);
    for p in own {
        v.protect(p);
    }
    v
}

/// The tools whose output is untrusted (`untrusted_output`): the proxy fences their results.
fn untrusted_tools(policy: &Policy) -> BTreeSet<String> {
    policy
        .tools
        .iter()
        .filter(|t| t.labels.contains(&Label::UntrustedOutput))
        .map(|t| t.name.clone())
        .collect()
}

/// The gateway the proxy decides through, its session and where the proxy's records go.
struct Gateway {
    backend: Arc<Backend>,
    /// The proxy's own audit writer beside a daemon (None: the local engine's log).
    own_writer: Option<AuditWriter>,
    recorder: Option<WriterHandle>,
    session: String,
}

impl Gateway {
    /// The daemon at `--socket` (with an audit log of the proxy's own for its records), else
    /// an engine of the proxy's own; no session yet ([`Gateway::open`]).
    fn connect(opts: &ProxyOptions, own: &[PathBuf]) -> Result<Gateway, McpError> {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let (backend, own_writer) = match &opts.socket {
            Some(s) => {
                let w = AuditWriter::start(AuditLog::open(&opts.audit, clock.clone())?)
                    .map_err(McpError::Thread)?;
                (Backend::daemon(s)?, Some(w))
            }
            None => (
                Backend::local(
                    opts.policy.clone(),
                    own.to_vec(),
                    Some(&opts.audit),
                    clock,
                    opts.learn,
                )?,
                None,
            ),
        };
        let recorder = backend
            .recorder()
            .or_else(|| own_writer.as_ref().map(AuditWriter::handle));
        Ok(Gateway {
            backend: Arc::new(backend),
            own_writer,
            recorder,
            session: String::new(),
        })
    }

    /// The gateway in a session of its own (opened, or `--session`'s attached to); the
    /// gateway it came from closes the audit log when both are done.
    async fn open(self, opts: &ProxyOptions) -> Result<Gateway, McpError> {
        let session = self
            .backend
            .open(opts.session.as_deref(), &opts.user, &opts.scopes)
            .await?;
        Ok(Gateway { session, ..self })
    }

    /// Another session in the same gateway (a `--listen` client's); closing it closes
    /// nothing.
    async fn another(&self, opts: &ProxyOptions) -> Result<Gateway, McpError> {
        let session = self
            .backend
            .open(opts.session.as_deref(), &opts.user, &opts.scopes)
            .await?;
        Ok(Gateway {
            backend: self.backend.clone(),
            own_writer: None,
            recorder: self.recorder.clone(),
            session,
        })
    }

    /// Writes one record of the proxy's (best effort: the chain's writer reports its own
    /// failures).
    fn record(&self, decision: Decision, reason: &str, detail: serde_json::Value) {
        if let Some(r) = &self.recorder {
            let _ = r.append(Entry::gateway(&self.session, decision, reason, detail));
        }
    }

    /// Closes the local engine or the proxy's own audit log; the session's id.
    fn close(self) -> Result<String, McpError> {
        if let Ok(b) = Arc::try_unwrap(self.backend) {
            b.close()?;
        }
        if let Some(w) = self.own_writer {
            w.close().map_err(|e| {
                McpError::Backend(BackendError::Malformed(format!("audit log: {e}")))
            })?;
        }
        Ok(self.session)
    }
}

/// The server checked against its pin and started in its profile, each step recorded
/// (`mcp_server_refused` with the error, or `mcp_server_start`).
fn start_server(
    opts: &ProxyOptions,
    server: &gatewayd_core::policy::McpServer,
    own: &[PathBuf],
    gateway: &Gateway,
) -> Result<server::Started, McpError> {
    let program = opts.command.first().cloned().unwrap_or_default();
    let refused = |error: String| {
        gateway.record(
            Decision::Deny,
            "mcp_server_refused",
            json!({"server": opts.server, "command": opts.command, "error": error}),
        );
    };
    let (path, sha) =
        match server::check_pin(&opts.server, &program, server.command_sha256.as_deref()) {
            Ok(p) => p,
            Err(e) => {
                refused(e.to_string());
                return Err(e.into());
            }
        };
    let started = match server::start(
        &opts.server,
        &opts.command,
        server,
        &opts.policy,
        own,
        server::Records {
            writer: gateway.recorder.clone(),
            client_session: Some(gateway.session.clone()),
        },
        opts.learn.is_on(),
    ) {
        Ok(r) => r,
        Err(e) => {
            refused(gatewayd_kernel::kernel::chain(&e));
            return Err(e.into());
        }
    };
    // The profile says what the kernel learns: the group's description, or why none.
    let kernel_learns = started
        .pieces
        .get("learn_files")
        .is_some_and(serde_json::Value::is_object);
    gateway.record(
        Decision::Info,
        "mcp_server_start",
        json!({"server": opts.server, "command": opts.command, "program": path,
               "sha256": sha, "pinned": server.command_sha256.is_some(),
               "pid": started.running.child.id(), "profile": started.pieces,
               "learn": opts.learn.detail(kernel_learns)}),
    );
    Ok(started)
}
