//! The proxy's TCP side: one task per connection the kernel sent here, at most
//! `MAX_CONNECTIONS` at once.
use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};

use super::{
    super::canary::Route,
    FIRST_BYTES, Shared, connect,
    peek::{MAX_HEAD, Peeked, peek},
};
use gatewayd_core::engine::sandbox::Dest;

/// Accepts connections while a permit is free; each is handled on its own task.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>, permits: Arc<Semaphore>) {
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        // As toward the server ([`connect`]): nothing the proxy writes waits for an ACK.
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            handle(stream, peer, &shared).await;
            drop(permit);
        });
    }
}

/// The connection's name, read from its first bytes within `FIRST_BYTES`.
async fn read_name(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Peeked, &'static str> {
    let read = async {
        loop {
            match peek(buf) {
                Peeked::More => {}
                done => return Ok(done),
            }
            let mut chunk = [0u8; 4096];
            let room = (MAX_HEAD + 1 - buf.len()).min(chunk.len());
            match stream.read(&mut chunk[..room]).await {
                Ok(0) | Err(_) => {
                    return Err("the connection closed before it named its destination");
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(FIRST_BYTES, read)
        .await
        .unwrap_or(Err("the connection sent no name within 10 s"))
}

/// What a connection's first bytes gave.
enum Named {
    /// Its host, port (when written), CONNECT head length (when a CONNECT) and TLS or not.
    Name((String, Option<u16>, Option<usize>, bool)),
    /// No name; recorded as learned, so the connection goes on to its original address.
    Learned,
    /// No name and refused (recorded), or the agent closed first.
    Closed,
}

/// The name the connection's first bytes give (SNI, `Host` or CONNECT's target). A
/// connection without one is refused and recorded (learning: recorded, `error` in `detail`).
async fn named(
    agent: &mut TcpStream,
    buf: &mut Vec<u8>,
    detail: &mut serde_json::Value,
    shared: &Arc<Shared>,
) -> Named {
    match read_name(agent, buf).await {
        Ok(Peeked::Name {
            host,
            port,
            connect,
            tls,
        }) => Named::Name((host, port, connect, tls)),
        Ok(Peeked::Refused(why)) | Err(why) => {
            detail["error"] = json!(why);
            let nameless = "a connection without a name the proxy can read is refused";
            if shared.learn {
                shared.learned(detail.clone(), nameless).await;
                Named::Learned
            } else {
                shared.refuse(detail.clone(), nameless).await;
                Named::Closed
            }
        }
        Ok(Peeked::More) => Named::Closed,
    }
}

async fn handle(mut agent: TcpStream, peer: SocketAddr, shared: &Arc<Shared>) {
    let Ok(local) = agent.local_addr() else {
        return;
    };
    let Some(original) = shared.maps.original(peer, local) else {
        let detail = json!({"addr": local.ip().to_string(), "port": local.port()});
        shared
            .refuse(detail, "a connection to the egress proxy's own port, not one the kernel sent there, is refused")
            .await;
        return;
    };
    let mut detail = json!({"addr": original.ip().to_string(), "port": original.port()});
    if *shared.lockdown.borrow() {
        shared.refuse(detail, "all egress is closed").await;
        return;
    }
    let mut buf = Vec::with_capacity(2048);
    let (host, port, connect_head, tls) =
        match named(&mut agent, &mut buf, &mut detail, shared).await {
            Named::Name(name) => name,
            Named::Learned => {
                if canary_refused(&mut agent, &buf, ("", false), &detail, shared).await {
                    return;
                }
                // Learned: on to the address the agent asked for.
                forward(agent, original, None, &buf, shared).await;
                return;
            }
            Named::Closed => return,
        };
    detail["host"] = json!(host);
    if canary_refused(&mut agent, &buf, (&host, tls), &detail, shared).await {
        return;
    }
    // A CONNECT names its own port; otherwise the connection's port is the original's.
    let port = if connect_head.is_some() {
        port.unwrap_or(0)
    } else {
        original.port()
    };
    let by_connect = connect_head.is_some();
    let Some(target) = allowed_target(
        &mut agent,
        (&host, port, tls),
        original,
        by_connect,
        &mut detail,
        shared,
    )
    .await
    else {
        return;
    };
    onward(
        agent,
        buf,
        (host, port, target),
        (tls, connect_head),
        detail,
        shared,
    )
    .await;
}

/// A named connection's allowlist check (only recorded in learn mode) and the address it
/// goes on to: the name's own address for a CONNECT, else the original destination once it
/// is shown to be an address of the name. `None` when refused: the agent has its answer and
/// the refusal is recorded.
async fn allowed_target(
    agent: &mut TcpStream,
    (host, port, tls): (&str, u16, bool),
    original: SocketAddr,
    by_connect: bool,
    detail: &mut serde_json::Value,
    shared: &Arc<Shared>,
) -> Option<SocketAddr> {
    let dest = Dest {
        host: host.to_string(),
        port,
    };
    let not_listed = format!("{host} port {port} is not in the egress allowlist");
    if !shared.egress.allows(&dest) {
        if !shared.learn {
            refuse_with_answer(agent, tls, host).await;
            shared.refuse(detail.clone(), &not_listed).await;
            return None;
        }
        shared.learned(detail.clone(), &not_listed).await;
    }
    let target = if by_connect {
        resolve_one(shared, host, port).await
    } else {
        verified(shared, host, original).await
    };
    match target {
        Ok(t) => Some(t),
        Err(why) => {
            refuse_with_answer(agent, tls, host).await;
            detail["error"] = json!(why);
            let why = format!("the destination is not an address of {host}");
            shared.refuse(detail.clone(), &why).await;
            None
        }
    }
}

/// An allowed connection, on to its server: read by [`inspect`] when its host is inspected;
/// else refused when a plain HTTP head carries a credential's placeholder, else forwarded.
async fn onward(
    mut agent: TcpStream,
    buf: Vec<u8>,
    (host, port, target): (String, u16, SocketAddr),
    (tls, connect_head): (bool, Option<usize>),
    detail: serde_json::Value,
    shared: &Arc<Shared>,
) {
    let dest = Dest {
        host: host.clone(),
        port,
    };
    if let Some(entry) = shared.inspected_for(&dest) {
        let conn = (host, port, target, entry);
        inspect(agent, buf, conn, (tls, connect_head), shared).await;
        return;
    }
    let misplaced = shared
        .inspection
        .as_ref()
        .and_then(|i| i.placeholder_in(&buf));
    if !tls && let Some(which) = misplaced {
        refuse_with_answer(&mut agent, tls, &host).await;
        let message = format!(
            "the request to {host} carries the credential {which}, which goes only to its own (inspected) host. Next: send it only there; the proxy puts the real credential in"
        );
        shared.deny("egress_placeholder", detail, message).await;
        return;
    }
    forward(agent, target, connect_head, &buf, shared).await;
}

/// An inspected host's connection, on to [`l7`](super::l7); a `CONNECT` tunnel to one is
/// refused (its bytes would pass unread).
async fn inspect(
    mut agent: TcpStream,
    buf: Vec<u8>,
    (host, port, target, entry): (String, u16, SocketAddr, usize),
    (tls, connect_head): (bool, Option<usize>),
    shared: &Arc<Shared>,
) {
    if connect_head.is_some() {
        refuse_with_answer(&mut agent, false, &host).await;
        let detail = json!({"host": host, "port": port, "method": "CONNECT"});
        let message = format!(
            "{host} is an inspected host: a CONNECT tunnel to it is refused. Next: connect to {host} directly (the session sends every connection through its proxy)"
        );
        shared
            .deny("egress_http_not_allowed", detail, message)
            .await;
        return;
    }
    let conn = super::l7::Conn {
        host,
        port,
        target,
        entry,
        tls,
    };
    super::l7::serve(agent, buf, conn, shared.clone()).await;
}

/// On to `target` with the bytes read so far: after a `CONNECT` head (at `connect_head`'s
/// end) the proxy answers `200` itself and sends on what followed the head.
async fn forward(
    mut agent: TcpStream,
    target: SocketAddr,
    connect_head: Option<usize>,
    buf: &[u8],
    shared: &Shared,
) {
    let Ok(mut upstream) = connect(target).await else {
        return;
    };
    let sent = match connect_head {
        Some(head) => {
            let rest = buf.get(head..).unwrap_or_default().to_vec();
            let answered = agent
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
            match answered {
                Ok(()) => upstream.write_all(&rest).await,
                Err(e) => Err(e),
            }
        }
        None => upstream.write_all(buf).await,
    };
    if sent.is_ok() {
        splice(agent, upstream, shared).await;
    }
}

/// Passes the bytes both ways ([`super::splice`]) until both sides close, either fails, or
/// the session is locked down.
async fn splice(agent: TcpStream, upstream: TcpStream, shared: &Shared) {
    let mut lockdown = shared.lockdown.clone();
    tokio::select! {
        _ = super::splice::both_ways(&agent, &upstream) => {}
        _ = lockdown.wait_for(|on| *on) => {}
    }
}

/// A canary credential in a connection's first bytes (a plain HTTP request head and what
/// came with it; of a TLS connection only its server name): the session is locked down and
/// `canary` recorded, and a plain HTTP client is answered 403 with why.
async fn canary_refused(
    agent: &mut TcpStream,
    buf: &[u8],
    (host, tls): (&str, bool),
    detail: &serde_json::Value,
    shared: &Shared,
) -> bool {
    let (text, route) = if tls {
        (String::new(), Route::ServerName)
    } else {
        (String::from_utf8_lossy(buf).into_owned(), Route::Http)
    };
    let Some(message) = shared.canary_in(&[host, &text], route, detail).await else {
        return false;
    };
    if !tls {
        let body = format!("gatewayd {message}.\n");
        let answer = format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = agent.write_all(answer.as_bytes()).await;
    }
    true
}

/// A plain HTTP client gets a 403 that says why; a TLS client just sees the close.
async fn refuse_with_answer(agent: &mut TcpStream, tls: bool, host: &str) {
    if tls {
        return;
    }
    let body = format!(
        "gatewayd: egress to {host} is refused by the session's policy. Next: add it to network.egress if the agent needs it.\n"
    );
    let answer = format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = agent.write_all(answer.as_bytes()).await;
}

/// The address the agent's socket meant to go to, when it is one the name resolves to:
/// one the session's resolver answered for it, or one a lookup now gives. Without the check
/// an allowed name in the `ClientHello` would carry the agent to any address (a server of its
/// own that accepts any name).
async fn verified(shared: &Shared, host: &str, original: SocketAddr) -> Result<SocketAddr, String> {
    if shared.answers.has(host, original.ip()) {
        return Ok(original);
    }
    let found = lookup(shared, host).await?;
    if found.contains(&original.ip()) {
        Ok(original)
    } else {
        Err(format!(
            "{} is not among the addresses {host} resolves to ({})",
            original.ip(),
            found
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// An HTTP `CONNECT`'s target: the agent chose the proxy's address, not the server's, so the
/// proxy resolves the name itself and connects to its first address.
async fn resolve_one(shared: &Shared, host: &str, port: u16) -> Result<SocketAddr, String> {
    let found = lookup(shared, host).await?;
    found
        .first()
        .map(|ip| SocketAddr::new(*ip, port))
        .ok_or_else(|| format!("{host} has no address"))
}

/// A's and AAAA's of `host`, asked of the session's upstream resolver (and remembered).
async fn lookup(shared: &Shared, host: &str) -> Result<Vec<IpAddr>, String> {
    let found = super::dns::lookup(shared.upstream, host).await?;
    shared.answers.add(host, &found);
    Ok(found)
}
