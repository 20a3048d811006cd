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

use super::{HostInfo, Item, Sink, SinkError, json, ocsf};
use gatewayd_core::audit::{Decision, parse_rfc3339_ms};

/// One request's whole time, connect to answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Of an answer, what is read at most.
const MAX_ANSWER: u64 = 64 * 1024;

pub(super) struct Otlp {
    url: String,
    agent: ureq::Agent,
    host: HostInfo,
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
            host: host.clone(),
        })
    }
}

/// The OTLP request for `batch` from `host` (over HTTP and gRPC alike).
pub(super) fn request(host: &HostInfo, batch: &[Item]) -> ExportLogsServiceRequest {
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
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let log_records = batch.iter().map(|i| log_record(host, i, now)).collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope),
                log_records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn log_record(host: &HostInfo, item: &Item, now: u64) -> LogRecord {
    let body = Some(text(&json::line(item, &host.id)));
    match item {
        Item::Record(r) => {
            let (sev, sev_text) = match r.decision {
                Decision::Deny => (SeverityNumber::Warn, "WARN"),
                Decision::Hold | Decision::WouldDeny => (SeverityNumber::Info2, "INFO2"),
                Decision::Allow | Decision::Info => (SeverityNumber::Info, "INFO"),
            };
            let mut attributes = vec![
                kv("gatewayd.type", text("record")),
                kv("gatewayd.seq", int(r.seq)),
                kv("gatewayd.prev", text(&r.prev)),
                kv("gatewayd.hash", text(&r.hash)),
                kv("gatewayd.source", text(r.source.as_str())),
                kv("gatewayd.session", text(&r.session)),
                kv("gatewayd.decision", text(r.decision.as_str())),
                kv("gatewayd.reason", text(&r.reason)),
            ];
            if let Some(t) = &r.tool {
                attributes.push(kv("gatewayd.tool", text(t)));
            }
            if let Some(h) = &r.hook {
                attributes.push(kv("gatewayd.hook", text(h)));
            }
            if let Some(c) = ocsf::class(r) {
                attributes.push(kv("ocsf.class_uid", int(u64::from(c.uid))));
                attributes.push(kv("ocsf.class_name", text(c.name)));
            }
            LogRecord {
                time_unix_nano: parse_rfc3339_ms(&r.ts).map_or(0, |ms| ms * 1_000_000),
                observed_time_unix_nano: now,
                severity_number: sev as i32,
                severity_text: sev_text.into(),
                event_name: "gatewayd.record".into(),
                body,
                attributes,
                ..Default::default()
            }
        }
        Item::Head(a) => LogRecord {
            time_unix_nano: a.ms * 1_000_000,
            observed_time_unix_nano: now,
            severity_number: SeverityNumber::Info as i32,
            severity_text: "INFO".into(),
            event_name: "gatewayd.anchor".into(),
            body,
            attributes: vec![
                kv("gatewayd.type", text("anchor")),
                kv("gatewayd.seq", int(a.seq)),
                kv("gatewayd.hash", text(&a.hash)),
                kv("gatewayd.why", text(&a.why)),
            ],
            ..Default::default()
        },
    }
}

impl Sink for Otlp {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        let body = request(&self.host, batch).encode_to_vec();
        let at = &self.url;
        let mut resp = self
            .agent
            .post(at)
            .header("Content-Type", "application/x-protobuf")
            .send(&body[..])
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
