//! JSON lines, to stdout or a file: every record as the log holds it (seq, prev, hash and
//! all) plus `type: record`, `host` and `ocsf` (when a class fits), keys sorted; and each head
//! as `type: anchor`. The same line is the message of the syslog, journal and OTLP sinks.
//! Without `type`, `host` and `ocsf`, a record line is byte for byte the log's line.
use std::io::Write;

use serde_json::Value;

use super::{HostInfo, Item, Sink, SinkError, ocsf};
use gatewayd_core::audit::canonical_json;

/// The exported JSON line of one item (no newline).
pub(super) fn line(item: &Item, host: &str) -> String {
    match item {
        Item::Record(r) => {
            let mut v = serde_json::to_value(&**r).unwrap_or(Value::Null);
            if let Some(m) = v.as_object_mut() {
                m.insert("type".into(), "record".into());
                m.insert("host".into(), host.into());
                let o = ocsf::attributes(r);
                if !o.is_null() {
                    m.insert("ocsf".into(), o);
                }
            }
            canonical_json(&v)
        }
        Item::Head(a) => canonical_json(&serde_json::to_value(&**a).unwrap_or(Value::Null)),
    }
}

/// JSON lines on a writer (stdout, a file).
pub(super) struct JsonLines {
    out: Box<dyn Write + Send>,
    host: String,
}

impl JsonLines {
    pub(super) fn new(out: Box<dyn Write + Send>, host: &HostInfo) -> JsonLines {
        JsonLines {
            out,
            host: host.id.clone(),
        }
    }
}

impl Sink for JsonLines {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        let mut buf = String::new();
        for item in batch {
            buf.push_str(&line(item, &self.host));
            buf.push('\n');
        }
        self.out
            .write_all(buf.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|e| SinkError::Retry(e.to_string()))
    }
}
