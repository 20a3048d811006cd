//! Syslog over TLS (`syslog:tls:HOST:PORT`, RFC 5425) to a real TLS server (Python's ssl
//! module on OpenSSL, `tls_listener.py`) whose certificate a private CA signed: without
//! `--export-ca` the daemon refuses the server (one error line, an `export_failing` record,
//! every decision made all the same); with it, every record of the log arrives.
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
    export_sinks::{Proc, listening, python, wait_for},
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

fn exporting(dir: &Path, port: u16, ca: Option<&Path>) -> Daemon {
    Daemon::start_exporting(
        dir.join("audit.jsonl"),
        ExportOptions {
            sinks: vec![ExportSpec::parse(&format!("syslog:tls:127.0.0.1:{port}")).unwrap()],
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
    let untrusting = tempfile::tempdir().unwrap();
    let d = exporting(untrusting.path(), port, None);
    session(&d, "untrusted");
    let log = d.audit.clone().unwrap();
    let error = wait_for_failing(&log);
    assert!(error.contains("certificate"), "{error}");
    let decided = records(&log)
        .iter()
        .filter(|r| r["tool"] == "count" && r["decision"] == "allow")
        .count();
    assert_eq!(decided, 3);
    d.stop().unwrap();
    assert_eq!(std::fs::read(&out).unwrap_or_default().len(), 0);

    // With it: every record of the log, in order.
    std::fs::write(dir.path().join("ca.pem"), ca).unwrap();
    let trusting = tempfile::tempdir().unwrap();
    let d = exporting(trusting.path(), port, Some(&dir.path().join("ca.pem")));
    session(&d, "trusted");
    let log = d.audit.clone().unwrap();
    wait_for("the queue to drain", 30, || {
        let s = &d.gw.export_stats()[0];
        s.exported > 0 && s.lag == 0
    });
    d.stop().unwrap();
    let got = String::from_utf8(std::fs::read(&out).unwrap()).unwrap();
    let exported: Vec<Value> = frames(&got)
        .into_iter()
        .filter(|v| v["type"] == "record")
        .collect();
    assert_whole_chain(&log, &exported);
}
