//! Resumption on `gatewayd mcp --listen` (docs/MCP.md, "A local HTTP endpoint"): a request's
//! SSE answer cut after its first event is taken up again with a `GET` and `Last-Event-ID`,
//! which gives the rest of that stream, its answer among it, and nothing of another stream.
//! Raw HTTP over TCP, so that the test cuts the stream where it wants; the server is the
//! Python SDK's (`rugpull_server.py`, stdio), whose `translate` sends a notification before
//! its answer.
use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    time::Duration,
};

use serde_json::json;

use crate::{
    listen::{ended, in_front_of_stdio},
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

#[test]
fn a_cut_sse_answer_is_resumed_from_its_last_event() {
    let dir = tempfile::tempdir().unwrap();
    let server = vec![
        python().display().to_string(),
        fixture("rugpull_server.py").display().to_string(),
    ];
    let pol = policy(
        dir.path(),
        &rugpull_tools(),
        &loopback(),
        &json!({"kernel": "off"}),
    );
    let audit = dir.path().join("audit.jsonl");
    let (mut proxy, port) = in_front_of_stdio(&pol, &audit, &server);

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
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
