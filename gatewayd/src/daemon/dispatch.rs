//! One request line in, one response line out: JSON-RPC parsing, method routing, parameter
//! decoding; and [`Serve`], each method's parameters run against a [`Gateway`], which the
//! in-process [`crate::backend::Backend`] calls without a line in between.
use std::future::Future;

use serde_json::Value;

use super::{gateway::Gateway, peer::Peer};
use crate::protocol::{
    ApprovalsApprove, ApprovalsDeny, ApprovalsList, AuditHead, CallDecide, CallOutput, ExportStats,
    Hello, Method, Rpc, SecretsAdd, SessionClose, SessionList, SessionOpen, ToolsRegister,
    messages::{ApprovalList, ExportStatsReply, SessionListReply},
    wire::{Request, RpcError, code, response},
};

/// A method's parameters, run by the gateway for a caller.
pub trait Serve: Rpc {
    /// Runs the method for `peer`.
    fn serve(
        self,
        gw: &Gateway,
        peer: &Peer,
    ) -> impl Future<Output = Result<Self::Reply, RpcError>> + Send;
}

impl Serve for Hello {
    async fn serve(self, gw: &Gateway, _: &Peer) -> Result<Self::Reply, RpcError> {
        Ok(gw.hello())
    }
}

impl Serve for SessionOpen {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.open(peer, self).await
    }
}

impl Serve for SessionClose {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.close(peer, self).await
    }
}

impl Serve for SessionList {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        let sessions = gw.sessions_list(peer).await?;
        Ok(SessionListReply { sessions })
    }
}

impl Serve for ToolsRegister {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.register(peer, self).await
    }
}

impl Serve for SecretsAdd {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.add_secret(peer, self).await
    }
}

impl Serve for CallDecide {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.decide(peer, self).await
    }
}

impl Serve for CallOutput {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.output(peer, self).await
    }
}

impl Serve for ApprovalsList {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        let approvals = gw.approvals_list(peer).await?;
        Ok(ApprovalList { approvals })
    }
}

impl Serve for ApprovalsApprove {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.settle(peer, self.id, true).await
    }
}

impl Serve for ApprovalsDeny {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.settle(peer, self.id, false).await
    }
}

impl Serve for ExportStats {
    async fn serve(self, gw: &Gateway, peer: &Peer) -> Result<Self::Reply, RpcError> {
        gw.require_operator(peer, "export/stats").await?;
        Ok(ExportStatsReply {
            exporters: gw.export_stats(),
        })
    }
}

impl Serve for AuditHead {
    async fn serve(self, gw: &Gateway, _: &Peer) -> Result<Self::Reply, RpcError> {
        Ok(gw.audit_head())
    }
}

/// Handles one line (without its newline). Returns the response line, or None for a
/// notification (a request without `id`), which is never answered.
pub(crate) async fn handle_line(gw: &Gateway, peer: &Peer, line: &[u8]) -> Option<String> {
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

/// Decodes `R` from `params`, runs it and writes its result as a JSON value (whose keys come
/// out sorted).
async fn serve<R: Serve>(
    method: Method,
    gw: &Gateway,
    peer: &Peer,
    params: Option<Value>,
) -> Result<Value, RpcError> {
    if R::METHOD != method {
        return Err(RpcError::new(
            code::INTERNAL,
            format!("`{}` is routed to `{}`", method.name(), R::METHOD.name()),
        ));
    }
    let p: R = serde_json::from_value(params.unwrap_or(Value::Object(serde_json::Map::default())))
        .map_err(|e| RpcError::params(format!("invalid params: {e}")))?;
    let reply = p.serve(gw, peer).await?;
    serde_json::to_value(reply).map_err(|e| RpcError::new(code::INTERNAL, e.to_string()))
}

async fn route(
    gw: &Gateway,
    peer: &Peer,
    method: &str,
    params: Option<Value>,
) -> Result<Value, RpcError> {
    let Some(m) = Method::from_name(method) else {
        return Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method `{}`; methods: {}",
                method.chars().take(100).collect::<String>(),
                Method::names()
            ),
        ));
    };
    match m {
        Method::Hello => serve::<Hello>(m, gw, peer, params).await,
        Method::SessionOpen => serve::<SessionOpen>(m, gw, peer, params).await,
        Method::SessionClose => serve::<SessionClose>(m, gw, peer, params).await,
        Method::SessionList => serve::<SessionList>(m, gw, peer, params).await,
        Method::ToolsRegister => serve::<ToolsRegister>(m, gw, peer, params).await,
        Method::SecretsAdd => serve::<SecretsAdd>(m, gw, peer, params).await,
        Method::CallDecide => serve::<CallDecide>(m, gw, peer, params).await,
        Method::CallOutput => serve::<CallOutput>(m, gw, peer, params).await,
        Method::ApprovalsList => serve::<ApprovalsList>(m, gw, peer, params).await,
        Method::ApprovalsApprove => serve::<ApprovalsApprove>(m, gw, peer, params).await,
        Method::ApprovalsDeny => serve::<ApprovalsDeny>(m, gw, peer, params).await,
        Method::AuditHead => serve::<AuditHead>(m, gw, peer, params).await,
        Method::ExportStats => serve::<ExportStats>(m, gw, peer, params).await,
    }
}
