//! The message router between an MCP client (the proxy's stdin/stdout) and the tool server
//! (the child's stdin/stdout). Everything passes through unchanged (the original line, ids
//! kept) except what docs/MCP.md lists as decided or checked: `tools/list` answers
//! (filtered, `listing`), `tools/call` requests (decided first, after the proxy's own listing
//! when the client has not listed), resource reads and subscriptions (decided), the answers
//! whose texts are the server's output (`outputs`), the server's elicitation and sampling
//! requests, and the client's answers to the server's `roots/list` (clamped). Framing is
//! strict: an answer to no request is dropped, a request id used twice is refused. Several
//! requests are in flight at once; a server that exits or stops answering gets every
//! waiting request a JSON-RPC error.
use std::{
    collections::{BTreeSet, HashMap, HashSet},
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
use crate::{backend::Backend, protocol::CallDecide};
use gatewayd_core::{
    audit::{Decision, Entry, writer::WriterHandle},
    engine::{
        ToolCall,
        sandbox::{EgressView, SandboxView},
        with_next,
    },
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
    /// The agent's sandbox (gatewayd's own files protected): `file://` resources.
    pub sandbox: SandboxView,
    /// The agent's egress allowlist: URL elicitations.
    pub egress: EgressView,
    /// The server's `resource_schemes`.
    pub schemes: Vec<String>,
    /// Whether a complete listing was registered since the proxy started (held while the
    /// proxy lists before a first call).
    pub listed: tokio::sync::Mutex<bool>,
    pub to_client: mpsc::Sender<String>,
    pub to_server: mpsc::Sender<String>,
    pub state: Mutex<State>,
    /// A `--listen` client's authorization: a request the remote server refused as HTTP
    /// (`401`/`403`) may be sent again with its id, authorized.
    pub client_auth: Option<Arc<super::http::ClientAuth>>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) pending: HashMap<String, Pending>,
    /// `tools/call` requests being decided: true once the client cancelled one.
    deciding: HashMap<String, bool>,
    /// Every request id the client used (an id is used once per session).
    client_ids: HashSet<String>,
    /// The server's requests waiting for the client's answer: their method.
    pub(super) server_requests: HashMap<String, String>,
    /// Why the server is gone, once it is.
    gone: Option<String>,
    /// The current listing, page by page.
    pub(super) listing: Vec<Value>,
    /// `_meta` of the client's last `tools/list` (a 2026-07-28 session's version).
    pub(super) last_meta: Option<Value>,
    /// The client's requests carry the 2026-07-28 per-request version: the server may then
    /// send its requests of [`ASSOCIATED_ONLY`] only while handling one of them (SEP-2260).
    modern: bool,
    /// Tasks created by `tools/call` (task id → the tool).
    pub(super) tasks: HashMap<String, String>,
    pub(super) own: u64,
}

/// The server's requests that SEP-2260 (2026-07-28) lets it send only while it handles a
/// request of the client's, on that request's behalf (`ping` is not one of them).
pub(super) const ASSOCIATED_ONLY: [&str; 3] =
    ["elicitation/create", "sampling/createMessage", "roots/list"];

/// What an answer from the server is, by the request it answers.
pub(super) enum Kind {
    Plain,
    List {
        first_page: bool,
    },
    Call {
        tool: String,
    },
    Own(oneshot::Sender<Value>),
    /// `resources/read`, `prompts/get`, `tasks/get`, `tasks/list`: every text in it is
    /// checked as output of `label`.
    Texts {
        label: String,
    },
    /// `tasks/result`: checked as a result of the task's tool.
    TaskResult {
        task: String,
    },
}

pub(super) struct Pending {
    pub(super) id: Value,
    pub(super) kind: Kind,
    pub(super) deadline: Instant,
    pub(super) progress: Option<String>,
}

impl Router {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) async fn send_client(&self, line: String) {
        let _ = self.to_client.send(line).await;
    }

    pub(super) async fn send_server(&self, line: String) {
        let _ = self.to_server.send(line).await;
    }

    /// A label for what this server sent that is not a tool's result (`SERVER:METHOD`): the
    /// gateway knows no such tool, so it checks it as untrusted output.
    pub(super) fn label(&self, what: &str) -> String {
        format!("{}:{what}", self.server)
    }

    pub(super) async fn record(&self, decision: Decision, reason: &str, detail: Value) {
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
        let (v, msg) = match jsonrpc::parse(line) {
            Ok(m) => m,
            Err(e) => {
                let err = json!({"jsonrpc": "2.0", "id": null, "error": e.error()});
                self.send_client(err.to_string()).await;
                return;
            }
        };
        let raw = || String::from_utf8_lossy(line).into_owned();
        match msg {
            Message::Request { id, method } => self.client_request(id, &method, v, raw()).await,
            Message::Notification { method } => {
                if method == "notifications/cancelled"
                    && let Some(rid) = v.pointer("/params/requestId")
                    && let Some(c) = self.lock().deciding.get_mut(&jsonrpc::id_key(rid))
                {
                    *c = true;
                }
                self.send_server(raw()).await;
            }
            Message::Response { id } => self.client_response(id, v, raw()).await,
        }
    }

    /// A request of the client's: refused when its id was used before; decided (calls,
    /// resources) or forwarded under the kind its answer is checked as.
    async fn client_request(self: Arc<Self>, id: Value, method: &str, v: Value, line: String) {
        if jsonrpc::meta_version(&v).is_some_and(|version| version >= "2026-07-28") {
            self.lock().modern = true;
        }
        let gone = self.lock().gone.clone();
        if let Some(why) = gone {
            self.send_client(jsonrpc::error_response(&id, code::SERVER_GONE, &why))
                .await;
            return;
        }
        let fresh = {
            let mut st = self.lock();
            let key = jsonrpc::id_key(&id);
            let again = || {
                self.client_auth
                    .as_ref()
                    .is_some_and(|c| c.take_retry(&key))
            };
            !st.pending.contains_key(&key) && (st.client_ids.insert(key.clone()) || again())
        };
        if !fresh {
            self.duplicate_id("client", &id, method).await;
            let m = with_next(
                &format!(
                    "request id {id} was used before in this session; the request was not forwarded"
                ),
                "send it again with an id not used before",
            );
            self.send_client(jsonrpc::error_response(&id, code::INVALID_REQUEST, &m))
                .await;
            return;
        }
        let kind = match method {
            "tools/call" => {
                tokio::spawn(self.clone().call(id, v));
                return;
            }
            "tools/list" => {
                if let Some(m) = v.pointer("/params/_meta") {
                    self.lock().last_meta = Some(m.clone());
                }
                Kind::List {
                    first_page: v.pointer("/params/cursor").is_none(),
                }
            }
            "resources/read" | "resources/subscribe" => {
                if !self.resource_allowed(&id, method, &v).await {
                    return;
                }
                Kind::Texts {
                    label: self.label(method),
                }
            }
            "prompts/get" | "tasks/get" | "tasks/list" => Kind::Texts {
                label: self.label(method),
            },
            "tasks/result" => Kind::TaskResult {
                task: v
                    .pointer("/params/taskId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            },
            _ => Kind::Plain,
        };
        self.forward(id, kind, &v, line).await;
    }

    /// The client's answer to a server's request: forwarded only when the server asked
    /// (`roots/list` answers clamped to the server's trees); else dropped and recorded.
    async fn client_response(&self, id: Value, mut v: Value, line: String) {
        let method = self.lock().server_requests.remove(&jsonrpc::id_key(&id));
        let Some(method) = method else {
            self.unknown_response("client", &id).await;
            return;
        };
        if method != "roots/list" || self.trees.is_empty() {
            self.send_server(line).await;
            return;
        }
        if let Some(result) = v.get_mut("result") {
            let dropped = roots::clamp(result, &self.trees);
            if !dropped.is_empty() {
                eprintln!("gatewayd mcp: roots outside the server's trees dropped: {dropped:?}");
                self.record(
                    Decision::Deny,
                    "roots_clamped",
                    json!({"server": self.server, "dropped": dropped,
                       "message": with_next(
                           "the client's roots outside the server's sandbox trees were not passed on",
                           "work inside the server's trees, or ask the user to widen them")}),
                )
                .await;
            }
        }
        self.send_server(v.to_string()).await;
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
        if let Err(e) = self.ensure_listed(&msg).await {
            self.lock().deciding.remove(&key);
            let m = with_next(
                &format!(
                    "the proxy could not list the server's tools to check `{tool}`'s definition before its first call ({e}); the call was not run"
                ),
                "list the tools again, then repeat the call; if it fails again, ask the user",
            );
            self.send_client(jsonrpc::error_response(&id, code::GATEWAY_UNAVAILABLE, &m))
                .await;
            return;
        }
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

    /// A 2026-07-28 session with no request of the client's waiting for the server's answer:
    /// a server request of [`ASSOCIATED_ONLY`] now belongs to none (the proxy's own requests,
    /// a listing before a first call, stand for no client request).
    fn unassociated(&self) -> bool {
        let st = self.lock();
        st.modern && !st.pending.values().any(|p| !matches!(p.kind, Kind::Own(_)))
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
            Message::Response { id } => self.server_response(id, v, raw()).await,
            Message::Request { id, method } => {
                let fresh = match self.lock().server_requests.entry(jsonrpc::id_key(&id)) {
                    std::collections::hash_map::Entry::Occupied(_) => false,
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(method.clone());
                        true
                    }
                };
                if !fresh {
                    self.duplicate_id("server", &id, &method).await;
                    let m = "request id already in use; refused by gatewayd";
                    self.send_server(jsonrpc::error_response(&id, code::INVALID_REQUEST, m))
                        .await;
                    return;
                }
                if ASSOCIATED_ONLY.contains(&method.as_str()) && self.unassociated() {
                    self.lock().server_requests.remove(&jsonrpc::id_key(&id));
                    self.unsolicited(&id, &method).await;
                    return;
                }
                match method.as_str() {
                    "elicitation/create" | "sampling/createMessage" => {
                        tokio::spawn(self.clone().server_request(id, v));
                    }
                    _ => self.send_client(raw()).await,
                }
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
                if method == "notifications/tasks/status" {
                    tokio::spawn(
                        self.clone()
                            .texts_checked(Value::Null, v, self.label(&method)),
                    );
                    return;
                }
                if method == "notifications/tools/list_changed" {
                    tokio::spawn(self.clone().relist(None));
                }
                self.send_client(raw()).await;
            }
        }
    }

    /// An answer of the server's: handled by the kind of request it answers; an answer to
    /// no request waiting is dropped.
    async fn server_response(self: Arc<Self>, id: Value, v: Value, line: String) {
        let p = self.lock().pending.remove(&jsonrpc::id_key(&id));
        match p.map(|p| p.kind) {
            None => self.unknown_response("server", &id).await,
            Some(Kind::Plain) => self.send_client(line).await,
            Some(Kind::Own(tx)) => {
                let _ = tx.send(v);
            }
            Some(Kind::List { first_page }) => {
                tokio::spawn(self.clone().listed(id, v, first_page));
            }
            Some(Kind::Call { tool }) => {
                tokio::spawn(self.clone().called(id, v, tool));
            }
            Some(Kind::Texts { label }) => {
                tokio::spawn(self.clone().texts_checked(id, v, label));
            }
            Some(Kind::TaskResult { task }) => {
                tokio::spawn(self.clone().task_result(id, v, task));
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
