//! The proxy against servers and clients that misbehave: a server that crashes, hangs, writes
//! garbage or answers out of order; a client that sends malformed or oversized lines;
//! several requests in flight; a server binary that differs from its pin; the daemon's
//! session used through `GATEWAYD_SOCKET`.
use crate::support;

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{Value, json};
use support::*;

const PY: &str = "/usr/bin/python3";

fn policy(dir: &Path, server: Value) -> PathBuf {
    let p = json!({"version": 1, "kernel": "best_effort",
        "tools": [{"name": "echo", "description": "Echo a text.",
                   "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}],
        "mcp_servers": {"fake": server}});
    let path = dir.join("policy.json");
    std::fs::write(&path, p.to_string()).unwrap();
    path
}

struct Proxy {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Proxy {
    fn start(
        policy: &Path,
        audit: &Path,
        extra: &[&str],
        mode: &str,
        env: &[(&str, &str)],
    ) -> Proxy {
        let mut args = proxy_cmd(policy, "fake", audit, extra);
        args.extend([
            "--".into(),
            PY.into(),
            fixture("fake_server.py").display().to_string(),
            mode.into(),
        ]);
        let mut child = Command::new(&args[0])
            .args(&args[1..])
            .envs(env.iter().copied())
            .env_remove("GATEWAYD_SESSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let v =
                    serde_json::from_str(&l).unwrap_or_else(|e| panic!("proxy wrote {l:?}: {e}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut p = Proxy { child, lines };
        p.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        );
        assert_eq!(p.next()["id"], 0);
        p.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        p.send(r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#);
        assert_eq!(p.next()["result"]["tools"][0]["name"], "echo");
        p
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: Value, text: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}})
            .to_string(),
        );
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the proxy answers, never hangs")
    }

    fn close(mut self) -> std::process::ExitStatus {
        drop(self.child.stdin.take());
        self.child.wait().unwrap()
    }
}

#[test]
fn a_crashing_server_gets_the_client_errors_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(dir.path(), json!({"kernel": "off"}));
    let audit = dir.path().join("audit.jsonl");
    let mut p = Proxy::start(&pol, &audit, &[], "crash", &[]);
    p.call(json!(7), "x");
    let e = p.next();
    assert_eq!(e["id"], 7, "{e}");
    assert_eq!(e["error"]["code"], -32050, "{e}");
    p.send(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    let e = p.next();
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(8), json!(-32050))
    );
    assert!(p.close().success());
    let stop = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "mcp_server_stop")
        .unwrap();
    assert!(
        stop["detail"]["status"].as_str().unwrap().contains('3'),
        "{stop}"
    );
}

#[test]
fn a_hanging_server_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(dir.path(), json!({"kernel": "off"}));
    let audit = dir.path().join("audit.jsonl");
    let mut p = Proxy::start(&pol, &audit, &["--request-timeout-s", "1"], "hang", &[]);
    p.call(json!("slow"), "x");
    let e = p.next();
    assert_eq!(e["id"], "slow");
    assert_eq!(e["error"]["code"], -32051, "{e}");
    p.close();
}

#[test]
fn malformed_lines_from_either_side_are_errors_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(dir.path(), json!({"kernel": "off"}));
    let audit = dir.path().join("audit.jsonl");
    let mut p = Proxy::start(
        &pol,
        &audit,
        &["--max-message-bytes", "4096"],
        "garbage",
        &[],
    );
    p.send("{not json");
    assert_eq!(p.next()["error"]["code"], -32700);
    p.send("[1,2]");
    assert_eq!(p.next()["error"]["code"], -32600);
    p.send(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":"{}"}}"#,
        "a".repeat(5000)
    ));
    let e = p.next();
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("4096"));
    p.call(json!(2), "still here");
    let r = p.next();
    assert_eq!(r["id"], 2);
    assert_eq!(r["result"]["content"][0]["text"], "still here");
    assert!(p.close().success());
    assert!(
        reasons(&audit).contains(&("info".into(), "mcp_server_malformed".into())),
        "the server's garbage is recorded"
    );
}

#[test]
fn requests_in_flight_keep_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(dir.path(), json!({"kernel": "off"}));
    let audit = dir.path().join("audit.jsonl");
    let mut p = Proxy::start(&pol, &audit, &[], "reorder", &[]);
    p.call(json!("a"), "first");
    p.call(json!(2), "second");
    let (x, y) = (p.next(), p.next());
    assert_eq!(
        (x["id"].clone(), y["id"].clone()),
        (json!(2), json!("a")),
        "{x} {y}"
    );
    assert_eq!(y["result"]["content"][0]["text"], "first");
    // A call to a tool the policy does not list never reaches the server.
    p.send(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rm","arguments":{}}}"#,
    );
    let r = p.next();
    assert_eq!(r["result"]["isError"], true, "{r}");
    // Unknown methods pass through, and so does the server's error for them.
    p.send(r#"{"jsonrpc":"2.0","id":4,"method":"server/discover"}"#);
    assert_eq!(p.next()["error"]["message"], "no server/discover");
    p.close();
}

#[test]
fn a_server_program_that_differs_from_its_pin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(
        dir.path(),
        json!({"kernel": "off", "command_sha256": "0".repeat(64)}),
    );
    let out = Command::new(GATEWAYD)
        .args(proxy_cmd(&pol, "fake", &audit, &["--", PY, "-c", "pass"])[1..].iter())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SHA-256"), "{stderr}");
    assert!(reasons(&audit).contains(&("deny".into(), "mcp_server_refused".into())));
    // The right pin starts it.
    let real = std::fs::canonicalize(PY).unwrap();
    let sha = gatewayd::mcp::server::sha256_file(&real).unwrap();
    let pol = policy(dir.path(), json!({"kernel": "off", "command_sha256": sha}));
    let p = Proxy::start(&pol, &audit, &[], "reorder", &[]);
    assert!(p.close().success());
    let start = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "mcp_server_start")
        .unwrap();
    assert_eq!(start["detail"]["pinned"], true);
}

#[test]
fn with_a_daemon_the_proxy_uses_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(dir.path(), json!({"kernel": "off"}));
    let socket = dir.path().join("d.sock");
    let daemon_audit = dir.path().join("daemon.jsonl");
    let mut daemon = start_daemon(&pol, &socket, &daemon_audit);
    let audit = dir.path().join("proxy.jsonl");
    let sock = socket.display().to_string();
    let mut p = Proxy::start(
        &pol,
        &audit,
        &["--session", "shared-1"],
        "reorder",
        &[("GATEWAYD_SOCKET", &sock)],
    );
    p.call(json!(1), "via the daemon");
    assert_eq!(p.next()["result"]["content"][0]["text"], "via the daemon");
    p.close();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    daemon.0.wait().unwrap();
    let decided: Vec<Value> = records(&daemon_audit)
        .into_iter()
        .filter(|r| r["tool"] == "echo")
        .collect();
    assert_eq!(decided.len(), 1, "the daemon decided the call");
    assert_eq!(decided[0]["session"], "shared-1");
    assert_eq!(decided[0]["decision"], "allow");
    let own = reasons(&audit);
    assert!(
        own.contains(&("info".into(), "mcp_server_start".into())),
        "{own:?}"
    );
    assert!(
        !own.iter().any(|(_, r)| r == "allowed"),
        "decisions are the daemon's"
    );
}
