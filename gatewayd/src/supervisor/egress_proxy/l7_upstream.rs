//! The proxy's own connections to an inspected host's server (TLS to the name when the agent
//! spoke TLS), kept alive and made again when the server closed one. Over TLS the server is
//! offered HTTP/2 and HTTP/1.1 by ALPN, as a client would: a server that takes HTTP/2 gets
//! every request of the agent's connection as a stream of one connection; over HTTP/1.1, an
//! agent on HTTP/1.1 sends one request at a time, so one connection serves it, and an agent
//! on HTTP/2 sends several at once, each going on a connection that is free (a new one when
//! none is), at most [`MAX_STREAMS`] at once, [`MAX_IDLE`] kept when idle.
use http_body_util::combinators::UnsyncBoxBody;
use hyper::{
    Request, Response, Version,
    body::{Bytes, Incoming},
    client::conn::{http1::SendRequest, http2},
    header::{CONNECTION, HOST, HeaderName, HeaderValue, TE, TRANSFER_ENCODING, UPGRADE},
};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::Mutex,
};

use super::{Shared, connect, l7::Conn};

/// A request body toward the server: whole, or a large one as it is checked.
pub(super) type UpBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// The most requests an HTTP/2 agent connection has in flight at once (its
/// `SETTINGS_MAX_CONCURRENT_STREAMS`), so the most server connections it opens.
pub(super) const MAX_STREAMS: u32 = 32;
/// Idle server connections kept for one agent connection.
const MAX_IDLE: usize = 4;

/// The server connections of one agent connection.
pub(super) struct Upstream {
    idle: Mutex<Vec<SendRequest<UpBody>>>,
    /// The server took HTTP/2: one connection, its requests multiplexed.
    h2: Mutex<Option<http2::SendRequest<UpBody>>>,
    /// HTTP/1.1 toward the agent: wait for the one connection to be free (its last answer
    /// read to the end) rather than open another.
    one_at_a_time: bool,
}

/// One connection to the server, in the version it took.
enum Sender {
    H1(SendRequest<UpBody>),
    H2(http2::SendRequest<UpBody>),
}

impl Upstream {
    /// The first connection, made before the agent's first request is read (a server that
    /// cannot be reached ends the agent's connection at once).
    pub(super) async fn open(
        conn: &Conn,
        shared: &Shared,
        one_at_a_time: bool,
    ) -> Result<Upstream, String> {
        let up = Upstream {
            idle: Mutex::new(Vec::new()),
            h2: Mutex::new(None),
            one_at_a_time,
        };
        match open_upstream(conn, shared).await? {
            Sender::H1(s) => up.idle.lock().await.push(s),
            Sender::H2(s) => *up.h2.lock().await = Some(s),
        }
        Ok(up)
    }

    /// A free connection, if one is kept.
    async fn take(&self) -> Option<SendRequest<UpBody>> {
        let mut idle = self.idle.lock().await;
        idle.retain(|s| !s.is_closed());
        if self.one_at_a_time {
            let mut s = idle.pop()?;
            drop(idle);
            return s.ready().await.is_ok().then_some(s);
        }
        let at = idle.iter().position(SendRequest::is_ready)?;
        Some(idle.swap_remove(at))
    }

    async fn keep(&self, sender: SendRequest<UpBody>) {
        let mut idle = self.idle.lock().await;
        if idle.len() < MAX_IDLE {
            idle.push(sender);
        }
    }

    /// Sends `req` (as the agent wrote it, decided) on a free connection, in the form of the
    /// version that connection speaks ([`as_h1`], [`as_h2`]); on a new one when none is free
    /// or the one taken was closed before the request went out (the request was then not
    /// sent).
    pub(super) async fn send(
        &self,
        req: Request<UpBody>,
        conn: &Conn,
        shared: &Shared,
    ) -> Result<Response<Incoming>, String> {
        let mut req = req;
        for _ in 0..2 {
            let sender = match self.take_h2().await {
                Some(s) => Sender::H2(s),
                None => match self.take().await {
                    Some(s) => Sender::H1(s),
                    None => open_upstream(conn, shared).await?,
                },
            };
            let (back, error) = match sender {
                Sender::H1(mut s) => match s.try_send_request(as_h1(req)).await {
                    Ok(resp) => {
                        self.keep(s).await;
                        return Ok(resp);
                    }
                    Err(mut e) => (e.take_message(), e.into_error()),
                },
                Sender::H2(mut s) => match s.try_send_request(as_h2(req, conn)).await {
                    Ok(resp) => {
                        *self.h2.lock().await = Some(s);
                        return Ok(resp);
                    }
                    Err(mut e) => (e.take_message(), e.into_error()),
                },
            };
            match back {
                Some(r) => req = r,
                None => return Err(error.to_string()),
            }
        }
        Err("the server closed every connection before the request was sent".into())
    }

    /// The server's HTTP/2 connection, when it has one that is open and ready.
    async fn take_h2(&self) -> Option<http2::SendRequest<UpBody>> {
        let mut h2 = self.h2.lock().await;
        let mut s = h2.take()?;
        if s.ready().await.is_err() {
            return None;
        }
        *h2 = Some(s.clone());
        Some(s)
    }
}

/// A request as HTTP/2 sends it: an absolute target (`:scheme`, `:authority` from the
/// connection's name and port), no `Host`, no HTTP/1.1 connection headers.
fn as_h2(req: Request<UpBody>, conn: &Conn) -> Request<UpBody> {
    let (mut parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = if conn.port == 443 {
        conn.host.clone()
    } else {
        format!("{}:{}", conn.host, conn.port)
    };
    if let Ok(uri) = format!("https://{authority}{path}").parse() {
        parts.uri = uri;
    }
    parts.version = Version::HTTP_2;
    for name in [
        HOST,
        CONNECTION,
        TRANSFER_ENCODING,
        UPGRADE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ] {
        parts.headers.remove(name);
    }
    if parts.headers.get(TE).is_some_and(|v| v != "trailers") {
        parts.headers.remove(TE);
    }
    Request::from_parts(parts, body)
}

/// A request as HTTP/1.1 sends it, whatever form it came in (the agent's HTTP/1.1 or
/// HTTP/2, or [`as_h2`]'s when it was not sent): origin form, with a `Host` (HTTP/2 names the
/// host in `:authority` only).
fn as_h1(req: Request<UpBody>) -> Request<UpBody> {
    let (mut parts, body) = req.into_parts();
    if !parts.headers.contains_key(HOST)
        && let Some(a) = parts.uri.authority()
        && let Ok(v) = HeaderValue::from_str(a.as_str())
    {
        parts.headers.insert(HOST, v);
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if let Ok(uri) = target.parse() {
        parts.uri = uri;
    }
    parts.version = Version::HTTP_11;
    Request::from_parts(parts, body)
}

/// One connection to the server: TLS to the name when the agent spoke TLS, HTTP/2 when the
/// server takes it by ALPN.
async fn open_upstream(conn: &Conn, shared: &Shared) -> Result<Sender, String> {
    let Some(l7) = &shared.inspection else {
        return Err("no inspection".into());
    };
    let tcp = connect(conn.target).await.map_err(|e| e.to_string())?;
    if !conn.tls {
        return handshake(tcp).await.map(Sender::H1);
    }
    let name =
        rustls::pki_types::ServerName::try_from(conn.host.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(l7.client.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS to the server: {e}"))?;
    if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
        return handshake(tls).await.map(Sender::H1);
    }
    let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(Sender::H2(sender))
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
