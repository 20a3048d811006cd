//! OTLP logs over gRPC: the same `ExportLogsServiceRequest` as over HTTP (`otlp.rs`, its
//! bytes written straight from the items by `otlp/wire.rs`), sent as `LogsService/Export` on
//! tonic's gRPC client (HTTP/2, one connection kept open and made again when lost) with a
//! codec that takes the request already encoded and decodes the answer with prost (what the
//! official crate's generated client does, but for building prost's messages first), over TLS for an `https://` URL (rustls on ring; the
//! server checked against the system's roots and `--export-ca`). The client runs on a
//! runtime of the sink's own (one worker), so no decision ever waits on it. As the OTLP spec
//! says: `OK` delivered (a partial success naming rejected records is a refusal); `CANCELLED`,
//! `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE` and
//! `DATA_LOSS` (and no connection, no answer, or one that is not gRPC) retried after a
//! back-off; any other status refused (the batch is dropped and counted).
use std::{io, path::Path, time::Duration};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
use prost::Message as _;
use tonic::{
    Code, Status,
    client::Grpc,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    codegen::http::uri::PathAndQuery,
    transport::{Channel, ClientTlsConfig, Endpoint},
};

use super::{HostInfo, Item, Sink, SinkError, otlp};
use crate::supervisor::egress_proxy::ca;

/// Connecting, and one request's whole time.
const TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct OtlpGrpc {
    url: String,
    runtime: tokio::runtime::Runtime,
    client: Grpc<Channel>,
    wire: otlp::Wire,
    /// The size of the last request, to size the next one's buffer.
    last_size: usize,
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
            client: Grpc::new(channel),
            wire: otlp::Wire::new(&otlp::resource(host), &otlp::scope()),
            last_size: 0,
        })
    }
}

impl Sink for OtlpGrpc {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        let mut request = Vec::with_capacity(self.last_size);
        let start = self.wire.encode(batch, otlp::now_ns(), &mut request);
        self.last_size = request.len();
        let request = prost::bytes::Bytes::from(request).slice(start..);
        let at = &self.url;
        let client = &mut self.client;
        let answer = self.runtime.block_on(async {
            client
                .ready()
                .await
                .map_err(|e| Status::unavailable(format!("the connection is not ready: {e}")))?;
            let path = PathAndQuery::from_static(EXPORT);
            client
                .unary(tonic::Request::new(request), path, Encoded)
                .await
        });
        match answer {
            Ok(answer) => otlp::accepted(answer.get_ref(), at),
            Err(status) => Err(failure(at, &status)),
        }
    }
}

/// The method, as the OTLP spec's `logs_service.proto` names it.
const EXPORT: &str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";

/// A gRPC codec whose request is an `ExportLogsServiceRequest` already encoded, and whose
/// answer is decoded as an `ExportLogsServiceResponse` by prost.
#[derive(Debug, Clone, Copy)]
struct Encoded;

impl Codec for Encoded {
    type Encode = prost::bytes::Bytes;
    type Decode = ExportLogsServiceResponse;
    type Encoder = Encoded;
    type Decoder = Encoded;

    fn encoder(&mut self) -> Encoded {
        Encoded
    }

    fn decoder(&mut self) -> Encoded {
        Encoded
    }
}

impl Encoder for Encoded {
    type Item = prost::bytes::Bytes;
    type Error = Status;

    fn encode(&mut self, item: prost::bytes::Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        use prost::bytes::BufMut as _;
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Encoded {
    type Item = ExportLogsServiceResponse;
    type Error = Status;

    fn decode(
        &mut self,
        src: &mut DecodeBuf<'_>,
    ) -> Result<Option<ExportLogsServiceResponse>, Status> {
        ExportLogsServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| {
                Status::internal(format!(
                    "an answer that is not an ExportLogsServiceResponse: {e}"
                ))
            })
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
