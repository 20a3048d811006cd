//! The proxy's own refusals and decisions, each recorded in the audit chain with a reason
//! code and a message ending in `Next:`: resource URIs and elicitations (decided by
//! [`super::checks`]), request ids used twice and answers to no request (strict framing).
use serde_json::{Value, json};

use super::{
    checks::{self, Refusal},
    jsonrpc::{self, code},
    proxy::Router,
};
use gatewayd_core::{audit::Decision, engine::with_next};

impl Router {
    /// A `resources/read` or `resources/subscribe`: its URI decided and recorded; a refusal
    /// is answered here.
    pub(super) async fn resource_allowed(&self, id: &Value, method: &str, v: &Value) -> bool {
        let uri = v
            .pointer("/params/uri")
            .and_then(Value::as_str)
            .unwrap_or("");
        let decided = checks::resource_uri(uri, &self.sandbox, &self.schemes);
        let refused = self
            .record_decision(method, &decided, json!({"uri": uri}))
            .await;
        match refused {
            None => true,
            Some(m) => {
                self.send_client(jsonrpc::error_response(id, code::REFUSED, &m))
                    .await;
                false
            }
        }
    }

    /// Records the proxy's decision of a `method` (`detail` with the server, the method and
    /// the refusal's message); for a refusal, the text the refused side is answered with.
    pub(super) async fn record_decision(
        &self,
        method: &str,
        decided: &Result<(), Refusal>,
        mut detail: Value,
    ) -> Option<String> {
        let (decision, reason, message) = match decided {
            Ok(()) => (Decision::Allow, "allowed", String::new()),
            Err(r) => (Decision::Deny, r.reason.code(), r.message.clone()),
        };
        detail["server"] = json!(self.server);
        detail["method"] = json!(method);
        detail["message"] = json!(message);
        self.record(decision, reason, detail).await;
        let r = decided.as_ref().err()?;
        eprintln!("gatewayd mcp: {method} refused: {}", r.message);
        Some(format!(
            "gatewayd refused this {method} (reason `{}`): {}",
            r.reason.code(),
            r.message
        ))
    }

    /// A record of a request id used twice (`mcp_duplicate_id`, deny).
    pub(super) async fn duplicate_id(&self, from: &str, id: &Value, method: &str) {
        eprintln!("gatewayd mcp: the {from} used request id {id} twice; refused");
        self.record(
            Decision::Deny,
            "mcp_duplicate_id",
            json!({"server": self.server, "from": from, "id": id, "method": method,
                   "message": with_next(
                       &format!("the {from} sent request id {id} ({method}) while that id was already used; it was refused"),
                       "ask the user to check the MCP client or server, which reuses request ids")}),
        )
        .await;
    }

    /// A 2026-07-28 server's request of [`super::proxy::ASSOCIATED_ONLY`] while no request
    /// of the client's is waiting (`mcp_unsolicited_request`, deny): answered to the server
    /// with -32600, never shown to the client.
    pub(super) async fn unsolicited(&self, id: &Value, method: &str) {
        eprintln!(
            "gatewayd mcp: the server sent {method} (id {id}) while handling no request of the client's; refused"
        );
        self.record(
            Decision::Deny,
            "mcp_unsolicited_request",
            json!({"server": self.server, "id": id, "method": method,
                   "message": with_next(
                       &format!("the server sent {method} while it was handling no request of the client's; at protocol revision 2026-07-28 a server sends it only on behalf of a client request (SEP-2260), so it was refused and not shown to the client"),
                       "ask the user to check the MCP server, which asks the client or the user for something nobody asked it to do")}),
        )
        .await;
        let m = format!(
            "refused by gatewayd: {method} is sent only while handling a client request at protocol revision 2026-07-28 (SEP-2260)"
        );
        self.send_server(jsonrpc::error_response(id, code::INVALID_REQUEST, &m))
            .await;
    }

    /// An answer to no request waiting (`mcp_unknown_response`, deny): dropped.
    pub(super) async fn unknown_response(&self, from: &str, id: &Value) {
        eprintln!(
            "gatewayd mcp: the {from} answered request id {id}, which no request waits for; dropped"
        );
        self.record(
            Decision::Deny,
            "mcp_unknown_response",
            json!({"server": self.server, "from": from, "id": id,
                   "message": with_next(
                       &format!("the {from} sent an answer with id {id}, which matches no request waiting (never sent, answered already or timed out); it was dropped"),
                       "ask the user to check the MCP client or server")}),
        )
        .await;
    }
}
