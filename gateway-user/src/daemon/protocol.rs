//! The wire format (docs/PROTOCOL.md): JSON-RPC 2.0, one message per line, UTF-8, at most
//! [`MAX_LINE`] bytes per line including the newline.
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version, in the `hello` and `session/open` results. Raised on any change a
/// client could notice.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest message accepted, newline included. A longer line is answered with an
/// `invalid_request` error and the connection is closed.
pub const MAX_LINE: usize = 1 << 20;

/// JSON-RPC error codes: the standard ones, and the daemon's own in -32000..-32099.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    /// No open session with that id.
    pub const UNKNOWN_SESSION: i64 = -32001;
    /// The session belongs to another cgroup than the caller's.
    pub const WRONG_CGROUP: i64 = -32002;
    /// The caller may not do this (operator methods from an agent's cgroup, or from a user
    /// who is neither root nor in the socket's group).
    pub const NOT_PERMITTED: i64 = -32003;
    /// The daemon is shutting down.
    pub const SHUTTING_DOWN: i64 = -32004;
    /// Too many open sessions.
    pub const LIMIT: i64 = -32005;
    /// No pending approval with that id, or it was already decided or has expired.
    pub const APPROVAL: i64 = -32006;
    /// The audit record of a non-decision (session open, approval) could not be written.
    pub const AUDIT_UNAVAILABLE: i64 = -32007;
    /// The caller's cgroup could not be read.
    pub const UNIDENTIFIED: i64 = -32008;
    /// The Rule-of-Two hook (the kernel egress lockdown) failed.
    pub const LOCKDOWN_FAILED: i64 = -32009;
}

/// A request as read from a line. `id` absent = a notification (never answered).
#[derive(Debug, Deserialize)]
pub struct Request {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Option<Value>,
    pub method: String,
    #[serde(default)]
    pub params: Option<Value>,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
}

/// One response line (without the newline).
pub fn response(id: &Value, result: Result<Value, RpcError>) -> String {
    let v = match result {
        Ok(r) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err(e) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": e}),
    };
    v.to_string()
}

/// Parameters of each method (unknown fields are refused, so a misspelt field is an error,
/// not a silently ignored option).
pub mod params {
    use serde::Deserialize;
    use serde_json::Value;

    use crate::engine::{ToolCall, ToolDefinition};

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Open {
        /// The session id: chosen by the client (e.g. the agent host's session id), or made
        /// up by the daemon. Opening an id the caller's cgroup already opened attaches to it.
        #[serde(default)]
        pub session: Option<String>,
        pub user: String,
        #[serde(default)]
        pub scopes: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SessionOnly {
        pub session: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Register {
        pub session: String,
        pub tools: Vec<ToolDefinition>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Secret {
        pub session: String,
        pub name: String,
        pub value: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Decide {
        pub session: String,
        pub call: ToolCall,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Output {
        pub session: String,
        pub tool: String,
        #[serde(default)]
        pub output: Option<Value>,
        #[serde(default)]
        pub error: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ApprovalId {
        pub id: String,
    }
}
