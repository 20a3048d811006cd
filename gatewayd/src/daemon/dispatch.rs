//! One request line in, one response line out: JSON-RPC parsing, method routing, parameter
//! decoding. Transport-free, so a supervisor can serve the same methods another way.
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    gateway::Gateway,
    peer::Peer,
    protocol::{Request, RpcError, code, response},
};

/// Every method, in the order docs/PROTOCOL.md describes them.
pub const METHODS: &[&str] = &[
    "hello",
    "session/open",
    "session/close",
    "session/list",
    "tools/register",
    "secrets/add",
    "call/decide",
    "call/output",
    "approvals/list",
    "approvals/approve",
    "approvals/deny",
    "audit/head",
];

/// Handles one line (without its newline). Returns the response line, or None for a
/// notification (a request without `id`), which is never answered.
pub async fn handle_line(gw: &Gateway, peer: &Peer, line: &[u8]) -> Option<String> {
    // A well-formed request is read straight into its fields; anything else is read again
    // as a value to say what is wrong with it.
    let req = match serde_json::from_slice::<Request>(line) {
        Ok(req) => req,
        Err(_) => match parse_slowly(line) {
            Ok(req) => req,
            Err(answer) => return Some(answer),
        },
    };
    let id = match (&req.id, req.jsonrpc.as_str()) {
        (None, _) => return None,
        (Some(id), "2.0") if id.is_string() || id.is_number() => id.clone(),
        (Some(id), _) => {
            return Some(response(
                id,
                Err(RpcError::new(
                    code::INVALID_REQUEST,
                    "`jsonrpc` must be \"2.0\" and `id` a string or a number",
                )),
            ));
        }
    };
    Some(response(
        &id,
        route(gw, peer, &req.method, req.params).await,
    ))
}

/// The request in `line` by way of a JSON value, or the error answer: not JSON, a batch, or
/// not a JSON-RPC 2.0 request.
fn parse_slowly(line: &[u8]) -> Result<Request, String> {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Err(response(
                &Value::Null,
                Err(RpcError::new(
                    code::PARSE_ERROR,
                    format!("parse error: {e}"),
                )),
            ));
        }
    };
    if v.is_array() {
        return Err(response(
            &Value::Null,
            Err(RpcError::new(
                code::INVALID_REQUEST,
                "batches are not supported: send one request per line",
            )),
        ));
    }
    let id = v.get("id").cloned();
    serde_json::from_value(v).map_err(|e| {
        response(
            &id.unwrap_or(Value::Null),
            Err(RpcError::new(
                code::INVALID_REQUEST,
                format!("not a JSON-RPC 2.0 request: {e}"),
            )),
        )
    })
}

fn decode<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    serde_json::from_value(params.unwrap_or(Value::Object(serde_json::Map::default())))
        .map_err(|e| RpcError::params(format!("invalid params: {e}")))
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::new(code::INTERNAL, e.to_string()))
}

async fn route(
    gw: &Gateway,
    peer: &Peer,
    method: &str,
    params: Option<Value>,
) -> Result<Value, RpcError> {
    match method {
        "hello" => Ok(gw.hello()),
        "session/open" => gw.open(peer, decode(params)?).await,
        "session/close" => gw.close(peer, decode(params)?).await,
        "session/list" => {
            to_value(gw.sessions_list(peer).await?).map(|s| serde_json::json!({"sessions": s}))
        }
        "tools/register" => gw.register(peer, decode(params)?).await,
        "secrets/add" => gw.add_secret(peer, decode(params)?).await,
        "call/decide" => to_value(gw.decide(peer, decode(params)?).await?),
        "call/output" => gw.output(peer, decode(params)?).await,
        "approvals/list" => {
            to_value(gw.approvals_list(peer).await?).map(|a| serde_json::json!({"approvals": a}))
        }
        "approvals/approve" => gw.settle(peer, decode(params)?, true).await,
        "approvals/deny" => gw.settle(peer, decode(params)?, false).await,
        "audit/head" => Ok(gw.audit_head()),
        other => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method `{}`; methods: {}",
                other.chars().take(100).collect::<String>(),
                METHODS.join(", ")
            ),
        )),
    }
}
