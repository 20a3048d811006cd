//! The proxy's own connections to an inspected host's server: HTTP/1.1 (TLS to the name when
//! the agent spoke TLS), kept alive and made again when the server closed one. An agent on
//! HTTP/1.1 sends one request at a time, so one connection serves it; an agent on HTTP/2
//! sends several at once, and each goes on a connection that is free (a new one when none
//! is), at most [`MAX_STREAMS`] at once, [`MAX_IDLE`] kept when idle.
use http_body_util::combinators::UnsyncBoxBody;
use hyper::{
    Request, Response,
    body::{Bytes, Incoming},
    client::conn::http1::SendRequest,
};
use hyper_util::rt::TokioIo;
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
    /// HTTP/1.1 toward the agent: wait for the one connection to be free (its last answer
    /// read to the end) rather than open another.
    one_at_a_time: bool,
}

impl Upstream {
    /// The first connection, made before the agent's first request is read (a server that
    /// cannot be reached ends the agent's connection at once).
    pub(super) async fn open(
        conn: &Conn,
        shared: &Shared,
        one_at_a_time: bool,
    ) -> Result<Upstream, String> {
        let first = open_upstream(conn, shared).await?;
        Ok(Upstream {
            idle: Mutex::new(vec![first]),
            one_at_a_time,
        })
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

    /// Sends `req` on a free connection, on a new one when none is free or the one taken
    /// was closed before the request went out (the request was then not sent).
    pub(super) async fn send(
        &self,
        req: Request<UpBody>,
        conn: &Conn,
        shared: &Shared,
    ) -> Result<Response<Incoming>, String> {
        let mut req = req;
        for _ in 0..2 {
            let mut sender = match self.take().await {
                Some(s) => s,
                None => open_upstream(conn, shared).await?,
            };
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    self.keep(sender).await;
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
}

/// One connection to the server: TLS to the name when the agent spoke TLS.
async fn open_upstream(conn: &Conn, shared: &Shared) -> Result<SendRequest<UpBody>, String> {
    let Some(l7) = &shared.inspection else {
        return Err("no inspection".into());
    };
    let tcp = connect(conn.target).await.map_err(|e| e.to_string())?;
    if !conn.tls {
        return handshake(tcp).await;
    }
    let name =
        rustls::pki_types::ServerName::try_from(conn.host.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(l7.client.clone())
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
