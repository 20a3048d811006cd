//! The systemd journal's native protocol (systemd's `JOURNAL_NATIVE_PROTOCOL`): one datagram
//! per entry to the journal's socket, each field `NAME=value\n`, or `NAME\n` + the value's
//! length as 64-bit little endian + the value + `\n` when the value holds a newline. Written
//! here rather than with a crate: the pure-Rust ones send only to the fixed system socket,
//! and a journal namespace's socket (`/run/systemd/journal.NAME/socket`) is where the tests
//! read entries back with `journalctl --namespace`.
use std::{os::unix::net::UnixDatagram, path::PathBuf};

use super::{HostInfo, Item, Sink, SinkError, json};
use gatewayd_core::audit::Decision;

pub(super) struct Journal {
    socket: PathBuf,
    conn: Option<UnixDatagram>,
    host: String,
}

impl Journal {
    pub(super) fn new(socket: PathBuf, host: &HostInfo) -> Journal {
        Journal {
            socket,
            conn: None,
            host: host.id.clone(),
        }
    }

    /// One entry's datagram.
    pub(super) fn entry(&self, item: &Item) -> Vec<u8> {
        let mut b = Vec::new();
        field(&mut b, "SYSLOG_IDENTIFIER", "gatewayd");
        field(&mut b, "SYSLOG_FACILITY", "10");
        field(&mut b, "GATEWAYD_HOST", &self.host);
        match item {
            Item::Record(r) => {
                let priority = match r.decision() {
                    Decision::Deny => "4",
                    Decision::Hold | Decision::WouldDeny => "5",
                    Decision::Allow | Decision::Info => "6",
                };
                let about = match (r.tool(), r.hook()) {
                    (Some(t), _) => format!(", tool {t}"),
                    (None, Some(h)) => format!(", hook {h}"),
                    (None, None) => String::new(),
                };
                let message = format!(
                    "{} {}: session {}{about} (seq {})",
                    r.decision().as_str(),
                    r.reason(),
                    r.session(),
                    r.seq()
                );
                field(&mut b, "MESSAGE", &message);
                field(&mut b, "PRIORITY", priority);
                field(&mut b, "GATEWAYD_TYPE", "record");
                field(&mut b, "GATEWAYD_SEQ", &r.seq().to_string());
                field(&mut b, "GATEWAYD_PREV", r.prev());
                field(&mut b, "GATEWAYD_HASH", r.hash());
                field(&mut b, "GATEWAYD_TS", r.ts());
                field(&mut b, "GATEWAYD_SOURCE", r.source().as_str());
                field(&mut b, "GATEWAYD_SESSION", r.session());
                field(&mut b, "GATEWAYD_DECISION", r.decision().as_str());
                field(&mut b, "GATEWAYD_REASON", r.reason());
                if let Some(t) = r.tool() {
                    field(&mut b, "GATEWAYD_TOOL", t);
                }
                if let Some(h) = r.hook() {
                    field(&mut b, "GATEWAYD_HOOK", h);
                }
                if let Some(c) = r.class() {
                    field(&mut b, "GATEWAYD_OCSF_CLASS_UID", &c.uid.to_string());
                    field(&mut b, "GATEWAYD_OCSF_CLASS_NAME", c.name);
                }
            }
            Item::Head(a) => {
                let message = format!("chain head: seq {} hash {} ({})", a.seq, a.hash, a.why);
                field(&mut b, "MESSAGE", &message);
                field(&mut b, "PRIORITY", "6");
                field(&mut b, "GATEWAYD_TYPE", "anchor");
                field(&mut b, "GATEWAYD_SEQ", &a.seq.to_string());
                field(&mut b, "GATEWAYD_HASH", &a.hash);
            }
        }
        field(&mut b, "GATEWAYD_RECORD", &json::line(item));
        b
    }
}

impl Sink for Journal {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        for item in batch {
            let entry = self.entry(item);
            let sock = match self.conn.take() {
                Some(s) => s,
                None => UnixDatagram::unbound()
                    .map_err(|e| SinkError::Retry(format!("cannot make a datagram socket: {e}")))?,
            };
            match sock.send_to(&entry, &self.socket) {
                Ok(_) => self.conn = Some(sock),
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    self.conn = Some(sock);
                    return Err(SinkError::Refused(format!(
                        "an entry of {} bytes is larger than the journal socket {} takes in one datagram",
                        entry.len(),
                        self.socket.display()
                    )));
                }
                Err(e) => {
                    return Err(SinkError::Retry(format!(
                        "the journal at {}: {e}",
                        self.socket.display()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Appends one field in the native protocol's form.
fn field(b: &mut Vec<u8>, name: &str, value: &str) {
    b.extend_from_slice(name.as_bytes());
    if value.contains('\n') {
        b.push(b'\n');
        b.extend_from_slice(&(value.len() as u64).to_le_bytes());
        b.extend_from_slice(value.as_bytes());
    } else {
        b.push(b'=');
        b.extend_from_slice(value.as_bytes());
    }
    b.push(b'\n');
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_with_a_newline_is_length_prefixed() {
        let mut b = Vec::new();
        super::field(&mut b, "A", "x=y");
        super::field(&mut b, "B", "1\n2");
        let mut want = b"A=x=y\nB\n".to_vec();
        want.extend_from_slice(&3u64.to_le_bytes());
        want.extend_from_slice(b"1\n2\n");
        assert_eq!(b, want);
    }
}
