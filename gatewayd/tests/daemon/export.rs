//! Audit export to real sinks (docs/FLEET.md, "Export"): every record of the chain, with its
//! seq, prev and hash, reaches JSON lines, a real rsyslog (TCP octet counting and UDP), a
//! real systemd-journald (a journal namespace of the test's own, read back with
//! `journalctl`) and an OTLP receiver built on the official `opentelemetry-proto` (the Python package).
//! A sink that is down, closes the connection, answers garbage or never answers costs no
//! decision and no record of the local chain: one `export_failing` record, a retry, and
//! what it lost recorded as `export_dropped`.
use std::{
    io::{BufRead, BufReader, Read},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use gatewayd::daemon::{ExportOptions, ExportSpec};
use gatewayd_core::audit::canonical_json;
use serde_json::{Value, json};

use crate::support::{Daemon, records};

fn session(d: &Daemon, id: &str) {
    let mut c = d.client();
    c.call("session/open", json!({"session": id, "user": "alice"}))
        .unwrap();
    for _ in 0..3 {
        c.call(
            "call/decide",
            json!({"session": id, "call": {"tool": "count", "arguments": {}}}),
        )
        .unwrap();
    }
    c.call("session/close", json!({"session": id})).unwrap();
}

fn start(dir: &Path, sinks: Vec<ExportSpec>) -> Daemon {
    Daemon::start_exporting(
        dir.join("audit.jsonl"),
        ExportOptions {
            sinks,
            anchor_every: Duration::ZERO,
        },
    )
}

/// Waits (bounded) until `cond` holds.
fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
fn assert_whole_chain(log: &Path, exported: &[Value]) {
    let want = log_lines(log);
    let got: Vec<String> = exported.iter().cloned().map(as_logged).collect();
    assert_eq!(got.len(), want.len(), "records exported vs logged");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

/// A child process killed when the test ends, passed or not.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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

/// A real rsyslogd, in the foreground, listening on TCP and UDP on loopback and on a
/// datagram socket of its own (as `/dev/log`), and writing what it parsed (RFC 5424: MSGID,
/// structured data, MSG) to one file per transport.
struct Rsyslog {
    _child: Proc,
    tcp: u16,
    udp: u16,
    dir: PathBuf,
}

impl Rsyslog {
    fn start(dir: &Path) -> Rsyslog {
        let bin = Path::new("/usr/sbin/rsyslogd");
        assert!(
            bin.exists(),
            "rsyslogd is missing; `cargo xtask setup` installs it"
        );
        let (tcp, udp) = (free_port(), free_port());
        let conf = dir.join("rsyslog.conf");
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                r#"global(workDirectory="{d}")
module(load="imtcp")
module(load="imudp")
module(load="imuxsock" SysSock.Use="off")
template(name="parsed" type="string" string="%msgid% %structured-data% %msg%\n")
ruleset(name="tcp") {{ action(type="omfile" file="{d}/tcp.log" template="parsed") }}
ruleset(name="udp") {{ action(type="omfile" file="{d}/udp.log" template="parsed") }}
ruleset(name="unix") {{ action(type="omfile" file="{d}/unix.log" template="parsed") }}
input(type="imtcp" address="127.0.0.1" port="{tcp}" ruleset="tcp")
input(type="imudp" address="127.0.0.1" port="{udp}" ruleset="udp")
input(type="imuxsock" Socket="{d}/log" Ruleset="unix" UseSpecialParser="off" ParseHostname="on")
"#
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.join("rsyslog.pid"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("rsyslogd to listen on TCP", 20, || {
            std::net::TcpStream::connect(("127.0.0.1", tcp)).is_ok()
        });
        // UDP and the local socket: a probe, sent until rsyslog wrote it.
        let probe = b"<14>1 2026-01-01T00:00:00Z h probe - probe - probe";
        let udp_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let unix_sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
        wait_for("rsyslogd to take UDP and local datagrams", 20, || {
            let _ = udp_sock.send_to(probe, ("127.0.0.1", udp));
            let _ = unix_sock.send_to(probe, dir.join("log"));
            ["udp.log", "unix.log"]
                .iter()
                .all(|f| std::fs::metadata(dir.join(f)).is_ok_and(|m| m.len() > 0))
        });
        Rsyslog {
            _child: Proc(child),
            tcp,
            udp,
            dir: dir.to_path_buf(),
        }
    }

    /// The records rsyslog wrote for one transport: MSG parsed as JSON, with MSGID and SD.
    fn received(&self, transport: &str) -> Vec<(String, String, Value)> {
        std::fs::read_to_string(self.dir.join(format!("{transport}.log")))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (msgid, rest) = l.split_once(' ')?;
                let at = rest.find('{')?;
                let v = serde_json::from_str(rest[at..].trim()).ok()?;
                Some((msgid.to_owned(), rest[..at].trim().to_owned(), v))
            })
            .collect()
    }
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

/// The records in octet-counted frames.
fn frames(mut s: &str) -> Vec<Value> {
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
    wait_for("export_failing in the chain", 20, || {
        records(&log)
            .iter()
            .any(|r| r["reason"] == "export_failing")
    });
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
    let failing: Vec<Value> = records(&log)
        .into_iter()
        .filter(|r| r["reason"] == "export_failing")
        .collect();
    assert_eq!(failing.len(), 1, "{failing:?}");
    let error = failing[0]["detail"]["error"].as_str().unwrap();
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
}

/// A systemd-journald of the test's own: a journal namespace, its socket under
/// /run/systemd/journal.NS/, read back with `journalctl --namespace NS`.
struct Journald {
    child: Child,
    ns: String,
}

impl Journald {
    fn start() -> Journald {
        let bin = Path::new("/lib/systemd/systemd-journald");
        assert!(
            bin.exists(),
            "systemd-journald is missing; `cargo xtask setup` installs systemd"
        );
        let ns = format!("gwtest{}", std::process::id());
        let child = Command::new(bin)
            .arg(&ns)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let j = Journald { child, ns };
        wait_for("journald's socket", 20, || {
            let s = std::os::unix::net::UnixDatagram::unbound().unwrap();
            s.send_to(b"MESSAGE=probe\n", j.socket()).is_ok()
        });
        j
    }

    fn socket(&self) -> PathBuf {
        PathBuf::from(format!("/run/systemd/journal.{}/socket", self.ns))
    }

    fn entries(&self) -> Vec<Value> {
        let out = Command::new("journalctl")
            .args(["--namespace", &self.ns, "-o", "json", "--no-pager"])
            .arg("SYSLOG_IDENTIFIER=gatewayd")
            .output()
            .unwrap();
        BufReader::new(&out.stdout[..])
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect()
    }
}

impl Drop for Journald {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(format!("/run/systemd/journal.{}", self.ns));
        let id = std::fs::read_to_string("/etc/machine-id").unwrap_or_default();
        for base in ["/var/log/journal", "/run/log/journal"] {
            let _ = std::fs::remove_dir_all(format!("{base}/{}.{}", id.trim(), self.ns));
        }
    }
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

fn python() -> PathBuf {
    let p = std::env::var_os("GATEWAYD_MCP_PYTHON").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/gatewayd/venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        p.exists(),
        "{} is missing; `cargo xtask setup` makes it",
        p.display()
    );
    p
}

/// The receiver in `mode` on `port` (0: any); returns it and the port it listens on.
fn receiver(mode: &str, port: u16, out: &Path) -> (Proc, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/daemon/otlp_receiver.py");
    let mut c = Command::new(python())
        .arg(script)
        .args([mode, &port.to_string()])
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .strip_prefix("listening ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("receiver said {line:?}"));
    (Proc(c), port)
}

fn received(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_record_reaches_an_otlp_receiver_started_late() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("otlp.jsonl");
    let port = free_port();
    let d = start(
        out.path(),
        vec![ExportSpec::parse(&format!("otlp:http://127.0.0.1:{port}")).unwrap()],
    );
    session(&d, "before");
    let log = d.audit.clone().unwrap();
    wait_for("export_failing in the chain", 20, || {
        records(&log)
            .iter()
            .any(|r| r["reason"] == "export_failing")
    });
    let (rx, _) = receiver("ok", port, &file);
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
    let first = &got[0];
    assert_eq!(first["path"], "/v1/logs");
    assert_eq!(first["content_type"], "application/x-protobuf");
    assert_eq!(first["resource"]["service.name"], "gatewayd");
    assert_eq!(first["scope"], "gatewayd.audit");
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
}

#[test]
fn an_otlp_endpoint_that_answers_garbage_refuses_or_never_answers_costs_no_decision() {
    let out = tempfile::tempdir().unwrap();
    let (garbage, gport) = receiver("garbage", 0, &out.path().join("g"));
    let (silent, sport) = receiver("silent", 0, &out.path().join("s"));
    let (reject, rport) = receiver("reject", 0, &out.path().join("r"));
    let d = start(
        out.path(),
        vec![
            ExportSpec::parse(&format!("otlp:http://127.0.0.1:{gport}")).unwrap(),
            ExportSpec::parse(&format!("otlp:http://127.0.0.1:{sport}")).unwrap(),
            ExportSpec::parse(&format!("otlp:http://127.0.0.1:{rport}")).unwrap(),
        ],
    );
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
            == 3
    });
    let gw = d.gw.clone();
    d.stop().unwrap();
    drop((garbage, silent, reject));
    let recs = records(&log);
    let decided = recs.iter().filter(|r| r["tool"] == "count").count();
    assert_eq!(decided, 6);
    let errors: Vec<String> = recs
        .iter()
        .filter(|r| r["reason"] == "export_failing")
        .map(|r| r["detail"]["error"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains(&gport.to_string())),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&sport.to_string()) && e.contains("no answer within 5 s")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&rport.to_string()) && e.contains("answered 400: bad request")),
        "{errors:?}"
    );
    // What no endpoint took is recorded, per sink: refused batches at once, the rest at stop.
    for s in gw.export_stats() {
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
