//! Audit export to real sinks (docs/FLEET.md, "Export"): every record of the chain, with its
//! seq, prev and hash, reaches JSON lines, a real rsyslog (TCP octet counting and UDP), a
//! real systemd-journald (a journal namespace of the test's own, read back with
//! `journalctl`) and an OTLP receiver built on the official `opentelemetry-proto` (the Python package).
//! A sink that is down, closes the connection, answers garbage or never answers costs no
//! decision and no record of the local chain: one `export_failing` record, a retry, and
//! what it lost recorded as `export_dropped`.
use std::{
    io::Read,
    net::TcpListener,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use gatewayd::daemon::{ExportOptions, ExportSpec};
use gatewayd_core::audit::canonical_json;
use serde_json::{Value, json};

use crate::{
    export_sinks::{Journald, Rsyslog, free_port, received, receiver, wait_for},
    support::{Daemon, records},
};

pub(crate) fn session(d: &Daemon, id: &str) {
    d.three_counted_calls(id);
}

fn start(dir: &Path, sinks: Vec<ExportSpec>) -> Daemon {
    Daemon::start_exporting(
        dir.join("audit.jsonl"),
        ExportOptions {
            sinks,
            anchor_every: Duration::ZERO,
            host_id: None,
            ..Default::default()
        },
    )
}

/// The log's lines by seq.
fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// An exported record line without `type`, `host` and `ocsf`: the log's line.
fn as_logged(mut v: Value) -> String {
    let m = v.as_object_mut().unwrap();
    for k in ["type", "host", "ocsf"] {
        m.remove(k);
    }
    canonical_json(&v)
}

/// Asserts that the exported record lines hold every line of the log, in order, once.
pub(crate) fn assert_whole_chain(log: &Path, exported: &[Value]) {
    let want = log_lines(log);
    let got: Vec<String> = exported.iter().cloned().map(as_logged).collect();
    assert_eq!(got.len(), want.len(), "records exported vs logged");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

#[test]
fn every_record_goes_to_json_lines_with_its_chain_fields_and_ocsf_class() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("export.jsonl");
    let d = start(out.path(), vec![ExportSpec::File(file.clone())]);
    session(&d, "one");
    let log = d.audit.clone().unwrap();
    // The operator sees the sink's counts.
    wait_for("the queue to drain", 20, || d.gw.export_stats()[0].lag == 0);
    let stats = d.client().call("export/stats", json!({})).unwrap();
    let x = &stats["exporters"][0];
    assert_eq!(x["sink"], format!("json:{}", file.display()));
    assert_eq!(
        x["exported"],
        log_lines(&log).len() + 1,
        "records and a head: {x}"
    );
    assert_eq!((&x["dropped"], &x["failing"]), (&json!(0), &json!(false)));
    d.stop().unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (recs, heads): (Vec<Value>, Vec<Value>) =
        lines.into_iter().partition(|l| l["type"] == "record");
    assert_whole_chain(&log, &recs);
    assert_eq!(heads.len(), 2, "session_close and stop heads: {heads:?}");
    assert!(heads.iter().all(|h| h["type"] == "anchor"));
    let decision = recs.iter().find(|r| r["tool"] == "count").unwrap();
    assert_eq!(decision["ocsf"]["class_name"], "API Activity");
    assert_eq!(decision["ocsf"]["disposition"], "Allowed");
    assert!(!decision["host"].as_str().unwrap().is_empty());
    let start = recs.iter().find(|r| r["reason"] == "daemon_start").unwrap();
    assert_eq!(start["ocsf"]["class_uid"], 6002);
}

#[test]
fn every_record_reaches_a_real_rsyslog_over_tcp_udp_and_a_local_socket() {
    let out = tempfile::tempdir().unwrap();
    let rs = Rsyslog::start(out.path());
    let d = start(
        out.path(),
        vec![
            ExportSpec::parse(&format!("syslog:tcp:127.0.0.1:{}", rs.tcp)).unwrap(),
            ExportSpec::parse(&format!("syslog:udp:127.0.0.1:{}", rs.udp)).unwrap(),
            ExportSpec::parse(&format!("syslog:unix:{}/log", out.path().display())).unwrap(),
        ],
    );
    session(&d, "one");
    let log = d.audit.clone().unwrap();
    let gw = d.gw.clone();
    d.stop().unwrap();
    let n = log_lines(&log).len();
    for t in ["tcp", "udp", "unix"] {
        wait_for(&format!("rsyslog to write {n} records ({t})"), 20, || {
            rs.received(t)
                .iter()
                .filter(|r| r.2["type"] == "record")
                .count()
                >= n
        });
        let got = rs.received(t);
        let recs: Vec<Value> = got
            .iter()
            .filter(|r| r.2["type"] == "record")
            .map(|r| r.2.clone())
            .collect();
        assert_whole_chain(&log, &recs);
        let (msgid, sd, v) = got.iter().find(|r| r.2["tool"] == "count").unwrap();
        assert_eq!(msgid, "allowed");
        assert!(sd.starts_with("[gatewayd@32473 seq=\""), "{sd}");
        assert!(
            sd.contains(&format!("hash=\"{}\"", v["hash"].as_str().unwrap())),
            "{sd}"
        );
        assert!(got.iter().any(|r| r.0 == "anchor"));
    }
    for s in gw.export_stats() {
        assert_eq!((s.dropped, s.lag, s.failing), (0, 0, false), "{s:?}");
    }
}

/// Reads one connection to its end.
fn read_all(l: &TcpListener) -> String {
    let (mut c, _) = l.accept().unwrap();
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s
}

/// Waits for the one `export_failing` record of `log`; its error.
pub(crate) fn wait_for_failing(log: &Path) -> String {
    let failing = |log: &Path| -> Vec<Value> {
        records(log)
            .into_iter()
            .filter(|r| r["reason"] == "export_failing")
            .collect()
    };
    wait_for("export_failing in the chain", 20, || {
        !failing(log).is_empty()
    });
    let failing = failing(log);
    assert_eq!(failing.len(), 1, "{failing:?}");
    failing[0]["detail"]["error"].as_str().unwrap().to_owned()
}

/// The records in octet-counted frames.
pub(crate) fn frames(mut s: &str) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some((len, rest)) = s.split_once(' ') {
        let len: usize = len.parse().unwrap();
        let msg = &rest[..len];
        out.push(serde_json::from_str(&msg[msg.find('{').unwrap()..]).unwrap());
        s = &rest[len..];
    }
    out
}

#[test]
fn a_syslog_server_that_closes_the_connection_and_goes_away_loses_no_record() {
    let out = tempfile::tempdir().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let d = start(
        out.path(),
        vec![ExportSpec::parse(&format!("syslog:tcp:127.0.0.1:{port}")).unwrap()],
    );
    // The first connection: read what came, then close it and stop listening.
    let (mut first, _) = l.accept().unwrap();
    first
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = String::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = first.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    drop(first);
    drop(l);
    // Decided and recorded while the server is gone.
    session(&d, "while-down");
    let log = d.audit.clone().unwrap();
    wait_for_failing(&log);
    let stats = &d.gw.export_stats()[0];
    assert!(stats.failing, "{stats:?}");
    // The server comes back on the same port: what waited is delivered.
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let reader = std::thread::spawn(move || read_all(&l));
    wait_for("the queue to drain", 60, || {
        let s = &d.gw.export_stats()[0];
        !s.failing && s.lag == 0
    });
    d.stop().unwrap();
    got.push_str(&reader.join().unwrap());
    let exported: Vec<Value> = frames(&got)
        .into_iter()
        .filter(|v| v["type"] == "record")
        .collect();
    assert_whole_chain(&log, &exported);
    let error = wait_for_failing(&log);
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
}

#[test]
fn every_record_reaches_a_real_journald_with_its_fields() {
    let j = Journald::start();
    let out = tempfile::tempdir().unwrap();
    let d = start(out.path(), vec![ExportSpec::Journal(j.socket())]);
    session(&d, "one");
    let log = d.audit.clone().unwrap();
    d.stop().unwrap();
    let n = log_lines(&log).len();
    wait_for("journalctl to show every record", 30, || {
        j.entries()
            .iter()
            .filter(|e| e["GATEWAYD_TYPE"] == "record")
            .count()
            >= n
    });
    let entries = j.entries();
    let recs: Vec<Value> = entries
        .iter()
        .filter(|e| e["GATEWAYD_TYPE"] == "record")
        .map(|e| serde_json::from_str(e["GATEWAYD_RECORD"].as_str().unwrap()).unwrap())
        .collect();
    assert_whole_chain(&log, &recs);
    let e = entries
        .iter()
        .find(|e| e["GATEWAYD_TOOL"] == "count")
        .unwrap();
    let logged: Value = serde_json::from_str(&log_lines(&log)[0]).unwrap();
    assert_eq!(entries[0]["GATEWAYD_HASH"], logged["hash"]);
    assert_eq!(e["PRIORITY"], "6");
    assert_eq!(e["GATEWAYD_DECISION"], "allow");
    assert_eq!(e["GATEWAYD_OCSF_CLASS_UID"], "6003");
    assert!(
        e["MESSAGE"]
            .as_str()
            .unwrap()
            .starts_with("allow allowed: session one, tool count")
    );
    assert!(entries.iter().any(|e| e["GATEWAYD_TYPE"] == "anchor"));
}

#[test]
fn every_record_reaches_an_otlp_receiver_started_late() {
    let got = started_late("otlp", "ok");
    assert_eq!(got[0]["path"], "/v1/logs");
    assert_eq!(got[0]["content_type"], "application/x-protobuf");
}

#[test]
fn every_record_reaches_an_otlp_grpc_receiver_started_late() {
    let got = started_late("otlp-grpc", "grpc");
    assert_eq!(
        got[0]["path"],
        "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
    );
    assert_eq!(got[0]["content_type"], "application/grpc");
}

/// A collector that closes idle connections (as one behind a load balancer does): the
/// next batch goes on a new connection, with no failure recorded.
#[test]
fn a_grpc_connection_closed_while_idle_is_made_again_without_a_failure() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("otlp.jsonl");
    let (rx, port) = receiver("grpc-idle", 0, &file);
    let d = start(
        out.path(),
        vec![ExportSpec::parse(&format!("otlp-grpc:http://127.0.0.1:{port}")).unwrap()],
    );
    let log = d.audit.clone().unwrap();
    for round in ["one", "two", "three"] {
        session(&d, round);
        wait_for("the queue to drain", 20, || {
            let s = &d.gw.export_stats()[0];
            s.lag == 0 && s.exported > 0
        });
        // Past the collector's idle limit (500 ms): it closes the connection.
        std::thread::sleep(Duration::from_millis(1500));
    }
    d.stop().unwrap();
    drop(rx);
    let failing: Vec<Value> = records(&log)
        .into_iter()
        .filter(|r| r["reason"] == "export_failing")
        .collect();
    assert!(failing.is_empty(), "{failing:?}");
    let got: Vec<Value> = received(&file)
        .iter()
        .filter(|r| r["attributes"]["gatewayd.type"] == "record")
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    assert_whole_chain(&log, &got);
}

/// A daemon exporting as `KIND:http://` to a port where nothing listens yet, then the
/// receiver started in `mode`: it gets every record of the chain, with its attributes. What
/// the receiver got.
fn started_late(kind: &str, mode: &str) -> Vec<Value> {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("otlp.jsonl");
    let port = free_port();
    let d = start(
        out.path(),
        vec![ExportSpec::parse(&format!("{kind}:http://127.0.0.1:{port}")).unwrap()],
    );
    session(&d, "before");
    let log = d.audit.clone().unwrap();
    wait_for("export_failing in the chain", 20, || {
        records(&log)
            .iter()
            .any(|r| r["reason"] == "export_failing")
    });
    let (rx, _) = receiver(mode, port, &file);
    session(&d, "after");
    wait_for("the queue to drain", 60, || {
        let s = &d.gw.export_stats()[0];
        !s.failing && s.lag == 0
    });
    d.stop().unwrap();
    drop(rx);
    let got = received(&file);
    let recs: Vec<Value> = got
        .iter()
        .filter(|r| r["attributes"]["gatewayd.type"] == "record")
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    assert_whole_chain(&log, &recs);
    assert_eq!(got[0]["resource"]["service.name"], "gatewayd");
    assert_eq!(got[0]["scope"], "gatewayd.audit");
    let call = got
        .iter()
        .find(|r| r["attributes"]["gatewayd.tool"] == "count")
        .unwrap();
    // The JSON mapping of protobuf writes 64-bit integers as strings.
    assert_eq!(call["attributes"]["ocsf.class_uid"], "6003");
    assert_eq!(call["severity_text"], "INFO");
    assert!(call["time_unix_nano"].as_u64().unwrap() > 1_700_000_000_000_000_000);
    let body: Value = serde_json::from_str(call["body"].as_str().unwrap()).unwrap();
    assert_eq!(call["attributes"]["gatewayd.hash"], body["hash"]);
    got
}

#[test]
fn an_otlp_endpoint_that_answers_garbage_refuses_or_never_answers_costs_no_decision() {
    failing_endpoints_cost_no_decision(
        "otlp",
        &[
            ("garbage", "the answer is not HTTP"),
            ("silent", "no answer within 5 s"),
            ("reject", "answered 400: bad request"),
        ],
    );
}

#[test]
fn an_otlp_grpc_endpoint_that_answers_garbage_an_error_or_never_answers_costs_no_decision() {
    failing_endpoints_cost_no_decision(
        "otlp-grpc",
        &[
            ("garbage", "no gRPC answer"),
            ("silent", "no answer within 5 s"),
            ("grpc-unavailable", "Unavailable: receiver is shutting down"),
            ("grpc-invalid", "InvalidArgument: no such tenant"),
        ],
    );
}

/// A daemon exporting as `KIND:http://` to one receiver per `(mode, error)`, none of which
/// takes a record: every call is decided at once, each endpoint's failure is recorded with
/// `error` in its words, what each sink lost is recorded, and the chain is whole.
fn failing_endpoints_cost_no_decision(kind: &str, endpoints: &[(&str, &str)]) {
    let out = tempfile::tempdir().unwrap();
    let receivers: Vec<_> = endpoints
        .iter()
        .map(|(mode, _)| receiver(mode, 0, &out.path().join(mode)))
        .collect();
    let sinks = receivers
        .iter()
        .map(|(_, port)| ExportSpec::parse(&format!("{kind}:http://127.0.0.1:{port}")).unwrap())
        .collect();
    let d = start(out.path(), sinks);
    let t0 = Instant::now();
    session(&d, "one");
    session(&d, "two");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "decisions waited on export"
    );
    let log = d.audit.clone().unwrap();
    wait_for("an export_failing record per endpoint", 30, || {
        records(&log)
            .iter()
            .filter(|r| r["reason"] == "export_failing")
            .count()
            == endpoints.len()
    });
    let gw = d.gw.clone();
    d.stop().unwrap();
    drop(receivers);
    let recs = records(&log);
    let decided = recs.iter().filter(|r| r["tool"] == "count").count();
    assert_eq!(decided, 6);
    for (s, (mode, error)) in gw.export_stats().iter().zip(endpoints) {
        let failing: Vec<&str> = recs
            .iter()
            .filter(|r| r["reason"] == "export_failing" && r["detail"]["sink"] == s.sink.as_str())
            .map(|r| r["detail"]["error"].as_str().unwrap())
            .collect();
        assert!(
            failing.len() == 1 && failing[0].contains(error),
            "{mode}: {failing:?}"
        );
        // What no endpoint took is recorded, per sink: refused batches at once, the rest at
        // stop.
        assert_eq!(s.exported, 0, "{s:?}");
        assert_eq!(s.dropped, s.queued, "{s:?}");
        let recorded: u64 = recs
            .iter()
            .filter(|r| r["reason"] == "export_dropped" && r["detail"]["sink"] == s.sink.as_str())
            .map(|r| r["detail"]["count"].as_u64().unwrap())
            .sum();
        assert_eq!(recorded, s.dropped, "{}", s.sink);
    }
    // The local chain is whole.
    let v = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["audit", "verify"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}

/// `gatewayd doctor --json --socket S` reports the daemon's export counts, and says so when
/// no daemon answers.
#[test]
fn doctor_reports_the_export_counts_of_the_daemon() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("export.jsonl");
    let d = start(out.path(), vec![ExportSpec::File(file.clone())]);
    session(&d, "one");
    wait_for("the queue to drain", 20, || d.gw.export_stats()[0].lag == 0);
    let doctor = |socket: &Path| -> Value {
        let o = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
            .args(["doctor", "--json", "--socket"])
            .arg(socket)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v = doctor(&d.socket);
    let s = &d.gw.export_stats()[0];
    assert!(s.exported > 0, "{s:?}");
    let x = &v["export"]["exporters"][0];
    assert_eq!(x["sink"], format!("json:{}", file.display()));
    assert_eq!(
        (&x["exported"], &x["dropped"]),
        (&json!(s.exported), &json!(0))
    );
    assert_eq!(x["failing"], false);
    let none = out.path().join("no-daemon.sock");
    let v = doctor(&none);
    assert_eq!(v["export"]["socket"], none.display().to_string());
    assert!(v["export"]["error"].is_string(), "{}", v["export"]);
}
