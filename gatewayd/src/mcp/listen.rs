//! `gatewayd mcp --listen 127.0.0.1:PORT`: a Streamable HTTP endpoint on loopback for MCP
//! clients configured with a URL, in front of the proxy's own router (docs/MCP.md, "A local
//! HTTP endpoint"). The client's messages become the router's input lines, so every decision
//! and check is the stdio proxy's; its output lines come back as the answers. One MCP session
//! per proxy (`Mcp-Session-Id`, made at `initialize`); a request is answered with
//! `application/json`; everything else the server sends (its requests and notifications)
//! goes to the client's GET stream (held until one is open); `DELETE` ends the session, and
//! the proxy with it. Requests whose `Host` or `Origin` is not loopback are refused (DNS
//! rebinding); no header is recorded, and none is passed to a stdio server.
use std::{
    collections::{HashMap, VecDeque},
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use http_body_util::{BodyExt as _, Full, Limited, combinators::BoxBody};
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{CONTENT_TYPE, HOST, ORIGIN},
};
use serde_json::Value;
use tokio::{
    io::{AsyncBufRead, BufReader},
    net::TcpListener,
    sync::{mpsc, oneshot},
};

use super::{
    McpError, ProxyOptions, ProxyOutcome,
    jsonrpc::{self, Line, code},
};

type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

const SESSION: &str = "mcp-session-id";
/// Server messages held for a GET stream not open yet.
const BACKLOG: usize = 1024;

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

struct Front {
    port: u16,
    session: Mutex<Option<String>>,
    /// The router's input; taken (closed) by `DELETE`.
    to_router: Mutex<Option<mpsc::Sender<String>>>,
    /// Requests waiting for their answer, by id.
    waiters: Mutex<HashMap<String, oneshot::Sender<String>>>,
    /// The open GET stream, or what waits for one.
    get: Mutex<(Option<mpsc::Sender<String>>, VecDeque<String>)>,
    max_message: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Serves `addr` until the client ends its session; the router runs as [`super::run`].
pub async fn serve(addr: SocketAddr, opts: ProxyOptions) -> Result<ProxyOutcome, McpError> {
    if !addr.ip().is_loopback() {
        return Err(ListenError::NotLoopback(addr).into());
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ListenError::Bind(addr, e))?;
    let (to_router, router_rx) = mpsc::channel(1024);
    let (input, router_in) = tokio::io::duplex(1 << 16);
    let (router_out, output) = tokio::io::duplex(1 << 16);
    let front = Arc::new(Front {
        port: listener.local_addr().map_or(addr.port(), |a| a.port()),
        session: Mutex::new(None),
        to_router: Mutex::new(Some(to_router)),
        waiters: Mutex::new(HashMap::new()),
        get: Mutex::new((None, VecDeque::new())),
        max_message: opts.max_message,
    });
    eprintln!(
        "gatewayd mcp: listening on http://{}/mcp",
        listener.local_addr().unwrap_or(addr)
    );
    let writer = tokio::spawn(super::proxy::writer(input, router_rx));
    let reader = tokio::spawn(front.clone().read_router(BufReader::new(output)));
    let accept = tokio::spawn(accept(listener, front.clone()));
    let outcome = super::run(opts, router_in, router_out).await;
    accept.abort();
    reader.abort();
    writer.abort();
    outcome
}

async fn accept(listener: TcpListener, front: Arc<Front>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let front = front.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(req).await) }
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

impl Front {
    /// The router's output lines: an answer goes to the request waiting for it; anything
    /// else to the GET stream.
    async fn read_router<R: AsyncBufRead + Unpin>(self: Arc<Self>, mut out: R) {
        let mut buf = Vec::new();
        while let Ok(Line::Whole) = jsonrpc::read_line(&mut out, &mut buf, usize::MAX).await {
            let line = String::from_utf8_lossy(&buf).into_owned();
            let waiter = match jsonrpc::parse(&buf) {
                Ok((_, jsonrpc::Message::Response { id })) => {
                    lock(&self.waiters).remove(&jsonrpc::id_key(&id))
                }
                _ => None,
            };
            match waiter {
                Some(w) => {
                    let _ = w.send(line);
                }
                None => self.to_get(line),
            }
        }
    }

    fn to_get(&self, line: String) {
        let mut g = lock(&self.get);
        if let Some(tx) = &g.0 {
            match tx.try_send(line) {
                Ok(()) => return,
                Err(e) => {
                    g.0 = None;
                    g.1.push_back(e.into_inner());
                }
            }
        } else {
            g.1.push_back(line);
        }
        while g.1.len() > BACKLOG {
            g.1.pop_front();
        }
    }

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
        let current = lock(&self.session).clone();
        let in_session = given.is_some() && given == current;
        match *req.method() {
            Method::POST => self.post(req, given, in_session).await,
            Method::GET if in_session => self.open_get(),
            Method::DELETE if in_session => {
                lock(&self.to_router).take();
                full(StatusCode::OK, String::new())
            }
            Method::GET | Method::DELETE if given.is_some() => {
                refuse(StatusCode::NOT_FOUND, "unknown or ended session")
            }
            Method::GET | Method::DELETE => {
                refuse(StatusCode::BAD_REQUEST, "Mcp-Session-Id missing")
            }
            _ => refuse(StatusCode::METHOD_NOT_ALLOWED, "POST, GET or DELETE"),
        }
    }

    fn open_get(&self) -> Response<Body> {
        let (tx, rx) = mpsc::channel(BACKLOG);
        {
            let mut g = lock(&self.get);
            if g.0.as_ref().is_some_and(|t| !t.is_closed()) {
                return refuse(StatusCode::CONFLICT, "a GET stream is already open");
            }
            for l in g.1.drain(..) {
                let _ = tx.try_send(l);
            }
            g.0 = Some(tx);
        }
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            let line = rx.recv().await?;
            Some((
                Ok::<_, Infallible>(sse_stream::Sse::default().data(line)),
                rx,
            ))
        });
        let mut r = Response::new(
            sse_stream::SseBody::new(events)
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                .boxed(),
        );
        r.headers_mut().insert(
            CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/event-stream"),
        );
        r
    }

    async fn post(
        &self,
        req: Request<Incoming>,
        given: Option<String>,
        in_session: bool,
    ) -> Response<Body> {
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
        let mut new_session = None;
        if initialize {
            let mut s = lock(&self.session);
            if s.is_some() {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "this proxy serves one MCP session, and it is open; start another proxy for another session",
                );
            }
            let id = session_id();
            *s = Some(id.clone());
            new_session = Some(id);
        } else if !in_session {
            return if given.is_some() {
                refuse(StatusCode::NOT_FOUND, "unknown or ended session")
            } else {
                refuse(StatusCode::BAD_REQUEST, "Mcp-Session-Id missing")
            };
        }
        let line = String::from_utf8_lossy(&body).replace(['\n', '\r'], " ");
        let Some(to_router) = lock(&self.to_router).clone() else {
            return refuse(StatusCode::NOT_FOUND, "the session has ended");
        };
        let jsonrpc::Message::Request { id, .. } = msg else {
            let _ = to_router.send(line).await;
            return full(StatusCode::ACCEPTED, String::new());
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut w = lock(&self.waiters);
            let key = jsonrpc::id_key(&id);
            if w.contains_key(&key) {
                let m = format!("request id {id} is in flight already; refused");
                return full(
                    StatusCode::OK,
                    jsonrpc::error_response(&id, code::INVALID_REQUEST, &m),
                );
            }
            w.insert(key, tx);
        }
        if to_router.send(line).await.is_err() {
            return refuse(StatusCode::SERVICE_UNAVAILABLE, "the proxy is stopping");
        }
        let Ok(answer) = rx.await else {
            return refuse(StatusCode::SERVICE_UNAVAILABLE, "the proxy is stopping");
        };
        let mut r = full(StatusCode::OK, answer);
        if let Some(s) = new_session
            && let Ok(h) = hyper::header::HeaderValue::from_str(&s)
        {
            r.headers_mut().insert(SESSION, h);
        }
        r
    }
}
