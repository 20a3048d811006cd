//! The session's own servers on loopback. A test suite that starts a server on
//! `127.0.0.1:0` and connects to it, or an agent that starts a development server and
//! `curl`s it, connects to a loopback address no egress rule lists: the connect programs let
//! such a connection through when the listener was bound by the same session
//! (`cgroup/bind4`/`bind6` mark it), at both tiers. A server of the host on loopback stays
//! refused, and so does a listener of the session's bound with `SO_REUSEPORT` (it could share
//! its port with another process's).
use std::net::TcpListener;

use super::*;

#[test]
fn the_session_reaches_its_own_listeners_on_loopback_and_not_the_hosts() {
    let dir = Scratch::new("own-listeners");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    );
    // A server of the host's on loopback, which the agent must not reach.
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in host.incoming() {});
    let host_connect = format!("tcp_connect=127.0.0.1:{host_port}");
    let args = [
        "own_listener=127.0.0.1",
        "own_listener=::1",
        // A dual-stack socket on every address, reached at 127.0.0.1 (Node's default).
        "own_listener=::",
        "own_listener=0.0.0.0",
        "own_listener_reuseport=127.0.0.1",
        &host_connect,
    ];

    let bare = std::process::Command::new(escape::escape_bin())
        .args(args)
        .output()
        .unwrap();
    let bare = stdout(&bare);
    assert_eq!(
        bare.lines().filter(|l| l.ends_with(" ok")).count(),
        args.len(),
        "bare, every connection is accepted:\n{bare}"
    );

    let audit = dir.path("audit.jsonl");
    let out = escape_under(&policy, &audit, &args);
    let text = stdout(&out);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("gatewayd"))
        .collect();
    assert_eq!(
        lines,
        [
            "own_listener ok",
            "own_listener ok",
            "own_listener ok",
            "own_listener ok",
            "own_listener_reuseport errno 1",
            "tcp_connect errno 1",
        ],
        "under gatewayd:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The two refusals are kernel records, naming the destinations.
    let denied: Vec<(String, u64)> = records(&audit)
        .iter()
        .filter(|r| r["source"] == "kernel" && r["reason"] == "egress_not_allowed")
        .map(|r| {
            assert_eq!(r["hook"], "cgroup/connect4", "{r}");
            (
                r["detail"]["addr"].as_str().unwrap_or("").to_owned(),
                r["detail"]["port"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert!(
        denied.contains(&("127.0.0.1".to_owned(), u64::from(host_port))),
        "{denied:?}"
    );
}

/// The session's gateway leaves loopback destinations to the kernel under `gatewayd run`:
/// `curl` to a loopback port is allowed there (the kernel then lets it reach only the
/// session's own listener), while the same policy's gateway without a kernel layer (`gatewayd
/// check`) refuses it, and an address elsewhere stays refused in both.
#[test]
fn under_run_the_gateway_leaves_loopback_to_the_kernel() {
    let dir = Scratch::new("own-listeners-gateway");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "tools": [{"name": "shell", "args": {"command": {"shell": {"exec": ["curl"]}}}}]}),
    );
    let call = |url: &str| serde_json::json!({"tool": "shell", "arguments": {"command": format!("curl -s {url}")}});
    let (own, elsewhere) = ("http://127.0.0.1:3000/health", "http://203.0.113.9/");
    let rpc = |url: &str| serde_json::json!({"session": "$SESSION", "call": call(url)}).to_string();
    let out = run_agent(
        &policy,
        &dir.path("audit.jsonl"),
        &[
            "rpc",
            "call/decide",
            &rpc(own),
            "+",
            "rpc",
            "call/decide",
            &rpc(elsewhere),
        ],
    );
    let text = stdout(&out);
    let decisions: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("OK rpc: "))
        .map(|a| {
            let v: serde_json::Value = serde_json::from_str(a).unwrap();
            v["result"]["decision"].as_str().unwrap_or("").to_owned()
        })
        .collect();
    assert_eq!(decisions, ["allow", "deny"], "under gatewayd run:\n{text}");

    for url in [own, elsewhere] {
        let out = std::process::Command::new(gatewayd())
            .args(["check", "--policy"])
            .arg(&policy)
            .arg("--call")
            .arg(call(url).to_string())
            .output()
            .unwrap();
        let text = stdout(&out);
        assert!(
            text.contains("decision: deny"),
            "gatewayd check, {url}:\n{text}"
        );
    }
}
