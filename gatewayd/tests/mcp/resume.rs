//! Streams of `gatewayd mcp --listen` (docs/MCP.md, "A local HTTP endpoint"), in raw HTTP
//! over TCP so that the test sees which stream carries what and cuts one where it wants.
//! Resumption: a request's SSE answer cut after its first event is taken up again with a
//! `GET` and `Last-Event-ID`, which gives the rest of that stream, its answer among it, and
//! nothing of another stream (the Python SDK's `rugpull_server.py`, stdio, whose `translate`
//! sends a notification before its answer), by hand and by the Python SDK's client, which
//! resumes by itself when a relay cuts the answer. A stdio server's elicitation goes on the answer
//! of the call it serves, not on the GET stream (the reference server's
//! `trigger-elicitation-request`).
use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    time::Duration,
};

use serde_json::json;

use crate::{
    listen::{ended, in_front_of_stdio},
    messages::{everything, pinned},
    remote::{loopback, policy, rugpull_tools},
    support::*,
};

/// Sends `method /mcp` with `body` and `headers` (the session's id among them once there
/// is one); the connection, to read the answer from.
fn send(port: u16, method: &str, headers: &[String], body: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_mins(1))).unwrap();
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.push_str(body);
    s.write_all(head.as_bytes()).unwrap();
    s
}

/// What `s` brings until `done` holds of it, or it ends.
fn read_until(s: &mut TcpStream, done: impl Fn(&str) -> bool) -> String {
    let (mut text, mut buf) = (String::new(), [0u8; 4096]);
    while !done(&text) {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    text
}

/// The whole answer to one exchange.
fn exchange(port: u16, method: &str, headers: &[String], body: &str) -> String {
    read_until(&mut send(port, method, headers, body), |_| false)
}

/// The ids of the SSE events in `text`, in order.
fn event_ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(str::to_owned)
        .collect()
}

/// A session initialized at `version` with `capabilities`: its `Mcp-Session-Id` header.
fn initialized(port: u16, version: &str, capabilities: serde_json::Value) -> Vec<String> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities,
        "clientInfo": {"name": "raw", "version": "1"}}});
    let answer = exchange(port, "POST", &[], &init.to_string());
    let session = answer
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {answer}"));
    let with_session = vec![format!("Mcp-Session-Id: {session}")];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    exchange(port, "POST", &with_session, &initialized.to_string());
    with_session
}

#[test]
fn an_elicitation_goes_on_the_answer_of_the_call_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let server = everything();
    let pol = policy(
        dir.path(),
        &json!(pinned(&server)),
        &loopback(),
        &json!({"kernel": "off"}),
    );
    let audit = dir.path().join("audit.jsonl");
    let (mut proxy, port) = in_front_of_stdio(&pol, &audit, &server);
    let with_session = initialized(port, "2025-11-25", json!({"elicitation": {"form": {}}}));
    // The GET stream is open: before, the server's requests all went there.
    let mut get = send(port, "GET", &with_session, "");
    let opened = read_until(&mut get, |t| t.contains("\r\n\r\n"));
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "trigger-elicitation-request", "arguments": {}}});
    let mut answer = send(port, "POST", &with_session, &call.to_string());
    let asked = read_until(&mut answer, |t| t.contains("elicitation/create"));
    let request: serde_json::Value = asked
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find_map(|d| serde_json::from_str(d).ok())
        .unwrap_or_else(|| panic!("the elicitation on the call's stream: {asked}"));
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    let decline = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}});
    let accepted = exchange(port, "POST", &with_session, &decline.to_string());
    assert!(accepted.starts_with("HTTP/1.1 202"), "{accepted}");
    let rest = read_until(&mut answer, |t| t.contains("\"id\":2"));
    assert!(
        rest.contains("\"result\""),
        "the call's answer after it: {rest}"
    );

    // Nothing of it went to the GET stream (given a short while: what must not happen).
    get.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut more = [0u8; 4096];
    let n = get.read(&mut more).unwrap_or(0);
    let on_get = String::from_utf8_lossy(&more[..n]);
    assert!(!on_get.contains("elicitation"), "{on_get}");
    assert!(ended(&mut proxy).success());
    verify(&audit);
}

/// The Python SDK's `rugpull_server.py` (stdio) behind `--listen`, its policy and log in
/// `dir`: the proxy, its port, the log.
fn rugpull_behind_listen(dir: &std::path::Path) -> (std::process::Child, u16, std::path::PathBuf) {
    let server = vec![
        python().display().to_string(),
        fixture("rugpull_server.py").display().to_string(),
    ];
    let pol = policy(
        dir,
        &rugpull_tools(),
        &loopback(),
        &json!({"kernel": "off"}),
    );
    let audit = dir.join("audit.jsonl");
    let (proxy, port) = in_front_of_stdio(&pol, &audit, &server);
    (proxy, port, audit)
}

#[test]
fn a_cut_sse_answer_is_resumed_from_its_last_event() {
    let dir = tempfile::tempdir().unwrap();
    let (mut proxy, port, audit) = rugpull_behind_listen(dir.path());

    let with_session = initialized(port, "2025-06-18", json!({}));
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert!(exchange(port, "POST", &with_session, &list.to_string()).contains("translate"));

    // The call's stream, cut once its first event (the server's notification) is read. The
    // same read may bring the answer too (the server sends both at once): the client takes
    // the first event as the last it handled, as if the cut came right after it.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "translate", "arguments": {"text": "hi"}}});
    let mut cut = send(port, "POST", &with_session, &call.to_string());
    let first = read_until(&mut cut, |t| {
        t.contains("list_changed") && t.contains("\n\n")
    });
    drop(cut);
    let ids = event_ids(&first);
    assert!(
        first.contains("text/event-stream") && !ids.is_empty(),
        "an event read: {first}"
    );
    assert!(
        first
            .find("hallo")
            .is_none_or(|answer| first.find("list_changed").is_some_and(|n| n < answer)),
        "the notification first: {first}"
    );

    // Taken up again from that event: the rest of the stream, the answer last.
    let mut headers = with_session.clone();
    headers.push(format!("Last-Event-ID: {}", ids[0]));
    let rest = exchange(port, "GET", &headers, "");
    assert!(rest.contains("hallo: hi"), "the answer: {rest}");
    assert!(
        !rest.contains("list_changed"),
        "not the event already read: {rest}"
    );
    let (stream, seq) = ids[0].split_once('-').unwrap();
    let next = format!("{stream}-{}", seq.parse::<u64>().unwrap() + 1);
    assert_eq!(event_ids(&rest), [next], "{rest}");

    // An id no stream of the session had, and one of another shape, are refused.
    for (id, status) in [("999-1", "404"), ("abc", "400")] {
        let mut h = with_session.clone();
        h.push(format!("Last-Event-ID: {id}"));
        let a = exchange(port, "GET", &h, "");
        assert!(a.starts_with(&format!("HTTP/1.1 {status}")), "{id}: {a}");
    }
    assert!(ended(&mut proxy).success());
    verify(&audit);
}

/// The Python SDK's client (`client.py`, Streamable HTTP at 2025-11-25: at 2026-07-28 a
/// dropped answer stream cancels its request) through a relay that cuts the call's SSE
/// answer after its first event (the priming one: an id, no data): the SDK resumes with
/// `GET` and `Last-Event-ID` by itself, and the call's answer reaches it.
#[test]
fn the_python_sdk_resumes_a_cut_answer_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (mut proxy, port, audit) = rugpull_behind_listen(dir.path());
    let log = dir.path().join("relay.jsonl");
    let mut relay = std::process::Command::new(python())
        .arg(fixture("cutting_relay.py"))
        .args([&port.to_string(), "translate"])
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let relay_port = gatewayd_testkit::net::announced_port(&mut relay, "listening ");
    let out = drive(&json!({
        "url": format!("http://127.0.0.1:{relay_port}/mcp"), "mode": "legacy",
        "steps": [{"list": true}, {"call": "translate", "args": {"text": "hi"}}]}));
    let _ = relay.kill();
    let _ = relay.wait();
    assert_eq!(out[1]["text"], "hallo: hi", "{out:?}");
    let seen: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        seen.iter()
            .any(|r| r["method"] == "POST" && r["cut"] == true),
        "the call's answer was cut: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|r| r["method"] == "GET" && r["last_event_id"].is_string()),
        "the SDK resumed: {seen:?}"
    );
    assert!(ended(&mut proxy).success());
    verify(&audit);
}
