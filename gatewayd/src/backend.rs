//! A front end's way to the gateway (the MCP proxy, the agent-host hooks): the daemon over
//! its socket (`GATEWAYD_SOCKET`: the agent's session, shared with its other tool paths), or
//! an in-process [`Gateway`] with an audit writer of its own. Both take the protocol's typed
//! requests ([`crate::protocol`]) and give back their typed results: in process the request
//! is run on the gateway directly, with no JSON in between.
use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use crate::{
    daemon::{Gateway, GatewayConfig, dispatch::Serve, peer::Peer},
    protocol::{
        RpcError, SessionOpen,
        client::{Client, ClientError},
    },
};
use gatewayd_core::{
    audit::{
        AuditLog, Decision,
        writer::{AuditWriter, WriterHandle},
    },
    clock::Clock,
    engine::{EngineError, Learn, Verdict},
    policy::Policy,
};

/// Why the gateway could not be reached or could not answer.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The daemon's socket could not be reached, written or read.
    #[error("the gateway daemon: {0}")]
    Client(#[from] ClientError),
    /// The gateway answered with a JSON-RPC error object.
    #[error("the gateway refused the request: {0}")]
    Rpc(RpcError),
    /// The in-process engine could not be built from the policy.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The in-process gateway's audit log could not be opened.
    #[error("audit log: {0}")]
    Audit(#[from] gatewayd_core::audit::AuditError),
    /// The in-process gateway's audit writer thread could not be spawned.
    #[error("cannot start the audit writer thread: {0}")]
    Thread(std::io::Error),
    /// The answer is not the result expected (also: a failed call task or audit-log close).
    #[error("the gateway's answer is unreadable: {0}")]
    Malformed(String),
}

/// The gateway, in this process or behind the daemon's socket.
pub enum Backend {
    /// An engine of our own: decisions recorded in our own audit log.
    Local {
        /// The in-process gateway.
        gw: Arc<Gateway>,
        /// The caller its requests are attributed to: this process's pid, uid and gid.
        peer: Peer,
        /// The audit writer of its log (None only for tests), closed by [`Backend::close`].
        writer: Option<AuditWriter>,
    },
    /// `gatewayd serve` (or `gatewayd run`'s socket): one connection, requests in order.
    Daemon {
        /// The one connection, shared by the front end's tasks.
        client: Arc<Mutex<Client>>,
        /// The daemon's socket path.
        socket: PathBuf,
    },
}

impl Backend {
    /// An in-process gateway for `policy`; `protect` lists paths no tool argument may touch
    /// (the policy file, the audit log); `audit` None only for tests; `learn`: the engine's
    /// learn mode.
    pub fn local(
        policy: Policy,
        protect: Vec<PathBuf>,
        audit: Option<&Path>,
        clock: Arc<dyn Clock>,
        learn: Learn,
    ) -> Result<Backend, BackendError> {
        let writer = match audit {
            Some(p) => Some(
                AuditWriter::start(AuditLog::open(p, clock.clone())?)
                    .map_err(BackendError::Thread)?,
            ),
            None => None,
        };
        let gw = Gateway::new(GatewayConfig {
            policy,
            protect,
            audit: writer.as_ref().map(AuditWriter::handle),
            clock,
            operator_gid: 0,
            learn,
            policy_digest: None,
            loopback_by_kernel: false,
        })?;
        Ok(Backend::Local {
            gw: Arc::new(gw),
            peer: Peer::from_parts(
                std::process::id() as i32,
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            ),
            writer,
        })
    }

    /// Connects to the daemon (which checks its protocol version).
    pub fn daemon(socket: &Path) -> Result<Backend, BackendError> {
        let client = Client::connect(socket)?;
        Ok(Backend::Daemon {
            client: Arc::new(Mutex::new(client)),
            socket: socket.to_owned(),
        })
    }

    /// Runs one request (docs/PROTOCOL.md) and returns its result.
    pub async fn request<R: Serve>(&self, params: R) -> Result<R::Reply, BackendError> {
        match self {
            Backend::Local { gw, peer, .. } => {
                params.serve(gw, peer).await.map_err(BackendError::Rpc)
            }
            Backend::Daemon { client, .. } => {
                let client = client.clone();
                tokio::task::spawn_blocking(move || {
                    let mut c = client
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    c.request(&params)
                })
                .await
                .map_err(|e| BackendError::Malformed(e.to_string()))?
                .map_err(|e| match e {
                    ClientError::Rpc(r) => BackendError::Rpc(r),
                    other => BackendError::Client(other),
                })
            }
        }
    }

    /// Opens (or attaches to) a session; returns its id.
    pub async fn open(
        &self,
        session: Option<&str>,
        user: &str,
        scopes: &[String],
    ) -> Result<String, BackendError> {
        let opened = self
            .request(SessionOpen {
                session: session.map(str::to_owned),
                user: user.to_owned(),
                scopes: scopes.to_vec(),
            })
            .await?;
        Ok(opened.session)
    }

    /// Where the front end's own records go (server start, refusals, kernel denials): the
    /// in-process gateway's log; None with the daemon (the front end opens its own).
    pub fn recorder(&self) -> Option<WriterHandle> {
        match self {
            Backend::Local { gw, .. } => gw.audit().cloned(),
            Backend::Daemon { .. } => None,
        }
    }

    /// The in-process gateway's policy, if local.
    pub fn local_gateway(&self) -> Option<&Arc<Gateway>> {
        match self {
            Backend::Local { gw, .. } => Some(gw),
            Backend::Daemon { .. } => None,
        }
    }

    /// Writes every queued record and closes the audit log (local); nothing for the daemon.
    pub fn close(self) -> Result<(), BackendError> {
        if let Backend::Local {
            writer: Some(w), ..
        } = self
        {
            w.close()
                .map_err(|e| BackendError::Malformed(format!("audit log: {e}")))?;
        }
        Ok(())
    }
}

/// What a host or client is told of a verdict: the decision, its reason code and the
/// gateway's message for the model.
pub fn verdict_text(v: &Verdict) -> String {
    let reason = v.reason.code();
    match (v.decision, &v.would_deny) {
        (Decision::Allow, Some(w)) => format!(
            "gatewayd: allowed in learn mode; the policy would refuse it (reason `{}`): {}",
            w.reason.code(),
            w.message
        ),
        (Decision::Allow, None) => format!("gatewayd: allowed ({reason})"),
        (Decision::Hold, _) => format!(
            "gatewayd held this call for a person's approval (reason `{reason}`): {}",
            v.message
        ),
        _ => format!(
            "gatewayd refused this call (reason `{reason}`): {}",
            v.message
        ),
    }
}
