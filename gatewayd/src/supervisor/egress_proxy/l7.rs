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

use http_body_util::{BodyExt as _, Either, Full, combinators::UnsyncBoxBody};
use hyper::{
    Request, Response, StatusCode,
    body::{Bytes, Incoming},
    client::conn::http1::SendRequest,
    header::{CONNECTION, CONTENT_TYPE},
    http::request::Parts,
};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::Mutex,
};

use super::{
    FIRST_BYTES, Shared, connect,
    inspection::Refusal,
    l7_body::{self, Channel, FirstRead, MAX_BODY, Part, Windows},
};

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
/// A request body toward the server: whole, or a large one as it is checked.
type UpBody = UnsyncBoxBody<Bytes, std::io::Error>;

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
) -> Result<SendRequest<UpBody>, String> {
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

async fn handshake<S>(io: S) -> Result<SendRequest<UpBody>, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn http<S>(io: S, upstream: SendRequest<UpBody>, conn: Arc<Conn>, shared: Arc<Shared>)
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
    let mut body = body;
    let first = match l7_body::read_first(&mut body, MAX_BODY).await {
        Ok(f) => f,
        Err(e) => return answer(StatusCode::BAD_REQUEST, format!("the request body: {e}")),
    };
    let whole: &[u8] = match &first {
        FirstRead::Whole(b) => b,
        FirstRead::Large(v) => v,
    };
    // The request with its body, or with a large body's first window.
    if let Some(message) = canary(&parts, whole, &detail, shared).await {
        return answer(StatusCode::FORBIDDEN, format!("gatewayd {message}."));
    }
    let entry = shared.inspected_entry(conn.entry);
    let checked = match (&shared.inspection, entry) {
        (Some(l7), Some(e)) => l7.check(
            e,
            (&conn.host, conn.port),
            (&method, &target),
            &mut parts.headers,
            whole,
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
    match first {
        FirstRead::Whole(b) => {
            let full = Full::new(b).map_err(|never| match never {}).boxed_unsync();
            let sent = send(upstream, Request::from_parts(parts, full), conn, shared).await;
            server_answer(sent, conn)
        }
        FirstRead::Large(v) => large(parts, (body, v), upstream, conn, (shared, detail)).await,
    }
}

/// The server's answer, or 502 when it gave none.
fn server_answer(sent: Result<Response<Incoming>, String>, conn: &Conn) -> Response<Body> {
    match sent {
        Ok(resp) => resp.map(Either::Left),
        Err(e) => answer(
            StatusCode::BAD_GATEWAY,
            format!("the server of {} did not answer: {e}", conn.host),
        ),
    }
}

/// A body over [`MAX_BODY`] (`first`: its first window, which passed with the request):
/// sent on as its windows pass ([`l7_body`]); the server's answer, or the refusal of the
/// first window that does not pass (the server's side of the body broken off before it).
async fn large(
    parts: Parts,
    (mut body, first): (Incoming, Vec<u8>),
    upstream: &Upstream,
    conn: &Conn,
    (shared, detail): (&Shared, serde_json::Value),
) -> Response<Body> {
    let longest = shared.inspection.as_ref().map_or(0, |i| i.longest_form());
    let (mut windows, now) = Windows::after_first(first, MAX_BODY, longest);
    let (tx, channel) = Channel::new();
    let sending = send(
        upstream,
        Request::from_parts(parts, channel.boxed_unsync()),
        conn,
        shared,
    );
    let streaming = async {
        let mut out = Some(now);
        loop {
            if let Some(b) = out.take()
                && tx.send(Part::Data(b)).await.is_err()
            {
                return Ok(());
            }
            let Some(frame) = body.frame().await else {
                break;
            };
            let frame = frame
                .map_err(|e| answer(StatusCode::BAD_REQUEST, format!("the request body: {e}")))?;
            if let Ok(data) = frame.into_data()
                && windows.take(&data)
            {
                window_passes(windows.window(), shared, &detail).await?;
                out = Some(windows.passed());
            }
        }
        if windows.unchecked() {
            window_passes(windows.window(), shared, &detail).await?;
        }
        let _ = tx.send(Part::Data(windows.rest())).await;
        let _ = tx.send(Part::End).await;
        Ok(())
    };
    tokio::pin!(sending, streaming);
    let mut streamed = false;
    loop {
        tokio::select! {
            r = &mut streaming, if !streamed => match r {
                Ok(()) => streamed = true,
                // Returning drops the sender before its end: the server's body breaks off.
                Err(refused) => return refused,
            },
            sent = &mut sending => return server_answer(sent, conn),
        }
    }
}

/// A later window of a large body: canaries, placeholders and secrets (the window made
/// text once for all three); the answer to the agent when it does not pass.
async fn window_passes(
    window: &[u8],
    shared: &Shared,
    detail: &serde_json::Value,
) -> Result<(), Response<Body>> {
    let text = String::from_utf8_lossy(window);
    if let Some(message) = shared
        .canary_in(&[&text], super::super::canary::Route::Inspected, detail)
        .await
    {
        return Err(answer(
            StatusCode::FORBIDDEN,
            format!("gatewayd {message}."),
        ));
    }
    match shared
        .inspection
        .as_ref()
        .map(|l7| l7.check_body_part(&text))
    {
        Some(Err(r)) => Err(refuse(shared, detail.clone(), r).await),
        _ => Ok(()),
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
type Upstream = Mutex<Option<SendRequest<UpBody>>>;

/// Sends `req` on the server connection, on a new one when that one is closed or was not
/// ready (the request was then not sent).
async fn send(
    upstream: &Upstream,
    req: Request<UpBody>,
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
        _ => "Next: change the request",
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
