//! An inspected host's connection: the proxy ends the agent's TLS with the session's CA
//! (or reads plain HTTP), serves HTTP/1.1 to the agent with hyper, decides each request
//! ([`Inspection::check`]), and sends the allowed ones on over one connection of its own
//! to the server (TLS checked against the system's roots), keep-alive on both sides.
use std::{
    convert::Infallible,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http_body_util::{BodyExt as _, Either, Full, Limited};
use hyper::{
    Request, Response, StatusCode,
    body::{Bytes, Incoming},
    client::conn::http1::SendRequest,
    header::{CONNECTION, CONTENT_TYPE},
};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Mutex,
};

use super::{FIRST_BYTES, Shared, connect, inspection::Refusal};

/// The largest request body read (and checked); a larger one is refused.
pub(super) const MAX_BODY: usize = 8 * 1024 * 1024;
/// The largest request head the proxy reads from the agent.
const MAX_HEAD_BUF: usize = 64 * 1024;

/// What the connection is for.
pub(super) struct Conn {
    pub(super) host: String,
    pub(super) port: u16,
    /// The server's address (checked against the name).
    pub(super) target: SocketAddr,
    /// The inspected entry of `network.egress`.
    pub(super) entry: usize,
    pub(super) tls: bool,
}

type Body = Either<Incoming, Full<Bytes>>;

/// Serves the agent's connection (`head`: the bytes already read from it) until either side
/// closes or the session is locked down.
pub(super) async fn serve(agent: TcpStream, head: Vec<u8>, conn: Conn, shared: Arc<Shared>) {
    let Some(l7) = shared.inspection.clone() else {
        return;
    };
    let io = Prefixed {
        head,
        at: 0,
        inner: agent,
    };
    let upstream = match open_upstream(&conn, &l7.client).await {
        Ok(u) => u,
        Err(e) => {
            eprintln!("gatewayd: egress proxy: {}:{}: {e}", conn.host, conn.port);
            return;
        }
    };
    let conn = Arc::new(conn);
    if conn.tls {
        let config = match l7.ca.server_config(&conn.host) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("gatewayd: egress proxy: {e}");
                return;
            }
        };
        let accept = tokio_rustls::TlsAcceptor::from(config).accept(io);
        let Ok(Ok(tls)) = tokio::time::timeout(FIRST_BYTES, accept).await else {
            return;
        };
        http(tls, upstream, conn, shared).await;
    } else {
        http(io, upstream, conn, shared).await;
    }
}

/// The proxy's own connection to the server: TLS to the name when the agent spoke TLS.
async fn open_upstream(
    conn: &Conn,
    client: &Arc<rustls::ClientConfig>,
) -> Result<SendRequest<Full<Bytes>>, String> {
    let tcp = connect(conn.target).await.map_err(|e| e.to_string())?;
    if !conn.tls {
        return handshake(tcp).await;
    }
    let name =
        rustls::pki_types::ServerName::try_from(conn.host.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(client.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS to the server: {e}"))?;
    handshake(tls).await
}

async fn handshake<S>(io: S) -> Result<SendRequest<Full<Bytes>>, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn http<S>(io: S, upstream: SendRequest<Full<Bytes>>, conn: Arc<Conn>, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let upstream = Arc::new(Mutex::new(Some(upstream)));
    let mut lockdown = shared.lockdown.clone();
    let service = hyper::service::service_fn(move |req| {
        let (upstream, conn, shared) = (upstream.clone(), conn.clone(), shared.clone());
        async move { Ok::<_, Infallible>(request(req, &upstream, &conn, &shared).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BUF)
        .max_header_size(MAX_HEAD_BUF)
        .header_read_timeout(Some(FIRST_BYTES))
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    tokio::select! {
        _ = served.as_mut() => return,
        _ = lockdown.wait_for(|on| *on) => {}
    }
    // Locked down: the answer in hand (a canary's refusal) is written, then the connection
    // closes; a request still waiting on its server gets at most `LOCKDOWN_GRACE`.
    served.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(LOCKDOWN_GRACE, served).await;
}

/// How long a locked-down connection may take to write the answer in hand.
const LOCKDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// One request: decided, then sent on (or answered 403 / 413 / 502 by the proxy).
async fn request(
    req: Request<Incoming>,
    upstream: &Upstream,
    conn: &Conn,
    shared: &Shared,
) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    let method = parts.method.as_str().to_owned();
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    // The path as recorded: a secret or placeholder in it is not written down.
    let shown = shared
        .inspection
        .as_ref()
        .map_or_else(|| target.clone(), |i| i.scrub(&target));
    let detail = json!({"host": conn.host, "port": conn.port, "method": method, "path": shown});
    if *shared.lockdown.borrow() {
        shared.refuse(detail, "all egress is closed").await;
        return answer(
            StatusCode::FORBIDDEN,
            "all egress of this session is closed (Rule of Two lockdown). Next: end the session."
                .into(),
        );
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_none() =>
        {
            return answer(StatusCode::BAD_REQUEST, format!("the request body: {e}"));
        }
        Err(_) => return too_large(shared, detail).await,
    };
    if let Some(message) = canary(&parts, &body, &detail, shared).await {
        return answer(StatusCode::FORBIDDEN, format!("gatewayd {message}."));
    }
    let entry = shared.inspected_entry(conn.entry);
    let checked = match (&shared.inspection, entry) {
        (Some(l7), Some(e)) => l7.check(
            e,
            (&conn.host, conn.port),
            (&method, &target),
            &mut parts.headers,
            &body,
        ),
        _ => Ok(()),
    };
    if let Err(r) = checked {
        return refuse(shared, detail, r).await;
    }
    // Origin form toward the server, whatever form the agent wrote.
    if let Ok(uri) = target.parse() {
        parts.uri = uri;
    }
    let req = Request::from_parts(parts, Full::new(body));
    match send(upstream, req, conn, shared).await {
        Ok(resp) => resp.map(Either::Left),
        Err(e) => answer(
            StatusCode::BAD_GATEWAY,
            format!("the server of {} did not answer: {e}", conn.host),
        ),
    }
}

/// A canary credential in the request (its target, headers, body): the session is locked
/// down and `canary` recorded; returns the message for the agent.
async fn canary(
    parts: &hyper::http::request::Parts,
    body: &[u8],
    detail: &serde_json::Value,
    shared: &Shared,
) -> Option<String> {
    shared.canary.as_ref()?;
    let mut texts = vec![
        parts.uri.to_string(),
        String::from_utf8_lossy(body).into_owned(),
    ];
    for (name, value) in &parts.headers {
        texts.push(format!(
            "{name}: {}",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    shared
        .canary_in(&refs, super::super::canary::Route::Inspected, detail)
        .await
}

/// The proxy's connection to the server, made again when the server closed it (an HTTP/1.0
/// server, or `Connection: close`) while the agent's stays open.
type Upstream = Mutex<Option<SendRequest<Full<Bytes>>>>;

/// Sends `req` on the server connection, on a new one when that one is closed or was not
/// ready (the request was then not sent).
async fn send(
    upstream: &Upstream,
    req: Request<Full<Bytes>>,
    conn: &Conn,
    shared: &Shared,
) -> Result<Response<Incoming>, String> {
    let Some(l7) = &shared.inspection else {
        return Err("no inspection".into());
    };
    let mut guard = upstream.lock().await;
    let mut req = req;
    for _ in 0..2 {
        let ready = match guard.take() {
            Some(mut s) => s.ready().await.is_ok().then_some(s),
            None => None,
        };
        let mut sender = match ready {
            Some(s) => s,
            None => open_upstream(conn, &l7.client).await?,
        };
        match sender.try_send_request(req).await {
            Ok(resp) => {
                *guard = Some(sender);
                return Ok(resp);
            }
            Err(mut e) => match e.take_message() {
                Some(back) => req = back,
                None => return Err(e.into_error().to_string()),
            },
        }
    }
    Err("the server closed every connection before the request was sent".into())
}

async fn too_large(shared: &Shared, detail: serde_json::Value) -> Response<Body> {
    let why = format!(
        "the request body is over {} MiB, the most the proxy reads to check it",
        MAX_BODY >> 20
    );
    let r = Refusal {
        reason: "egress_body_too_large",
        why,
    };
    refuse(shared, detail, r).await
}

/// Records the refusal and answers 403 with why and what to do.
async fn refuse(shared: &Shared, mut detail: serde_json::Value, r: Refusal) -> Response<Body> {
    let next = match r.reason {
        "egress_http_not_allowed" => {
            "Next: use a request the host's rules allow, or ask the user to add an http rule to the host's network.egress entry"
        }
        "egress_placeholder" => {
            "Next: send the placeholder only in its own header to its own host; the proxy puts the real credential there"
        }
        "egress_secret" => {
            "Next: leave the secret out of the request; secrets never leave the session"
        }
        _ => "Next: send a smaller request",
    };
    let message = format!("{}. {next}.", r.why);
    detail["reason_detail"] = json!(r.why);
    shared.deny(r.reason, detail, message.clone()).await;
    answer(
        StatusCode::FORBIDDEN,
        format!("gatewayd refused this request: {message}"),
    )
}

fn answer(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Either::Right(Full::new(Bytes::from(text + "\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if status == StatusCode::BAD_GATEWAY {
        r.headers_mut()
            .insert(CONNECTION, hyper::header::HeaderValue::from_static("close"));
    }
    r
}

/// A stream that gives the bytes already read first.
struct Prefixed {
    head: Vec<u8>,
    at: usize,
    inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.at < self.head.len() {
            let n = (self.head.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.head[at..at + n]);
            self.at += n;
            if self.at == self.head.len() {
                self.head = Vec::new();
                self.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
