//! MCP's stdio framing (one JSON-RPC message per line) as the proxy sees it: lines read with
//! a size limit, messages sorted into requests, notifications and responses, and the error
//! answers the proxy writes itself.
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

/// JSON-RPC error codes the proxy answers with (docs/MCP.md lists them).
pub(crate) mod code {
    /// The line is not JSON.
    pub(crate) const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC message, a batch, or a line over the size limit.
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// `tools/call` without a tool name.
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// The tool server exited, or its answer could not be processed.
    pub(crate) const SERVER_GONE: i64 = -32050;
    /// The tool server did not answer in time.
    pub(crate) const SERVER_TIMEOUT: i64 = -32051;
    /// The gateway (the daemon, or the proxy's own engine) could not decide: the call is not
    /// run.
    pub(crate) const GATEWAY_UNAVAILABLE: i64 = -32052;
    /// The gateway refused the request (a resource it may not read), or a request of the
    /// server's (an elicitation asking for a secret, a URL outside the egress allowlist).
    pub(crate) const REFUSED: i64 = -32053;
}

/// What one read produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line is in the buffer (without its `\n`, and without a `\r` before it).
    Whole,
    /// The line was longer than the limit; it was read to its end and thrown away.
    TooLong,
    /// End of input (a last line without `\n` is returned as [`Line::Whole`] first).
    Eof,
}

/// Reads one line into `buf` (cleared first), holding at most `max` bytes of it.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Whole,
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(if done { take + 1 } else { take });
        if done {
            if too_long {
                return Ok(Line::TooLong);
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Whole);
        }
    }
}

/// A parsed message.
#[derive(Debug)]
pub(crate) enum Message {
    /// `method` and `id`.
    Request {
        /// The request's `id`, echoed in its response.
        id: Value,
        /// The request's `method`.
        method: String,
    },
    /// `method`, no `id`.
    Notification {
        /// The notification's `method`.
        method: String,
    },
    /// `id` with `result` or `error`.
    Response {
        /// The `id` of the request answered.
        id: Value,
    },
}

/// Why a line is not a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Not JSON at all.
    NotJson(String),
    /// JSON, but not one JSON-RPC 2.0 message (a batch, a scalar, no method and no id).
    NotRpc(&'static str),
}

impl Malformed {
    /// The error object the proxy answers with.
    pub(crate) fn error(&self) -> Value {
        match self {
            Malformed::NotJson(e) => error_obj(code::PARSE_ERROR, &format!("parse error: {e}")),
            Malformed::NotRpc(why) => error_obj(code::INVALID_REQUEST, why),
        }
    }
}

/// Parses one line into its JSON value and what kind of message it is.
pub(crate) fn parse(line: &[u8]) -> Result<(Value, Message), Malformed> {
    let v: Value = serde_json::from_slice(line).map_err(|e| Malformed::NotJson(e.to_string()))?;
    let obj = match &v {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(Malformed::NotRpc(
                "batches are not part of MCP: send one message per line",
            ));
        }
        _ => return Err(Malformed::NotRpc("a message must be a JSON object")),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Malformed::NotRpc("`jsonrpc` must be \"2.0\""));
    }
    let id = obj.get("id").filter(|i| i.is_string() || i.is_number());
    let msg = match (obj.get("method").and_then(Value::as_str), id) {
        (Some(m), Some(id)) => Message::Request {
            id: id.clone(),
            method: m.to_owned(),
        },
        (Some(m), None) if !obj.contains_key("id") => Message::Notification {
            method: m.to_owned(),
        },
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Message::Response { id: id.clone() }
        }
        _ => {
            return Err(Malformed::NotRpc(
                "not a JSON-RPC 2.0 request, notification or response (`id` must be a string or a number)",
            ));
        }
    };
    Ok((v, msg))
}

/// A key for maps of pending ids: `1` and `"1"` are different ids.
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A JSON-RPC error object.
pub(crate) fn error_obj(code: i64, message: &str) -> Value {
    json!({"code": code, "message": message})
}

/// An error response line.
pub(crate) fn error_response(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": error_obj(code, message)}).to_string()
}

/// A result response line.
pub(crate) fn result_response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// The 2026-07-28 per-request protocol version (`_meta`), if the request carries one.
pub(crate) fn meta_version(msg: &Value) -> Option<&str> {
    msg.pointer("/params/_meta")?
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<(Line, String)> {
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut r, &mut buf, max).await.unwrap();
            let done = l == Line::Eof;
            out.push((l, String::from_utf8_lossy(&buf).into_owned()));
            if done {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_and_limited() {
        let got = lines(b"{\"a\":1}\r\n0123456789abc\nlast", 8).await;
        assert_eq!(got[0], (Line::Whole, "{\"a\":1}".into()));
        assert_eq!(got[1].0, Line::TooLong, "{got:?}");
        assert_eq!(got[2], (Line::Whole, "last".into()));
        assert_eq!(got[3].0, Line::Eof);
    }

    #[test]
    fn messages_are_classified() {
        let kind = |s: &str| parse(s.as_bytes()).map(|(_, m)| format!("{m:?}"));
        assert!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
                .unwrap()
                .starts_with("Request")
        );
        assert!(
            kind(r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#)
                .unwrap()
                .starts_with("Notification")
        );
        assert!(
            kind(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#)
                .unwrap()
                .starts_with("Response")
        );
        assert!(matches!(kind("{nope"), Err(Malformed::NotJson(_))));
        assert!(matches!(kind("[1]"), Err(Malformed::NotRpc(_))));
        assert!(matches!(
            kind(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            Err(Malformed::NotRpc(_))
        ));
        assert!(matches!(
            kind(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            Err(Malformed::NotRpc(_))
        ));
        assert_ne!(id_key(&json!(1)), id_key(&json!("1")));
    }
}
