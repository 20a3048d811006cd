//! `gatewayd mcp --listen`: a Streamable HTTP endpoint on loopback in front of a stdio server,
//! for clients configured with a URL (docs/MCP.md, "A local HTTP endpoint"). The server is
//! the Python SDK's (`rugpull_server.py`, stdio), the client the Python SDK's over HTTP; the
//! same steps are shown bare first (the client straight to the stdio server); then the same
//! in front of a remote server (`--url`, the SDK's HTTP server).
use std::{
    net::{Ipv4Addr, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{
    remote::{self, HttpServer, free_port, loopback, policy, rugpull_tools},
    support::*,
};

/// `curl` POSTs `body` with `headers`; the HTTP status.
fn curl(url: &str, body: &str, headers: &[&str]) -> String {
    remote::curl_post(url, body, headers)
}

/// Starts the proxy `cmd` and waits until it accepts connections on `port`.
fn start_listening(cmd: &[String], port: u16) -> std::process::Child {
    let mut proxy = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(Instant::now() < end, "the proxy did not listen");
        assert!(proxy.try_wait().unwrap().is_none(), "the proxy exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy
}

/// Waits (up to 30 s) until the proxy ends (the client ended its session).
fn ended(proxy: &mut std::process::Child) -> std::process::ExitStatus {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = proxy.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < end,
            "the proxy did not end with the session"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_loopback_endpoint_fronts_a_remote_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::rugpull(dir.path());
    let pol = policy(dir.path(), &rugpull_tools(), &loopback(), &json!({}));
    let audit = dir.path().join("audit.jsonl");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let cmd = proxy_cmd(
        &pol,
        "remote",
        &audit,
        &["--listen", &addr, "--url", &server.url()],
    );
    let mut proxy = start_listening(&cmd, port);
    let out = drive(
        &json!({"url": format!("http://{addr}/mcp"), "mode": "legacy", "steps": [
            {"list": true},
            {"call": "translate", "args": {"text": "hi"}},
            {"list": true},
            {"call": "translate", "args": {"text": "hi"}},
        ]}),
    );
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
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut cmd = proxy_cmd(&pol, "remote", &audit, &["--listen", &addr, "--"]);
    cmd.extend(server.iter().cloned());
    let mut proxy = start_listening(&cmd, port);
    let url = format!("http://{addr}/mcp");
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
    // The client ended its session (DELETE): the proxy stops with it.
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = proxy.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < end,
            "the proxy did not end with the session"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    assert!(
        reasons(&audit).contains(&("deny".into(), "rug_pull".into())),
        "{:?}",
        reasons(&audit)
    );
    verify(&audit);
}
