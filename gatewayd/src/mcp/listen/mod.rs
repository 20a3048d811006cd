//! `gatewayd mcp --listen 127.0.0.1:PORT`: a Streamable HTTP endpoint on loopback for MCP
//! clients configured with a URL, in front of the proxy's own router (docs/MCP.md, "A local
//! HTTP endpoint"). Each client session (`Mcp-Session-Id`, made at its `initialize`) is a
//! proxied session of its own: its own router, its own server (a process, or a session with
//! the remote server) and its own gateway session, all in one gateway and one audit log. A
//! client's messages become its router's input lines, so every decision and check is the
//! stdio proxy's; its router's output lines come back as the answers: an SSE stream
//! (`text/event-stream`) when the client accepts one, carrying the server's messages sent
//! while the request is in flight and then the answer; else `application/json`. The
//! server's other messages go to the session's GET stream (held until one is open).
//! Every SSE event has an id, and a client whose stream was cut gets its later events again
//! with a `GET` and `Last-Event-ID` ([`streams`]). `DELETE` ends a session; the endpoint
//! serves until SIGINT or SIGTERM. Requests whose
//! `Host` or `Origin` is not loopback are refused (DNS rebinding); no header is recorded,
//! and none is passed to a stdio server. In front of a remote server the policy binds no
//! credential to, the client's `Authorization` is passed through untouched and the server's
//! `401`/`403` comes back as HTTP with its `WWW-Authenticate` ([`super::http::ClientAuth`]).
mod front;
mod streams;

use front::{Front, Out};

use std::{
    collections::HashMap,
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, Full, Limited, combinators::BoxBody};
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, ORIGIN},
};
use serde_json::Value;
use tokio::{
    io::{BufReader, DuplexStream},
    net::TcpListener,
    sync::mpsc,
};

use super::{
    Gateway, McpError, ProxyOptions, ProxyOutcome,
    http::ClientAuth,
    jsonrpc::{self, code},
};

type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

const SESSION: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
/// Client sessions at once.
const SESSIONS: usize = 64;

/// Why `--listen` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Only loopback addresses: the endpoint has no authentication of its own.
    #[error(
        "--listen {0}: only a loopback address (127.0.0.1, ::1) is accepted; the endpoint has no authentication of its own"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("--listen {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
}

/// A session for the serving loop to run: its router's two ends.
struct NewSession {
    id: String,
    front: Arc<Front>,
    input: DuplexStream,
    output: DuplexStream,
}

/// The endpoint: its sessions by id, and where a new one is sent to be run.
struct Endpoint {
    port: u16,
    max_message: usize,
    remote: bool,
    sessions: Mutex<HashMap<String, Arc<Front>>>,
    start: mpsc::Sender<NewSession>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Serves `addr` until SIGINT or SIGTERM; each client session runs as [`super::run`] does,
/// in one gateway.
pub async fn serve(addr: SocketAddr, opts: ProxyOptions) -> Result<ProxyOutcome, McpError> {
    if !addr.ip().is_loopback() {
        return Err(ListenError::NotLoopback(addr).into());
    }
    super::checked(&opts)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ListenError::Bind(addr, e))?;
    let gateway = Gateway::connect(&opts, &super::own_files(&opts))?;
    let (start, mut starts) = mpsc::channel(SESSIONS);
    let endpoint = Arc::new(Endpoint {
        port: listener.local_addr().map_or(addr.port(), |a| a.port()),
        max_message: opts.max_message,
        remote: opts.url.is_some(),
        sessions: Mutex::new(HashMap::new()),
        start,
    });
    eprintln!(
        "gatewayd mcp: listening on http://{}/mcp",
        listener.local_addr().unwrap_or(addr)
    );
    let accept = tokio::spawn(accept(listener, endpoint.clone()));
    let mut running = futures_util::stream::FuturesUnordered::new();
    let mut ended = Vec::new();
    let stop = stopped();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            Some(new) = starts.recv() => running.push(run_session(&opts, &gateway, &endpoint, new)),
            Some(id) = running.next(), if !running.is_empty() => ended.extend(id),
            () = &mut stop => break,
        }
    }
    accept.abort();
    let open: Vec<_> = lock(&endpoint.sessions).drain().collect();
    for (_, f) in open {
        lock(&f.to_router).take();
    }
    while let Some(id) = running.next().await {
        ended.extend(id);
    }
    drop(running);
    gateway.close()?;
    Ok(ProxyOutcome {
        session: if ended.is_empty() {
            "(none)".into()
        } else {
            ended.join(", ")
        },
        server_status: None,
    })
}

/// SIGINT or SIGTERM (never, when they cannot be watched).
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! {
                _ = i.recv() => {}
                _ = t.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// One client session, from its `initialize` until it ends; its gateway session's id.
async fn run_session(
    opts: &ProxyOptions,
    gateway: &Gateway,
    endpoint: &Endpoint,
    new: NewSession,
) -> Option<String> {
    let result = match gateway.another(opts).await {
        Ok(g) => {
            let auth = new.front.client_auth.clone();
            super::proxy_session(opts, &g, auth, new.input, new.output)
                .await
                .map(|_| g.session.clone())
        }
        Err(e) => Err(e),
    };
    lock(&endpoint.sessions).remove(&new.id);
    match result {
        Ok(s) => Some(s),
        Err(e) => {
            // The server could not be started or reached: the requests waiting fail.
            let m = format!("the MCP session could not start: {e}");
            eprintln!("gatewayd mcp: {m}");
            for (_, w) in lock(&new.front.waiters).drain() {
                let _ = w.tx.send(Out::Answer(jsonrpc::error_response(
                    &w.id,
                    code::SERVER_GONE,
                    &m,
                )));
            }
            None
        }
    }
}

async fn accept(listener: TcpListener, endpoint: Arc<Endpoint>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // An answer is written as it comes (an SSE event at a time): with Nagle's algorithm
        // on, each small write after the first waited for the client's delayed ACK, 40 ms.
        let _ = stream.set_nodelay(true);
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let endpoint = endpoint.clone();
                async move { Ok::<_, Infallible>(endpoint.handle(req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

fn full(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|e: Infallible| match e {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// An HTTP error with a JSON-RPC error body (id null).
fn refuse(status: StatusCode, message: &str) -> Response<Body> {
    full(
        status,
        jsonrpc::error_response(&Value::Null, code::INVALID_REQUEST, message),
    )
}

/// A fresh session id: 128 random bits, hex.
fn session_id() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut b);
    }
    gatewayd_core::canonical::hex(&b)
}

fn event_stream<S>(events: S) -> Response<Body>
where
    S: futures_util::Stream<Item = Result<sse_stream::Sse, Infallible>> + Send + Sync + 'static,
{
    let mut r = Response::new(
        sse_stream::SseBody::new(events)
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            .boxed(),
    );
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    r
}

impl Endpoint {
    /// Host and Origin name loopback (a page elsewhere may not drive the endpoint).
    fn local(&self, req: &Request<Incoming>) -> bool {
        let loopback = |h: &str| {
            let host = h.rsplit_once(':').map_or(h, |(h, _)| h);
            matches!(host, "127.0.0.1" | "localhost" | "[::1]")
        };
        let host_ok = req
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| loopback(h) && h.ends_with(&format!(":{}", self.port)));
        let origin_ok = req.headers().get(ORIGIN).is_none_or(|o| {
            o.to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .is_some_and(|(_, h)| loopback(h))
        });
        host_ok && origin_ok
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if req.uri().path() != "/mcp" {
            return refuse(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp");
        }
        if !self.local(&req) {
            return refuse(
                StatusCode::FORBIDDEN,
                "Host or Origin is not loopback: refused (DNS rebinding)",
            );
        }
        let given = req
            .headers()
            .get(SESSION)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned);
        let front = given
            .as_ref()
            .and_then(|g| lock(&self.sessions).get(g).cloned());
        match (req.method().clone(), front) {
            (Method::POST, front) => self.post(req, given, front).await,
            (Method::GET, Some(f)) => f.open_get(req.headers().get(LAST_EVENT_ID)),
            (Method::DELETE, Some(f)) => {
                if let Some(g) = &given {
                    lock(&self.sessions).remove(g);
                }
                lock(&f.to_router).take();
                full(StatusCode::OK, String::new())
            }
            (Method::GET | Method::DELETE, None) if given.is_some() => {
                refuse(StatusCode::NOT_FOUND, "unknown or ended session")
            }
            (Method::GET | Method::DELETE, None) => {
                refuse(StatusCode::BAD_REQUEST, "Mcp-Session-Id missing")
            }
            _ => refuse(StatusCode::METHOD_NOT_ALLOWED, "POST, GET or DELETE"),
        }
    }

    /// A new client session: its front, its router's pipes sent to the serving loop.
    async fn open_session(
        &self,
        initialize: &Value,
    ) -> Result<(String, Arc<Front>), Response<Body>> {
        if lock(&self.sessions).len() >= SESSIONS {
            let m = format!("{SESSIONS} MCP sessions are open; end one (DELETE) first");
            return Err(refuse(StatusCode::SERVICE_UNAVAILABLE, &m));
        }
        let id = session_id();
        let (to_router, router_rx) = mpsc::channel(1024);
        let (input, router_in) = tokio::io::duplex(1 << 16);
        let (router_out, output) = tokio::io::duplex(1 << 16);
        let front = Arc::new(Front {
            to_router: Mutex::new(Some(to_router)),
            waiters: Mutex::new(HashMap::new()),
            streams: Arc::default(),
            client_auth: self.remote.then(|| Arc::new(ClientAuth::default())),
            // Revisions are dates, YYYY-MM-DD: they sort as text.
            prime_streams: initialize
                .pointer("/params/protocolVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v >= "2025-11-25"),
        });
        tokio::spawn(super::proxy::writer(input, router_rx));
        tokio::spawn(front.clone().read_router(BufReader::new(output)));
        let new = NewSession {
            id: id.clone(),
            front: front.clone(),
            input: router_in,
            output: router_out,
        };
        if self.start.send(new).await.is_err() {
            return Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the proxy is stopping",
            ));
        }
        lock(&self.sessions).insert(id.clone(), front.clone());
        Ok((id, front))
    }

    async fn post(
        &self,
        req: Request<Incoming>,
        given: Option<String>,
        front: Option<Arc<Front>>,
    ) -> Response<Body> {
        let authorization = req.headers().get(AUTHORIZATION).cloned();
        let stream = req
            .headers()
            .get(ACCEPT)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|a| a.contains("text/event-stream"));
        let collected = Limited::new(req.into_body(), self.max_message)
            .collect()
            .await;
        let Ok(body) = collected.map(http_body_util::Collected::to_bytes) else {
            let m = format!("message over {} bytes refused", self.max_message);
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, &m);
        };
        let (v, msg) = match jsonrpc::parse(&body) {
            Ok(m) => m,
            Err(e) => {
                let err = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": e.error()});
                return full(StatusCode::BAD_REQUEST, err.to_string());
            }
        };
        let initialize = v.get("method").and_then(Value::as_str) == Some("initialize");
        let (front, new_session) = match (front, initialize) {
            (Some(_), true) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "this session is initialized already; a new session's initialize carries no Mcp-Session-Id",
                );
            }
            (Some(f), false) => (f, None),
            (None, true) => match self.open_session(&v).await {
                Ok((id, f)) => (f, Some(id)),
                Err(r) => return r,
            },
            (None, false) if given.is_some() => {
                return refuse(StatusCode::NOT_FOUND, "unknown or ended session");
            }
            (None, false) => return refuse(StatusCode::BAD_REQUEST, "Mcp-Session-Id missing"),
        };
        if let Some(c) = &front.client_auth {
            c.set(authorization.as_ref());
        }
        let line = String::from_utf8_lossy(&body).replace(['\n', '\r'], " ");
        let r = match msg {
            jsonrpc::Message::Request { id, .. } => front.request(id, line, stream).await,
            _ => front.notify(line).await,
        };
        self.answered(r, new_session)
    }

    /// The answer of a request: a session opened carries its id; one whose `initialize` the
    /// server refused as HTTP is ended (the client authorizes and starts again).
    fn answered(&self, mut r: Response<Body>, new_session: Option<String>) -> Response<Body> {
        let Some(id) = new_session else {
            return r;
        };
        if r.status().is_success() {
            if let Ok(h) = HeaderValue::from_str(&id) {
                r.headers_mut().insert(SESSION, h);
            }
        } else if let Some(f) = lock(&self.sessions).remove(&id) {
            lock(&f.to_router).take();
        }
        r
    }
}
