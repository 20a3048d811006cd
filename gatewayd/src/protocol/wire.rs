//! The frame (docs/PROTOCOL.md): JSON-RPC 2.0, one message per line, UTF-8, at most
//! [`MAX_LINE`] bytes per line including the newline; the error codes.
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version, in the `hello` and `session/open` results. Raised on any change an
/// existing client would misread (docs/PROTOCOL.md, "Versioning"); not for a field added to
/// a result, which clients ignore.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest message accepted, newline included. A longer line is answered with an
/// `invalid_request` error and the connection is closed.
pub const MAX_LINE: usize = 1 << 20;

/// JSON-RPC error codes: the standard ones, and the daemon's own in -32000..-32099.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC 2.0 request object, a batch, or a line over [`MAX_LINE`](super::MAX_LINE).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No method has that name.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Missing or unknown fields, wrong types, or a value out of range.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A failure that should not happen.
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
pub(crate) struct Request {
    /// Must be `"2.0"`.
    pub jsonrpc: String,
    /// A string or a number; absent for a notification.
    #[serde(default)]
    pub id: Option<Value>,
    /// The method name, e.g. `call/decide`.
    pub method: String,
    /// The method's parameters (an object); absent = `{}`.
    #[serde(default)]
    pub params: Option<Value>,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcError {
    /// One of the [`code`] constants.
    pub code: i64,
    /// What went wrong, for the client (and the model) to read.
    pub message: String,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    /// An `invalid_params` error.
    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
}

/// One response line (without the newline).
pub(crate) fn response(id: &Value, result: Result<Value, RpcError>) -> String {
    /// The members in the order a JSON object of them always had (sorted by name), written
    /// without building that object first.
    #[derive(Serialize)]
    struct Line<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a RpcError>,
        id: &'a Value,
        jsonrpc: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a Value>,
    }
    let (result, error) = match &result {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    let line = Line {
        error,
        id,
        jsonrpc: "2.0",
        result,
    };
    // A JSON value and an error of a code and a text always serialise.
    serde_json::to_string(&line).unwrap_or_else(|e| {
        format!(
            r#"{{"error":{{"code":{},"message":"the answer could not be written: {}"}},"id":null,"jsonrpc":"2.0"}}"#,
            code::INTERNAL,
            e.to_string().replace(['"', '\\'], "'")
        )
    })
}

/// One request line as a client writes it (without the newline): the members in the order
/// PROTOCOL.md's examples show them.
pub(crate) fn request_line<P: Serialize>(
    id: u64,
    method: &str,
    params: &P,
) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Line<'a, P> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        params: &'a P,
    }
    serde_json::to_string(&Line {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// One answer line as a client reads it: the result (of type `R`) or the error.
#[derive(Debug, Deserialize)]
pub(crate) struct Answer<R> {
    /// The request's id (null for a line that could not be read as a request).
    pub(crate) id: Value,
    /// The result; absent on error.
    #[serde(default = "Option::default")]
    pub(crate) result: Option<R>,
    /// The error; absent on success.
    #[serde(default)]
    pub(crate) error: Option<RpcError>,
}

impl<R> Answer<R> {
    /// The result or the error of an answer to request `id`; `None` when the answer is to
    /// another id or has neither.
    pub(crate) fn into_result(self, id: u64) -> Option<Result<R, RpcError>> {
        if self.id.as_u64() != Some(id) && !(self.id.is_null() && self.error.is_some()) {
            return None;
        }
        match (self.result, self.error) {
            (_, Some(e)) => Some(Err(e)),
            (Some(r), None) => Some(Ok(r)),
            (None, None) => None,
        }
    }
}
