//! RFC 5424 syslog (fasyslog's formatter) to a local datagram socket (`/dev/log`), over UDP,
//! or over TCP with octet-counting framing (RFC 6587 3.4.1: `LEN SP MSG`), plain or in TLS
//! (RFC 5425: rustls on ring, the server's certificate checked against the system's roots
//! and `--export-ca`, for the host name of `HOST:PORT`). Facility
//! `authpriv`, APP-NAME `gatewayd`, MSGID the record's reason (`anchor` for a head), the
//! chain fields in structured data `[gatewayd@32473 ...]` (32473: RFC 5612's example
//! enterprise number), and the exported JSON line as MSG. A lost connection is dropped and
//! made again on the next attempt (the exporter's back-off paces them); before each batch a
//! TCP connection the server closed is noticed and replaced.
use std::{
    io::{ErrorKind, Write},
    net::{TcpStream, ToSocketAddrs, UdpSocket},
    os::unix::net::UnixDatagram,
    path::Path,
    sync::Arc,
    time::Duration,
};

use rustls::{ClientConfig, ClientConnection, StreamOwned, pki_types::ServerName};

use fasyslog::{Facility, SDElement, Severity, format::SyslogContext};

use super::{HostInfo, Item, Sink, SinkError, SyslogTransport, json, ocsf};
use gatewayd_core::audit::Decision;

/// Connect and write timeout.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Our structured data's SD-ID.
const SD_ID: &str = "gatewayd@32473";

enum Conn {
    Unix(UnixDatagram),
    Udp(UdpSocket),
    Tcp(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

pub(super) struct Syslog {
    target: SyslogTransport,
    conn: Option<Conn>,
    ctx: SyslogContext,
    host: String,
    /// For `syslog:tls:`, made when the sink is opened (the CA file read then).
    tls: Option<Arc<ClientConfig>>,
}

impl Syslog {
    /// A syslog sink; over TLS, the servers are checked against the system's roots and
    /// those of the PEM file `ca` (an error when it cannot be read).
    pub(super) fn new(
        target: SyslogTransport,
        host: &HostInfo,
        ca: Option<&Path>,
    ) -> std::io::Result<Syslog> {
        let tls = match &target {
            SyslogTransport::Tls(_) => Some(Arc::new(
                crate::supervisor::egress_proxy::ca::tls_client(
                    ca,
                    "--export-ca",
                    "the syslog server",
                )
                .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, e))?,
            )),
            _ => None,
        };
        let mut ctx = SyslogContext::const_new();
        ctx.facility(Facility::AUTHPRIV)
            .hostname(host.name.clone())
            .appname("gatewayd")
            .procid(std::process::id().to_string());
        Ok(Syslog {
            target,
            conn: None,
            ctx,
            host: host.id.clone(),
            tls,
        })
    }

    fn connect(&self) -> std::io::Result<Conn> {
        Ok(match &self.target {
            SyslogTransport::Unix(p) => {
                let s = UnixDatagram::unbound()?;
                s.connect(p)?;
                s.set_write_timeout(Some(TIMEOUT))?;
                Conn::Unix(s)
            }
            SyslogTransport::Udp(a) => {
                let to = resolve(a)?;
                let s = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" })?;
                s.connect(to)?;
                Conn::Udp(s)
            }
            SyslogTransport::Tcp(a) => Conn::Tcp(tcp(a)?),
            SyslogTransport::Tls(a) => {
                let config = self.tls.clone().ok_or_else(|| {
                    std::io::Error::new(ErrorKind::InvalidInput, "no TLS configuration")
                })?;
                let name = a.rsplit_once(':').map_or(a.as_str(), |(h, _)| h);
                let name = name.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(name.to_owned())
                    .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, e))?;
                let s = tcp(a)?;
                s.set_read_timeout(Some(TIMEOUT))?;
                let tls = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
                let mut stream = StreamOwned::new(tls, s);
                // The handshake now: a certificate the CAs do not vouch for is this
                // attempt's error, not a later write's.
                while stream.conn.is_handshaking() {
                    stream.conn.complete_io(&mut stream.sock)?;
                }
                Conn::Tls(Box::new(stream))
            }
        })
    }

    /// One RFC 5424 message.
    pub(super) fn message(&self, item: &Item) -> String {
        let mut sd = sd_element();
        let (severity, msgid) = match item {
            Item::Record(r) => {
                param(&mut sd, "seq", &r.seq.to_string());
                param(&mut sd, "prev", &r.prev);
                param(&mut sd, "hash", &r.hash);
                param(&mut sd, "host", &self.host);
                param(&mut sd, "decision", r.decision.as_str());
                if let Some(c) = ocsf::class(r) {
                    param(&mut sd, "ocsf_class_uid", &c.uid.to_string());
                }
                let severity = match r.decision {
                    Decision::Deny => Severity::WARNING,
                    Decision::Hold | Decision::WouldDeny => Severity::NOTICE,
                    Decision::Allow | Decision::Info => Severity::INFORMATIONAL,
                };
                (severity, msgid(&r.reason))
            }
            Item::Head(a) => {
                param(&mut sd, "type", "anchor");
                param(&mut sd, "seq", &a.seq.to_string());
                param(&mut sd, "hash", &a.hash);
                param(&mut sd, "host", &a.host);
                (Severity::INFORMATIONAL, "anchor".to_owned())
            }
        };
        let line = json::line(item, &self.host);
        self.ctx
            .format_rfc5424(severity, Some(msgid), sd.into_iter().collect(), Some(line))
            .to_string()
    }

    fn write(&mut self, batch: &[Item]) -> std::io::Result<()> {
        let msgs: Vec<String> = batch.iter().map(|i| self.message(i)).collect();
        let closed = match &mut self.conn {
            Some(Conn::Tcp(s)) => peer_closed(s),
            Some(Conn::Tls(s)) => tls_closed(s),
            _ => false,
        };
        if closed {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.conn = Some(self.connect()?);
        }
        let framed = || {
            let mut buf = Vec::new();
            for m in &msgs {
                buf.extend_from_slice(format!("{} {m}", m.len()).as_bytes());
            }
            buf
        };
        match &mut self.conn {
            Some(Conn::Tcp(s)) => s.write_all(&framed()),
            Some(Conn::Tls(s)) => s.write_all(&framed()).and_then(|()| s.flush()),
            Some(Conn::Udp(s)) => msgs.iter().try_for_each(|m| s.send(m.as_bytes()).map(drop)),
            Some(Conn::Unix(s)) => msgs.iter().try_for_each(|m| s.send(m.as_bytes()).map(drop)),
            None => Ok(()),
        }
    }
}

impl Sink for Syslog {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        self.write(batch).map_err(|e| {
            self.conn = None;
            let what = match &self.target {
                SyslogTransport::Unix(p) => p.display().to_string(),
                SyslogTransport::Udp(a) | SyslogTransport::Tcp(a) | SyslogTransport::Tls(a) => {
                    a.clone()
                }
            };
            let e = if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                format!("the syslog server at {what} closed the connection ({e})")
            } else {
                format!("syslog server at {what}: {e}")
            };
            SinkError::Retry(e)
        })
    }
}

fn tcp(a: &str) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&resolve(a)?, TIMEOUT)?;
    s.set_write_timeout(Some(TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(s)
}

fn resolve(a: &str) -> std::io::Result<std::net::SocketAddr> {
    a.to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(ErrorKind::NotFound, format!("{a}: no address")))
}

/// Whether the server closed `s` (it never sends anything: readable means closed).
fn peer_closed(s: &TcpStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let closed = match s.peek(&mut [0u8; 1]) {
        Ok(_) => true,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    };
    closed || s.set_nonblocking(false).is_err()
}

/// Whether the server closed the TLS connection `s`: what it sent since (TLS 1.3's session
/// tickets, a `close_notify`) is read through rustls without waiting; the end of the stream,
/// a `close_notify` or a TLS error means closed.
fn tls_closed(s: &mut StreamOwned<ClientConnection, TcpStream>) -> bool {
    if s.sock.set_nonblocking(true).is_err() {
        return true;
    }
    let closed = loop {
        match s.conn.read_tls(&mut s.sock) {
            Ok(0) => break true,
            Ok(_) => match s.conn.process_new_packets() {
                Ok(state) if state.peer_has_closed() => break true,
                Ok(_) => {}
                Err(_) => break true,
            },
            Err(e) => break e.kind() != ErrorKind::WouldBlock,
        }
    };
    closed || s.sock.set_nonblocking(false).is_err()
}

fn sd_element() -> Option<SDElement> {
    SDElement::new(SD_ID).ok()
}

fn param(sd: &mut Option<SDElement>, name: &str, value: &str) {
    if let Some(e) = sd {
        let _ = e.add_param(name, value);
    }
}

/// RFC 5424's MSGID: 1 to 32 printable US-ASCII characters.
fn msgid(reason: &str) -> String {
    let m: String = reason
        .chars()
        .filter(char::is_ascii_graphic)
        .take(32)
        .collect();
    if m.is_empty() { "-".into() } else { m }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use gatewayd_core::audit::{Record, Source};

    #[test]
    fn a_record_becomes_one_rfc5424_message_with_its_chain_fields() {
        let host = HostInfo {
            id: "m1".into(),
            name: "h1".into(),
        };
        let s = Syslog::new(SyslogTransport::Tcp("127.0.0.1:1".into()), &host, None).unwrap();
        let r = Record {
            seq: 7,
            prev: "p".repeat(64),
            ts: "2026-01-01T00:00:00.000Z".into(),
            source: Source::Gateway,
            session: "s".into(),
            tool: Some("send_email".into()),
            hook: None,
            decision: Decision::Deny,
            reason: "argument_rule".into(),
            detail: serde_json::json!({"quote": "a\"]b"}),
            hash: "h".repeat(64),
        };
        let logged = r.canonical_line();
        let m = s.message(&Item::Record(Arc::new(super::super::Exported::new(
            r, logged,
        ))));
        // authpriv (10) * 8 + warning (4) = 84.
        assert!(m.starts_with("<84>1 "), "{m}");
        assert!(m.contains(" h1 gatewayd "), "{m}");
        assert!(
            m.contains(" argument_rule [gatewayd@32473 seq=\"7\" prev=\""),
            "{m}"
        );
        assert!(m.contains("ocsf_class_uid=\"6003\"]"), "{m}");
        let json = &m[m.find("] {").unwrap() + 2..];
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["detail"]["quote"], "a\"]b");
    }
}
