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

use opentelemetry_proto::tonic::{
    collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse},
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber},
    resource::v1::Resource,
};
use prost::Message as _;
use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};

use super::{HostInfo, Item, Sink, SinkError, json};
use gatewayd_core::audit::{Decision, parse_rfc3339_ms};

/// One request's whole time, connect to answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Of an answer, what is read at most.
const MAX_ANSWER: u64 = 64 * 1024;

pub(super) struct Otlp {
    url: String,
    agent: ureq::Agent,
    requests: Requests,
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
            agent: ureq::Agent::new_with_config(config.build()),
            requests: Requests::new(host),
            body: Vec::new(),
        })
    }
}

/// The OTLP request for `batch` from `host` (over HTTP and gRPC alike).
pub(super) fn request(host: &HostInfo, batch: &[Item]) -> ExportLogsServiceRequest {
    let mut requests = Requests::new(host);
    requests.fill(batch);
    requests.request
}

/// A sink's request, kept from one batch to the next: each log record, and each attribute
/// of it, is written over the last batch's in place, so that a batch reuses the strings of
/// the one before instead of allocating and freeing a dozen for each record. (The records
/// of a batch have the same few shapes, so the keys already in place are nearly always the
/// ones wanted.) At most [`super::MAX_BATCH`] records are kept.
pub(super) struct Requests {
    request: ExportLogsServiceRequest,
    /// Records of a larger batch before, not in this request, kept for the next.
    spare: Vec<LogRecord>,
}

impl Requests {
    pub(super) fn new(host: &HostInfo) -> Requests {
        let resource = Resource {
            attributes: vec![
                kv("service.name", text("gatewayd")),
                kv("host.id", text(&host.id)),
                kv("host.name", text(&host.name)),
            ],
            ..Default::default()
        };
        let scope = InstrumentationScope {
            name: "gatewayd.audit".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        };
        Requests {
            request: ExportLogsServiceRequest {
                resource_logs: vec![ResourceLogs {
                    resource: Some(resource),
                    scope_logs: vec![ScopeLogs {
                        scope: Some(scope),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
            },
            spare: Vec::new(),
        }
    }

    /// The request holding `batch`'s records, in order.
    pub(super) fn fill(&mut self, batch: &[Item]) -> &ExportLogsServiceRequest {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let records = self
            .request
            .resource_logs
            .iter_mut()
            .flat_map(|r| r.scope_logs.iter_mut())
            .map(|s| &mut s.log_records)
            .next();
        if let Some(records) = records {
            while records.len() > batch.len() {
                self.spare.extend(records.pop());
            }
            for (i, item) in batch.iter().enumerate() {
                if i == records.len() {
                    records.push(self.spare.pop().unwrap_or_default());
                }
                write_record(&mut records[i], item, now);
            }
        }
        &self.request
    }
}

/// `item` written over `rec`.
fn write_record(rec: &mut LogRecord, item: &Item, now: u64) {
    set_text(&mut rec.body, &json::line(item));
    rec.observed_time_unix_nano = now;
    let mut attributes = Attributes {
        list: &mut rec.attributes,
        n: 0,
    };
    let (time_ms, sev, sev_text, event) = match item {
        Item::Record(r) => {
            let (sev, sev_text) = match r.decision() {
                Decision::Deny => (SeverityNumber::Warn, "WARN"),
                Decision::Hold | Decision::WouldDeny => (SeverityNumber::Info2, "INFO2"),
                Decision::Allow | Decision::Info => (SeverityNumber::Info, "INFO"),
            };
            attributes.text("gatewayd.type", "record");
            attributes.int("gatewayd.seq", r.seq());
            attributes.text("gatewayd.prev", r.prev());
            attributes.text("gatewayd.hash", r.hash());
            attributes.text("gatewayd.source", r.source().as_str());
            attributes.text("gatewayd.session", r.session());
            attributes.text("gatewayd.decision", r.decision().as_str());
            attributes.text("gatewayd.reason", r.reason());
            if let Some(t) = r.tool() {
                attributes.text("gatewayd.tool", t);
            }
            if let Some(h) = r.hook() {
                attributes.text("gatewayd.hook", h);
            }
            if let Some(c) = r.class() {
                attributes.int("ocsf.class_uid", u64::from(c.uid));
                attributes.text("ocsf.class_name", c.name);
            }
            let ms = parse_rfc3339_ms(r.ts()).unwrap_or(0);
            (ms, sev, sev_text, "gatewayd.record")
        }
        Item::Head(a) => {
            attributes.text("gatewayd.type", "anchor");
            attributes.int("gatewayd.seq", a.seq);
            attributes.text("gatewayd.hash", &a.hash);
            attributes.text("gatewayd.why", &a.why);
            (a.ms, SeverityNumber::Info, "INFO", "gatewayd.anchor")
        }
    };
    attributes.end();
    rec.time_unix_nano = time_ms * 1_000_000;
    rec.severity_number = sev as i32;
    set_str(&mut rec.severity_text, sev_text);
    set_str(&mut rec.event_name, event);
}

/// A log record's attributes, written in order over those it had.
struct Attributes<'a> {
    list: &'a mut Vec<KeyValue>,
    n: usize,
}

impl Attributes<'_> {
    /// The next attribute's slot, its key `key`.
    fn next(&mut self, key: &str) -> &mut Option<AnyValue> {
        if self.n == self.list.len() {
            self.list.push(KeyValue::default());
        }
        let kv = &mut self.list[self.n];
        self.n += 1;
        set_str(&mut kv.key, key);
        &mut kv.value
    }

    fn text(&mut self, key: &str, value: &str) {
        set_text(self.next(key), value);
    }

    fn int(&mut self, key: &str, n: u64) {
        *self.next(key) = Some(int(n));
    }

    /// Drops the attributes after the last one written.
    fn end(self) {
        self.list.truncate(self.n);
    }
}

/// `s` becomes `value`, in the buffer it has.
fn set_str(s: &mut String, value: &str) {
    s.clear();
    s.push_str(value);
}

/// `slot` becomes the string `value`, in the string it holds if it holds one.
fn set_text(slot: &mut Option<AnyValue>, value: &str) {
    match slot {
        Some(AnyValue {
            value: Some(any_value::Value::StringValue(s)),
        }) => set_str(s, value),
        _ => *slot = Some(text(value)),
    }
}

impl Sink for Otlp {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        // Into the sink's own buffer, which keeps its capacity from batch to batch (prost
        // sizes the request once, in `encode`).
        self.body.clear();
        self.requests
            .fill(batch)
            .encode(&mut self.body)
            .map_err(|e| SinkError::Refused(format!("encoding the OTLP request: {e}")))?;
        let at = &self.url;
        let mut resp = self
            .agent
            .post(at)
            .header("Content-Type", "application/x-protobuf")
            .send(&self.body[..])
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
        Item::Record(Arc::new(Exported::new(r, &logged, "\"m1\"")))
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

    /// The request without the time it was made at, which differs between two requests.
    fn without_observed_time(mut r: ExportLogsServiceRequest) -> ExportLogsServiceRequest {
        for rl in &mut r.resource_logs {
            for sl in &mut rl.scope_logs {
                for lr in &mut sl.log_records {
                    lr.observed_time_unix_nano = 0;
                }
            }
        }
        r
    }

    #[test]
    fn a_request_written_over_the_last_batch_is_the_one_made_afresh() {
        let host = HostInfo {
            id: "m1".into(),
            name: "h1".into(),
        };
        // Batches of every shape after one another: records with and without a tool, a
        // hook or a class, anchors among them, a batch larger than the last and smaller.
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
            vec![record(7, Some("noop"), None, Decision::Allow), anchor(7)],
        ];
        let mut reused = Requests::new(&host);
        for batch in &batches {
            let got = without_observed_time(reused.fill(batch).clone());
            let fresh = without_observed_time(request(&host, batch));
            assert_eq!(got, fresh);
            assert_eq!(got.encode_to_vec(), fresh.encode_to_vec());
            let records = &got.resource_logs[0].scope_logs[0].log_records;
            assert_eq!(records.len(), batch.len());
        }
    }
}
