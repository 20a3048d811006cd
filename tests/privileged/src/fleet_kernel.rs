//! The fleet's kernel half (docs/FLEET.md, "A fleet on one machine"): eight `gatewayd run`
//! sessions at once, each a host of its own (`--host-id`), all exporting over OTLP to one
//! receiver (the daemon tests' `otlp_receiver.py`, on the official `opentelemetry-proto` from
//! `PyPI`: `cargo xtask` puts it in `GATEWAYD_PY_REQUESTS`, in the guests too). Each agent is
//! refused by the kernel twice, shown working bare first: a read of a protected file and a
//! connect outside the egress allowlist. The receiver holds every record of every host's
//! chain as it was logged, the kernel denials among them with their OCSF class, and the head
//! each run exported at its end proves its log (`audit verify --anchors`). And a run whose
//! receiver is stopped for 10 s in the middle of the session loses no record.
use std::{
    collections::BTreeMap,
    process::{Child, Stdio},
};

use serde_json::{Value, json};

use super::*;

const HOSTS: usize = 8;
const RECEIVER: &str = include_str!("../../../gatewayd/tests/daemon/otlp_receiver.py");

/// The receiver, killed when the test ends.
struct Receiver(Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The OTLP receiver on `port` (0: any free one) writing one JSON line per log record to
/// `out`; it and its port.
fn receiver(dir: &Scratch, out: &Path, port: u16) -> (Receiver, u16) {
    let script = dir.path("otlp_receiver.py");
    std::fs::write(&script, RECEIVER).unwrap();
    let site = std::env::var_os("GATEWAYD_PY_REQUESTS")
        .expect("GATEWAYD_PY_REQUESTS: run through cargo xtask (the OTLP definitions)");
    let mut c = Command::new("/usr/bin/python3")
        .arg(&script)
        .args(["ok", &port.to_string()])
        .arg(out)
        .env("PYTHONPATH", site)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let port = gatewayd_testkit::net::announced_port(&mut c, "listening ");
    (Receiver(c), port)
}

/// The exported bodies the receiver got, as JSON.
fn received(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| serde_json::from_str(r["body"].as_str()?).ok())
        .collect()
}

/// An exported record without what export adds (`type`, `host`, `ocsf`): the log's line.
fn as_logged(mut v: Value) -> String {
    if let Some(m) = v.as_object_mut() {
        for k in ["type", "host", "ocsf"] {
            m.remove(k);
        }
    }
    gatewayd_core::audit::canonical_json(&v)
}

#[test]
fn eight_runs_export_their_kernel_denials_to_one_receiver_whole() {
    let _ = tier();
    let dir = Scratch::new("fleet-kernel");
    let (secret, ..) = protected_fixture(&dir);
    let (port, rx) = listener("127.0.0.1:0");
    let agent = agent();
    let to = format!("127.0.0.1:{port}");
    let actions = ["read", secret.to_str().unwrap(), "+", "send", &to, "x"];

    // Bare: the file reads and the connect goes through.
    let bare = Command::new(&agent).args(actions).output().unwrap();
    let text = stdout(&bare);
    assert!(
        text.contains("OK read") && text.contains("OK send"),
        "bare: {text}"
    );
    rx.recv_timeout(MUST_HAPPEN_WITHIN).unwrap();

    let out = dir.path("otlp.jsonl");
    let (_receiver, otlp) = receiver(&dir, &out, 0);
    // Loopback egress to another port only: the agent's connect is outside the allowlist.
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret]},
            "network": {"egress": [{"cidr": "127.0.0.1/32", "port": 9}]}}),
    );
    let audits: Vec<PathBuf> = (0..HOSTS)
        .map(|i| dir.path(&format!("audit-{i}.jsonl")))
        .collect();
    let outputs: Vec<Output> = std::thread::scope(|s| {
        let runs: Vec<_> = audits
            .iter()
            .enumerate()
            .map(|(i, audit)| {
                let (policy, agent) = (&policy, &agent);
                let otlp = format!("otlp:http://127.0.0.1:{otlp}");
                s.spawn(move || {
                    gatewayd_run()
                        .arg("--policy")
                        .arg(policy)
                        .arg("--audit")
                        .arg(audit)
                        .args(["--host-id", &format!("kfleet-{i}"), "--export", &otlp])
                        .args(["--anchor-every-s", "0", "--", agent])
                        .args(actions)
                        .output()
                        .unwrap()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (i, o) in outputs.iter().enumerate() {
        let t = stdout(o);
        assert!(
            t.contains("FAIL read") && t.contains("FAIL send"),
            "host {i}, both refused: {t}"
        );
    }
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "no connect reached the listener"
    );
    // Each run delivers what it queued, its last head among it, before it exits.
    for (i, audit) in audits.iter().enumerate() {
        let denials = [("protected_path", 1001), ("egress_not_allowed", 4001)];
        check_host(
            &format!("kfleet-{i}"),
            audit,
            &received(&out),
            &dir,
            &denials,
        );
    }
}

/// The receiver got `host`'s whole chain as logged, its kernel denials (`denials`, in order,
/// with their OCSF class: 1001 File System Activity, 4001 Network Activity), and a head that
/// proves the log.
fn check_host(host: &str, audit: &Path, got: &[Value], dir: &Scratch, denials: &[(&str, u64)]) {
    assert!(verify(audit).status.success(), "{host}: the log verifies");
    let log = gatewayd_testkit::export::log_by_seq(audit);
    let mine: Vec<&Value> = got.iter().filter(|b| b["host"] == host).collect();
    let mut copy = BTreeMap::new();
    for r in mine.iter().filter(|b| b["type"] == "record") {
        let seq = r["seq"].as_u64().unwrap();
        let line = as_logged((*r).clone());
        assert_eq!(Some(&line), log.get(&seq), "{host}: seq {seq} as logged");
        copy.insert(seq, r);
    }
    let missing: Vec<&u64> = log.keys().filter(|s| !copy.contains_key(s)).collect();
    assert!(missing.is_empty(), "{host}: not received: seq {missing:?}");
    let kernel: Vec<(&str, u64)> = copy
        .values()
        .filter(|r| r["source"] == "kernel")
        .filter_map(|r| Some((r["reason"].as_str()?, r["ocsf"]["class_uid"].as_u64()?)))
        .collect();
    assert_eq!(
        kernel, denials,
        "{host}: the kernel's denials with their OCSF class"
    );
    let heads: String = mine
        .iter()
        .filter(|b| b["type"] == "anchor")
        .map(|b| format!("{b}\n"))
        .collect();
    assert!(
        heads.contains("\"why\":\"stop\""),
        "{host}: the last head: {heads}"
    );
    let anchors = dir.path(&format!("anchors-{host}.jsonl"));
    std::fs::write(&anchors, heads).unwrap();
    let v = Command::new(gatewayd())
        .args(["audit", "verify"])
        .arg(audit)
        .arg("--anchors")
        .arg(&anchors)
        .output()
        .unwrap();
    assert!(v.status.success(), "{host}: {}", stdout(&v));
}

/// One `gatewayd run --export otlp:...` whose receiver is stopped for 10 s while the agent
/// is refused again: the exporter records that it fails, keeps the records queued, and when
/// the receiver is back (same port) delivers them; the receiver ends with the whole chain,
/// nothing dropped.
#[test]
fn a_run_loses_no_record_while_its_receiver_is_stopped_for_10_s() {
    let _ = tier();
    let dir = Scratch::new("fleet-outage");
    let (secret, ..) = protected_fixture(&dir);
    let (port, rx) = listener("127.0.0.1:0");
    let (go_on, finish) = (dir.path("go-on"), dir.path("finish"));
    let out = dir.path("otlp.jsonl");
    let (receiver_up, otlp) = receiver(&dir, &out, 0);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret]},
            "network": {"egress": [{"cidr": "127.0.0.1/32", "port": 9}]}}),
    );
    let audit = dir.path("audit.jsonl");
    let run = gatewayd_run()
        .arg("--policy")
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .args(["--host-id", "outage", "--anchor-every-s", "0"])
        .args(["--export", &format!("otlp:http://127.0.0.1:{otlp}")])
        .args([
            "--",
            &agent(),
            "read",
            secret.to_str().unwrap(),
            "+",
            "waitfile",
        ])
        .arg(&go_on)
        .args([
            "+",
            "send",
            &format!("127.0.0.1:{port}"),
            "x",
            "+",
            "waitfile",
        ])
        .arg(&finish)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let at_receiver = |reason: &str| received(&out).iter().any(|r| r["reason"] == reason);
    wait_until("the read's denial at the receiver", || {
        at_receiver("protected_path")
    });
    drop(receiver_up);
    let stopped = std::time::Instant::now();
    std::fs::write(&go_on, "").unwrap();
    wait_for_record(&audit, "egress_not_allowed");
    let failing = wait_for_record(&audit, "export_failing");
    assert!(
        failing["detail"]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&otlp.to_string())),
        "{failing}"
    );
    std::thread::sleep(Duration::from_secs(10).saturating_sub(stopped.elapsed()));
    assert!(
        !at_receiver("egress_not_allowed"),
        "nothing arrives while the receiver is stopped"
    );
    let (_receiver, _) = receiver(&dir, &out, otlp);
    wait_until("the connect's denial at the receiver", || {
        at_receiver("egress_not_allowed")
    });
    std::fs::write(&finish, "").unwrap();
    let t = stdout(&run.wait_with_output().unwrap());
    assert!(
        t.contains("FAIL read") && t.contains("FAIL send"),
        "both refused: {t}"
    );
    assert!(rx.try_recv().is_err(), "no connect reached the listener");
    let denials = [("protected_path", 1001), ("egress_not_allowed", 4001)];
    check_host("outage", &audit, &received(&out), &dir, &denials);
    assert!(
        !records(&audit)
            .iter()
            .any(|r| r["reason"] == "export_dropped"),
        "nothing dropped"
    );
}
