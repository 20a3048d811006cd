//! Every message a server sends, decided or checked (docs/MCP.md, "What the proxy does"):
//! resources (`file://` as the agent's reads, other schemes by `resource_schemes`), prompts,
//! task results, elicitation, sampling, a first call without a listing, strict framing, and
//! the per-server limits of the policy. Each path is shown bare first (the real server
//! straight to the client: the unchecked thing happens), then through the proxy.
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    peer::{Peer, texts},
    support::*,
};

const FENCE: &str = "<untrusted-output";

pub(crate) fn everything() -> Vec<String> {
    vec![everything_server().display().to_string(), "stdio".into()]
}

fn probe(mode: &str) -> Vec<String> {
    vec![
        python().display().to_string(),
        fixture("probe_server.py").display().to_string(),
        mode.into(),
    ]
}

/// The tools a server lists (bare), as policy entries pinned to those definitions.
pub(crate) fn pinned(server: &[String]) -> Vec<Value> {
    let mut bare = Peer::start(server);
    let listed = bare.request("tools/list", json!({}));
    bare.kill();
    listed["result"]["tools"]
        .as_array()
        .expect("a listing")
        .iter()
        .map(|t| {
            json!({"name": t["name"], "description": t["description"],
                   "input_schema": t["inputSchema"], "labels": ["untrusted_output"]})
        })
        .collect()
}

/// A policy with `tools`, the agent's files under `dir` readable, egress to `ok.example`
/// only, and server `s` (no kernel profile: the gateway layer is the subject here).
fn policy(dir: &Path, tools: Vec<Value>, server: Value) -> PathBuf {
    let mut s = json!({"kernel": "off"});
    s.as_object_mut()
        .unwrap()
        .extend(server.as_object().unwrap().clone());
    let p = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"readable": [dir]},
        "network": {"egress": [{"host": "ok.example", "port": 443}]},
        "tools": tools, "mcp_servers": {"s": s}});
    let path = dir.join("policy.json");
    std::fs::write(&path, p.to_string()).unwrap();
    path
}

/// `gatewayd mcp` (with `extra` options) in front of `server` (server name `s`).
fn proxy_line(policy: &Path, audit: &Path, server: &[String], extra: &[&str]) -> Vec<String> {
    let mut cmd = proxy_cmd(policy, "s", audit, extra);
    cmd.push("--".into());
    cmd.extend(server.iter().cloned());
    cmd
}

fn proxied(policy: &Path, audit: &Path, server: &[String]) -> Peer {
    Peer::start(&proxy_line(policy, audit, server, &[]))
}

/// In `dir`: a policy pinning what `server` lists (with `extra` in its entry), the proxy
/// in front of it, its tools listed; the audit log's path and the client.
fn behind_proxy(dir: &Path, server: &[String], extra: Value) -> (PathBuf, Peer) {
    let audit = dir.join("audit.jsonl");
    let pol = policy(dir, pinned(server), extra);
    let mut p = proxied(&pol, &audit, server);
    let listed = p.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    (audit, p)
}

/// The record with `reason` whose detail has `key` = `value`.
fn record(audit: &Path, reason: &str, key: &str, value: &str) -> Value {
    records(audit)
        .into_iter()
        .find(|r| r["reason"] == reason && r["detail"][key] == value)
        .unwrap_or_else(|| {
            panic!(
                "no {reason} record with {key} = {value}: {:?}",
                reasons(audit)
            )
        })
}

fn refused(answer: &Value, reason: &str) {
    assert_eq!(answer["error"]["code"], -32053, "{answer}");
    let m = answer["error"]["message"].as_str().unwrap();
    assert!(
        m.contains(&format!("`{reason}`")) && m.contains("Next: "),
        "{m}"
    );
}

#[test]
fn file_resources_are_read_as_the_agent_reads_files() {
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    let mut bare = Peer::start(&probe("plain"));
    let r = bare.request("resources/read", json!({"uri": "file:///etc/hostname"}));
    assert_eq!(r["result"]["contents"][0]["text"], hostname.as_str(), "{r}");
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(dir.join("note.txt"), "hello note").unwrap();
    let pol = policy(&dir, Vec::new(), json!({}));
    let audit = dir.join("audit.jsonl");
    let mut p = proxied(&pol, &audit, &probe("plain"));
    let note = format!("file://{}/note.txt", dir.display());
    let r = p.request("resources/read", json!({"uri": note}));
    let text = texts(&r["result"]);
    assert!(text.contains("hello note") && text.contains(FENCE), "{r}");
    let r = p.request("resources/read", json!({"uri": "file:///etc/hostname"}));
    refused(&r, "sandbox");
    let r = p.request(
        "resources/subscribe",
        json!({"uri": "file:///etc/hostname"}),
    );
    refused(&r, "sandbox");
    p.close();
    let deny = record(&audit, "sandbox", "method", "resources/read");
    assert_eq!(deny["decision"], "deny");
    assert!(
        deny["detail"]["message"]
            .as_str()
            .unwrap()
            .contains("Next: ")
    );
    record(&audit, "sandbox", "method", "resources/subscribe");
    assert_eq!(record(&audit, "allowed", "uri", &note)["decision"], "allow");
    verify(&audit);
}

#[test]
fn other_schemes_need_the_policy_and_prompts_are_checked() {
    let uri = "demo://resource/dynamic/text/1";
    let prompt = json!({"name": "simple-prompt"});
    let mut bare = Peer::start(&everything());
    let r = bare.request("resources/read", json!({"uri": uri}));
    assert!(!texts(&r["result"]).is_empty(), "{r}");
    let r = bare.request("prompts/get", prompt.clone());
    let bare_prompt = texts(&r["result"]);
    assert!(
        !bare_prompt.is_empty() && !bare_prompt.contains(FENCE),
        "{r}"
    );
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(dir.path(), Vec::new(), json!({}));
    let mut p = proxied(&pol, &audit, &everything());
    refused(&p.request("resources/read", json!({"uri": uri})), "sandbox");
    let r = p.request("prompts/get", prompt.clone());
    assert!(texts(&r["result"]).contains(FENCE), "{r}");
    p.close();
    assert_eq!(record(&audit, "sandbox", "uri", uri)["decision"], "deny");

    let pol = policy(
        dir.path(),
        Vec::new(),
        json!({"resource_schemes": ["demo"]}),
    );
    let mut p = proxied(&pol, &audit, &everything());
    let r = p.request("resources/read", json!({"uri": uri}));
    assert!(texts(&r["result"]).contains(FENCE), "{r}");
    p.close();
    verify(&audit);
}

#[test]
fn with_a_daemon_the_texts_are_checked_by_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let pol = policy(
        dir.path(),
        Vec::new(),
        json!({"resource_schemes": ["demo"]}),
    );
    let socket = dir.path().join("d.sock");
    let daemon = start_daemon(&pol, &socket, &dir.path().join("daemon.jsonl"));
    let audit = dir.path().join("proxy.jsonl");
    let sock = socket.display().to_string();
    let extra = ["--socket", &sock, "--session", "d-1"];
    let mut p = Peer::start(&proxy_line(&pol, &audit, &everything(), &extra));
    let r = p.request("prompts/get", json!({"name": "simple-prompt"}));
    assert!(texts(&r["result"]).contains(FENCE), "{r}");
    let r = p.request(
        "resources/read",
        json!({"uri": "demo://resource/dynamic/text/1"}),
    );
    assert!(texts(&r["result"]).contains(FENCE), "{r}");
    refused(
        &p.request("resources/read", json!({"uri": "other://x"})),
        "sandbox",
    );
    p.close();
    drop(daemon);
    record(&audit, "sandbox", "uri", "other://x");
}

#[test]
fn elicitations_are_decided() {
    let url_call = |host: &str| {
        json!({"name": "trigger-url-elicitation",
               "arguments": {"url": format!("https://{host}/login"), "message": "Open it"}})
    };
    let mut bare = Peer::start(&everything());
    bare.request("tools/call", url_call("evil.example"));
    assert_eq!(
        bare.requests("elicitation/create")[0]["params"]["url"],
        "https://evil.example/login"
    );
    bare.kill();
    let mut bare = Peer::start(&probe("plain"));
    bare.request("tools/call", json!({"name": "login", "arguments": {}}));
    assert_eq!(bare.requests("elicitation/create").len(), 1);
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let (audit, mut p) = behind_proxy(dir.path(), &everything(), json!({}));
    p.request("tools/call", url_call("evil.example"));
    assert!(p.requests("elicitation/create").is_empty(), "{:?}", p.seen);
    p.request("tools/call", url_call("ok.example"));
    p.request(
        "tools/call",
        json!({"name": "trigger-elicitation-request", "arguments": {}}),
    );
    let asked: Vec<&Value> = p.requests("elicitation/create");
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0]["params"]["url"], "https://ok.example/login");
    p.close();
    let deny = record(&audit, "sandbox", "url", "https://evil.example/login");
    assert!(
        deny["detail"]["message"]
            .as_str()
            .unwrap()
            .contains("Next: ")
    );
    assert_eq!(
        record(&audit, "allowed", "url", "https://ok.example/login")["decision"],
        "allow"
    );

    let dir = tempfile::tempdir().unwrap();
    let (audit, mut p) = behind_proxy(dir.path(), &probe("plain"), json!({}));
    let r = p.request("tools/call", json!({"name": "login", "arguments": {}}));
    assert!(p.requests("elicitation/create").is_empty(), "{r}");
    p.close();
    let deny = record(&audit, "secret_egress", "method", "elicitation/create");
    assert!(
        deny["detail"]["message"]
            .as_str()
            .unwrap()
            .contains("`password`")
    );
    verify(&audit);
}

#[test]
fn requests_embedded_in_a_2026_result_are_decided() {
    let sign_in = json!({"name": "sign_in", "arguments": {}});
    let mut bare = Peer::spawn(&probe("plain"));
    let r = bare.request_modern("tools/call", sign_in.clone());
    let asked = &r["result"]["inputRequests"]["pw"];
    assert_eq!(asked["method"], "elicitation/create", "{r}");
    assert!(asked["params"]["requestedSchema"]["properties"]["password"].is_object());
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(dir.path(), pinned(&probe("plain")), json!({}));
    let mut p = Peer::spawn(&proxy_line(&pol, &audit, &probe("plain"), &[]));
    let r = p.request_modern("tools/call", sign_in);
    refused(&r, "secret_egress");
    p.close();
    record(&audit, "secret_egress", "method", "elicitation/create");
    verify(&audit);
}

#[test]
fn sampling_requests_are_untrusted_input() {
    let call = json!({"name": "trigger-sampling-request",
                      "arguments": {"prompt": "Say hello to the reader"}});
    let mut bare = Peer::start(&everything());
    bare.request("tools/call", call.clone());
    let asked = texts(&bare.requests("sampling/createMessage")[0]["params"]);
    assert!(
        asked.contains("Say hello") && !asked.contains(FENCE),
        "{asked}"
    );
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let (audit, mut p) = behind_proxy(dir.path(), &everything(), json!({}));
    p.request("tools/call", call);
    let asked = texts(&p.requests("sampling/createMessage")[0]["params"]);
    assert!(
        asked.contains("Say hello") && asked.contains(FENCE),
        "{asked}"
    );
    p.close();
    record(
        &audit,
        "sampling_untrusted",
        "method",
        "sampling/createMessage",
    );
    verify(&audit);
}

/// A task-augmented call to the reference server's task tool, polled to its end; the
/// status texts (of `tasks/get` and `notifications/tasks/status`) and the text of
/// `tasks/result`.
fn run_task(p: &mut Peer) -> (Vec<String>, String) {
    let r = p.request(
        "tools/call",
        json!({"name": "simulate-research-query", "task": {"ttl": 60000},
               "arguments": {"topic": "gateways", "ambiguous": false}}),
    );
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {r}"))
        .to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    let mut statuses = Vec::new();
    loop {
        let s = p.request("tasks/get", json!({"taskId": task}));
        statuses.extend(s["result"]["statusMessage"].as_str().map(str::to_owned));
        match s["result"]["status"].as_str() {
            Some("completed") => break,
            Some("working") => {}
            other => panic!("task status {other:?}: {s}"),
        }
        assert!(std::time::Instant::now() < deadline, "the task did not end");
        // The server's own poll interval, as a client waits between polls.
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let r = p.request("tasks/result", json!({"taskId": task}));
    let notified: Vec<String> = p
        .requests("notifications/tasks/status")
        .iter()
        .filter_map(|n| n["params"]["statusMessage"].as_str().map(str::to_owned))
        .collect();
    assert!(!notified.is_empty(), "status notifications: {:?}", p.seen);
    statuses.extend(notified);
    (statuses, texts(&r["result"]))
}

#[test]
fn task_results_are_checked_as_the_tools_results() {
    let mut bare = Peer::start(&everything());
    let (status, result) = run_task(&mut bare);
    assert!(!result.is_empty() && !result.contains(FENCE), "{result}");
    assert!(!status.iter().any(|t| t.contains(FENCE)), "{status:?}");
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let (audit, mut p) = behind_proxy(dir.path(), &everything(), json!({}));
    let (status, result) = run_task(&mut p);
    assert!(
        result.contains(r#"<untrusted-output tool="simulate-research-query""#),
        "{result}"
    );
    // Every status text (tasks/get and notifications/tasks/status) was fenced.
    assert!(status.iter().all(|t| t.contains(FENCE)), "{status:?}");
    p.close();
    verify(&audit);
}

#[test]
fn a_first_call_without_a_listing_is_decided_on_the_current_definition() {
    let call = json!({"name": "echo", "arguments": {"text": "hi"}});
    let mut bare = Peer::start(&probe("poisoned"));
    let r = bare.request("tools/call", call.clone());
    assert_eq!(
        texts(&r["result"]),
        "hi",
        "the poisoned tool runs bare: {r}"
    );
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(dir.path(), pinned(&probe("plain")), json!({}));
    let mut p = proxied(&pol, &audit, &probe("plain"));
    let r = p.request("tools/call", call.clone());
    assert!(
        texts(&r["result"]).contains("hi") && r["result"]["isError"] == false,
        "{r}"
    );
    p.close();
    let mut p = proxied(&pol, &audit, &probe("poisoned"));
    let r = p.request("tools/call", call);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(texts(&r["result"]).contains("rug_pull"), "{r}");
    p.close();
    assert!(reasons(&audit).contains(&("deny".into(), "rug_pull".into())));
    verify(&audit);
}

fn fake(mode: &str) -> Vec<String> {
    vec![
        "/usr/bin/python3".into(),
        fixture("fake_server.py").display().to_string(),
        mode.into(),
    ]
}

fn echo_tool() -> Vec<Value> {
    vec![json!({"name": "echo", "description": "Echo a text.",
                "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}})]
}

#[test]
fn framing_is_strict() {
    let call = json!({"name": "echo", "arguments": {"text": "x"}});
    let mut bare = Peer::start(&fake("stray"));
    bare.request("tools/call", call.clone());
    assert!(
        bare.seen.iter().any(|m| m["id"] == "stray-1"),
        "{:?}",
        bare.seen
    );
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(dir.path(), echo_tool(), json!({}));
    let mut p = proxied(&pol, &audit, &fake("stray"));
    let r = p.request("tools/call", call);
    assert!(texts(&r["result"]).contains('x'), "{r}");
    // Answered after the stray line: had it been forwarded, it would be seen by now.
    let r = p.request("ping", json!({}));
    assert!(r.get("error").is_some(), "{r}");
    assert!(p.seen.iter().all(|m| m["id"] != "stray-1"), "{:?}", p.seen);
    let first = p.request_id(&json!(5), "tools/list", json!({}));
    assert!(first.get("result").is_some(), "{first}");
    let again = p.request_id(&json!(5), "tools/list", json!({}));
    assert_eq!(again["error"]["code"], -32600, "{again}");
    p.close();
    assert_eq!(
        record(&audit, "mcp_unknown_response", "id", "stray-1")["decision"],
        "deny"
    );
    let dup = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "mcp_duplicate_id")
        .expect("mcp_duplicate_id record");
    assert_eq!(dup["detail"]["id"], 5);
    verify(&audit);
}

#[test]
fn the_policy_sets_a_servers_timeout_and_message_size() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(
        dir.path(),
        echo_tool(),
        json!({"timeout_s": 1, "max_message_bytes": 1024}),
    );
    let mut p = proxied(&pol, &audit, &fake("hang"));
    p.request("tools/list", json!({}));
    let start = std::time::Instant::now();
    let r = p.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(r["error"]["code"], -32051, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("within 1 s"),
        "{r}"
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
    p.send(&json!({"jsonrpc": "2.0", "id": "big", "method": "ping",
                   "params": {"pad": "x".repeat(2000)}}));
    let r = p.until_response(&Value::Null);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over 1024 bytes"),
        "{r}"
    );
    p.close();
}

/// `base64 -d` of `b64` (coreutils), as text.
fn decoded(b64: &str) -> String {
    use std::io::Write as _;
    let mut c = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b64.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "not base64: {b64}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn binary_contents_pass_the_checks_unchanged() {
    let image = |r: &Value| {
        r["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "image")
            .cloned()
    };
    let blob = "demo://resource/dynamic/blob/1";
    let mut bare = Peer::start(&everything());
    let call = json!({"name": "get-tiny-image", "arguments": {}});
    let r = bare.request("tools/call", call.clone());
    let bare_image = image(&r).unwrap_or_else(|| panic!("bare: an image: {r}"));
    let r = bare.request("resources/read", json!({"uri": blob}));
    let b = r["result"]["contents"][0]["blob"].as_str().unwrap();
    assert!(decoded(b).starts_with("Resource 1: This is a base64 blob"));
    bare.kill();

    // Every tool untrusted (fenced): the texts are checked, the image is kept as it came,
    // at its place.
    let dir = tempfile::tempdir().unwrap();
    let (audit, mut p) = behind_proxy(
        dir.path(),
        &everything(),
        json!({"resource_schemes": ["demo"]}),
    );
    let r = p.request("tools/call", call);
    assert_eq!(image(&r), Some(bare_image), "{r}");
    let content = r["result"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "{r}");
    assert!(texts(&r["result"]).contains(FENCE), "{r}");
    let r = p.request("resources/read", json!({"uri": blob}));
    let b = r["result"]["contents"][0]["blob"].as_str().unwrap();
    assert!(
        decoded(b).starts_with("Resource 1: This is a base64 blob"),
        "{r}"
    );
    p.close();
    verify(&audit);
}

/// A 2026-07-28 server's elicitation that belongs to no request of the client's (SEP-2260
/// forbids it; the SDK refuses to send it, so the probe server writes it itself): bare, the
/// client is asked; through the proxy, the client never sees it, and it is recorded.
#[test]
fn a_2026_server_request_outside_any_client_request_is_refused() {
    let nudge = json!({"name": "nudge", "arguments": {}});
    let mut bare = Peer::spawn(&probe("plain"));
    bare.request_modern("tools/call", nudge.clone());
    let asked = bare.next();
    assert_eq!(asked["method"], "elicitation/create", "bare: {asked}");
    bare.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}));
    assert_eq!(nudge_outcome(&mut bare), "sent");
    bare.kill();

    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let pol = policy(dir.path(), pinned(&probe("plain")), json!({}));
    let mut p = Peer::spawn(&proxy_line(&pol, &audit, &probe("plain"), &[]));
    p.request_modern("tools/call", nudge);
    // The refusal's record first: a poll in flight before it would make the server's
    // request one that belongs to a client request.
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while !records_written_whole(&audit).iter().any(|r| {
        r["reason"] == "mcp_unsolicited_request" && r["detail"]["method"] == "elicitation/create"
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            reasons(&audit)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Answers come in the order the server wrote them: by this one's, the elicitation
    // would have reached the client.
    assert!(nudge_outcome(&mut p).contains("sent"));
    assert!(p.requests("elicitation/create").is_empty(), "{:?}", p.seen);
    p.close();
    verify(&audit);
}

/// What came of the probe server's `nudge`, once it is no longer pending.
fn nudge_outcome(peer: &mut Peer) -> String {
    let outcome = json!({"name": "nudge_outcome", "arguments": {}});
    for _ in 0..600 {
        let r = peer.request_modern("tools/call", outcome.clone());
        let text = texts(&r["result"]);
        if !text.contains("pending") {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the nudge is still pending after 60 s");
}
