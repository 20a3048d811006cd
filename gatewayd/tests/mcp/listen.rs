//! `gatewayd mcp --listen`: a Streamable HTTP endpoint on loopback in front of a stdio server,
//! for clients configured with a URL (docs/MCP.md, "A local HTTP endpoint"). The server is
//! the Python SDK's (`rugpull_server.py`, stdio), the client the Python SDK's over HTTP; the
//! same steps are shown bare first (the client straight to the stdio server); then the same
//! in front of a remote server (`--url`, the SDK's HTTP server); several client sessions at
//! once, each proxied on its own.
use std::{
    net::{Ipv4Addr, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    remote::{self, HttpServer, free_port, loopback, policy, rugpull_tools},
    support::*,
};

/// `curl` POSTs `body` with `headers`; the HTTP status.
fn curl(url: &str, body: &str, headers: &[&str]) -> String {
    remote::curl_post(url, body, headers)
}

/// Starts the proxy `cmd` (its stderr to `stderr`) and waits until it accepts connections
/// on `port`.
fn start_listening(cmd: &[String], port: u16, stderr: Stdio) -> std::process::Child {
    let proxy = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    wait_listening(proxy, port)
}

/// Waits until `proxy` accepts connections on `port`.
fn wait_listening(mut proxy: std::process::Child, port: u16) -> std::process::Child {
    let end = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(Instant::now() < end, "the proxy did not listen");
        assert!(proxy.try_wait().unwrap().is_none(), "the proxy exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy
}

/// `gatewayd mcp --listen` in front of `server` (the rug-pull tools; the server's policy
/// entry `entry`), with `env`, its stderr in `dir/proxy.err`, once it listens; the proxy,
/// its endpoint's URL and its audit log.
pub(crate) fn in_front_of(
    dir: &Path,
    server: &HttpServer,
    entry: &Value,
    env: &[(&str, &str)],
) -> (std::process::Child, String, PathBuf) {
    let pol = policy(dir, &rugpull_tools(), &loopback(), entry);
    let audit = dir.join("audit.jsonl");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let cmd = proxy_cmd(
        &pol,
        "remote",
        &audit,
        &["--listen", &addr, "--url", &server.url()],
    );
    let proxy = Command::new(&cmd[0])
        .args(&cmd[1..])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(dir.join("proxy.err")).unwrap())
        .spawn()
        .unwrap();
    (
        wait_listening(proxy, port),
        format!("http://{addr}/mcp"),
        audit,
    )
}

/// `gatewayd mcp --listen` with `pol` in front of the stdio server `server`, once it
/// listens; the proxy and its port.
pub(crate) fn in_front_of_stdio(
    pol: &Path,
    audit: &Path,
    server: &[String],
) -> (std::process::Child, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut cmd = proxy_cmd(pol, "remote", audit, &["--listen", &addr, "--"]);
    cmd.extend(server.iter().cloned());
    (start_listening(&cmd, port, Stdio::inherit()), port)
}

/// The records of `reason` in `audit`.
pub(crate) fn with_reason(audit: &Path, reason: &str) -> Vec<Value> {
    records(audit)
        .into_iter()
        .filter(|r| r["reason"] == reason)
        .collect()
}

/// Stops the proxy (SIGTERM: it ends its sessions) and waits (up to 30 s) until it ends.
pub(crate) fn ended(proxy: &mut std::process::Child) -> std::process::ExitStatus {
    let kill = Command::new("kill")
        .args(["-TERM", &proxy.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = proxy.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < end, "the proxy did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_loopback_endpoint_fronts_a_remote_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::rugpull(dir.path());
    let (mut proxy, url, audit) = in_front_of(dir.path(), &server, &json!({}), &[]);
    let out = drive(&json!({"url": url, "mode": "legacy", "steps": [
        {"list": true},
        {"call": "translate", "args": {"text": "hi"}},
        {"list": true},
        {"call": "translate", "args": {"text": "hi"}},
    ]}));
    assert_eq!(out[1], json!({"text": "hallo: hi", "isError": false}));
    assert_eq!(out[2]["tools"], json!(["echo"]), "changed → withheld");
    assert_eq!(out[3]["isError"], true, "{out:?}");
    assert!(ended(&mut proxy).success());
    verify(&audit);
}

#[test]
fn a_loopback_endpoint_fronts_a_stdio_server() {
    let server = vec![
        python().display().to_string(),
        fixture("rugpull_server.py").display().to_string(),
    ];
    let steps = json!([
        {"list": true},
        {"call": "translate", "args": {"text": "hi"}},
        {"list": true},
        {"call": "translate", "args": {"text": "hi"}},
    ]);
    let bare = drive(&json!({"command": server, "mode": "legacy", "steps": steps}));
    assert_eq!(
        bare[3],
        json!({"text": "hallo: hi", "isError": false}),
        "bare: the changed tool still runs"
    );

    let dir = tempfile::tempdir().unwrap();
    let entry = json!({"kernel": "off"});
    let pol = policy(dir.path(), &rugpull_tools(), &loopback(), &entry);
    let audit = dir.path().join("audit.jsonl");
    let (mut proxy, port) = in_front_of_stdio(&pol, &audit, &server);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    assert_eq!(curl(&url, &list, &[]), "400", "no session");
    assert_eq!(
        curl(&url, &list, &["mcp-session-id: nope"]),
        "404",
        "unknown session"
    );
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"}}})
    .to_string();
    assert_eq!(
        curl(&url, &init, &["origin: http://evil.example"]),
        "403",
        "a page elsewhere (DNS rebinding)"
    );
    assert_eq!(
        curl(&url, &init, &[&format!("host: evil.example:{port}")]),
        "403"
    );

    let out = drive(&json!({"url": url, "mode": "legacy", "steps": steps}));
    remote::assert_rug_pull_withheld(&out);
    assert!(ended(&mut proxy).success());
    assert!(
        reasons(&audit).contains(&("deny".into(), "rug_pull".into())),
        "{:?}",
        reasons(&audit)
    );
    verify(&audit);
}

#[test]
fn each_client_session_is_proxied_on_its_own() {
    let server = [
        python().display().to_string(),
        fixture("rugpull_server.py").display().to_string(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(
        dir.path(),
        &rugpull_tools(),
        &loopback(),
        &json!({"kernel": "off"}),
    );
    // A budget of two calls per gateway session.
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pol).unwrap()).unwrap();
    p["limits"] = json!({"budget": 2});
    std::fs::write(&pol, p.to_string()).unwrap();
    let audit = dir.path().join("audit.jsonl");
    let (mut proxy, port) = in_front_of_stdio(&pol, &audit, &server);
    let url = format!("http://127.0.0.1:{port}/mcp");
    // Both sessions open at once (both use the same request ids); the first spends its
    // budget and has its third call refused, then the second calls twice: its own server,
    // router and gateway session (and its own budget).
    let session = |steps: serde_json::Value| json!({"url": url, "mode": "legacy", "steps": steps});
    // `echo`: `translate` would announce a change after its call (the rug pull).
    let call = |t: &str| json!({"call": "echo", "args": {"text": t}});
    let echoed = |o: &serde_json::Value, t: &str| {
        o["isError"] == false && o["text"].as_str().is_some_and(|x| x.contains(t))
    };
    let out = drive(&json!({"sessions": [
        session(json!([call("a1"), call("a2"), call("a3")])),
        session(json!([call("b1"), call("b2")])),
    ]}));
    assert!(echoed(&out[0][1], "a2"), "{out:?}");
    assert_eq!(out[0][2]["isError"], true, "{out:?}");
    let refusal = out[0][2]["text"].as_str().unwrap();
    assert!(refusal.contains("reason `budget`"), "{refusal}");
    assert!(echoed(&out[1][1], "b2"), "{out:?}");
    assert!(ended(&mut proxy).success());
    let starts: Vec<_> = with_reason(&audit, "mcp_server_start")
        .into_iter()
        .map(|r| r["session"].clone())
        .collect();
    assert_eq!(starts.len(), 2, "a server each: {:?}", reasons(&audit));
    assert_ne!(starts[0], starts[1], "a gateway session each");
    assert_eq!(
        with_reason(&audit, "budget").len(),
        1,
        "{:?}",
        reasons(&audit)
    );
    verify(&audit);
}

#[test]
fn sixteen_sessions_at_once_in_front_of_a_remote_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::rugpull(dir.path());
    let (mut proxy, url, audit) = in_front_of(dir.path(), &server, &json!({}), &[]);
    let sessions: Vec<_> = (0..16)
        .map(|i| {
            let call = |n: u32| json!({"call": "echo", "args": {"text": format!("s{i}-{n}")}});
            json!({"url": url, "mode": "legacy", "steps": [call(1), call(2), call(3)]})
        })
        .collect();
    let out = drive(&json!({"sessions": sessions, "concurrent": true}));
    for (i, o) in out.iter().enumerate() {
        for n in 1..=3 {
            let text = o[n - 1]["text"].as_str().unwrap_or_default();
            assert!(
                text.contains(&format!("s{i}-{n}")) && text.contains("<untrusted-output"),
                "session {i}: {o}"
            );
        }
    }
    assert!(ended(&mut proxy).success());
    assert_eq!(with_reason(&audit, "mcp_server_start").len(), 16);
    verify(&audit);
}
