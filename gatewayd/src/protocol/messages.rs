//! Every method's parameters and result, as types that both encode and decode. Unknown
//! parameter fields are refused, so a misspelt field is an error, not an ignored option.
//! Results are written with their keys sorted (through a JSON value), which is what
//! PROTOCOL.md's examples show byte for byte.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use gatewayd_core::engine::{Approval, Legs, ToolCall, ToolDefinition, Verdict};

/// `hello`: no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {}

/// `hello`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloReply {
    /// The longest line the server reads, newline included.
    pub max_line: usize,
    /// The protocol version ([`super::PROTOCOL_VERSION`]).
    pub protocol: u32,
    /// `gatewayd`.
    pub server: String,
}

/// `session/open`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionOpen {
    /// The session id: chosen by the client (e.g. the agent host's session id), or made
    /// up by the daemon. Opening an id the caller's cgroup already opened attaches to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Who the agent acts for (1 to 256 bytes), from the application.
    pub user: String,
    /// Scopes the session holds, from the application.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// `session/open`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opened {
    /// Whether the id was already open (the caller attached to it).
    pub attached: bool,
    /// The protocol version.
    pub protocol: u32,
    /// The session id.
    pub session: String,
}

/// `session/close`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionClose {
    /// The session id.
    pub session: String,
}

/// `session/close`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Closed {
    /// Always true.
    pub closed: bool,
    /// The session id.
    pub session: String,
}

/// `session/list` (operators): no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionList {}

/// `session/list`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionListReply {
    /// Every open session, oldest first.
    pub sessions: Vec<SessionInfo>,
}

/// One line of `session/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session id.
    pub session: String,
    /// Who the agent acts for.
    pub user: String,
    /// The session's scopes.
    pub scopes: Vec<String>,
    /// The cgroup that owns the session.
    pub cgroup: String,
    /// Pid of the process that opened it.
    pub pid: i32,
    /// Uid of the process that opened it.
    pub uid: u32,
    /// When it was opened, ms since the Unix epoch.
    pub created_ms: u64,
    /// The Rule-of-Two legs touched so far.
    pub legs: Legs,
    /// Whether both untrusted and private legs are held.
    pub tripped: bool,
    /// Budget units spent by allowed calls.
    pub spent: u64,
    /// Names of the session's own secrets (never values).
    pub secrets: Vec<String>,
}

/// `tools/register`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsRegister {
    /// The session id.
    pub session: String,
    /// The definitions the tool server announced.
    pub tools: Vec<ToolDefinition>,
}

/// `tools/register`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registered {
    /// One status per definition, in the order given.
    pub tools: Vec<ToolStatus>,
}

/// What the gateway made of one announced definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStatus {
    /// The tool's name.
    pub name: String,
    /// The verdict, and what goes with it.
    #[serde(flatten)]
    pub status: Status,
}

/// `tools/register`'s verdict on one definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    /// Matches its pin (and the scan found nothing).
    Accepted,
    /// Not in the policy's registry: calls to it stay refused.
    NotInPolicy,
    /// Differs from its pin: blocked for every session until re-pinned.
    RugPull {
        /// The pinned fingerprint.
        pinned: String,
        /// The announced definition's fingerprint.
        got: String,
    },
    /// The strict description scan flagged it: blocked.
    Flagged {
        /// What the scan found.
        findings: Vec<String>,
    },
}

impl Status {
    /// The status as the protocol spells it (`accepted`, `rug_pull`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::NotInPolicy => "not_in_policy",
            Status::RugPull { .. } => "rug_pull",
            Status::Flagged { .. } => "flagged",
        }
    }
}

/// `secrets/add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsAdd {
    /// The session id.
    pub session: String,
    /// The secret's name (recorded; the value never is).
    pub name: String,
    /// The value, at least 8 characters.
    pub value: String,
}

/// `secrets/add`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecretAdded {
    /// Always true.
    pub added: bool,
    /// The secret's name.
    pub name: String,
}

/// `call/decide`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallDecide {
    /// The session id.
    pub session: String,
    /// The call the agent asks for.
    pub call: ToolCall,
}

/// `call/decide`'s result: the verdict, and on allow what the caller needs to run the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    /// The engine's verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The arguments to run the call with (paths canonicalised); only on allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The tool's credentials; only on allow, only for a tool that has some, and never to
    /// a caller inside an agent cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<BTreeMap<String, String>>,
    /// The session's legs after the decision.
    pub legs: Legs,
}

/// `call/output`: what the tool returned (`output` or `error`, exactly one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallOutput {
    /// The session id.
    pub session: String,
    /// The tool that ran.
    pub tool: String,
    /// Its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Its error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CallOutput {
    /// A report of `tool`'s result: its output, or its error text.
    pub fn of(session: &str, tool: &str, result: Result<Value, String>) -> CallOutput {
        let (output, error) = match result {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e)),
        };
        CallOutput {
            session: session.to_owned(),
            tool: tool.to_owned(),
            output,
            error,
        }
    }
}

/// `call/output`'s result: the output or error as the model may see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    /// The output, redacted (and fenced for an untrusted tool); None when an error was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The error text, redacted; None when an output was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The session's legs after the output.
    pub legs: Legs,
}

/// `approvals/list` (operators): no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApprovalsList {}

/// `approvals/list`'s result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovalList {
    /// Pending approvals, oldest first.
    pub approvals: Vec<PendingApproval>,
}

/// One held call of `approvals/list`: what a person needs to decide it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The approval: id, session, tool, the canonical `arguments` and their SHA-256, the
    /// reasons of the hold, created and expiry times, state.
    #[serde(flatten)]
    pub approval: Approval,
    /// The session's Rule-of-Two legs now; null when the session has been closed.
    pub legs: Option<Legs>,
}

/// `approvals/approve` (operators).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsApprove {
    /// The approval id.
    pub id: String,
}

/// `approvals/deny` (operators).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsDeny {
    /// The approval id.
    pub id: String,
}

/// The result of `approvals/approve` and `approvals/deny`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settled {
    /// The approval id.
    pub id: String,
    /// `approved` or `rejected`.
    pub state: gatewayd_core::engine::ApprovalState,
}

/// `audit/head`: no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditHead {}

/// `audit/head`'s result: the last durable record, to anchor elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// Its `seq` (0: an empty log).
    pub seq: u64,
    /// Its hash (null: an empty log).
    pub hash: Option<String>,
}

/// `export/stats` (operators): no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportStats {}

/// `export/stats`'s result: each export sink's counts, in the order configured (none when
/// the daemon exports nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportStatsReply {
    /// One per `--export`.
    pub exporters: Vec<ExporterStats>,
}

/// One export sink's counts (docs/FLEET.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExporterStats {
    /// The sink, as configured (`syslog:tcp:127.0.0.1:514`).
    pub sink: String,
    /// Items (records and heads) accepted into its queue.
    pub queued: u64,
    /// Items the sink took.
    pub exported: u64,
    /// Items dropped: the queue full, the sink refusing them, or still failing at stop.
    pub dropped: u64,
    /// Items queued and not yet exported or dropped.
    pub lag: u64,
    /// From queued to delivered, for the last batch delivered (ms).
    pub lag_ms: u64,
    /// Whether the last attempt failed (the sink is being retried with back-off).
    pub failing: bool,
    /// The last failure, if any.
    pub last_error: Option<String>,
}
