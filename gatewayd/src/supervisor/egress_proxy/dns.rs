//! The session's resolver: the kernel sends all of the agent's port-53 traffic here (UDP
//! and TCP, whatever address it named). A query for a name the egress list names (exactly
//! or under a `*.domain` entry) is forwarded to the host's resolver and its answer passed
//! back, its addresses remembered for the proxy's check; any other query is answered
//! NXDOMAIN and recorded, so DNS carries nothing out but the listed names. Messages are read
//! and written with hickory's DNS library.
use std::{
    io,
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use hickory_resolver::proto::{
    op::{Message, ResponseCode},
    rr::RData,
};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, UdpSocket},
    sync::Semaphore,
    task::JoinSet,
};

use super::{FIRST_BYTES, Shared, UPSTREAM, peek::host_name};

/// Queries answered at once (forwarding waits for the host's resolver).
const MAX_QUERIES: usize = 64;
/// The largest message read or forwarded (UDP and TCP).
const MAX_MESSAGE: usize = 4096;

/// The resolver's sockets, on one port of `127.0.0.1` (and `::1` where the host has it).
pub(super) struct Listeners {
    udp: Vec<UdpSocket>,
    tcp: Vec<TcpListener>,
    pub(super) port: u16,
}

impl Listeners {
    /// Binds UDP and TCP on one free port (tried a few times: the UDP port picked may be
    /// taken for TCP).
    pub(super) async fn bind() -> io::Result<Listeners> {
        let mut last = io::Error::from(io::ErrorKind::AddrInUse);
        for _ in 0..8 {
            let udp = UdpSocket::bind("127.0.0.1:0").await?;
            let port = udp.local_addr()?.port();
            match TcpListener::bind(("127.0.0.1", port)).await {
                Ok(tcp) => {
                    let mut l = Listeners {
                        udp: vec![udp],
                        tcp: vec![tcp],
                        port,
                    };
                    if let (Ok(u6), Ok(t6)) = (
                        UdpSocket::bind(("::1", port)).await,
                        TcpListener::bind(("::1", port)).await,
                    ) {
                        l.udp.push(u6);
                        l.tcp.push(t6);
                    }
                    return Ok(l);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub(super) fn spawn(self, set: &mut JoinSet<()>, shared: &Arc<Shared>) {
        let permits = Arc::new(Semaphore::new(MAX_QUERIES));
        for s in self.udp {
            set.spawn(serve_udp(Arc::new(s), shared.clone(), permits.clone()));
        }
        for l in self.tcp {
            set.spawn(serve_tcp(l, shared.clone(), permits.clone()));
        }
    }
}

async fn serve_udp(sock: Arc<UdpSocket>, shared: Arc<Shared>, permits: Arc<Semaphore>) {
    let mut buf = vec![0u8; MAX_MESSAGE];
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let Ok((n, from)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let query = buf[..n].to_vec();
        let (sock, shared) = (sock.clone(), shared.clone());
        tokio::spawn(async move {
            if let Some(reply) = answer(&shared, &query, Transport::Udp).await {
                let _ = sock.send_to(&reply, from).await;
            }
            drop(permit);
        });
    }
}

async fn serve_tcp(listener: TcpListener, shared: Arc<Shared>, permits: Arc<Semaphore>) {
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = tcp_session(stream, &shared).await;
            drop(permit);
        });
    }
}

/// Length-prefixed queries on one connection, each read within `FIRST_BYTES`.
async fn tcp_session(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    loop {
        let mut len = [0u8; 2];
        let query = async {
            stream.read_exact(&mut len).await?;
            let n = usize::from(u16::from_be_bytes(len));
            if n > MAX_MESSAGE {
                return Err(io::Error::from(io::ErrorKind::InvalidData));
            }
            let mut q = vec![0u8; n];
            stream.read_exact(&mut q).await?;
            Ok(q)
        };
        let q = tokio::time::timeout(FIRST_BYTES, query)
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        let Some(reply) = answer(shared, &q, Transport::Tcp).await else {
            return Ok(());
        };
        let n =
            u16::try_from(reply.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        // Length and message in one write: written apart, the message waited for the
        // resolver's delayed ACK of the two-byte length (Nagle's algorithm).
        let mut framed = Vec::with_capacity(2 + reply.len());
        framed.extend_from_slice(&n.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}

#[derive(Clone, Copy)]
enum Transport {
    Udp,
    Tcp,
}

/// The reply to one query; `None` for bytes that are no DNS message.
async fn answer(shared: &Shared, query: &[u8], via: Transport) -> Option<Vec<u8>> {
    let msg = Message::from_vec(query).ok()?;
    let (id, op) = (msg.metadata.id, msg.metadata.op_code);
    let refuse = |code: ResponseCode| {
        let mut r = Message::error_msg(id, op, code);
        r.add_queries(msg.queries.clone());
        r.to_vec().ok()
    };
    let [q] = msg.queries.as_slice() else {
        return refuse(ResponseCode::FormErr);
    };
    let asked = q.name().to_ascii();
    let detail = json!({"host": asked, "query_type": q.query_type().to_string()});
    if shared
        .canary_in(&[&asked], super::super::canary::Route::Dns, &detail)
        .await
        .is_some()
    {
        return refuse(ResponseCode::NXDomain);
    }
    let Some(name) = host_name(&asked) else {
        return refuse(ResponseCode::NXDomain);
    };
    let locked = *shared.lockdown.borrow();
    // A learning session's resolver answers every name: what the agent connects to is
    // learned by the proxy, by name.
    if locked || !(shared.learn || shared.egress.names(&name)) {
        let detail = json!({
            "host": name, "query_type": q.query_type().to_string(),
            "transport": match via { Transport::Udp => "udp", Transport::Tcp => "tcp" },
        });
        shared
            .refuse(detail, &format!("the session's resolver answers only the names in network.egress; {name} is not one (NXDOMAIN)"))
            .await;
        return refuse(ResponseCode::NXDomain);
    }
    let Ok(reply) = forward(shared.upstream, query).await else {
        return refuse(ResponseCode::ServFail);
    };
    if let Ok(parsed) = Message::from_vec(&reply) {
        shared.answers.add(&name, &addresses(&parsed));
    }
    Some(reply)
}

fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

/// Sends `query` to the host's resolver over UDP (from gatewayd, outside the session) and
/// returns its answer.
async fn forward(upstream: SocketAddr, query: &[u8]) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if upstream.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(upstream).await?;
    sock.send(query).await?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    let n = tokio::time::timeout(UPSTREAM, sock.recv(&mut buf))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    buf.truncate(n);
    Ok(buf)
}

/// The A and AAAA addresses of `host`, asked of `upstream` (both questions, over UDP).
pub(super) async fn lookup(upstream: SocketAddr, host: &str) -> Result<Vec<IpAddr>, String> {
    use hickory_resolver::proto::{
        op::Query,
        rr::{Name, RecordType},
    };
    let name = Name::from_ascii(format!("{host}.")).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    for kind in [RecordType::A, RecordType::AAAA] {
        let mut q = Message::query();
        q.metadata.recursion_desired = true;
        q.add_query(Query::query(name.clone(), kind));
        let bytes = q.to_vec().map_err(|e| e.to_string())?;
        let reply = forward(upstream, &bytes).await.map_err(|e| e.to_string())?;
        let parsed = Message::from_vec(&reply).map_err(|e| e.to_string())?;
        found.extend(addresses(&parsed));
    }
    Ok(found)
}
