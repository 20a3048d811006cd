//! Bad input and faults against the daemon: malformed JSON, unknown methods, oversized
//! messages, notifications and batches, slow and vanished clients, 1,000 idle connections,
//! a full disk under the audit log, SIGTERM during load, stale and live sockets.
use crate::support;

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::net::UnixStream,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use gatewayd::protocol::{
    MAX_LINE,
    client::{Client, ClientError},
    code,
};
use serde_json::{Value, json};
use support::{Daemon, records};

/// The standard policy without its budget (the load tests make many calls).
fn unlimited(root: &std::path::Path) -> Value {
    let mut p = support::policy(root);
    p.as_object_mut().unwrap().remove("limits");
    p
}

fn answer(line: &str) -> Value {
    serde_json::from_str(line).unwrap()
}

#[test]
fn malformed_unknown_notifications_and_batches_keep_the_connection() {
    let d = Daemon::start();
    let mut c = d.client();
    let r = answer(&c.raw("{not json").unwrap());
    assert_eq!(r["error"]["code"], code::PARSE_ERROR);
    assert_eq!(r["id"], Value::Null);
    let r = answer(
        &c.raw(r#"{"jsonrpc":"2.0","id":7,"method":"nope"}"#)
            .unwrap(),
    );
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(7), json!(code::METHOD_NOT_FOUND))
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call/decide")
    );
    let r = answer(
        &c.raw(r#"[{"jsonrpc":"2.0","id":1,"method":"hello"}]"#)
            .unwrap(),
    );
    assert_eq!(r["error"]["code"], code::INVALID_REQUEST);
    let r = answer(
        &c.raw(r#"{"jsonrpc":"1.0","id":2,"method":"hello"}"#)
            .unwrap(),
    );
    assert_eq!(r["error"]["code"], code::INVALID_REQUEST);
    let r = answer(&c.raw(r#"{"id":3}"#).unwrap());
    assert_eq!(r["error"]["code"], code::INVALID_REQUEST);
    // A notification (no id) is not answered: the next answer is the next request's.
    let r = answer(
        &c.raw("{\"jsonrpc\":\"2.0\",\"method\":\"hello\"}\n{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"hello\"}")
            .unwrap(),
    );
    assert_eq!(r["id"], 9);
    // Blank lines are skipped; the connection still works.
    assert_eq!(
        answer(
            &c.raw("\n\r\n{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"hello\"}")
                .unwrap()
        )["id"],
        10
    );
}

#[test]
fn an_oversized_message_is_refused_and_the_connection_closed() {
    let d = Daemon::start();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{{\"x\":\"{}\"}}}}\n",
        "a".repeat(MAX_LINE)
    );
    // The daemon may close before reading it all: a write error is fine.
    let _ = s.write_all(big.as_bytes());
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let v = answer(&line);
    assert_eq!(v["error"]["code"], code::INVALID_REQUEST);
    assert!(v["error"]["message"].as_str().unwrap().contains("1048576"));
    line.clear();
    assert_eq!(r.read_line(&mut line).unwrap_or(0), 0, "connection closed");
    // A message just under the limit is fine.
    let pad = MAX_LINE - 100;
    let ok = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(pad)
    );
    assert_eq!(
        answer(&d.client().raw(&ok).unwrap())["result"]["protocol"],
        1
    );
}

#[test]
fn slow_and_silent_clients_do_not_hold_up_others() {
    let d = Daemon::start();
    // Half a line, then nothing.
    let mut slow = UnixStream::connect(&d.socket).unwrap();
    slow.write_all(br#"{"jsonrpc":"2.0","id":1,"meth"#).unwrap();
    // Many requests, never reading the answers.
    let mut deaf = UnixStream::connect(&d.socket).unwrap();
    let req = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\"}\n".repeat(20_000);
    deaf.set_nonblocking(true).unwrap();
    let _ = deaf.write(req.as_bytes());
    let t = Instant::now();
    for _ in 0..50 {
        d.client().call("hello", json!({})).unwrap();
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // The slow client finishes its line and gets its answer.
    slow.write_all(b"od\":\"hello\"}\n").unwrap();
    let mut line = String::new();
    BufReader::new(slow).read_line(&mut line).unwrap();
    assert_eq!(answer(&line)["result"]["server"], "gatewayd");
}

#[test]
fn a_thousand_idle_connections_and_the_daemon_still_answers() {
    // Both ends live in this process: 2,000 descriptors and more.
    gatewayd::daemon::raise_fd_limit();
    let d = Daemon::start();
    let idle: Vec<UnixStream> = (0..1000)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    let t = Instant::now();
    d.client().call("hello", json!({})).unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    // Idle connections are live connections.
    for s in [&idle[0], &idle[500], &idle[999]] {
        let mut c = s.try_clone().unwrap();
        c.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\"}\n")
            .unwrap();
        let mut line = String::new();
        BufReader::new(c).read_line(&mut line).unwrap();
        assert_eq!(answer(&line)["id"], 1);
    }
}

#[test]
fn a_client_gone_mid_call_leaves_a_consistent_session_and_its_record() {
    let d = Daemon::start();
    let mut c = d.client();
    c.call("session/open", json!({"session": "s", "user": "a"}))
        .unwrap();
    let before = c.call("audit/head", json!({})).unwrap()["seq"]
        .as_u64()
        .unwrap();
    for _ in 0..10 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"call/decide\",\"params\":{\"session\":\"s\",\"call\":{\"tool\":\"count\"}}}\n",
        )
        .unwrap();
        drop(s); // gone before the answer
    }
    // Every decision was still made and recorded; the budget counted each of them.
    let t = Instant::now();
    while c.call("audit/head", json!({})).unwrap()["seq"]
        .as_u64()
        .unwrap()
        < before + 10
    {
        assert!(t.elapsed() < Duration::from_secs(10), "records missing");
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = records(d.audit.as_ref().unwrap());
    assert_eq!(list.iter().filter(|r| r["tool"] == "count").count(), 10);
    let r = c
        .call(
            "call/decide",
            json!({"session": "s", "call": {"tool": "count"}}),
        )
        .unwrap();
    assert_eq!(r["decision"], "allow");
}

/// A tmpfs of 64 KiB under the audit log: once it is full, every decision is denied with
/// `audit_unavailable`, and nothing allowed is missing from the log.
#[test]
fn a_full_disk_denies_every_decision_with_audit_unavailable() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test mounts a small tmpfs: it needs root (run the suite as root)"
    );
    let mnt = tempfile::tempdir().unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        mnt.path(),
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=64k,mode=0700"),
    )
    .unwrap();
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _u = Unmount(mnt.path().to_owned());
    let audit = mnt.path().join("audit.jsonl");
    let d = Daemon::start_with(
        unlimited,
        Some(audit.clone()),
        Arc::new(gatewayd_core::clock::SystemClock),
    );
    let mut c = d.client();
    c.call("session/open", json!({"session": "s", "user": "a"}))
        .unwrap();
    let mut allowed = 0;
    let mut first_failure = None;
    for i in 0..2000 {
        let r = c
            .call(
                "call/decide",
                json!({"session": "s", "call": {"tool": "fetch_url"}}),
            )
            .unwrap();
        if let Some("allow") = r["decision"].as_str() {
            allowed += 1;
        } else {
            assert_eq!(r["reason"], "audit_unavailable", "{r}");
            first_failure.get_or_insert(i);
        }
        if first_failure.is_some_and(|f| i > f + 20) {
            break;
        }
    }
    let f = first_failure.expect("the disk never filled");
    assert_eq!(allowed, f, "an allow after the first audit failure");
    // Anything that needs a record fails too.
    let e = c.call("session/open", json!({"session": "t", "user": "a"}));
    assert!(
        matches!(e, Err(ClientError::Rpc(ref x)) if x.code == code::AUDIT_UNAVAILABLE),
        "{e:?}"
    );
    // Every allowed decision is in the log (a last partial line aside).
    let text = std::fs::read_to_string(&audit).unwrap();
    let recorded = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["decision"] == "allow")
        .count();
    assert_eq!(recorded, allowed);
    drop(c);
    assert!(
        d.stop().is_err(),
        "the daemon reports the failed log at exit"
    );
}

fn policy_file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("policy.json");
    std::fs::write(&p, unlimited(dir).to_string()).unwrap();
    p
}

fn spawn_serve(dir: &std::path::Path, sock: &std::path::Path) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .arg("serve")
        .arg("--policy")
        .arg(policy_file(dir))
        .arg("--socket")
        .arg(sock)
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while Client::connect(sock).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn sigterm_under_load_loses_no_record_and_the_chain_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("g.sock");
    let mut child = spawn_serve(dir.path(), &sock);
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (sock, stop, answered) = (sock.clone(), stop.clone(), answered.clone());
            std::thread::spawn(move || {
                let mut c = Client::connect(&sock).unwrap();
                let id = format!("load{i}");
                c.call("session/open", json!({"session": id, "user": "u"}))
                    .unwrap();
                while !stop.load(Ordering::SeqCst) {
                    match c.call(
                        "call/decide",
                        json!({"session": id, "call": {"tool": "fetch_url"}}),
                    ) {
                        Ok(r) => {
                            assert_eq!(r["decision"], "allow");
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        // The daemon closed the connection: a clean end, never half an answer.
                        Err(ClientError::Closed | ClientError::Io(_)) => return,
                        Err(e) => panic!("unexpected: {e}"),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("stopped; audit head seq"), "{err}");
    assert!(!sock.exists(), "the socket is removed");
    let audit = dir.path().join("audit.jsonl");
    let rep = gatewayd_core::audit::verify(&audit, None).unwrap();
    let recs = records(&audit);
    assert_eq!(rep.records as usize, recs.len());
    let decisions = recs.iter().filter(|r| r["tool"] == "fetch_url").count() as u64;
    let n = answered.load(Ordering::SeqCst);
    assert!(n > 0);
    assert!(
        decisions >= n,
        "{decisions} records for {n} answered decisions"
    );
    assert_eq!(recs.last().unwrap()["reason"], "daemon_stop");
}

#[test]
fn a_live_socket_is_refused_and_a_stale_one_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("g.sock");
    let mut first = spawn_serve(dir.path(), &sock);
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .arg("serve")
        .arg("--policy")
        .arg(policy_file(dir.path()))
        .arg("--socket")
        .arg(&sock)
        .arg("--audit")
        .arg(dir.path().join("other.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by a running daemon"));
    // Killed: the socket file stays behind, stale.
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(sock.exists());
    let mut second = spawn_serve(dir.path(), &sock);
    Client::connect(&sock)
        .unwrap()
        .call("hello", json!({}))
        .unwrap();
    second.kill().unwrap();
    second.wait().unwrap();
    // The chain survived the kill and the restart.
    gatewayd_core::audit::verify(&dir.path().join("audit.jsonl"), None).unwrap();
}

/// Many connections of one peer each half-sending a line of nearly 1 MiB: beyond the first
/// 16 KiB of each, the lines take from the peer's part of the daemon's budget (8 MiB of the
/// 64 MiB all peers share); once it is spent a connection gets a `limit` error and is closed,
/// instead of the daemon growing by a MiB per connection. When they go, a new client is
/// served. (How peers share the 64 MiB: `daemon::line_budget`'s unit tests.)
#[test]
fn half_sent_long_lines_share_one_bounded_budget() {
    let d = Daemon::start();
    let chunk = vec![b'x'; MAX_LINE - 1024];
    let mut conns = Vec::new();
    let mut refused = 0;
    for _ in 0..20 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // No newline: the line stays unfinished. A refused client's write fails once the
        // daemon closes it.
        if s.write_all(b"{\"x\": \"")
            .and_then(|()| s.write_all(&chunk))
            .is_err()
        {
            refused += 1;
            continue;
        }
        conns.push(s);
    }
    // Each connection that was refused was answered first.
    let mut limit_answers = 0;
    for s in &mut conns {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut line = String::new();
        if BufReader::new(&*s)
            .read_line(&mut line)
            .is_ok_and(|n| n > 0)
            && answer(&line)["error"]["code"] == code::LIMIT
        {
            limit_answers += 1;
        }
    }
    let held = conns.len() - limit_answers;
    assert!(
        (7..=9).contains(&held),
        "about 8 lines of ~1 MiB fit in one peer's 8 MiB: {held} held, {limit_answers} answered `limit`, {refused} closed"
    );
    drop(conns);
    let mut c = d.client();
    assert!(c.call("hello", json!({})).is_ok(), "served again");
}
