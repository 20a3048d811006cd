//! The message router between an MCP client (the proxy's stdin/stdout) and the tool server
//! (the child's stdin/stdout). Everything passes through unchanged (the original line, ids
//! kept) except `tools/list` answers (filtered), `tools/call` requests (decided first) and
//! their answers (redacted, fenced), and the client's answers to the server's `roots/list`
//! (clamped). Several requests are in flight at once; a server that exits or stops
//! answering gets every waiting request a JSON-RPC error.
use std::{
    collections::{BTreeSet, HashMap},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufRead, AsyncWrite, AsyncWriteExt as _},
    sync::{mpsc, oneshot},
};

use super::{
    jsonrpc::{self, Line, Message, code},
    roots, tools,
};
use crate::{
    backend::Backend,
    protocol::{CallDecide, CallOutput, ToolStatus, ToolsRegister},
};
use gatewayd_core::{
    audit::{Decision, Entry, writer::WriterHandle},
    engine::ToolCall,
};

/// What the router needs to know.
pub(super) struct Router {
    pub backend: Arc<Backend>,
    pub session: String,
    pub server: String,
    pub recorder: Option<WriterHandle>,
    /// Tools labelled `untrusted_output` (their results are fenced).
    pub untrusted: BTreeSet<String>,
    /// The server's trees: client roots outside them are dropped (empty: no clamp).
    pub trees: Vec<PathBuf>,
    pub listing: Option<PathBuf>,
    pub timeout: Duration,
    pub max_message: usize,
    /// Learn mode: tools the policy does not list are shown to the client (their calls are
    /// learned).
    pub learn: bool,
    pub to_client: mpsc::Sender<String>,
    pub to_server: mpsc::Sender<String>,
    pub state: Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    pending: HashMap<String, Pending>,
    /// `tools/call` requests being decided: true once the client cancelled one.
    deciding: HashMap<String, bool>,
    /// The server's `roots/list` requests waiting for the client's answer.
    roots_requests: BTreeSet<String>,
    /// Why the server is gone, once it is.
    gone: Option<String>,
    /// The current listing, page by page.
    listing: Vec<Value>,
    /// `_meta` of the client's last `tools/list` (a 2026-07-28 session's version).
    last_meta: Option<Value>,
    own: u64,
}

enum Kind {
    Plain,
    List { first_page: bool },
    Call { tool: String },
    Own(oneshot::Sender<Value>),
}

struct Pending {
    id: Value,
    kind: Kind,
    deadline: Instant,
    progress: Option<String>,
}

impl Router {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn send_client(&self, line: String) {
        let _ = self.to_client.send(line).await;
    }

    async fn record(&self, decision: Decision, reason: &str, detail: Value) {
        if let Some(r) = &self.recorder
            && let Ok(t) = r.submit(Entry::gateway(&self.session, decision, reason, detail))
        {
            let _ = r.wait_async(t).await;
        }
    }

    /// Reads the client's lines until its input ends.
    pub(super) async fn client_loop<R: AsyncBufRead + Unpin>(self: Arc<Self>, mut input: R) {
        let mut buf = Vec::new();
        loop {
            match jsonrpc::read_line(&mut input, &mut buf, self.max_message).await {
                Ok(Line::Eof) | Err(_) => return,
                Ok(Line::TooLong) => {
                    let msg = format!("message over {} bytes refused", self.max_message);
                    self.send_client(jsonrpc::error_response(
                        &Value::Null,
                        code::INVALID_REQUEST,
                        &msg,
                    ))
                    .await;
                }
                Ok(Line::Whole) => {
                    if buf.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    self.clone().from_client(&buf).await;
                }
            }
        }
    }

    async fn from_client(self: Arc<Self>, line: &[u8]) {
        let (mut v, msg) = match jsonrpc::parse(line) {
            Ok(m) => m,
            Err(e) => {
                let err = json!({"jsonrpc": "2.0", "id": null, "error": e.error()});
                self.send_client(err.to_string()).await;
                return;
            }
        };
        let raw = || String::from_utf8_lossy(line).into_owned();
        match msg {
            Message::Request { id, method } => {
                let gone = self.lock().gone.clone();
                if let Some(why) = gone {
                    self.send_client(jsonrpc::error_response(&id, code::SERVER_GONE, &why))
                        .await;
                    return;
                }
                match method.as_str() {
                    "tools/call" => {
                        tokio::spawn(self.clone().call(id, v));
                    }
                    "tools/list" => {
                        let first_page = v.pointer("/params/cursor").is_none();
                        if let Some(m) = v.pointer("/params/_meta") {
                            self.lock().last_meta = Some(m.clone());
                        }
                        self.forward(id, Kind::List { first_page }, &v, raw()).await;
                    }
                    _ => self.forward(id, Kind::Plain, &v, raw()).await,
                }
            }
            Message::Notification { method } => {
                if method == "notifications/cancelled"
                    && let Some(rid) = v.pointer("/params/requestId")
                    && let Some(c) = self.lock().deciding.get_mut(&jsonrpc::id_key(rid))
                {
                    *c = true;
                }
                let _ = self.to_server.send(raw()).await;
            }
            Message::Response { id } => {
                let clamp = self.lock().roots_requests.remove(&jsonrpc::id_key(&id));
                if clamp && !self.trees.is_empty() {
                    if let Some(result) = v.get_mut("result") {
                        let dropped = roots::clamp(result, &self.trees);
                        if !dropped.is_empty() {
                            eprintln!(
                                "gatewayd mcp: roots outside the server's trees dropped: {dropped:?}"
                            );
                            self.record(
                                Decision::Deny,
                                "roots_clamped",
                                json!({"server": self.server, "dropped": dropped,
                                   "message": "the client's roots outside the server's sandbox trees were not passed on"}),
                            )
                            .await;
                        }
                    }
                    let _ = self.to_server.send(v.to_string()).await;
                } else {
                    let _ = self.to_server.send(raw()).await;
                }
            }
        }
    }

    /// Forwards a request to the server, waiting for its answer under `kind`.
    async fn forward(&self, id: Value, kind: Kind, msg: &Value, line: String) {
        let progress = msg
            .pointer("/params/_meta/progressToken")
            .map(jsonrpc::id_key);
        self.lock().pending.insert(
            jsonrpc::id_key(&id),
            Pending {
                id: id.clone(),
                kind,
                deadline: Instant::now() + self.timeout,
                progress,
            },
        );
        if self.to_server.send(line).await.is_err() {
            self.lock().pending.remove(&jsonrpc::id_key(&id));
            self.send_client(jsonrpc::error_response(
                &id,
                code::SERVER_GONE,
                "the MCP server is not running",
            ))
            .await;
        }
    }

    /// A `tools/call`: decided by the gateway before the server sees it.
    async fn call(self: Arc<Self>, id: Value, mut msg: Value) {
        let key = jsonrpc::id_key(&id);
        let modern = jsonrpc::meta_version(&msg).is_some();
        let Some(tool) = msg.pointer("/params/name").and_then(Value::as_str) else {
            self.send_client(jsonrpc::error_response(
                &id,
                code::INVALID_PARAMS,
                "tools/call needs `params.name`",
            ))
            .await;
            return;
        };
        let tool = tool.to_owned();
        let arguments = msg
            .pointer("/params/arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.lock().deciding.insert(key.clone(), false);
        let decided = self
            .backend
            .request(CallDecide {
                session: self.session.clone(),
                call: ToolCall::new(&tool, arguments),
            })
            .await;
        let cancelled = self.lock().deciding.remove(&key).unwrap_or(false);
        if cancelled {
            return;
        }
        match decided {
            Err(e) => {
                let m = format!("the gateway could not decide this call ({e}); it was not run");
                self.send_client(jsonrpc::error_response(&id, code::GATEWAY_UNAVAILABLE, &m))
                    .await;
            }
            Ok(d) if d.verdict.is_allow() => {
                if let (Some(params), Some(args)) = (msg.get_mut("params"), d.arguments) {
                    params["arguments"] = args;
                }
                let line = msg.to_string();
                self.forward(id, Kind::Call { tool }, &msg, line).await;
            }
            Ok(d) => {
                self.send_client(jsonrpc::result_response(
                    &id,
                    tools::refused(&d.verdict, modern),
                ))
                .await;
            }
        }
    }

    /// Reads the server's lines until its output ends; then every waiting request fails.
    pub(super) async fn server_loop<R: AsyncBufRead + Unpin>(self: Arc<Self>, mut input: R) {
        let mut buf = Vec::new();
        loop {
            match jsonrpc::read_line(&mut input, &mut buf, self.max_message).await {
                Ok(Line::Eof) | Err(_) => return,
                Ok(Line::TooLong) => {
                    self.server_malformed(&format!("a line over {} bytes", self.max_message))
                        .await;
                }
                Ok(Line::Whole) => {
                    if buf.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    self.clone().from_server(&buf).await;
                }
            }
        }
    }

    async fn server_malformed(&self, what: &str) {
        eprintln!("gatewayd mcp: the server wrote {what}; dropped");
        self.record(
            Decision::Info,
            "mcp_server_malformed",
            json!({"server": self.server, "what": what}),
        )
        .await;
    }

    async fn from_server(self: Arc<Self>, line: &[u8]) {
        let (v, msg) = match jsonrpc::parse(line) {
            Ok(m) => m,
            Err(e) => {
                self.server_malformed(&format!("a malformed message ({:?})", e.error()["message"]))
                    .await;
                return;
            }
        };
        let raw = || String::from_utf8_lossy(line).into_owned();
        match msg {
            Message::Response { id } => {
                let p = self.lock().pending.remove(&jsonrpc::id_key(&id));
                match p.map(|p| p.kind) {
                    None | Some(Kind::Plain) => self.send_client(raw()).await,
                    Some(Kind::Own(tx)) => {
                        let _ = tx.send(v);
                    }
                    Some(Kind::List { first_page }) => {
                        tokio::spawn(self.clone().listed(id, v, first_page));
                    }
                    Some(Kind::Call { tool }) => {
                        tokio::spawn(self.clone().called(id, v, tool));
                    }
                }
            }
            Message::Request { id, method } => {
                if method == "roots/list" {
                    self.lock().roots_requests.insert(jsonrpc::id_key(&id));
                }
                self.send_client(raw()).await;
            }
            Message::Notification { method } => {
                if method == "notifications/progress"
                    && let Some(t) = v.pointer("/params/progressToken")
                {
                    let t = jsonrpc::id_key(t);
                    let deadline = Instant::now() + self.timeout;
                    for p in self.lock().pending.values_mut() {
                        if p.progress.as_deref() == Some(t.as_str()) {
                            p.deadline = deadline;
                        }
                    }
                }
                if method == "notifications/tools/list_changed" {
                    tokio::spawn(self.clone().relist());
                }
                self.send_client(raw()).await;
            }
        }
    }

    /// Registers one page of a listing and returns the statuses.
    async fn register(&self, tools: &[Value]) -> Result<Vec<ToolStatus>, String> {
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
    async fn listed(self: Arc<Self>, id: Value, mut v: Value, first_page: bool) {
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
        self.note_page(&tools, first_page, result.get("nextCursor").is_none());
        let withheld = tools::filter_listing(result, &statuses, &self.untrusted, self.learn);
        for w in withheld.iter().filter(|w| w.status != "not_in_policy") {
            eprintln!(
                "gatewayd mcp: tool `{}` withheld from the client: {}",
                w.name, w.status
            );
        }
        self.send_client(v.to_string()).await;
    }

    /// A `tools/call` answer: reported to the gateway, passed on redacted (and fenced).
    async fn called(self: Arc<Self>, id: Value, mut v: Value, tool: String) {
        let result = match v.get("error") {
            Some(e) => Err(e["message"].as_str().unwrap_or("").to_owned()),
            None => Ok(tools::output_payload(&v["result"])),
        };
        let report = CallOutput::of(&self.session, &tool, result);
        match self.backend.request(report).await {
            Ok(answer) => {
                if let Some(e) = v.get_mut("error") {
                    e["message"] = json!(answer.error.as_deref().unwrap_or(""));
                    e.as_object_mut().map(|o| o.remove("data"));
                } else if let Some(r) = v.get_mut("result") {
                    tools::apply_output(r, &answer);
                }
                self.send_client(v.to_string()).await;
            }
            Err(e) => {
                let m = format!(
                    "the tool ran, but the gateway could not check its output ({e}); it is withheld"
                );
                self.send_client(jsonrpc::error_response(&id, code::GATEWAY_UNAVAILABLE, &m))
                    .await;
            }
        }
    }

    /// After `notifications/tools/list_changed`: the proxy lists the tools itself (every
    /// page), so a changed definition is caught even if the client never lists again.
    async fn relist(self: Arc<Self>) {
        let mut cursor: Option<Value> = None;
        let mut first_page = true;
        loop {
            let (tx, rx) = oneshot::channel();
            let id = {
                let mut st = self.lock();
                st.own += 1;
                json!(format!("gatewayd-relist-{}-{}", std::process::id(), st.own))
            };
            let mut params = json!({});
            if let Some(m) = self.lock().last_meta.clone() {
                params["_meta"] = m;
            }
            if let Some(c) = &cursor {
                params["cursor"] = c.clone();
            }
            let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
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
                return;
            }
            let Ok(v) = rx.await else { return };
            let tools = v["result"]["tools"].as_array().cloned().unwrap_or_default();
            if let Err(e) = self.register(&tools).await {
                eprintln!("gatewayd mcp: re-listing after list_changed: {e}");
                return;
            }
            cursor = v["result"].get("nextCursor").cloned();
            self.note_page(&tools, first_page, cursor.is_none());
            first_page = false;
            if cursor.is_none() {
                return;
            }
        }
    }

    /// Fails every request that waited too long; runs until the router is dropped.
    pub(super) async fn sweep(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = Instant::now();
            let late: Vec<Pending> = {
                let mut st = self.lock();
                let keys: Vec<String> = st
                    .pending
                    .iter()
                    .filter(|(_, p)| p.deadline <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                keys.iter().filter_map(|k| st.pending.remove(k)).collect()
            };
            for p in late {
                if matches!(p.kind, Kind::Own(_)) {
                    continue;
                }
                let m = format!(
                    "the MCP server did not answer within {} s",
                    self.timeout.as_secs()
                );
                self.send_client(jsonrpc::error_response(&p.id, code::SERVER_TIMEOUT, &m))
                    .await;
            }
        }
    }

    /// Waits until no request is waiting for the server (or it is gone), at most `limit`.
    pub(super) async fn drain(&self, limit: Duration) {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            {
                let st = self.lock();
                if st.gone.is_some() || (st.pending.is_empty() && st.deciding.is_empty()) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The server is gone: every waiting request gets an error, and so will later ones.
    pub(super) async fn server_gone(&self, why: String) {
        let waiting: Vec<Pending> = {
            let mut st = self.lock();
            st.gone = Some(why.clone());
            st.pending.drain().map(|(_, p)| p).collect()
        };
        for p in waiting {
            if !matches!(p.kind, Kind::Own(_)) {
                self.send_client(jsonrpc::error_response(&p.id, code::SERVER_GONE, &why))
                    .await;
            }
        }
    }
}

/// Writes each line it is sent, with a newline, flushing after each.
pub(super) async fn writer<W: AsyncWrite + Unpin>(mut out: W, mut rx: mpsc::Receiver<String>) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.shutdown().await;
}
