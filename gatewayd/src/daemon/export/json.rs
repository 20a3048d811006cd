//! JSON lines, to stdout or a file: every record as `type: record`, `host` and `ocsf` (when a
//! class fits) followed by the record as the log holds it (seq, prev, hash and all); each
//! head as `type: anchor`. The same line is the message of the syslog, journal and OTLP
//! sinks. Without `type`, `host` and `ocsf`, a record line is byte for byte the log's line.
use std::io::Write;

use serde_json::Value;

use super::{HostInfo, Item, Sink, SinkError, ocsf};
use gatewayd_core::audit::{Record, canonical_json};

/// The exported JSON line of one item (no newline).
pub(super) fn line<'a>(item: &'a Item, host: &str) -> std::borrow::Cow<'a, str> {
    match item {
        Item::Record(r) => r.line(host).into(),
        Item::Head(a) => canonical_json(&serde_json::to_value(&**a).unwrap_or(Value::Null)).into(),
    }
}

/// A record's line: `type`, `host` and `ocsf` (when a class fits), then `own`, the record's
/// line in the log (its canonical JSON), whose keys follow in byte order.
pub(super) fn record_line(r: &Record, own: &str, host: &str) -> String {
    let mut out = String::with_capacity(own.len() + 256);
    out.push_str("{\"type\":\"record\",\"host\":");
    out.push_str(&Value::from(host).to_string());
    if let Some(o) = ocsf::attributes(r)
        && let Ok(o) = serde_json::to_string(&o)
    {
        out.push_str(",\"ocsf\":");
        out.push_str(&o);
    }
    out.push(',');
    out.push_str(own.strip_prefix('{').unwrap_or(own));
    out
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
