//! The server's tool listings: each page the client asked for registered with the gateway
//! (fingerprint against the pin, description scan) and filtered, the listing kept for
//! `--listing`, and the proxy's own listings — after `notifications/tools/list_changed`,
//! and before the first `tools/call` of a session that has not listed, so no call is
//! decided without the server's current definition.
use std::{sync::Arc, time::Instant};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{
    jsonrpc::{self, code},
    proxy::{Kind, Pending, Router},
    tools,
};
use crate::protocol::{ToolStatus, ToolsRegister};

impl Router {
    /// Registers one page of a listing and returns the statuses.
    pub(super) async fn register(&self, tools: &[Value]) -> Result<Vec<ToolStatus>, String> {
        let tools = tools
            .iter()
            .map(tools::definition)
            .collect::<Result<Vec<_>, _>>()?;
        let r = self
            .backend
            .request(ToolsRegister {
                session: self.session.clone(),
                tools,
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok(r.tools)
    }

    /// Keeps the listing across pages; writes it out when the last page is in.
    fn note_page(&self, tools: &[Value], first_page: bool, last_page: bool) {
        let mut st = self.lock();
        if first_page {
            st.listing.clear();
        }
        st.listing.extend(tools.iter().cloned());
        if last_page && let Some(path) = &self.listing {
            let text =
                serde_json::to_string_pretty(&json!({"tools": st.listing})).unwrap_or_default();
            if let Err(e) = std::fs::write(path, text + "\n") {
                eprintln!(
                    "gatewayd mcp: cannot write the listing {}: {e}",
                    path.display()
                );
            }
        }
    }

    /// A `tools/list` answer: registered, filtered, passed on.
    pub(super) async fn listed(self: Arc<Self>, id: Value, mut v: Value, first_page: bool) {
        let Some(result) = v.get_mut("result") else {
            self.send_client(v.to_string()).await;
            return;
        };
        let tools = result["tools"].as_array().cloned().unwrap_or_default();
        let statuses = match self.register(&tools).await {
            Ok(s) => s,
            Err(e) => {
                let m = format!("the gateway could not check the server's tools ({e})");
                self.send_client(jsonrpc::error_response(&id, code::GATEWAY_UNAVAILABLE, &m))
                    .await;
                return;
            }
        };
        let last_page = result.get("nextCursor").is_none();
        self.note_page(&tools, first_page, last_page);
        if last_page {
            *self.listed.lock().await = true;
        }
        let withheld = tools::filter_listing(result, &statuses, &self.untrusted, self.learn);
        for w in withheld.iter().filter(|w| w.status != "not_in_policy") {
            eprintln!(
                "gatewayd mcp: tool `{}` withheld from the client: {}",
                w.name, w.status
            );
        }
        self.send_client(v.to_string()).await;
    }

    /// Before a `tools/call`: unless a complete listing was registered since the proxy
    /// started, the proxy lists the tools itself (with the call's `_meta`, for a 2026-07-28
    /// session) so the call is decided against the server's current definitions.
    pub(super) async fn ensure_listed(&self, call: &Value) -> Result<(), String> {
        let mut listed = self.listed.lock().await;
        if *listed {
            return Ok(());
        }
        let meta = call
            .pointer("/params/_meta")
            .cloned()
            .map(|mut m| {
                if let Some(o) = m.as_object_mut() {
                    o.remove("progressToken");
                }
                m
            })
            .or_else(|| self.lock().last_meta.clone());
        self.list_own(meta).await?;
        *listed = true;
        Ok(())
    }

    /// After `notifications/tools/list_changed`: the proxy lists the tools itself (every
    /// page), so a changed definition is caught even if the client never lists again.
    pub(super) async fn relist(self: Arc<Self>, meta: Option<Value>) {
        let meta = meta.or_else(|| self.lock().last_meta.clone());
        match self.list_own(meta).await {
            Ok(()) => *self.listed.lock().await = true,
            Err(e) => eprintln!("gatewayd mcp: re-listing after list_changed: {e}"),
        }
    }

    /// One request of the proxy's own; its answer.
    async fn own_request(&self, method: &str, params: Value) -> Result<Value, String> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut st = self.lock();
            st.own += 1;
            json!(format!("gatewayd-own-{}-{}", std::process::id(), st.own))
        };
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.lock().pending.insert(
            jsonrpc::id_key(&id),
            Pending {
                id: id.clone(),
                kind: Kind::Own(tx),
                deadline: Instant::now() + self.timeout,
                progress: None,
            },
        );
        if self.to_server.send(req.to_string()).await.is_err() {
            return Err("the MCP server is not running".into());
        }
        let v = rx
            .await
            .map_err(|_| "the MCP server did not answer in time".to_owned())?;
        match v.get("error") {
            Some(e) => Err(format!("the server answered {method} with an error: {e}")),
            None => Ok(v["result"].clone()),
        }
    }

    /// Lists every page of the server's tools and registers them.
    async fn list_own(&self, meta: Option<Value>) -> Result<(), String> {
        let mut cursor: Option<Value> = None;
        let mut first_page = true;
        loop {
            let mut params = json!({});
            if let Some(m) = &meta {
                params["_meta"] = m.clone();
            }
            if let Some(c) = &cursor {
                params["cursor"] = c.clone();
            }
            let result = self.own_request("tools/list", params).await?;
            let tools = result["tools"].as_array().cloned().unwrap_or_default();
            self.register(&tools).await?;
            cursor = result.get("nextCursor").cloned();
            self.note_page(&tools, first_page, cursor.is_none());
            first_page = false;
            if cursor.is_none() {
                return Ok(());
            }
        }
    }
}
