//! RFC 5424 syslog (fasyslog's formatter) to a local datagram socket (`/dev/log`), over UDP,
//! or over TCP with octet-counting framing (RFC 6587 3.4.1: `LEN SP MSG`). Facility
//! `authpriv`, APP-NAME `gatewayd`, MSGID the record's reason (`anchor` for a head), the
//! chain fields in structured data `[gatewayd@32473 ...]` (32473: RFC 5612's example
//! enterprise number), and the exported JSON line as MSG. A lost connection is dropped and
//! made again on the next attempt (the exporter's back-off paces them); before each batch a
//! TCP connection the server closed is noticed and replaced.
use std::{
    io::{ErrorKind, Write},
    net::{TcpStream, ToSocketAddrs, UdpSocket},
    os::unix::net::UnixDatagram,
    time::Duration,
};

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
}

pub(super) struct Syslog {
    target: SyslogTransport,
    conn: Option<Conn>,
    ctx: SyslogContext,
    host: String,
}

impl Syslog {
    pub(super) fn new(target: SyslogTransport, host: &HostInfo) -> Syslog {
        let mut ctx = SyslogContext::const_new();
        ctx.facility(Facility::AUTHPRIV)
            .hostname(host.name.clone())
            .appname("gatewayd")
            .procid(std::process::id().to_string());
        Syslog {
            target,
            conn: None,
            ctx,
            host: host.id.clone(),
        }
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
            SyslogTransport::Tcp(a) => {
                let s = TcpStream::connect_timeout(&resolve(a)?, TIMEOUT)?;
                s.set_write_timeout(Some(TIMEOUT))?;
                s.set_nodelay(true)?;
                Conn::Tcp(s)
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
        if let Some(Conn::Tcp(s)) = &self.conn
            && peer_closed(s)
        {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.conn = Some(self.connect()?);
        }
        match &mut self.conn {
            Some(Conn::Tcp(s)) => {
                let mut buf = Vec::new();
                for m in &msgs {
                    buf.extend_from_slice(format!("{} {m}", m.len()).as_bytes());
                }
                s.write_all(&buf)
            }
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
                SyslogTransport::Udp(a) | SyslogTransport::Tcp(a) => a.clone(),
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
        let s = Syslog::new(SyslogTransport::Tcp("127.0.0.1:1".into()), &host);
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
