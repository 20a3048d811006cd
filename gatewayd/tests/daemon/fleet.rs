//! A fleet on one machine (docs/FLEET.md, "A fleet on one machine"): eight `gatewayd serve`
//! processes, each a host of its own (state directory, socket, audit chain, `--host-id`), all
//! exporting to one OTLP receiver (the official `opentelemetry-proto`, `otlp_receiver.py`) and
//! one real rsyslog over TCP. Decisions on all eight; then the receiver is stopped for 10 s
//! while all eight go on deciding, one of them hard enough to overflow its export queue;
//! then it comes back. Every host's chain is whole, the receiver holds every record of every
//! host except exactly the ones a host recorded as dropped (`export_dropped`, itself
//! delivered), and the heads it received verify each host's log.
use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use gatewayd::protocol::client::Client;
use gatewayd_core::audit::canonical_json;
use serde_json::{Value, json};

use crate::{
    export_sinks::{Proc, Rsyslog, received, receiver, wait_for},
    support::records,
};

const HOSTS: usize = 8;

/// One `gatewayd serve` as a host.
struct Host {
    id: String,
    dir: tempfile::TempDir,
    socket: PathBuf,
    audit: PathBuf,
    proc: Proc,
}

impl Host {
    fn start(i: usize, sinks: &[String]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let policy = root.join("policy.json");
        std::fs::write(
            &policy,
            json!({"version": 1, "tools": [
                {"name": "noop", "description": "Does nothing.", "cost": 0}]})
            .to_string(),
        )
        .unwrap();
        let (socket, audit) = (root.join("gatewayd.sock"), root.join("audit.jsonl"));
        let id = format!("fleet-host-{i}");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatewayd"));
        cmd.arg("serve")
            .arg("--policy")
            .arg(&policy)
            .arg("--socket")
            .arg(&socket)
            .arg("--audit")
            .arg(&audit)
            .args(["--host-id", &id, "--anchor-every-s", "0"]);
        for s in sinks {
            cmd.args(["--export", s]);
        }
        let log = std::fs::File::create(root.join("stderr.log")).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().unwrap();
        let h = Host {
            id,
            dir,
            socket,
            audit,
            proc: Proc(child),
        };
        wait_for(&format!("{} to serve", h.id), 30, || {
            Client::connect(&h.socket).is_ok()
        });
        h
    }

    /// `n` calls in one session: allowed (`noop`) and, every fourth, refused (a tool the
    /// policy does not know).
    fn decide(&self, session: &str, n: usize) {
        let mut c = Client::connect(&self.socket).unwrap();
        c.call("session/open", json!({"session": session, "user": "alice"}))
            .unwrap();
        for i in 0..n {
            let tool = if i % 4 == 3 { "rm_rf" } else { "noop" };
            c.call(
                "call/decide",
                json!({"session": session, "call": {"tool": tool, "arguments": {}}}),
            )
            .unwrap();
        }
        c.call("session/close", json!({"session": session}))
            .unwrap();
    }

    /// The exporter whose sink starts with `kind` (`export/stats`).
    fn stats(&self, kind: &str) -> Value {
        let mut c = Client::connect(&self.socket).unwrap();
        let s = c.call("export/stats", json!({})).unwrap();
        s["exporters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["sink"].as_str().unwrap().starts_with(kind))
            .unwrap()
            .clone()
    }

    fn drained(&self, kind: &str) -> bool {
        let s = self.stats(kind);
        s["lag"] == 0 && s["failing"] == false
    }

    /// SIGTERM, and the exit awaited: the log is complete and the stop head exported.
    fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.proc.0.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = self.proc.0.wait().unwrap();
        assert!(status.success(), "{}: {status}", self.id);
    }
}

/// An exported record without `type`, `host` and `ocsf`: the log's line.
fn as_logged(mut v: Value) -> String {
    let m = v.as_object_mut().unwrap();
    for k in ["type", "host", "ocsf"] {
        m.remove(k);
    }
    canonical_json(&v)
}

/// Checks one sink's copy of one host's chain: each record received is the log's line; the
/// records and heads missing are exactly as many as the host recorded dropped for that sink
/// (one head per session close and one at stop: `--anchor-every-s 0`). Returns how many
/// records were missing.
fn check_copy(h: &Host, sink: &str, got: &[Value], heads: u64) -> u64 {
    let log = gatewayd_testkit::export::log_by_seq(&h.audit);
    // At least once: a batch sent again repeats records, which `seq` tells.
    let mut copy = BTreeMap::new();
    for r in got {
        assert_eq!(r["host"], h.id.as_str());
        let seq = r["seq"].as_u64().unwrap();
        let line = as_logged(r.clone());
        assert_eq!(Some(&line), log.get(&seq), "{} seq {seq} via {sink}", h.id);
        copy.insert(seq, line);
    }
    let missing = log.keys().filter(|s| !copy.contains_key(s)).count() as u64;
    let dropped: Vec<&Value> = got
        .iter()
        .filter(|r| r["reason"] == "export_dropped" && r["detail"]["sink"] == sink)
        .collect();
    let recs = records(&h.audit);
    let recorded: u64 = recs
        .iter()
        .filter(|r| r["reason"] == "export_dropped" && r["detail"]["sink"] == sink)
        .map(|r| r["detail"]["count"].as_u64().unwrap())
        .sum();
    let heads_sent = 1 + recs
        .iter()
        .filter(|r| r["reason"] == "session_close")
        .count() as u64;
    assert_eq!(
        missing + heads_sent - heads,
        recorded,
        "{} via {sink}: records and heads missing vs recorded dropped",
        h.id
    );
    if recorded > 0 {
        assert!(
            !dropped.is_empty(),
            "{}: the drop record reached {sink}",
            h.id
        );
    }
    missing
}

#[test]
fn eight_hosts_export_every_record_to_one_receiver_and_a_10_s_outage_loses_none() {
    let out = tempfile::tempdir().unwrap();
    let otlp_file = out.path().join("otlp.jsonl");
    let rs = Rsyslog::start(out.path());
    let (rx, port) = receiver("ok", 0, &otlp_file);
    let otlp = format!("otlp:http://127.0.0.1:{port}");
    let syslog = format!("syslog:tcp:127.0.0.1:{}", rs.tcp);
    let mut hosts: Vec<Host> = (0..HOSTS)
        .map(|i| Host::start(i, &[otlp.clone(), syslog.clone()]))
        .collect();
    let all = |f: &(dyn Fn(&Host) + Sync)| {
        std::thread::scope(|s| {
            for h in &hosts {
                s.spawn(|| f(h));
            }
        });
    };
    all(&|h| h.decide("before", 40));
    wait_for("every host's OTLP queue to drain", 30, || {
        hosts.iter().all(|h| h.drained("otlp"))
    });
    // The receiver goes away for 10 s; every host goes on deciding, host 0 past its queue.
    drop(rx);
    let down = Instant::now();
    all(&|h| h.decide("during", 40));
    let mut burst = 0;
    while hosts[0].stats("otlp")["dropped"] == 0 {
        assert!(
            burst < 40,
            "no drop after {burst} bursts: {}",
            hosts[0].stats("otlp")
        );
        std::thread::scope(|s| {
            for t in 0..4 {
                let h = &hosts[0];
                s.spawn(move || h.decide(&format!("burst-{burst}-{t}"), 500));
            }
        });
        burst += 1;
    }
    assert!(
        hosts.iter().all(|h| h.stats("otlp")["failing"] == true),
        "the receiver is down"
    );
    if let Some(left) = Duration::from_secs(10).checked_sub(down.elapsed()) {
        std::thread::sleep(left); // the outage's length, not a guard
    }
    let (rx, _) = receiver("ok", port, &otlp_file);
    all(&|h| h.decide("after", 40));
    wait_for("every host to deliver again and drain", 90, || {
        hosts.iter().all(|h| h.drained("otlp"))
    });
    // The sinks as the hosts name them (in `export_dropped` records too).
    let otlp = hosts[0].stats("otlp")["sink"].as_str().unwrap().to_owned();
    let syslog = hosts[0].stats("syslog")["sink"]
        .as_str()
        .unwrap()
        .to_owned();
    for h in &mut hosts {
        h.stop();
    }
    wait_for("the stop heads", 30, || {
        let heads = received(&otlp_file)
            .iter()
            .filter(|r| r["attributes"]["gatewayd.type"] == "anchor")
            .filter(|r| r["body"].as_str().unwrap().contains("\"why\":\"stop\""))
            .count();
        heads == HOSTS
    });
    drop(rx);
    check_otlp(&hosts, &received(&otlp_file), &otlp);
    check_syslog(&hosts, &rs, &syslog);
}

/// The receiver got every host's chain and heads, less what each recorded as dropped for it
/// (only host 0 dropped any); each host's log verifies, alone and against the heads received.
fn check_otlp(hosts: &[Host], got: &[Value], otlp: &str) {
    for (i, h) in hosts.iter().enumerate() {
        let v = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
            .args(["audit", "verify"])
            .arg(&h.audit)
            .output()
            .unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
        let mine: Vec<&Value> = got
            .iter()
            .filter(|r| r["resource"]["host.id"] == h.id.as_str())
            .collect();
        let bodies: Vec<Value> = mine
            .iter()
            .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
            .collect();
        let recs: Vec<Value> = bodies
            .iter()
            .filter(|b| b["type"] == "record")
            .cloned()
            .collect();
        let heads = (bodies.len() - recs.len()) as u64;
        let missing = check_copy(h, otlp, &recs, heads);
        println!(
            "{}: {} records in the chain, {} received over OTLP, {} heads; dropped from the copy {missing}",
            h.id,
            records(&h.audit).len(),
            recs.len(),
            heads
        );
        if i == 0 {
            assert!(missing > 0, "host 0 overflowed its queue");
        } else {
            assert_eq!(missing, 0, "{}: a 10 s outage lost nothing", h.id);
        }
        verify_anchors(h, &bodies);
    }
}

/// The heads the receiver got for `h` prove its log (`audit verify --anchors`).
fn verify_anchors(h: &Host, bodies: &[Value]) {
    let file = h.dir.path().join("received-anchors.jsonl");
    let text: String = bodies
        .iter()
        .filter(|b| b["type"] == "anchor")
        .map(|b| format!("{b}\n"))
        .collect();
    assert!(!text.is_empty(), "{}: no head received", h.id);
    std::fs::write(&file, text).unwrap();
    let v = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["audit", "verify"])
        .arg(&h.audit)
        .arg("--anchors")
        .arg(&file)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}

/// rsyslog got every host's chain and heads, less what each recorded as dropped for it.
fn check_syslog(hosts: &[Host], rs: &Rsyslog, sink: &str) {
    let expected = |h: &Host| {
        let recs = records(&h.audit);
        let dropped: u64 = recs
            .iter()
            .filter(|r| r["reason"] == "export_dropped" && r["detail"]["sink"] == sink)
            .map(|r| r["detail"]["count"].as_u64().unwrap())
            .sum();
        let heads = 1 + recs
            .iter()
            .filter(|r| r["reason"] == "session_close")
            .count();
        (recs.len() + heads) as u64 - dropped
    };
    let of = |h: &Host, got: &[(String, String, Value)], kind: &str| -> Vec<Value> {
        got.iter()
            .filter(|r| r.2["type"] == kind && r.2["host"] == h.id.as_str())
            .map(|r| r.2.clone())
            .collect()
    };
    wait_for("rsyslog to write every host's records", 60, || {
        let got = rs.received("tcp");
        hosts.iter().all(|h| {
            let seqs: std::collections::BTreeSet<u64> = of(h, &got, "record")
                .iter()
                .map(|r| r["seq"].as_u64().unwrap())
                .collect();
            (seqs.len() + of(h, &got, "anchor").len()) as u64 >= expected(h)
        })
    });
    let got = rs.received("tcp");
    for (i, h) in hosts.iter().enumerate() {
        let heads = of(h, &got, "anchor").len() as u64;
        let missing = check_copy(h, sink, &of(h, &got, "record"), heads);
        if i > 0 {
            assert_eq!(missing, 0, "{} via syslog", h.id);
        }
    }
}
