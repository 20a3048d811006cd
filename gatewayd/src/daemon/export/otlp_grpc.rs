//! OTLP logs over gRPC: the same `ExportLogsServiceRequest` as over HTTP (`otlp.rs`), sent
//! with the official crate's generated `LogsService` client on tonic (HTTP/2, one connection
//! kept open and made again when lost), over TLS for an `https://` URL (rustls on ring; the
//! server checked against the system's roots and `--export-ca`). The client runs on a
//! runtime of the sink's own (one worker), so no decision ever waits on it. As the OTLP spec
//! says: `OK` delivered (a partial success naming rejected records is a refusal); `CANCELLED`,
//! `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE` and
//! `DATA_LOSS` (and no connection, no answer, or one that is not gRPC) retried after a
//! back-off; any other status refused (the batch is dropped and counted).
use std::{io, path::Path, time::Duration};

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use tonic::{
    Code, Status,
    transport::{Channel, ClientTlsConfig, Endpoint},
};

use super::{HostInfo, Item, Sink, SinkError, otlp};
use crate::supervisor::egress_proxy::ca;

/// Connecting, and one request's whole time.
const TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct OtlpGrpc {
    url: String,
    runtime: tokio::runtime::Runtime,
    client: LogsServiceClient<Channel>,
    host: HostInfo,
}

impl OtlpGrpc {
    /// The sink for `url` (`http://HOST:PORT` or `https://HOST:PORT`), connected on first
    /// use; for `https://`, the roots are the system's and those of the PEM file `ca` (an
    /// error when it cannot be read, or when there is no root at all).
    pub(super) fn new(url: String, host: &HostInfo, ca: Option<&Path>) -> io::Result<OtlpGrpc> {
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| invalid(format!("--export otlp-grpc:{url}: {e}")))?
            .connect_timeout(TIMEOUT)
            .timeout(TIMEOUT);
        if url.starts_with("https://") {
            let roots = ca::root_store(ca, "--export-ca", "the OTLP endpoint").map_err(invalid)?;
            endpoint = endpoint
                .tls_config(ClientTlsConfig::new().trust_anchors(roots.roots))
                .map_err(|e| invalid(format!("--export otlp-grpc:{url}: {e}")))?;
        }
        // One worker of its own: the connection's task runs between batches too, so a
        // connection the collector closed while idle is seen closed and made again before
        // the next batch, not found broken by it (which a runtime driven only while sending
        // did: a spurious failure after every idle close).
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gatewayd-otlp-grpc")
            .enable_all()
            .build()?;
        let channel = {
            let _inside = runtime.enter();
            endpoint.connect_lazy()
        };
        Ok(OtlpGrpc {
            url,
            runtime,
            client: LogsServiceClient::new(channel),
            host: host.clone(),
        })
    }
}

impl Sink for OtlpGrpc {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        let request = otlp::request(&self.host, batch);
        let at = &self.url;
        match self.runtime.block_on(self.client.export(request)) {
            Ok(answer) => otlp::accepted(answer.get_ref(), at),
            Err(status) => Err(failure(at, &status)),
        }
    }
}

/// A failed export, retried or refused as the OTLP spec says of gRPC status codes.
fn failure(at: &str, status: &Status) -> SinkError {
    let why = format!("OTLP/gRPC endpoint {at}: {}", in_words(status));
    match status.code() {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => SinkError::Retry(why),
        // No gRPC status from a server: the connection failed or the peer does not speak
        // gRPC (tonic reports it as `Unknown` or `Internal` with the transport's error).
        Code::Unknown | Code::Internal if std::error::Error::source(status).is_some() => {
            SinkError::Retry(why)
        }
        _ => SinkError::Refused(why),
    }
}

/// A status as a person reads it: the code's name and the message, and what lies under it.
fn in_words(status: &Status) -> String {
    if status.code() == Code::Cancelled && status.message().contains("Timeout expired") {
        return format!("no answer within {} s", TIMEOUT.as_secs());
    }
    // The connection failed, or the peer does not speak gRPC: no status of a server's.
    let not_grpc = matches!(status.code(), Code::Unknown | Code::Internal)
        && std::error::Error::source(status).is_some();
    let mut words = if not_grpc {
        "no gRPC answer".to_owned()
    } else {
        format!("{:?}", status.code())
    };
    if !status.message().is_empty() {
        words.push_str(": ");
        words.push_str(status.message());
    }
    let mut cause = std::error::Error::source(status);
    while let Some(c) = cause {
        let c_words = c.to_string();
        if !words.contains(&c_words) {
            words.push_str(": ");
            words.push_str(&c_words);
        }
        cause = c.source();
    }
    words
}
