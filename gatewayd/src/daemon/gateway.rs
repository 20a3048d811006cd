//! [`Gateway`]: one engine, its sessions, the agent-cgroup registry and the audit writer,
//! and every method of the protocol as a plain async function of (caller, parameters). The
//! socket server (`server.rs`) and any supervisor that embeds the daemon (`gatewayd run`)
//! call these.
use std::{
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
};

use serde_json::{Value, json};

use super::{
    peer::Peer,
    sessions::{AddError, AgentCgroups, SessionSlot, SessionState, Sessions},
};
use crate::protocol::{
    CallDecide, CallOutput, Checked, Closed, Decided, Head, HelloReply, MAX_LINE, Opened,
    PROTOCOL_VERSION, Registered, RpcError, SecretAdded, SecretsAdd, SessionClose, SessionOpen,
    Status, ToolStatus, ToolsRegister, code,
};
use gatewayd_core::{
    audit::{
        Decision as AD, Entry,
        writer::{DeferredSink, WriterHandle},
    },
    clock::Clock,
    engine::{AuditSink, Engine, EngineError, Learn, Legs, Reason, Registration, Session, Verdict},
    policy::Policy,
};

/// What a [`TripHook`] returns: a future, so that a hook can wait for the task that owns the
/// kernel layer (or for the audit writer) without blocking the runtime.
pub type HookFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>>;

/// Called when a session first holds both Rule-of-Two legs (untrusted content seen and
/// private data read), before the answer that tripped it is returned. The kernel egress
/// lockdown of the session's cgroup is wired here (`gatewayd run`, `gatewayd serve`). An
/// `Err` fails closed: the tripping call is refused and the hook is tried again on the
/// session's next call.
pub trait TripHook: Send + Sync {
    /// Reacts to `session` tripping (locks its cgroup's egress); `Err` says why it failed,
    /// and the tripping call is refused.
    fn session_tripped<'a>(&'a self, session: &'a TrippedSession<'a>) -> HookFuture<'a>;
}

/// The session that tripped, and what tripped it.
#[derive(Debug)]
pub struct TrippedSession<'a> {
    /// The session's id.
    pub id: &'a str,
    /// The cgroup that owns the session (the one whose egress to lock).
    pub cgroup: &'a str,
    /// The legs it holds (both untrusted and private).
    pub legs: Legs,
    /// The tool of the call that tripped it (None: a kernel denial did).
    pub tool: Option<&'a str>,
    /// What tripped it: `call/decide`, `call/output` or `kernel/denial`.
    pub method: &'static str,
}

/// What a gateway is built from.
pub struct GatewayConfig {
    /// The policy the engine is built from.
    pub policy: Policy,
    /// Paths no tool argument may touch (the policy file, the audit log, the socket).
    pub protect: Vec<PathBuf>,
    /// The audit writer; None only for tests and benchmarks.
    pub audit: Option<WriterHandle>,
    /// The clock every decision and record reads.
    pub clock: Arc<dyn Clock>,
    /// The socket's group: root and its members are operators.
    pub operator_gid: u32,
    /// Learn mode of the engine (docs/POLICY.md, "Learn mode").
    pub learn: Learn,
    /// SHA-256 (hex) of the policy file's bytes, named in every decision record (None:
    /// the policy did not come from a file).
    pub policy_digest: Option<String>,
    /// The agent's kernel layer judges loopback destinations (`gatewayd run` with the cgroup
    /// connect programs attached): the engine leaves them to it.
    pub loopback_by_kernel: bool,
}

/// What every engine of a gateway is built with, the first and each reload's.
pub(super) struct EngineBuild {
    protect: Vec<PathBuf>,
    learn: Learn,
    sink: Option<Arc<Mutex<dyn AuditSink>>>,
    loopback_by_kernel: bool,
}

impl EngineBuild {
    /// An engine for `policy`, protecting the gateway's paths, in its learn mode.
    pub(super) fn engine(
        &self,
        policy: Policy,
        digest: Option<String>,
        clock: &Arc<dyn Clock>,
    ) -> Result<Engine, EngineError> {
        let mut engine = Engine::new(Arc::new(policy), clock.clone(), self.sink.clone())?;
        for p in &self.protect {
            engine.protect(p);
        }
        engine.set_learn(self.learn);
        if self.loopback_by_kernel {
            engine.leave_loopback_to_kernel();
        }
        if let Some(d) = digest {
            engine.set_policy_digest(d);
        }
        Ok(engine)
    }
}

/// The daemon's state, shared by every connection.
pub struct Gateway {
    /// The engine of the policy in force: a call takes it once and is decided wholly under
    /// it; a reload ([`Gateway::reload_policy`]) swaps it.
    engine: RwLock<Arc<Engine>>,
    /// What a reload builds the next engine with.
    pub(super) build: EngineBuild,
    audit: Option<WriterHandle>,
    pub(super) sessions: Sessions,
    pub(super) agents: AgentCgroups,
    pub(super) operator_gid: u32,
    trip_hook: RwLock<Option<Arc<dyn TripHook>>>,
    /// Looks at every call for the session's canary credentials ([`super::canary`]).
    pub(super) canary: RwLock<Option<Arc<dyn super::CanaryCheck>>>,
    /// Run before a reloaded policy is put in force ([`super::reload::ReloadHook`]).
    pub(super) reload_hook: RwLock<Option<Arc<dyn super::reload::ReloadHook>>>,
    /// Where the chain's heads are exported ([`super::export`]).
    pub(super) anchors: RwLock<Option<Arc<super::export::Anchors>>>,
    clock: Arc<dyn Clock>,
}

fn deny(reason: Reason, message: String, legs: Legs) -> Decided {
    Decided {
        verdict: Verdict::deny(reason, message),
        arguments: None,
        credentials: None,
        legs,
    }
}

impl Gateway {
    /// Builds the engine from the policy (protecting `cfg.protect` too); no sessions yet.
    pub fn new(cfg: GatewayConfig) -> Result<Gateway, EngineError> {
        let sink: Option<Arc<Mutex<dyn AuditSink>>> = cfg
            .audit
            .as_ref()
            .map(|h| Arc::new(Mutex::new(DeferredSink(h.clone()))) as _);
        let build = EngineBuild {
            protect: cfg.protect,
            learn: cfg.learn,
            sink,
            loopback_by_kernel: cfg.loopback_by_kernel,
        };
        let engine = build.engine(cfg.policy, cfg.policy_digest, &cfg.clock)?;
        Ok(Gateway {
            engine: RwLock::new(Arc::new(engine)),
            build,
            audit: cfg.audit,
            sessions: Sessions::default(),
            agents: AgentCgroups::default(),
            operator_gid: cfg.operator_gid,
            trip_hook: RwLock::new(None),
            canary: RwLock::new(None),
            reload_hook: RwLock::new(None),
            anchors: RwLock::new(None),
            clock: cfg.clock,
        })
    }

    /// The decision engine of the policy in force (a reload swaps it: take it once per
    /// call).
    pub fn engine(&self) -> Arc<Engine> {
        self.engine
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Runs `f` on the engine in force while no reload can swap it (for what must not be
    /// lost in a swap: a definition's registration).
    fn with_engine<R>(&self, f: impl FnOnce(&Engine) -> R) -> R {
        f(&self
            .engine
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Puts `next` in force, taking over what the engine in force learned at run time
    /// ([`Engine::adopt`]); returns the engine it replaced.
    pub(super) fn swap_engine(&self, mut next: Engine) -> Arc<Engine> {
        let mut slot = self
            .engine
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        next.adopt(&slot);
        std::mem::replace(&mut *slot, Arc::new(next))
    }

    /// The clock every decision and record reads.
    pub(super) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The audit writer the gateway records through (None: no audit).
    pub fn audit(&self) -> Option<&WriterHandle> {
        self.audit.as_ref()
    }

    /// The open sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The agent cgroup subtrees (operators' methods are refused inside them).
    pub fn agent_cgroups(&self) -> &AgentCgroups {
        &self.agents
    }

    /// Sets the hook called when a session trips the Rule of Two.
    pub fn set_trip_hook(&self, hook: Arc<dyn TripHook>) {
        *self
            .trip_hook
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hook);
    }

    /// Waits until every record submitted so far is durable.
    async fn durable(&self) -> Result<(), String> {
        match &self.audit {
            Some(h) => h
                .wait_async(h.last_ticket())
                .await
                .map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Appends a record that is not an engine decision and waits until it is durable.
    pub(super) async fn note(
        &self,
        session: &str,
        decision: AD,
        reason: &str,
        detail: Value,
    ) -> Result<(), RpcError> {
        let Some(h) = &self.audit else {
            return Ok(());
        };
        let e = Entry::gateway(session, decision, reason, detail);
        let t = h
            .submit(e)
            .map_err(|e| RpcError::new(code::AUDIT_UNAVAILABLE, e.to_string()))?;
        h.wait_async(t)
            .await
            .map_err(|e| RpcError::new(code::AUDIT_UNAVAILABLE, e.to_string()))
    }

    pub(super) fn cgroup_of(peer: &Peer) -> Result<&str, RpcError> {
        peer.cgroup.as_deref().ok_or_else(|| {
            RpcError::new(
                code::UNIDENTIFIED,
                format!(
                    "the caller's cgroup cannot be read (pid {}); sessions are bound to cgroups",
                    peer.pid
                ),
            )
        })
    }

    /// The session `id`, if the caller's cgroup owns it; a caller from another cgroup is
    /// refused, and the refusal recorded.
    async fn session_for(
        &self,
        peer: &Peer,
        id: &str,
        method: &str,
    ) -> Result<Arc<SessionSlot>, RpcError> {
        let cg = Self::cgroup_of(peer)?;
        let slot = self.sessions.get(id).ok_or_else(|| {
            RpcError::new(code::UNKNOWN_SESSION, format!("no open session `{id}`"))
        })?;
        if slot.owner_cgroup != cg {
            self.note(
                id,
                AD::Deny,
                "wrong_cgroup",
                json!({"method": method, "peer": peer, "owner_cgroup": slot.owner_cgroup}),
            )
            .await?;
            return Err(RpcError::new(
                code::WRONG_CGROUP,
                format!(
                    "session `{id}` belongs to cgroup {}; this caller is in {cg}: refused",
                    slot.owner_cgroup
                ),
            ));
        }
        Ok(slot)
    }

    /// `hello`: the protocol version, the server name and the line limit.
    pub fn hello(&self) -> HelloReply {
        HelloReply {
            max_line: MAX_LINE,
            protocol: PROTOCOL_VERSION,
            server: "gatewayd".into(),
        }
    }

    /// `session/open` for the caller's own cgroup.
    pub async fn open(&self, peer: &Peer, p: SessionOpen) -> Result<Opened, RpcError> {
        let cg = Self::cgroup_of(peer)?.to_owned();
        self.open_for(&cg, peer, p).await
    }

    /// Opens (or attaches to) a session owned by `owner_cgroup`: what a supervisor calls to
    /// open its agent's session before the agent starts. The session starts with the secrets
    /// of the protected files and of the environment `peer` started with
    /// (`/proc/PID/environ`); a supervisor whose agent gets another environment passes it to
    /// [`Gateway::open_with_env`].
    pub async fn open_for(
        &self,
        owner_cgroup: &str,
        peer: &Peer,
        p: SessionOpen,
    ) -> Result<Opened, RpcError> {
        let env = super::peer::environ(peer.pid);
        self.open_with_env(owner_cgroup, peer, p, env).await
    }

    /// [`Gateway::open_for`] with the agent's environment given (None: unknown, noted in the
    /// `session_open` record); its credential-like values become the session's secrets.
    pub async fn open_with_env(
        &self,
        owner_cgroup: &str,
        peer: &Peer,
        p: SessionOpen,
        env: Option<Vec<(String, String)>>,
    ) -> Result<Opened, RpcError> {
        if p.user.is_empty() || p.user.len() > 256 {
            return Err(RpcError::params("`user` must be 1 to 256 bytes"));
        }
        let id = match p.session {
            Some(id) if valid_id(&id) => id,
            Some(_) => {
                return Err(RpcError::params(
                    "`session` must be 1 to 128 printable ASCII characters without spaces",
                ));
            }
            None => gatewayd_core::engine::fence::random_hex(16)
                .map_err(|e| RpcError::new(code::INTERNAL, e))?,
        };
        let scopes: Vec<&str> = p.scopes.iter().map(String::as_str).collect();
        let mut session = Session::new(&id, &p.user, &scopes);
        // Reading the protected files is only worth it for a session that is new.
        let (names, notes) = if self.sessions.get(&id).is_some() {
            (Vec::new(), Vec::new())
        } else {
            self.engine().start_session(&mut session, env.as_deref())
        };
        let slot = SessionSlot {
            id: id.clone(),
            owner_cgroup: owner_cgroup.to_owned(),
            opener: peer.clone(),
            created_ms: self.clock.now_ms(),
            state: tokio::sync::Mutex::new(SessionState {
                session,
                trip_reported: false,
            }),
        };
        match self.sessions.add(slot) {
            Ok(_) => {}
            Err(AddError::Exists(s)) if s.owner_cgroup == owner_cgroup => {
                return Ok(Opened {
                    attached: true,
                    protocol: PROTOCOL_VERSION,
                    session: id,
                });
            }
            Err(AddError::Exists(_)) => {
                self.session_for(peer, &id, "session/open").await?;
                return Err(RpcError::new(code::INTERNAL, "session owner changed"));
            }
            Err(AddError::Full) => {
                return Err(RpcError::new(code::LIMIT, "too many open sessions"));
            }
        }
        let detail = json!({"user": p.user, "scopes": p.scopes, "peer": peer, "cgroup": owner_cgroup,
            "start_secrets": start_secrets_detail(&names, &notes)});
        if let Err(e) = self.note(&id, AD::Info, "session_open", detail).await {
            self.sessions.remove(&id);
            return Err(e);
        }
        Ok(Opened {
            attached: false,
            protocol: PROTOCOL_VERSION,
            session: id,
        })
    }

    /// `session/close`, by the session's owner cgroup: waits for a call in progress, forgets the
    /// session and records it.
    pub async fn close(&self, peer: &Peer, p: SessionClose) -> Result<Closed, RpcError> {
        let slot = self.session_for(peer, &p.session, "session/close").await?;
        // Wait for a call in progress on it to finish.
        let st = slot.state.lock().await;
        self.sessions.remove(&p.session);
        let detail = json!({"peer": peer, "legs": st.session.legs()});
        drop(st);
        self.note(&p.session, AD::Info, "session_close", detail)
            .await?;
        self.export_head("session_close");
        Ok(Closed {
            closed: true,
            session: p.session,
        })
    }

    /// `tools/register`: compares each definition with its pin and scans it; blocked ones are
    /// recorded.
    pub async fn register(&self, peer: &Peer, p: ToolsRegister) -> Result<Registered, RpcError> {
        self.session_for(peer, &p.session, "tools/register").await?;
        let tools = p
            .tools
            .iter()
            .map(|d| ToolStatus {
                name: d.name.clone(),
                status: match self.with_engine(|e| e.register(d)) {
                    Registration::Accepted => Status::Accepted,
                    Registration::NotInPolicy => Status::NotInPolicy,
                    Registration::RugPull { pinned, got } => Status::RugPull { pinned, got },
                    Registration::Flagged(findings) => Status::Flagged { findings },
                },
            })
            .collect();
        self.durable()
            .await
            .map_err(|e| RpcError::new(code::AUDIT_UNAVAILABLE, e))?;
        Ok(Registered { tools })
    }

    /// `secrets/add`: a secret of this session alone (at least 8 characters); records its name.
    pub async fn add_secret(&self, peer: &Peer, p: SecretsAdd) -> Result<SecretAdded, RpcError> {
        let slot = self.session_for(peer, &p.session, "secrets/add").await?;
        let mut st = slot.state.lock().await;
        self.engine()
            .add_session_secret(&mut st.session, &p.name, &p.value)
            .map_err(|e| RpcError::params(e.to_string()))?;
        self.note(
            &p.session,
            AD::Info,
            "secret_added",
            json!({"name": p.name}),
        )
        .await?;
        Ok(SecretAdded {
            added: true,
            name: p.name,
        })
    }

    /// `call/decide`: the full decision of [`Engine::call`] (counters, limits, approvals,
    /// legs), its record durable before the answer; the tool is run by the caller.
    pub async fn decide(&self, peer: &Peer, p: CallDecide) -> Result<Decided, RpcError> {
        let slot = self.session_for(peer, &p.session, "call/decide").await?;
        let mut st = slot.state.lock().await;
        if let Some(message) = self.canary_in(&p.call.tool, &p.call.arguments).await {
            return Ok(deny(Reason::SecretEgress, message, st.session.legs()));
        }
        // The session stays locked until the record is durable: the decision's effects on
        // it (counters, legs) are seen by no other call before that.
        // Taken once the session is locked: the call is decided wholly under one policy.
        let admission = self.engine().admit(&mut st.session, &p.call);
        let legs = st.session.legs();
        if let Err(e) = self.durable().await {
            return Ok(deny(
                Reason::AuditUnavailable,
                format!("the audit record could not be written ({e}); the call must not run"),
                legs,
            ));
        }
        if let Err(e) = self
            .after_change(&slot, &mut st, Some(&p.call.tool), "call/decide")
            .await
        {
            return Ok(deny(Reason::CheckError, e, legs));
        }
        let in_agent = peer
            .cgroup
            .as_deref()
            .is_none_or(|c| self.agents.contains(c));
        let (arguments, credentials) = match admission.admitted {
            Some(a) => {
                let creds =
                    (!in_agent && !a.credentials.is_empty()).then(|| a.credentials.into_map());
                (Some(a.arguments.into_owned()), creds)
            }
            None => (None, None),
        };
        Ok(Decided {
            verdict: admission.verdict,
            arguments,
            credentials,
            legs,
        })
    }

    /// `call/output`: a tool's output or error, redacted, and fenced when untrusted.
    pub async fn output(&self, peer: &Peer, p: CallOutput) -> Result<Checked, RpcError> {
        let result = match (p.output, p.error) {
            (Some(o), None) => Ok(o),
            (None, Some(e)) => Err(e),
            _ => return Err(RpcError::params("give exactly one of `output` and `error`")),
        };
        let slot = self.session_for(peer, &p.session, "call/output").await?;
        let mut st = slot.state.lock().await;
        let (output, error) = self.engine().finish(&mut st.session, &p.tool, result);
        if let Err(e) = self
            .after_change(&slot, &mut st, Some(&p.tool), "call/output")
            .await
        {
            return Err(RpcError::new(code::LOCKDOWN_FAILED, e));
        }
        Ok(Checked {
            output,
            error,
            legs: st.session.legs(),
        })
    }

    /// Runs the Rule-of-Two hook once, when the session's legs first trip; a failure is
    /// recorded and returned (the caller refuses what it was doing).
    pub(super) async fn after_change(
        &self,
        slot: &SessionSlot,
        st: &mut SessionState,
        tool: Option<&str>,
        method: &'static str,
    ) -> Result<(), String> {
        let legs = st.session.legs();
        if !legs.tripped() || st.trip_reported {
            return Ok(());
        }
        let hook = self
            .trip_hook
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            // `--learn-unsafe`: the lockdown is recorded as what would have been done.
            .filter(|_| self.build.learn != Learn::Unsafe);
        let tripped = TrippedSession {
            id: &slot.id,
            cgroup: &slot.owner_cgroup,
            legs,
            tool,
            method,
        };
        let res = match hook {
            Some(h) => h.session_tripped(&tripped).await,
            None => Ok(()),
        };
        let detail =
            json!({"cgroup": slot.owner_cgroup, "legs": legs, "tool": tool, "method": method});
        match res {
            Ok(()) if self.build.learn == Learn::Unsafe => {
                let m =
                    "learn mode (unsafe): the egress lockdown of the Rule of Two was not applied";
                let d =
                    json!({"cgroup": slot.owner_cgroup, "legs": legs, "tool": tool, "message": m});
                self.note(&slot.id, AD::WouldDeny, "egress_lockdown", d)
                    .await
                    .map_err(|e| e.message)?;
                st.trip_reported = true;
                Ok(())
            }
            Ok(()) => {
                self.note(&slot.id, AD::Info, "session_tripped", detail)
                    .await
                    .map_err(|e| e.message)?;
                st.trip_reported = true;
                Ok(())
            }
            Err(e) => {
                let msg = format!(
                    "this session tripped the Rule of Two and its egress lockdown failed ({e}); refused"
                );
                let _ = self
                    .note(&slot.id, AD::Deny, "lockdown_failed", json!({"error": e}))
                    .await;
                Err(msg)
            }
        }
    }

    /// The last durable record: seq and hash, to anchor elsewhere.
    pub fn audit_head(&self) -> Head {
        let head = self
            .audit
            .as_ref()
            .map(WriterHandle::head)
            .unwrap_or_default();
        Head {
            seq: head.seq,
            hash: head.hash,
        }
    }
}

/// What the `session_open` record says of the secrets a session started with: how many, the
/// first names (never values), and what could not be used.
fn start_secrets_detail(names: &[String], notes: &[String]) -> Value {
    const SHOWN: usize = 32;
    json!({"count": names.len(), "names": &names[..names.len().min(SHOWN)], "notes": notes})
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}
