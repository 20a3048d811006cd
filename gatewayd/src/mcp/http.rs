//! Streamable HTTP to a remote MCP server (`gatewayd mcp --url`, docs/MCP.md). The router
//! ([`super::proxy`]) sees the remote server as it sees a local one, one JSON-RPC message per
//! line in each direction, so every decision and check is the stdio proxy's own; this module
//! only carries the lines. Each message of the router's is sent as a `POST` (`Accept: application/json,
//! text/event-stream`); the answer is a JSON body or an SSE stream whose events are passed
//! back one line each, in order. `Mcp-Session-Id` (from the `initialize` answer) and
//! `MCP-Protocol-Version` (the negotiated version, or a 2026-07-28 request's own) go on every
//! later request; the server's GET stream carries its own requests and notifications when it
//! offers one; a stream cut before its answer is resumed with `Last-Event-ID`; the session is
//! ended with a `DELETE`. Redirects are not followed (a redirect's host never passed the egress
//! policy). A credential the policy binds to the server is added here: the client never sees
//! it, and no header is recorded. Without one, behind `--listen`, the client's own
//! `Authorization` is sent as it came ([`ClientAuth`]), and the server's `401`/`403` with its
//! `WWW-Authenticate` goes back to the client as HTTP, so the client runs its own OAuth flow.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures_util::StreamExt as _;
use reqwest::{
    Response, StatusCode, Url,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE},
};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncWrite, BufReader, DuplexStream},
    sync::mpsc,
    task::JoinHandle,
};

use super::jsonrpc::{self, Line, code};

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
const LAST_EVENT: &str = "last-event-id";
/// How many times a cut stream is resumed (or the GET stream reopened) without an event.
const RESUMES: u32 = 3;

/// Why the remote server cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL does not parse, or is not `http`/`https`.
    #[error("`{url}` is not an http or https URL: {why}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The HTTP client could not be built (no TLS trust store).
    #[error("the HTTP client could not be built: {0}")]
    Client(#[from] reqwest::Error),
    /// The variable holding the server's credential is unset or not a header value.
    #[error(
        "mcp_servers.{server}.authorization_env names `{var}`, which is unset, empty or not a valid header value; set it to the Authorization header's value (e.g. `Bearer TOKEN`) in the proxy's environment"
    )]
    Credential {
        /// The server's name.
        server: String,
        /// The variable's name.
        var: String,
    },
}

/// Whose `Authorization` the remote server gets.
pub(crate) enum Auth {
    /// None: the remote server gets no `Authorization` header.
    None,
    /// The credential the policy binds to the server (`authorization_env`'s value); a
    /// client's own header is never sent.
    Bound(String),
    /// The client's own header (`--listen`, no credential bound), passed through untouched.
    Client(Arc<ClientAuth>),
}

/// The client's `Authorization` (`--listen` in front of `--url`, no credential bound), and the
/// server's authorization challenges for the client's requests. Shared by the endpoint, which
/// sets the one and answers the other as HTTP, and the connection, which does the opposite.
/// Its values are sensitive headers: never recorded, never printed.
#[derive(Default)]
pub(crate) struct ClientAuth {
    /// The `Authorization` of the client's latest request (a client refreshing its token
    /// sends the new one on its next request).
    latest: Mutex<Option<HeaderValue>>,
    /// The server's `401`/`403` answers, by the id of the client's request they refused.
    challenges: Mutex<HashMap<String, Challenge>>,
    /// The ids of the client's requests the server refused as HTTP: never processed, so the
    /// client may send them again (an OAuth client repeats the request once authorized).
    retries: Mutex<std::collections::HashSet<String>>,
}

/// A remote server's refusal of a request's authorization, for the client to see as HTTP.
#[derive(Debug, Clone)]
pub(crate) struct Challenge {
    /// 401 or 403.
    pub(crate) status: u16,
    /// The server's `WWW-Authenticate`, as it came (its `resource_metadata` URL among it).
    pub(crate) www_authenticate: Option<HeaderValue>,
}

/// Challenges kept for answers not claimed (a request of the proxy's own was refused).
const CHALLENGES: usize = 256;

impl ClientAuth {
    /// The client's request carried `value` (or none: the next requests carry none either).
    pub(crate) fn set(&self, value: Option<&HeaderValue>) {
        *lock(&self.latest) = value.cloned().map(|mut v| {
            v.set_sensitive(true);
            v
        });
    }

    /// The challenge the server answered the client's request `id` with, if any.
    pub(crate) fn take_challenge(&self, id: &Value) -> Option<Challenge> {
        lock(&self.challenges).remove(&jsonrpc::id_key(id))
    }

    /// Whether the client's request id `key` was refused as HTTP (and may be used again,
    /// once).
    pub(crate) fn take_retry(&self, key: &str) -> bool {
        lock(&self.retries).remove(key)
    }

    fn challenge(&self, id: &Value, c: Challenge) {
        let key = jsonrpc::id_key(id);
        let mut m = lock(&self.challenges);
        let mut r = lock(&self.retries);
        if m.len() >= CHALLENGES || r.len() >= CHALLENGES {
            m.clear();
            r.clear();
        }
        m.insert(key.clone(), c);
        r.insert(key);
    }
}

/// A remote server as the router sees a process: its input and output, and what to stop.
pub(crate) struct Connected {
    /// The router's lines to the server.
    pub(crate) input: DuplexStream,
    /// The server's lines to the router.
    pub(crate) output: DuplexStream,
    /// What [`Connection::stop`] ends.
    pub(crate) connection: Connection,
}

/// The session with the remote server and its tasks.
pub(crate) struct Connection {
    remote: Arc<Remote>,
    tasks: Vec<JoinHandle<()>>,
}

struct Remote {
    client: reqwest::Client,
    url: Url,
    auth: RemoteAuth,
    session: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    /// The GET stream, once it was asked for.
    get: Mutex<Option<JoinHandle<()>>>,
    inbox: mpsc::Sender<String>,
    max_message: usize,
}

enum RemoteAuth {
    None,
    Bound(HeaderValue),
    Client(Arc<ClientAuth>),
}

/// Checks `url` and starts carrying lines to it, with `auth`'s `Authorization`.
pub(crate) fn connect(url: &str, auth: Auth, max_message: usize) -> Result<Connected, HttpError> {
    let bad = |why: String| HttpError::BadUrl {
        url: url.to_owned(),
        why,
    };
    let parsed = Url::parse(url).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!("scheme `{}`", parsed.scheme())));
    }
    let auth = match auth {
        Auth::None => RemoteAuth::None,
        Auth::Client(c) => RemoteAuth::Client(c),
        Auth::Bound(a) => {
            // Not the header's own error: it could quote the value.
            let mut v = HeaderValue::from_str(&a)
                .map_err(|_| bad("the bound credential is not a valid header value".into()))?;
            v.set_sensitive(true);
            RemoteAuth::Bound(v)
        }
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(15))
        .build()?;
    let (inbox, inbox_rx) = mpsc::channel(1024);
    let remote = Arc::new(Remote {
        client,
        url: parsed,
        auth,
        session: Mutex::new(None),
        version: Mutex::new(None),
        get: Mutex::new(None),
        inbox,
        max_message,
    });
    let (input, from_router) = tokio::io::duplex(1 << 16);
    let (to_router, output) = tokio::io::duplex(1 << 16);
    let tasks = vec![
        tokio::spawn(super::proxy::writer(to_router, inbox_rx)),
        tokio::spawn(remote.clone().read_router(BufReader::new(from_router))),
    ];
    Ok(Connected {
        input,
        output,
        connection: Connection { remote, tasks },
    })
}

impl Connection {
    /// Ends the session (`DELETE`, when the server gave one) and the tasks; the router then
    /// reads the end of the server's output.
    pub(crate) async fn stop(self) {
        let r = &self.remote;
        if let Some(get) = lock(&r.get).take() {
            get.abort();
        }
        if lock(&r.session).is_some() {
            let req = r.request(reqwest::Method::DELETE, None);
            let _ = tokio::time::timeout(Duration::from_secs(5), req.send()).await;
        }
        for t in self.tasks {
            t.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `id` of a response, else None.
fn response_id(v: &Value) -> Option<&Value> {
    (v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some()))
        .then(|| v.get("id"))
        .flatten()
}

impl Remote {
    /// Reads the router's lines; requests are sent each in a task of its own (several are
    /// in flight at once); `initialize`, notifications and responses in order.
    async fn read_router<R: AsyncRead + Unpin>(self: Arc<Self>, mut input: BufReader<R>) {
        let mut buf = Vec::new();
        loop {
            match jsonrpc::read_line(&mut input, &mut buf, self.max_message).await {
                Ok(Line::Eof) | Err(_) => return,
                Ok(Line::TooLong) => {}
                Ok(Line::Whole) => {
                    let v: Value = serde_json::from_slice(&buf).unwrap_or(Value::Null);
                    let method = v.get("method").and_then(Value::as_str).unwrap_or("");
                    let id = (!method.is_empty()).then(|| v.get("id").cloned()).flatten();
                    let initialize = method == "initialize";
                    let initialized = method == "notifications/initialized";
                    let post = self.clone().post(buf.clone(), v, id.clone());
                    if id.is_some() && !initialize {
                        tokio::spawn(post);
                    } else {
                        post.await;
                    }
                    if initialized {
                        let get = tokio::spawn(self.clone().listen());
                        *lock(&self.get) = Some(get);
                    }
                }
            }
        }
    }

    /// A request with the session's headers (and the version `msg` asks for, if any).
    fn request(&self, method: reqwest::Method, msg: Option<&Value>) -> reqwest::RequestBuilder {
        let mut req = self.client.request(method, self.url.clone());
        if let Some(s) = lock(&self.session).clone() {
            req = req.header(SESSION, s);
        }
        let own = msg
            .and_then(jsonrpc::meta_version)
            .and_then(|v| HeaderValue::from_str(v).ok());
        if let Some(v) = own.or_else(|| lock(&self.version).clone()) {
            req = req.header(VERSION, v);
        }
        let auth = match &self.auth {
            RemoteAuth::None => None,
            RemoteAuth::Bound(a) => Some(a.clone()),
            RemoteAuth::Client(c) => lock(&c.latest).clone(),
        };
        if let Some(a) = auth {
            req = req.header(AUTHORIZATION, a);
        }
        req
    }

    /// POSTs one message and passes its answer back.
    async fn post(self: Arc<Self>, body: Vec<u8>, msg: Value, id: Option<Value>) {
        let req = self
            .request(reqwest::Method::POST, Some(&msg))
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let mut m = format!("cannot reach the remote MCP server {}: {e}", self.url);
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    m.push_str(&format!(": {s}"));
                    source = s.source();
                }
                return self.fail(id.as_ref(), &m).await;
            }
        };
        if msg.get("method").and_then(Value::as_str) == Some("initialize")
            && let Some(s) = resp.headers().get(SESSION)
        {
            *lock(&self.session) = Some(s.clone());
        }
        let status = resp.status();
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return;
        }
        if !status.is_success() {
            return self.http_error(id.as_ref(), resp).await;
        }
        if is_stream(&resp) {
            self.stream(resp, id.as_ref()).await;
            return;
        }
        match self.body(resp).await {
            Ok(text) => self.deliver(&text).await,
            Err(m) => self.fail(id.as_ref(), &m).await,
        }
    }

    /// Reads a JSON answer, at most `max_message` bytes.
    async fn body(&self, mut resp: Response) -> Result<String, String> {
        let mut out = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(None) => return Ok(String::from_utf8_lossy(&out).into_owned()),
                Ok(Some(c)) if out.len() + c.len() <= self.max_message => out.extend(c),
                Ok(Some(_)) => {
                    return Err(format!(
                        "the remote server's answer is over {} bytes; dropped",
                        self.max_message
                    ));
                }
                Err(e) => return Err(format!("the remote server's answer was cut: {e}")),
            }
        }
    }

    /// The events of a POST's stream until its end; a stream cut before the answer to `id`
    /// is resumed from its last event id.
    async fn stream(&self, resp: Response, id: Option<&Value>) {
        let (mut answered, mut last, mut retry) = self.events(resp, id).await;
        let mut tries = 0;
        while !answered && id.is_some() && tries < RESUMES {
            let Some(from) = last.clone() else { break };
            tokio::time::sleep(retry).await;
            tries += 1;
            let req = self
                .request(reqwest::Method::GET, None)
                .header(ACCEPT, "text/event-stream")
                .header(LAST_EVENT, from);
            match req.send().await {
                Ok(r) if r.status().is_success() && is_stream(&r) => {
                    let (a, l, t) = self.events(r, id).await;
                    answered = a;
                    if l.is_some() {
                        last = l;
                        tries = 0;
                    }
                    retry = t;
                }
                _ => {}
            }
        }
        if !answered && id.is_some() {
            let m = "the remote MCP server closed its stream before answering (and it could not be resumed)";
            self.fail(id, m).await;
        }
    }

    /// Passes a stream's events on; whether the answer to `id` was among them, the last
    /// event id, and the server's reconnection delay.
    async fn events(&self, resp: Response, id: Option<&Value>) -> (bool, Option<String>, Duration) {
        let mut events = sse_stream::SseStream::new(reqwest::Body::from(resp));
        let (mut answered, mut last, mut retry) = (false, None, Duration::from_secs(1));
        while let Some(Ok(ev)) = events.next().await {
            if let Some(i) = ev.id {
                last = Some(i);
            }
            if let Some(ms) = ev.retry {
                retry = Duration::from_millis(ms.min(30_000));
            }
            let Some(data) = ev.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            if data.len() > self.max_message {
                eprintln!(
                    "gatewayd mcp: the remote server sent an event over {} bytes; dropped",
                    self.max_message
                );
                continue;
            }
            if let (Some(want), Ok(v)) = (id, serde_json::from_str::<Value>(&data))
                && response_id(&v) == Some(want)
            {
                answered = true;
            }
            self.deliver(&data).await;
        }
        (answered, last, retry)
    }

    /// The server's GET stream (its own requests and notifications), reopened from its last
    /// event when cut; nothing when the server offers none (405).
    async fn listen(self: Arc<Self>) {
        let mut last: Option<String> = None;
        let mut fails = 0;
        while fails < RESUMES {
            let mut req = self
                .request(reqwest::Method::GET, None)
                .header(ACCEPT, "text/event-stream");
            if let Some(l) = &last {
                req = req.header(LAST_EVENT, l.clone());
            }
            let retry = match req.send().await {
                Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
                Ok(r) if r.status().is_success() && is_stream(&r) => {
                    let (_, l, retry) = self.events(r, None).await;
                    if l.is_some() {
                        last = l;
                        fails = 0;
                    } else {
                        fails += 1;
                    }
                    retry
                }
                _ => {
                    fails += 1;
                    Duration::from_secs(1)
                }
            };
            tokio::time::sleep(retry).await;
        }
    }

    /// One message from the server, as one line (an answer to `initialize` also sets the
    /// protocol version of later requests).
    async fn deliver(&self, text: &str) {
        let line = match serde_json::from_str::<Value>(text) {
            Ok(v) => {
                if let Some(ver) = v.pointer("/result/protocolVersion").and_then(Value::as_str)
                    && let Ok(h) = HeaderValue::from_str(ver)
                {
                    lock(&self.version).get_or_insert(h);
                }
                v.to_string()
            }
            // Not JSON: the router records it as malformed.
            Err(_) => text.replace(['\n', '\r'], " "),
        };
        let _ = self.inbox.send(line).await;
    }

    /// The request `id` (if any) answered with the proxy's error.
    async fn fail(&self, id: Option<&Value>, message: &str) {
        eprintln!("gatewayd mcp: {message}");
        if let Some(id) = id {
            let line = jsonrpc::error_response(id, code::SERVER_GONE, message);
            let _ = self.inbox.send(line).await;
        }
    }

    /// An HTTP error status: a JSON-RPC answer in its body is passed on, else the request
    /// fails with what the status means.
    async fn http_error(&self, id: Option<&Value>, resp: Response) {
        let status = resp.status();
        let www_authenticate = resp.headers().get(WWW_AUTHENTICATE).cloned();
        if let (RemoteAuth::Client(c), Some(id)) = (&self.auth, id)
            && matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
        {
            let www_authenticate = www_authenticate.clone();
            c.challenge(
                id,
                Challenge {
                    status: status.as_u16(),
                    www_authenticate,
                },
            );
        }
        let challenge = www_authenticate
            .as_ref()
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned);
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned);
        let had_session = lock(&self.session).is_some();
        let text = self.body(resp).await.unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<Value>(&text)
            && id.is_some()
            && response_id(&v) == id
        {
            return self.deliver(&text).await;
        }
        let why = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => format!(
                "the remote MCP server refused the request's authorization (HTTP {status}{}); {}",
                challenge.map_or_else(String::new, |c| format!(", WWW-Authenticate: {c}")),
                if matches!(self.auth, RemoteAuth::Client(_)) {
                    "the client has the server's answer as HTTP and must authorize itself (its OAuth flow), or ask the user to bind a credential to this server in the policy (authorization_env, docs/MCP.md)"
                } else {
                    "ask the user to bind a credential to this server in the policy (mcp_servers.NAME.url and authorization_env, docs/MCP.md)"
                }
            ),
            StatusCode::NOT_FOUND if had_session => format!(
                "the remote MCP server no longer knows this session (HTTP {status}); the MCP client must restart its connection"
            ),
            s if s.is_redirection() => format!(
                "the remote MCP server redirects (HTTP {status} to {}); redirects are not followed: ask the user to put the final URL in the policy",
                location.as_deref().unwrap_or("?")
            ),
            _ => {
                let excerpt: String = text.chars().take(200).collect();
                format!("the remote MCP server answered HTTP {status}: {excerpt}")
            }
        };
        self.fail(id, &why).await;
    }
}

fn is_stream(resp: &Response) -> bool {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|c| c.trim_start().starts_with("text/event-stream"))
}

/// Makes the module's pipes usable as the router's boxed reader and writer.
pub(crate) fn boxed(
    c: Connected,
) -> (
    Box<dyn AsyncWrite + Unpin + Send>,
    Box<dyn AsyncRead + Unpin + Send>,
    Connection,
) {
    (Box::new(c.input), Box::new(c.output), c.connection)
}
