//! `gatewayd hook`: one event of an agent host (Claude Code, Codex, Gemini CLI) on stdin,
//! decided by the gateway, answered in that host's format (docs/HOOKS.md).
//!
//! - [`mapping`] — each host's tools to the gateway's tools
//! - [`answer`]  — each host's answer format, and the exit-2 deny every host reads
//!
//! The gateway is the daemon (`GATEWAYD_SOCKET`: the session's taint, counters and approvals
//! shared with the agent's other tool paths; the policy is not loaded per call) or an engine
//! loaded for this one event ([`Gate::Local`]; then each event is a session of its own).
use serde_json::{Value, json};

use crate::{
    backend::Backend,
    daemon::dispatch::Serve,
    protocol::{
        CallDecide, CallOutput, SessionOpen,
        client::{Client, ClientError},
    },
};
use gatewayd_core::{
    audit::{Decision, Entry},
    engine::{ToolCall, Verdict},
};

pub(crate) mod answer;
pub mod codex_trust;
pub mod install;
pub(crate) mod mapping;

pub use answer::Answer;

/// The agent host whose hook this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// Claude Code (`claude`).
    Claude,
    /// Codex (`codex`).
    Codex,
    /// Gemini CLI (`gemini`).
    Gemini,
}

impl std::str::FromStr for Host {
    type Err = String;
    fn from_str(s: &str) -> Result<Host, String> {
        match s {
            "claude" => Ok(Host::Claude),
            "codex" => Ok(Host::Codex),
            "gemini" => Ok(Host::Gemini),
            _ => Err(format!("unknown host `{s}` (claude, codex, gemini)")),
        }
    }
}

/// Before or after the tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the tool runs (`PreToolUse`, Gemini's `BeforeTool`): the call is decided.
    Pre,
    /// After the tool ran (`PostToolUse`, Gemini's `AfterTool`): its result is reported.
    Post,
}

/// Where decisions come from.
pub enum Gate {
    /// The daemon, over one blocking connection.
    Daemon(Client),
    /// An engine of this process's own, with its audit log.
    Local {
        /// The runtime the engine's calls are run on.
        rt: tokio::runtime::Runtime,
        /// The in-process engine and its audit log.
        backend: Backend,
    },
}

impl Gate {
    fn request<R: Serve>(&mut self, params: R) -> Result<R::Reply, String> {
        match self {
            Gate::Daemon(c) => c.request(&params).map_err(|e| match e {
                ClientError::Rpc(r) => r.to_string(),
                other => other.to_string(),
            }),
            Gate::Local { rt, backend } => rt
                .block_on(backend.request(params))
                .map_err(|e| e.to_string()),
        }
    }

    /// Opens (or attaches to) `session`.
    fn open(&mut self, session: &str, user: &str, scopes: &[String]) -> Result<(), String> {
        self.request(SessionOpen {
            session: Some(session.to_owned()),
            user: user.to_owned(),
            scopes: scopes.to_vec(),
        })
        .map(drop)
    }

    /// Records input that could not be decided. The daemon has no method for a record of
    /// the front end's own, so there it is a refused call of the pseudo-tool `hook:malformed`
    /// (a name no policy tool can take: `not_allowlisted`, recorded by the daemon).
    fn record_malformed(&mut self, session: &str, user: &str, why: &str) {
        match self {
            Gate::Local { backend, .. } => {
                if let Some(r) = backend.recorder() {
                    let _ = r.append(Entry::gateway(
                        session,
                        Decision::Deny,
                        "hook_malformed",
                        json!({"message": why}),
                    ));
                }
            }
            Gate::Daemon(_) => {
                let _ = self.open(session, user, &[]);
                let error = why.chars().take(500).collect::<String>();
                let _ = self.request(CallDecide {
                    session: session.to_owned(),
                    call: ToolCall::new("hook:malformed", json!({ "error": error })),
                });
            }
        }
    }

    /// Closes the audit log of a local gate.
    pub fn close(self) {
        if let Gate::Local { backend, .. } = self {
            let _ = backend.close();
        }
    }
}

/// Who the session belongs to (from the command line; the host does not say), and how its
/// allows are answered.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The session's user.
    pub user: String,
    /// The scopes the session holds.
    pub scopes: Vec<String>,
    /// `--authoritative`: a gateway allow is an explicit allow, which skips the host's own
    /// permission step. By default an allow says nothing and the host asks as it would.
    pub authoritative: bool,
}

/// A session id the daemon accepts: the host's own, or a digest of it.
fn session_id(host: Host, raw: &str) -> String {
    if (1..=100).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_graphic()) {
        return format!("{}-{raw}", host_name(host));
    }
    let d = gatewayd_core::engine::fingerprint::sha256_hex(raw.as_bytes());
    format!("{}-{}", host_name(host), &d[..32])
}

fn host_name(h: Host) -> &'static str {
    match h {
        Host::Claude => "claude",
        Host::Codex => "codex",
        Host::Gemini => "gemini",
    }
}

/// A host call before it runs: the gateway decides each of its calls, and the host is told
/// the strictest verdict (a deny over a hold over an allow).
fn decide_calls(
    host: Host,
    calls: Vec<ToolCall>,
    session: &str,
    gate: &mut Gate,
    who: &Identity,
) -> Answer {
    let rank = |d: &Verdict| match d.decision {
        Decision::Allow => 0,
        Decision::Hold => 1,
        _ => 2,
    };
    let mut worst: Option<Verdict> = None;
    for c in calls {
        let decide = CallDecide {
            session: session.to_owned(),
            call: c,
        };
        let d = match gate.request(decide) {
            Ok(r) => r.verdict,
            Err(e) => return Answer::fail(&format!("the gateway is unavailable ({e}); refused")),
        };
        if worst.as_ref().is_none_or(|w| rank(&d) > rank(w)) {
            worst = Some(d);
        }
    }
    match worst {
        Some(d) => answer::pre(host, &d, who.authoritative),
        None => Answer::fail("nothing to decide"),
    }
}

/// Decides one event. Never panics on input; anything that cannot be decided is denied
/// (exit 2) and recorded.
pub fn handle(host: Host, input: &[u8], gate: &mut Gate, who: &Identity) -> Answer {
    let fallback = format!("{}-unidentified", host_name(host));
    let malformed = |gate: &mut Gate, session: &str, why: String| {
        gate.record_malformed(session, &who.user, &why);
        Answer::fail(&format!("hook input refused: {why}"))
    };
    let v: Value = match serde_json::from_slice(input) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return malformed(gate, &fallback, "the event is not a JSON object".into()),
        Err(e) => return malformed(gate, &fallback, format!("the event is not JSON ({e})")),
    };
    let session = match v.get("session_id").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => session_id(host, s),
        _ => return malformed(gate, &fallback, "the event has no `session_id`".into()),
    };
    let event = v["hook_event_name"].as_str().unwrap_or("");
    let phase = match (host, event) {
        (Host::Claude | Host::Codex, "PreToolUse") | (Host::Gemini, "BeforeTool") => Phase::Pre,
        (Host::Claude | Host::Codex, "PostToolUse") | (Host::Gemini, "AfterTool") => Phase::Post,
        _ => {
            let why = format!("`hook_event_name` {event:?} is not a tool event of this host");
            return malformed(gate, &session, why);
        }
    };
    let Some(tool) = v.get("tool_name").and_then(Value::as_str) else {
        return malformed(gate, &session, "the event has no `tool_name`".into());
    };
    let input = v.get("tool_input").cloned().unwrap_or(Value::Null);
    let cwd = v["cwd"].as_str().unwrap_or("");
    let server = v
        .pointer("/mcp_context/server_name")
        .and_then(Value::as_str);
    let calls = match mapping::map(host, tool, &input, cwd, server) {
        Ok(c) => c,
        Err(why) => return malformed(gate, &session, format!("`{tool}`: {why}")),
    };
    if let Err(e) = gate.open(&session, &who.user, &who.scopes) {
        return Answer::fail(&format!("the gateway is unavailable ({e}); refused"));
    }
    match phase {
        Phase::Pre => decide_calls(host, calls, &session, gate, who),
        Phase::Post => {
            let original = v
                .get("tool_response")
                .or_else(|| v.get("tool_output"))
                .cloned()
                .unwrap_or(Value::Null);
            let report = CallOutput::of(&session, &calls[0].tool, Ok(original.clone()));
            match gate.request(report) {
                Ok(r) => answer::post(host, tool, &original, &r.output.unwrap_or(Value::Null)),
                Err(e) => Answer::fail(&format!(
                    "the gateway could not check the tool's output ({e})"
                )),
            }
        }
    }
}
