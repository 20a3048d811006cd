//! `host` entries of `network.egress` in the kernel: `gatewayd run` resolves them at start and
//! again when their TTL runs out. A tiny DNS server of this test (the guests have no network)
//! answers `svc.gwtest` first with 127.0.0.2 (TTL 1 s), then, once the test says so, with
//! 127.0.0.1: the agent's connect to 127.0.0.1 is denied before and allowed after, and both
//! answers are `egress_resolved` records.
use std::{
    net::UdpSocket,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use super::*;

const HOST: &str = "svc.gwtest";

/// Answers every A query with `127.0.0.2` (TTL 1 s) until `flipped`, then with `127.0.0.1`
/// (TTL 300 s); any other query with no answer. Returns its port.
fn dns_server(flipped: Arc<AtomicBool>) -> u16 {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                return;
            };
            let q = &buf[..n];
            // The question: labels up to a zero byte, then QTYPE and QCLASS.
            let Some(end) = q.iter().skip(12).position(|&b| b == 0).map(|p| 12 + p + 5) else {
                continue;
            };
            if end > n {
                continue;
            }
            let is_a = q[end - 4..end - 2] == [0, 1];
            let mut r = Vec::from(&q[..2]);
            r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(is_a), 0, 0, 0, 0]);
            r.extend_from_slice(&q[12..end]);
            if is_a {
                let (ip, ttl) = if flipped.load(Ordering::SeqCst) {
                    ([127, 0, 0, 1], 300u32)
                } else {
                    ([127, 0, 0, 2], 1)
                };
                r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
                r.extend_from_slice(&ttl.to_be_bytes());
                r.extend_from_slice(&[0, 4]);
                r.extend_from_slice(&ip);
            }
            let _ = sock.send_to(&r, from);
        }
    });
    port
}

#[test]
fn host_entries_are_resolved_into_the_kernel_and_follow_their_ttl() {
    let _ = tier();
    let dir = Scratch::new("dns");
    let (port, rx) = listener("127.0.0.1:0");
    let flipped = Arc::new(AtomicBool::new(false));
    let dns = dns_server(flipped.clone());
    let policy = write_policy(
        &dir,
        best_effort(serde_json::json!([{"host": HOST, "port": port}])),
    );
    let audit = dir.path("audit.jsonl");
    let go = dir.path("go");
    let to = format!("127.0.0.1:{port}");
    let child = under_gatewayd(&policy, &audit, agent())
        .args(["send", &to, "before", "+", "waitfile"])
        .arg(&go)
        .args(["+", "send", &to, "after"])
        .env("GATEWAYD_DNS_SERVER", format!("127.0.0.1:{dns}"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let resolved = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|r| r["reason"] == "egress_resolved")
            .collect()
    };
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    while resolved().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    flipped.store(true, Ordering::SeqCst);
    while resolved().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("FAIL send: Operation not permitted"),
        "{HOST} resolved to 127.0.0.2 only: {text}"
    );
    assert!(lines[2].starts_with("OK send"), "re-resolved: {text}");
    assert_eq!(rx.recv_timeout(MUST_HAPPEN_WITHIN).unwrap(), b"after");

    let recs = records(&audit);
    let res: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["reason"] == "egress_resolved")
        .collect();
    assert_eq!(res.len(), 2, "{recs:#?}");
    assert_eq!(res[0]["detail"]["host"], HOST);
    assert_eq!(res[0]["detail"]["port"], port);
    assert_eq!(
        res[0]["detail"]["addresses"],
        serde_json::json!(["127.0.0.2"])
    );
    assert!(res[0]["detail"]["ttl_s"].as_u64().unwrap() <= 1);
    assert_eq!(
        res[1]["detail"]["addresses"],
        serde_json::json!(["127.0.0.1"])
    );
    // The first record comes before the agent's first connect was denied: resolved at start.
    let first_resolved = recs
        .iter()
        .position(|r| r["reason"] == "egress_resolved")
        .unwrap();
    let denied = recs
        .iter()
        .position(|r| r["source"] == "kernel")
        .expect("the connect to 127.0.0.1 before the change is a kernel denial");
    assert!(first_resolved < denied, "{recs:#?}");
    assert_eq!(recs[denied]["detail"]["addr"], "127.0.0.1");
    assert!(verify(&audit).status.success());
}
