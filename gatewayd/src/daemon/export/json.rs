//! JSON lines, to stdout or a file: every record as `type: record`, `host` and `ocsf` (when a
//! class fits) followed by the record as the log holds it (seq, prev, hash and all); each
//! head as `type: anchor`. The same line is the message of the syslog, journal and OTLP
//! sinks. Without `type`, `host` and `ocsf`, a record line is byte for byte the log's line.
use std::io::Write;

use serde_json::Value;

use super::{Item, Sink, SinkError};
#[cfg(test)]
use gatewayd_core::audit::Record;
use gatewayd_core::audit::canonical_json;

/// The exported JSON line of one item (no newline).
pub(super) fn line(item: &Item) -> std::borrow::Cow<'_, str> {
    match item {
        Item::Record(r) => r.line().into(),
        Item::Head(a) => canonical_json(&serde_json::to_value(&**a).unwrap_or(Value::Null)).into(),
    }
}

/// A record's line: `type`, `host` (`host_json`: this host's id as a JSON string) and `ocsf`
/// (when a class fits), then `own`, the record's line in the log (its canonical JSON), whose
/// keys follow in byte order.
#[cfg(test)]
pub(super) fn record_line(r: &Record, own: &str, host_json: &str) -> String {
    use super::ocsf::{attributes_json, class};
    let ocsf = class(r).map(|c| attributes_json(c, r.decision));
    let mut out = String::with_capacity(record_line_len(ocsf, own, host_json));
    write_record_line(&mut out, ocsf, own, host_json);
    out
}

const TYPE: &str = "{\"type\":\"record\",\"host\":";
const OCSF: &str = ",\"ocsf\":";

/// [`record_line`] added to `out`, for a record whose OCSF attributes are `ocsf`
/// ([`super::ocsf::attributes_json`]).
pub(super) fn write_record_line(out: &mut String, ocsf: Option<&str>, own: &str, host_json: &str) {
    out.push_str(TYPE);
    out.push_str(host_json);
    if let Some(o) = ocsf {
        out.push_str(OCSF);
        out.push_str(o);
    }
    out.push(',');
    out.push_str(own.strip_prefix('{').unwrap_or(own));
}

/// The length of [`write_record_line`]'s line.
pub(super) fn record_line_len(ocsf: Option<&str>, own: &str, host_json: &str) -> usize {
    TYPE.len()
        + host_json.len()
        + ocsf.map_or(0, |o| OCSF.len() + o.len())
        + 1
        + own.strip_prefix('{').unwrap_or(own).len()
}

/// `host` as a JSON string, as [`record_line`] takes it.
pub(super) fn host_json(host: &str) -> String {
    Value::from(host).to_string()
}

/// JSON lines on a writer (stdout, a file).
pub(super) struct JsonLines {
    out: Box<dyn Write + Send>,
}

impl JsonLines {
    pub(super) fn new(out: Box<dyn Write + Send>) -> JsonLines {
        JsonLines { out }
    }
}

impl Sink for JsonLines {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        let mut buf = String::new();
        for item in batch {
            buf.push_str(&line(item));
            buf.push('\n');
        }
        self.out
            .write_all(buf.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|e| SinkError::Retry(e.to_string()))
    }
}
