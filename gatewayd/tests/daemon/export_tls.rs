//! Export in TLS to real servers whose certificate a private CA signed: syslog
//! (`syslog:tls:HOST:PORT`, RFC 5425) to Python's ssl module on OpenSSL
//! (`tls_listener.py`), OTLP over HTTPS to the OTLP receiver (`otlp_receiver.py`, the same
//! ssl module). Without `--export-ca` the daemon refuses the server (one error line, an
//! `export_failing` record, every decision made all the same); with it, every record of the
//! log arrives.
use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use gatewayd::daemon::{ExportOptions, ExportSpec};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use serde_json::Value;

use crate::{
    export::{assert_whole_chain, frames, session, wait_for_failing},
    export_sinks::{Proc, listening, python, received, wait_for},
    support::{Daemon, records},
};

/// A CA, and a certificate for 127.0.0.1 it signed: (CA PEM, server cert PEM, key PEM).
fn certificates() -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), server.pem(), key.serialize_pem())
}

/// The listener, serving `cert`/`key` and writing what it gets to `out`; and its port.
fn listener(dir: &Path, cert: &str, key: &str, out: &Path) -> (Proc, u16) {
    std::fs::write(dir.join("server.pem"), cert).unwrap();
    std::fs::write(dir.join("server.key"), key).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/daemon/tls_listener.py");
    let c = Command::new(python())
        .arg(script)
        .arg(dir.join("server.pem"))
        .arg(dir.join("server.key"))
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    listening(c)
}

fn exporting(dir: &Path, sink: &str, ca: Option<&Path>) -> Daemon {
    Daemon::start_exporting(
        dir.join("audit.jsonl"),
        ExportOptions {
            sinks: vec![ExportSpec::parse(sink).unwrap()],
            anchor_every: Duration::ZERO,
            ca: ca.map(Path::to_path_buf),
            ..Default::default()
        },
    )
}

#[test]
fn syslog_over_tls_checks_the_server_against_the_ca_file_and_delivers_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates();
    let out = dir.path().join("received");
    let (_server, port) = listener(dir.path(), &cert, &key, &out);

    // Without the CA: the server is not trusted, nothing is sent, nothing is held back.
    let sink = format!("syslog:tls:127.0.0.1:{port}");
    refused_without_the_ca(&sink);
    assert_eq!(std::fs::read(&out).unwrap_or_default().len(), 0);

    // With it: every record of the log, in order.
    let log = delivered_with_the_ca(dir.path(), &ca, &sink);
    let exported = || -> Vec<Value> {
        let got = String::from_utf8(std::fs::read(&out).unwrap_or_default()).unwrap();
        frames(&got)
            .into_iter()
            .filter(|v| v["type"] == "record")
            .collect()
    };
    // Sent is not yet written down by the server: wait for the server's file itself.
    wait_for_every_record(&log, || exported().len());
    assert_whole_chain(&log, &exported());
}

#[test]
fn otlp_over_https_checks_the_server_against_the_ca_file_and_delivers_every_record() {
    otlp_over_tls("ok", "otlp");
}

#[test]
fn otlp_over_grpc_with_tls_checks_the_server_against_the_ca_file_and_delivers_every_record() {
    otlp_over_tls("grpc", "otlp-grpc");
}

/// The receiver in `mode` over TLS, exported to as `KIND:https://`: refused without the CA,
/// every record delivered with it.
fn otlp_over_tls(mode: &str, kind: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates();
    std::fs::write(dir.path().join("server.pem"), cert).unwrap();
    std::fs::write(dir.path().join("server.key"), key).unwrap();
    let out = dir.path().join("received.jsonl");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/daemon/otlp_receiver.py");
    let c = Command::new(python())
        .arg(script)
        .args([mode, "0"])
        .arg(&out)
        .arg(dir.path().join("server.pem"))
        .arg(dir.path().join("server.key"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (_receiver, port) = listening(c);
    let sink = format!("{kind}:https://127.0.0.1:{port}");
    refused_without_the_ca(&sink);
    assert!(received(&out).is_empty());
    let log = delivered_with_the_ca(dir.path(), &ca, &sink);
    let exported = || -> Vec<Value> {
        received(&out)
            .into_iter()
            .filter(|r| r["attributes"]["gatewayd.type"] == "record")
            .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
            .collect()
    };
    wait_for_every_record(&log, || exported().len());
    assert_whole_chain(&log, &exported());
}

/// Waits (20 s at most) until the receiver holds as many records as `log` has lines: a
/// record the exporter has sent may not be in the receiver's file yet.
fn wait_for_every_record(log: &Path, mut held: impl FnMut() -> usize) {
    let lines = std::fs::read_to_string(log).unwrap().lines().count();
    wait_for("the receiver to hold every record of the log", 20, || {
        held() >= lines
    });
}

/// A daemon exporting to `sink` without `--export-ca`: the server's certificate is refused
/// (an `export_failing` record that says so), and every call is decided all the same.
fn refused_without_the_ca(sink: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = exporting(dir.path(), sink, None);
    session(&d, "untrusted");
    let log = d.audit.clone().unwrap();
    let error = wait_for_failing(&log);
    assert!(
        error.contains("certificate") || error.contains("issuer"),
        "{error}"
    );
    let decided = records(&log)
        .iter()
        .filter(|r| r["tool"] == "count" && r["decision"] == "allow")
        .count();
    assert_eq!(decided, 3);
    d.stop().unwrap();
}

/// A daemon exporting to `sink` with `ca` as `--export-ca`, stopped once its queue is
/// delivered; its log.
fn delivered_with_the_ca(dir: &Path, ca: &str, sink: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("ca.pem"), ca).unwrap();
    let trusting = tempfile::tempdir().unwrap();
    let d = exporting(trusting.path(), sink, Some(&dir.join("ca.pem")));
    session(&d, "trusted");
    let log = d.audit.clone().unwrap();
    wait_for("the queue to drain", 30, || {
        let s = &d.gw.export_stats()[0];
        s.exported > 0 && s.lag == 0
    });
    d.stop().unwrap();
    // The log outlives the daemon's directory for the caller's checks.
    let kept = dir.join(format!("audit-{}.jsonl", sink.len()));
    std::fs::copy(&log, &kept).unwrap();
    kept
}
