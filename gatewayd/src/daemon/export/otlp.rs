//! OTLP logs over HTTP/protobuf: each batch one `ExportLogsServiceRequest` (the official
//! OpenTelemetry messages, `opentelemetry-proto`) sent (POST) as `application/x-protobuf`,
//! over HTTPS for an `https://` URL (rustls on ring; the server checked against the system's
//! roots and `--export-ca`). The
//! resource carries `service.name=gatewayd` and `host.id`; each log record the record's time,
//! a severity by decision, the exported JSON line as its body, and the chain and OCSF fields
//! as attributes (`gatewayd.seq`, `gatewayd.prev`, `gatewayd.hash`, ...). As the OTLP spec
//! says: 2xx delivered; 429, 502, 503, 504 (and no answer, or one that is not HTTP) retried
//! after a back-off; any other status refused (the batch is dropped and counted).
use std::{
    path::Path,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

#[cfg(test)]
use opentelemetry_proto::tonic::{
    collector::logs::v1::ExportLogsServiceRequest,
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
};
use opentelemetry_proto::tonic::{
    collector::logs::v1::ExportLogsServiceResponse,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    logs::v1::SeverityNumber,
    resource::v1::Resource,
};
use prost::Message as _;
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

use super::{HostInfo, Item, Sink, SinkError, json};
use gatewayd_core::audit::{Decision, parse_rfc3339_ms};
pub(super) use wire::Wire;

mod resolver;
mod wire;

/// One request's whole time, connect to answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Of an answer, what is read at most.
const MAX_ANSWER: u64 = 64 * 1024;

pub(super) struct Otlp {
    url: String,
    agent: ureq::Agent,
    wire: Wire,
    body: Vec<u8>,
}

impl Otlp {
    /// The sink for `url`; for `https://`, the roots are the system's and those of the PEM
    /// file `ca` (an error when it cannot be read, or when there is no root at all).
    pub(super) fn new(url: String, host: &HostInfo, ca: Option<&Path>) -> std::io::Result<Otlp> {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0);
        if url.starts_with("https://") {
            let roots = crate::supervisor::egress_proxy::ca::roots(ca, "--export-ca")
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            let roots: Vec<Certificate<'static>> = roots
                .iter()
                .map(|c| Certificate::from_der(c.as_ref()).to_owned())
                .collect();
            config = config.tls_config(
                TlsConfig::builder()
                    .provider(TlsProvider::Rustls)
                    .root_certs(RootCerts::new_with_certs(&roots))
                    .unversioned_rustls_crypto_provider(Arc::new(
                        rustls::crypto::ring::default_provider(),
                    ))
                    .build(),
            );
        }
        Ok(Otlp {
            url,
            agent: ureq::Agent::with_parts(
                config.build(),
                ureq::unversioned::transport::DefaultConnector::default(),
                resolver::AddressFirst::default(),
            ),
            wire: Wire::new(&resource(host), &scope()),
            body: Vec::new(),
        })
    }
}

/// The OTLP request for `batch` from `host`, made at `now` (ns since the epoch), as prost's
/// messages: what [`Wire`] writes straight from the items, made the way the crate means it
/// to be made (a test holds the two to each other).
#[cfg(test)]
fn request_at(host: &HostInfo, batch: &[Item], now: u64) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource(host)),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope()),
                log_records: batch.iter().map(|i| log_record(&fields(i, now))).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The resource of every request: `service.name`, `host.id`, `host.name`.
pub(super) fn resource(host: &HostInfo) -> Resource {
    Resource {
        attributes: vec![
            kv("service.name", text("gatewayd")),
            kv("host.id", text(&host.id)),
            kv("host.name", text(&host.name)),
        ],
        ..Default::default()
    }
}

/// The instrumentation scope of every request.
pub(super) fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "gatewayd.audit".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

pub(super) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The most attributes a log record has (a record with a tool, a hook and a class).
const MAX_ATTRIBUTES: usize = 12;

/// An attribute's value.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Text(&'a str),
    Int(u64),
}

/// What one log record carries, whichever way it is encoded.
struct Fields<'a> {
    time_unix_nano: u64,
    observed_time_unix_nano: u64,
    severity: SeverityNumber,
    severity_text: &'static str,
    /// The exported JSON line.
    body: std::borrow::Cow<'a, str>,
    attributes: [(&'static str, Value<'a>); MAX_ATTRIBUTES],
    n_attributes: usize,
    event_name: &'static str,
}

impl<'a> Fields<'a> {
    fn attribute(&mut self, key: &'static str, value: Value<'a>) {
        if let Some(slot) = self.attributes.get_mut(self.n_attributes) {
            *slot = (key, value);
            self.n_attributes += 1;
        }
    }

    fn attributes(&self) -> &[(&'static str, Value<'a>)] {
        &self.attributes[..self.n_attributes]
    }
}

/// The log record of `item`, made at `now` (ns since the epoch).
fn fields(item: &Item, now: u64) -> Fields<'_> {
    let mut f = Fields {
        time_unix_nano: 0,
        observed_time_unix_nano: now,
        severity: SeverityNumber::Info,
        severity_text: "INFO",
        body: json::line(item),
        attributes: [("", Value::Int(0)); MAX_ATTRIBUTES],
        n_attributes: 0,
        event_name: "gatewayd.record",
    };
    let time_ms = match item {
        Item::Record(r) => {
            (f.severity, f.severity_text) = match r.decision() {
                Decision::Deny => (SeverityNumber::Warn, "WARN"),
                Decision::Hold | Decision::WouldDeny => (SeverityNumber::Info2, "INFO2"),
                Decision::Allow | Decision::Info => (SeverityNumber::Info, "INFO"),
            };
            f.attribute("gatewayd.type", Value::Text("record"));
            f.attribute("gatewayd.seq", Value::Int(r.seq()));
            f.attribute("gatewayd.prev", Value::Text(r.prev()));
            f.attribute("gatewayd.hash", Value::Text(r.hash()));
            f.attribute("gatewayd.source", Value::Text(r.source().as_str()));
            f.attribute("gatewayd.session", Value::Text(r.session()));
            f.attribute("gatewayd.decision", Value::Text(r.decision().as_str()));
            f.attribute("gatewayd.reason", Value::Text(r.reason()));
            if let Some(t) = r.tool() {
                f.attribute("gatewayd.tool", Value::Text(t));
            }
            if let Some(h) = r.hook() {
                f.attribute("gatewayd.hook", Value::Text(h));
            }
            if let Some(c) = r.class() {
                f.attribute("ocsf.class_uid", Value::Int(u64::from(c.uid)));
                f.attribute("ocsf.class_name", Value::Text(c.name));
            }
            parse_rfc3339_ms(r.ts()).unwrap_or(0)
        }
        Item::Head(a) => {
            f.attribute("gatewayd.type", Value::Text("anchor"));
            f.attribute("gatewayd.seq", Value::Int(a.seq));
            f.attribute("gatewayd.hash", Value::Text(&a.hash));
            f.attribute("gatewayd.why", Value::Text(&a.why));
            f.event_name = "gatewayd.anchor";
            a.ms
        }
    };
    f.time_unix_nano = time_ms * 1_000_000;
    f
}

/// `f` as prost's message.
#[cfg(test)]
fn log_record(f: &Fields<'_>) -> LogRecord {
    LogRecord {
        time_unix_nano: f.time_unix_nano,
        observed_time_unix_nano: f.observed_time_unix_nano,
        severity_number: f.severity as i32,
        severity_text: f.severity_text.into(),
        body: Some(text(&f.body)),
        attributes: f
            .attributes()
            .iter()
            .map(|(k, v)| {
                kv(
                    k,
                    match v {
                        Value::Text(s) => text(s),
                        Value::Int(n) => int(*n),
                    },
                )
            })
            .collect(),
        event_name: f.event_name.into(),
        ..Default::default()
    }
}

impl Sink for Otlp {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        // Into the sink's own buffer, which keeps its capacity from batch to batch.
        self.body.clear();
        let start = self.wire.encode(batch, now_ns(), &mut self.body);
        let at = &self.url;
        let mut resp = self
            .agent
            .post(at)
            .header("Content-Type", "application/x-protobuf")
            .send(&self.body[start..])
            .map_err(|e| SinkError::Retry(format!("OTLP endpoint {at}: {}", why(&e))))?;
        let status = resp.status().as_u16();
        let answer = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_vec()
            .map_err(|e| {
                SinkError::Retry(format!("OTLP endpoint {at}: reading its answer: {e}"))
            })?;
        match status {
            200..=299 => match ExportLogsServiceResponse::decode(&answer[..]) {
                Ok(r) => accepted(&r, at),
                Err(e) => Err(SinkError::Retry(format!(
                    "OTLP endpoint {at} answered {status} with a body that is not an ExportLogsServiceResponse ({e}): is it an OTLP receiver?"
                ))),
            },
            429 | 502..=504 => Err(SinkError::Retry(format!(
                "OTLP endpoint {at} answered {status}: {}",
                snippet(&answer)
            ))),
            _ => Err(SinkError::Refused(format!(
                "OTLP endpoint {at} answered {status}: {}",
                snippet(&answer)
            ))),
        }
    }
}

/// A delivered request's answer: an error when the receiver says it rejected records (OTLP's
/// partial success), which sending again would not change.
pub(super) fn accepted(answer: &ExportLogsServiceResponse, at: &str) -> Result<(), SinkError> {
    match &answer.partial_success {
        Some(p) if p.rejected_log_records > 0 => Err(SinkError::Refused(format!(
            "OTLP endpoint {at} rejected {} log record(s): {}",
            p.rejected_log_records, p.error_message
        ))),
        _ => Ok(()),
    }
}

/// An HTTP failure in words.
fn why(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => format!("no answer within {} s", TIMEOUT.as_secs()),
        ureq::Error::Protocol(p) => format!("the answer is not HTTP ({p})"),
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

fn snippet(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(200)])
        .chars()
        .filter(|c| !c.is_control())
        .collect()
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(value),
        ..Default::default()
    }
}

fn text(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    }
}

#[cfg(test)]
fn int(n: u64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(n as i64)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::daemon::export::Exported;
    use gatewayd_core::audit::{Record, Source, anchors::Anchor};

    fn record(seq: u64, tool: Option<&str>, hook: Option<&str>, decision: Decision) -> Item {
        let r = Record {
            seq,
            prev: format!("{seq:064}"),
            ts: "2026-12-06T03:02:33.123Z".into(),
            source: if hook.is_some() {
                Source::Kernel
            } else {
                Source::Gateway
            },
            session: format!("s{seq}"),
            tool: tool.map(str::to_owned),
            hook: hook.map(str::to_owned),
            decision,
            reason: "a reason".repeat(usize::try_from(seq % 3).unwrap() + 1),
            detail: serde_json::json!({"n": seq}),
            hash: format!("{:064}", seq + 1),
        };
        let logged = r.canonical_line();
        Item::Record(Exported::new(r, logged, "\"m1\""))
    }

    fn anchor(seq: u64) -> Item {
        Item::Head(Arc::new(Anchor {
            kind: "anchor".into(),
            seq,
            hash: "h".repeat(64),
            host: "m1".into(),
            log: None,
            policy: None,
            ms: 1_765_000_000_000,
            why: "interval".into(),
        }))
    }

    /// A record whose text fields are empty and whose time does not parse, in words that
    /// are not ASCII: the fields prost leaves out, and lengths counted in bytes.
    fn odd_record() -> Item {
        let r = Record {
            seq: 0,
            prev: String::new(),
            ts: "not a time".into(),
            source: Source::Gateway,
            session: String::new(),
            tool: Some("écrire".into()),
            hook: None,
            decision: Decision::Info,
            reason: String::new(),
            detail: serde_json::json!({"mot": "déjà ✓"}),
            hash: String::new(),
        };
        let logged = r.canonical_line();
        Item::Record(Exported::new(r, logged, "\"m1\""))
    }

    #[test]
    fn the_request_written_from_the_items_is_the_one_prost_writes() {
        let host = HostInfo {
            id: "m1".into(),
            name: "h1".into(),
        };
        let long = (0..300u64)
            .map(|n| record(n + 10, Some("shell"), None, Decision::Allow))
            .collect::<Vec<_>>();
        // Batches of every shape: records with and without a tool, a hook or a class,
        // anchors among them, an empty batch, one whose lengths take several bytes.
        let batches = [
            vec![
                record(1, Some("read_file"), None, Decision::Deny),
                anchor(1),
                record(2, None, Some("lsm/file_open"), Decision::Deny),
            ],
            vec![
                record(3, None, None, Decision::Info),
                record(4, Some("shell"), None, Decision::Allow),
                anchor(4),
                record(5, Some("send"), None, Decision::Hold),
                record(6, None, Some("cgroup/connect4"), Decision::WouldDeny),
            ],
            vec![anchor(6)],
            vec![],
            vec![odd_record()],
            long,
        ];
        let wire = Wire::new(&resource(&host), &scope());
        let mut ours = Vec::new();
        for (n, batch) in batches.iter().enumerate() {
            let now = 1_765_000_000_123_456_789 + n as u64;
            // After what `ours` holds already: the request starts where encode says.
            ours.clear();
            ours.extend_from_slice(b"before");
            let start = wire.encode(batch, now, &mut ours);
            assert_eq!(&ours[..6], b"before");
            let ours = &ours[start..];
            let theirs = request_at(&host, batch, now);
            assert_eq!(ours, theirs.encode_to_vec(), "batch {n}");
            let back = ExportLogsServiceRequest::decode(ours).unwrap();
            assert_eq!(
                back.resource_logs[0].scope_logs[0].log_records.len(),
                batch.len()
            );
        }
    }
}
