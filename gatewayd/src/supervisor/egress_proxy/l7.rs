//! An inspected host's connection: the proxy ends the agent's TLS with the session's CA
//! (or reads plain HTTP), serves HTTP/2 (when the agent's TLS asks for it by ALPN) or
//! HTTP/1.1 to the agent with hyper, decides each request (its host: the connection's
//! name; then [`Inspection::check`]), and sends the allowed ones on over connections of its
//! own to the server (TLS checked against the system's roots; HTTP/2 when the server takes
//! it, else HTTP/1.1: [`l7_upstream`]), keep-alive on both sides.
use std::{
    convert::Infallible,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http_body_util::{BodyExt as _, Either, Full};
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{CONNECTION, CONTENT_TYPE, HOST, UPGRADE},
    http::request::Parts,
};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};

use super::{
    FIRST_BYTES, Shared,
    inspection::Refusal,
    l7_body::{self, Channel, FirstRead, MAX_BODY, Part, Windows},
    l7_upstream::{MAX_STREAMS, Upstream},
    peek::split_authority,
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
    if !conn.tls {
        if let Some(upstream) = first_upstream(&conn, &shared, true).await {
            http1(io, (upstream, Arc::new(conn)), shared).await;
        }
        return;
    }
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
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let Some(upstream) = first_upstream(&conn, &shared, !h2).await else {
        return;
    };
    if h2 {
        http2(tls, (upstream, Arc::new(conn)), shared).await;
    } else {
        http1(tls, (upstream, Arc::new(conn)), shared).await;
    }
}

/// The proxy's first connection to the server; `None` (said on stderr) when it fails.
async fn first_upstream(conn: &Conn, shared: &Shared, one_at_a_time: bool) -> Option<Upstream> {
    match Upstream::open(conn, shared, one_at_a_time).await {
        Ok(u) => Some(u),
        Err(e) => {
            eprintln!("gatewayd: egress proxy: {}:{}: {e}", conn.host, conn.port);
            None
        }
    }
}

/// The service that decides and sends on each request of one agent connection.
fn service(
    (upstream, conn): (Upstream, Arc<Conn>),
    shared: Arc<Shared>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    let upstream = Arc::new(upstream);
    hyper::service::service_fn(move |req| {
        let (upstream, conn, shared) = (upstream.clone(), conn.clone(), shared.clone());
        async move { Ok::<_, Infallible>(request(req, &upstream, &conn, &shared).await) }
    })
}

async fn http1<S>(io: S, server: (Upstream, Arc<Conn>), shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let lockdown = shared.lockdown.clone();
    let served = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BUF)
        .max_header_size(MAX_HEAD_BUF)
        .header_read_timeout(Some(FIRST_BYTES))
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(TokioIo::new(io), service(server, shared));
    until_lockdown(
        served,
        lockdown,
        hyper::server::conn::http1::Connection::graceful_shutdown,
    )
    .await;
}

/// HTTP/2 toward the agent (ALPN `h2`): its streams are requests decided one by one, as
/// HTTP/1.1's are; the head at most [`MAX_HEAD_BUF`] (after HPACK), [`MAX_STREAMS`] at once.
async fn http2<S>(io: S, server: (Upstream, Arc<Conn>), shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let lockdown = shared.lockdown.clone();
    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .max_header_list_size(MAX_HEAD_BUF as u32)
        .max_concurrent_streams(MAX_STREAMS)
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(TokioIo::new(io), service(server, shared));
    until_lockdown(
        served,
        lockdown,
        hyper::server::conn::http2::Connection::graceful_shutdown,
    )
    .await;
}

/// Drives a connection until it ends or the session is locked down. Locked down: the answer
/// in hand (a canary's refusal) is written, then the connection closes; a request still
/// waiting on its server gets at most `LOCKDOWN_GRACE`.
async fn until_lockdown<C: Future>(
    served: C,
    mut lockdown: tokio::sync::watch::Receiver<bool>,
    shutdown: impl FnOnce(Pin<&mut C>),
) {
    tokio::pin!(served);
    tokio::select! {
        _ = served.as_mut() => return,
        _ = lockdown.wait_for(|on| *on) => {}
    }
    shutdown(served.as_mut());
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
    if let Some((r, extra)) = refused_unread(&mut parts, conn) {
        let mut detail = detail;
        if let Some((k, v)) = extra {
            detail[k] = json!(v);
        }
        return refuse(shared, detail, r).await;
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
    match first {
        FirstRead::Whole(b) => {
            let full = Full::new(b).map_err(|never| match never {}).boxed_unsync();
            let sent = upstream
                .send(Request::from_parts(parts, full), conn, shared)
                .await;
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
    let sending = upstream.send(
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

/// What is refused before the body is read, with a detail for the record: a request naming
/// another host than its connection's ([`other_host`]), and a tunnel or protocol upgrade
/// (`CONNECT`, a WebSocket), whose bytes after the answer would pass unread. An `h2c`
/// upgrade offer (`curl --http2` over plain HTTP) is taken out instead: the server answers
/// in HTTP/1.1, as to a client that made none.
fn refused_unread(
    parts: &mut Parts,
    conn: &Conn,
) -> Option<(Refusal, Option<(&'static str, String)>)> {
    if let Some(named) = other_host(parts, conn) {
        let why = format!(
            "the request names host `{named}` on a connection made for `{}` (its TLS server name or first Host): a server that routes by the request's host would carry it to another site; connect to `{named}` itself, if the policy allows it",
            conn.host
        );
        let refusal = Refusal {
            reason: "egress_not_allowed",
            why,
        };
        return Some((refusal, Some(("request_host", named))));
    }
    let upgrade = parts
        .headers
        .get(UPGRADE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase());
    if upgrade.as_deref().is_some_and(|u| u.trim() == "h2c") {
        parts.headers.remove(UPGRADE);
        parts.headers.remove("http2-settings");
        return None;
    }
    if parts.method != Method::CONNECT && upgrade.is_none() {
        return None;
    }
    let what = upgrade.map_or_else(
        || "a CONNECT tunnel".to_owned(),
        |u| format!("an upgrade to `{u}`"),
    );
    let why = format!(
        "{what} on an inspected host: the bytes after it would pass unread (the proxy reads HTTP requests only); if the agent needs it, the host's network.egress entry must not be inspected (no inspect, http or inject), so that it is decided by name only"
    );
    let refusal = Refusal {
        reason: "egress_http_not_allowed",
        why,
    };
    Some((refusal, None))
}

/// The host a request names (`:authority` or an absolute target, and `Host`), when it is not
/// the connection's name and port: what a server behind one address for many names (a CDN,
/// a shared host) would route by, so a request to an allowed name could reach another site.
fn other_host(parts: &Parts, conn: &Conn) -> Option<String> {
    let host_header = parts
        .headers
        .get_all(HOST)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let authority = parts.uri.authority().map(|a| a.as_str().to_owned());
    authority.into_iter().chain(host_header).find(|named| {
        split_authority(named)
            .is_none_or(|(host, port)| host != conn.host || port.is_some_and(|p| p != conn.port))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Conn {
        Conn {
            host: "git.example.test".into(),
            port: 443,
            target: ([192, 0, 2, 1], 443).into(),
            entry: 0,
            tls: true,
        }
    }

    fn named(uri: &str, hosts: &[&str]) -> Option<String> {
        let mut req = Request::builder().uri(uri);
        for h in hosts {
            req = req.header(HOST, *h);
        }
        let (parts, ()) = req.body(()).unwrap().into_parts();
        other_host(&parts, &conn())
    }

    fn refused(method: &str, headers: &[(&str, &str)]) -> (Option<&'static str>, Parts) {
        let mut req = Request::builder()
            .method(method)
            .uri("/x")
            .header(HOST, "git.example.test");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let (mut parts, ()) = req.body(()).unwrap().into_parts();
        let r = refused_unread(&mut parts, &conn()).map(|(r, _)| r.reason);
        (r, parts)
    }

    #[test]
    fn tunnels_and_upgrades_are_refused_and_an_h2c_offer_taken_out() {
        let ws = [("connection", "Upgrade"), ("upgrade", "websocket")];
        assert_eq!(refused("GET", &ws).0, Some("egress_http_not_allowed"));
        assert_eq!(refused("CONNECT", &[]).0, Some("egress_http_not_allowed"));
        let h2c = [
            ("connection", "Upgrade, HTTP2-Settings"),
            ("upgrade", "h2c"),
            ("http2-settings", "AAMAAABkAAQCAAAAAAIAAAAA"),
        ];
        let (r, parts) = refused("GET", &h2c);
        assert_eq!(r, None);
        assert!(!parts.headers.contains_key(UPGRADE));
        assert!(!parts.headers.contains_key("http2-settings"));
        assert_eq!(refused("GET", &[]).0, None);
    }

    #[test]
    fn a_request_names_the_connections_host_or_is_refused() {
        for same in [
            "git.example.test",
            "GIT.example.test.",
            "git.example.test:443",
        ] {
            assert_eq!(named("/x", &[same]), None, "{same}");
        }
        assert_eq!(named("https://git.example.test/x", &[]), None, "HTTP/2");
        assert_eq!(named("/x", &[]), None, "no host named");
        for other in [
            "cdn-other.test",
            "git.example.test:8443",
            "git.example.test@x",
            "",
        ] {
            assert!(named("/x", &[other]).is_some(), "{other}");
        }
        assert_eq!(
            named("https://other.test/x", &["git.example.test"]).as_deref(),
            Some("other.test"),
            "HTTP/2's :authority"
        );
        assert_eq!(
            named("/x", &["git.example.test", "other.test"]).as_deref(),
            Some("other.test"),
            "a second Host"
        );
    }
}
