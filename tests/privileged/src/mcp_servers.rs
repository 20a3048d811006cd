//! The per-server kernel profile of `gatewayd mcp` (docs/MCP.md), on the host (tier 2:
//! cgroup egress programs + a Landlock allowlist) and in the QEMU guest (tier 1: BPF LSM
//! too). The server is `gw-testagent mcpserver`, a minimal MCP server that reads files and
//! sends over TCP when asked; the gateway allows every call, so what stops it is its
//! kernel profile alone.
use std::io::Write as _;

use serde_json::{Value, json};

use super::*;

/// Runs `gatewayd mcp` for `server` with these `tools/call`s; returns each call's result.
fn proxy_calls(policy: &Path, audit: &Path, server: &str, calls: &[Value]) -> Vec<Value> {
    proxy_calls_with(policy, audit, server, &[], calls)
}

/// [`proxy_calls`] with `extra` options of `gatewayd mcp`.
fn proxy_calls_with(
    policy: &Path,
    audit: &Path,
    server: &str,
    extra: &[&str],
    calls: &[Value],
) -> Vec<Value> {
    let (status, answers) = proxy_run(policy, audit, server, extra, calls);
    assert!(
        status.success(),
        "gatewayd mcp: {status}; its records: {:#?}",
        records(audit)
    );
    (0..calls.len())
        .map(|i| {
            answers
                .iter()
                .find(|a| a["id"] == json!(i))
                .unwrap_or_else(|| panic!("no answer to call {i}: {answers:?}"))["result"]
                .clone()
        })
        .collect()
}

/// Runs `gatewayd mcp` with these calls: its exit status and every answer it wrote.
fn proxy_run(
    policy: &Path,
    audit: &Path,
    server: &str,
    extra: &[&str],
    calls: &[Value],
) -> (std::process::ExitStatus, Vec<Value>) {
    let mut child = Command::new(gatewayd())
        .args(["mcp", "--policy"])
        .arg(policy)
        .args(["--server", server, "--audit"])
        .arg(audit)
        .args(extra)
        .arg("--")
        .arg(agent())
        .arg("mcpserver")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn gatewayd mcp");
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "privileged", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (i, c) in calls.iter().enumerate() {
        lines.push(json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": c}));
    }
    {
        let mut stdin = child.stdin.take().unwrap();
        for l in &lines {
            writeln!(stdin, "{l}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status, answers)
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or("")
}

/// The tools of `gw-testagent mcpserver`, for the policy's registry.
fn mcpserver_tools() -> Value {
    let object = |props: Value| json!({"type": "object", "properties": props});
    let string = json!({"type": "string"});
    json!([
        {"name": "read", "description": "Read a file.",
         "input_schema": object(json!({"path": string}))},
        {"name": "send", "description": "Send a text over TCP.",
         "input_schema": object(json!({"to": string, "text": string}))},
        {"name": "list", "description": "List a directory's names.",
         "input_schema": object(json!({"path": string}))},
    ])
}

/// A server profile that reads the system, the server's own binary (not its directory: in
/// the guest that is `/`) and `dir`, with `secret` protected.
fn mcpserver_sandbox(dir: &Scratch, secret: &Path) -> Value {
    json!({
        "readable": ["/usr", "/lib", "/lib64", "/etc", "/proc", "/dev", agent(), dir.0],
        "protected": [secret]})
}

#[test]
fn a_tool_server_runs_in_its_own_kernel_profile() {
    let dir = Scratch::new("mcp-profile");
    let (secret, _, _, _) = protected_fixture(&dir);
    let outside = Scratch::new("mcp-outside");
    std::fs::write(outside.path("other.txt"), "not for the server").unwrap();
    std::fs::write(dir.path("notes.txt"), "notes").unwrap();
    let (port, got) = listener("127.0.0.1:0");
    let to = format!("127.0.0.1:{port}");
    let sandbox = mcpserver_sandbox(&dir, &secret);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
            "tools": mcpserver_tools(),
            "mcp_servers": {
                "net": {"sandbox": sandbox, "network": {"egress": [{"cidr": "127.0.0.1/32", "port": port}]}},
                "nonet": {"sandbox": sandbox}}}),
    );
    let audit = dir.path("mcp.jsonl");
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let r = proxy_calls(
        &policy,
        &audit,
        "net",
        &[
            call("read", json!({"path": dir.path("notes.txt")})),
            call("read", json!({"path": secret})),
            call("read", json!({"path": outside.path("other.txt")})),
            call(
                "send",
                json!({"to": to, "text": "from the fetching server"}),
            ),
            call("list", json!({"path": dir.0})),
            call("list", json!({"path": outside.0})),
        ],
    );
    // The directory that holds the protected file stays listable (names, not contents); a
    // directory outside the server's trees does not.
    assert_eq!(r[4]["isError"], false, "{r:?}");
    assert!(
        text(&r[4]).contains("notes.txt") && text(&r[4]).contains("secret.txt"),
        "{r:?}"
    );
    assert_eq!(r[5]["isError"], true, "outside its trees: {r:?}");
    assert_eq!(text(&r[0]), "notes", "{r:?}");
    // Both tiers: the Landlock allowlist refuses a file outside the server's trees (its
    // readable roots), and the protected file inside them (BPF LSM at tier 1 as well).
    let refused: &[(usize, &str)] = &[(1, "the protected file"), (2, "a file outside its trees")];
    for &(i, what) in refused {
        assert_eq!(r[i]["isError"], true, "{what}: {r:?}");
        assert!(
            text(&r[i]).contains("ermission denied"),
            "{what}: {}",
            text(&r[i])
        );
    }
    assert_eq!(r[3]["isError"], false, "its own egress allowlist: {r:?}");
    let received = got.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(received, b"from the fetching server");

    // The same server without egress in its profile, and the agent under `gatewayd run`
    // without egress: both refused by the cgroup programs.
    let r = proxy_calls(
        &policy,
        &audit,
        "nonet",
        &[call("send", json!({"to": to, "text": "should not arrive"}))],
    );
    assert_eq!(r[0]["isError"], true, "{r:?}");
    let agent_policy = write_policy(&dir, best_effort(json!([])));
    let out = run_agent(
        &agent_policy,
        &dir.path("agent.jsonl"),
        &["send", &to, "agent"],
    );
    assert!(
        !out.status.success(),
        "the agent may not reach what the server may"
    );
    assert!(got.recv_timeout(Duration::from_millis(500)).is_err());

    let recs = records(&audit);
    let start = recs
        .iter()
        .find(|r| r["reason"] == "mcp_server_start" && r["detail"]["server"] == "net")
        .expect("start record");
    let profile = &start["detail"]["profile"];
    assert_eq!(profile["cgroup/connect4"], "attached", "{profile}");
    assert!(
        profile["landlock"]
            .as_str()
            .unwrap()
            .starts_with("allowlist applied"),
        "{profile}"
    );
    let kernel: Vec<&Value> = recs.iter().filter(|r| r["source"] == "kernel").collect();
    assert!(
        kernel
            .iter()
            .any(|r| r["session"] == "mcp:nonet" && r["hook"] == "cgroup/connect4"),
        "the refused connect is recorded: {kernel:?}"
    );
    if tier() == Tier::BpfLsm {
        assert_eq!(profile["lsm/file_open"], "attached", "{profile}");
        // No `lsm/file_open` record is asserted for the protected read: Landlock's allowlist
        // leaves protected paths out, and the kernel calls Landlock's file_open hook before
        // the BPF LSM's (the `lsm=` order), so Landlock refuses first and unaudited
        // (docs/MCP.md).
    }
    assert!(verify(&audit).status.success());
}

/// `gatewayd mcp --learn` learns a server's profile (docs/MCP.md, "Learning a server's
/// profile"; both tiers): from a profile of its directory alone, which cannot even start the
/// server (its libraries are outside), the learning run works with the protected file still
/// refused; the suggested profile then runs the same calls with no kernel refusal.
#[test]
fn a_tool_servers_profile_is_learned_then_enforced() {
    let dir = Scratch::new("mcp-learn");
    let (secret, _, _, _) = protected_fixture(&dir);
    std::fs::write(dir.path("notes.txt"), "notes").unwrap();
    let tool = |name: &str, desc: &str| {
        json!({"name": name, "description": desc, "input_schema":
            {"type": "object", "properties": {"path": {"type": "string"}}}})
    };
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
            "tools": [tool("read", "Read a file."), tool("list", "List a directory's names.")],
            "mcp_servers": {"fs": {"sandbox": {"readable": [dir.0], "protected": [secret]}}}}),
    );
    let call = |name: &str, path: &Path| json!({"name": name, "arguments": {"path": path}});
    let calls = [
        call("read", &dir.path("notes.txt")),
        call("list", &dir.0),
        call("read", &secret),
    ];
    let learned = dir.path("learn.jsonl");
    let r = proxy_calls_with(&policy, &learned, "fs", &["--learn"], &calls);
    assert_eq!(text(&r[0]), "notes", "{r:?}");
    assert_eq!(r[1]["isError"], false, "{r:?}");
    // Hidden by a mount at tier 2 (it reads as empty), refused by BPF LSM at tier 1.
    assert!(!text(&r[2]).contains("top secret"), "{r:?}");
    let recs = records(&learned);
    let start = recs
        .iter()
        .find(|x| x["reason"] == "mcp_server_start")
        .expect("start record");
    assert_eq!(start["detail"]["learn"]["kernel"], true, "{start}");
    let would = |recs: &[Value]| {
        recs.iter()
            .filter(|x| x["session"] == "mcp:fs" && x["decision"] == "would_deny")
            .count()
    };
    assert!(would(&recs) > 0, "nothing learned: {recs:#?}");

    let next = dir.path("next.json");
    let out = suggest(&learned, &policy, &next);
    assert!(out.status.success(), "{}", stdout(&out));
    let again = dir.path("again.jsonl");
    let r = proxy_calls(&next, &again, "fs", &calls);
    assert_eq!(text(&r[0]), "notes", "{r:?}");
    assert_eq!(r[1]["isError"], false, "{r:?}");
    assert_eq!(r[2]["isError"], true, "{r:?}");
    assert!(!text(&r[2]).contains("top secret"), "{r:?}");
    let recs = records(&again);
    let refused: Vec<&Value> = recs
        .iter()
        .filter(|x| x["session"] == "mcp:fs" && x["decision"] == "deny")
        .filter(|x| x["detail"]["path"] != json!(secret))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    assert_eq!(would(&recs), 0);
}

/// `gatewayd policy init` writes a policy that validates and runs the demo agent: the
/// workspace is readable, the home's key is not.
#[test]
fn the_starter_policy_runs_the_demo_agent() {
    let dir = Scratch::new("starter");
    let ws = dir.path("ws");
    let home = dir.path("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
    std::fs::write(ws.join("notes.txt"), "notes").unwrap();
    let policy = dir.path("starter.json");
    let out = gatewayd_testkit::starter::policy_init(&gatewayd(), &policy, &ws, &home).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let valid = Command::new(gatewayd())
        .args(["policy", "validate"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(valid.status.success(), "{}", stdout(&valid));
    let audit = dir.path("audit.jsonl");
    let notes = ws.join("notes.txt").display().to_string();
    let key = home.join(".ssh/id_rsa").display().to_string();
    let out = run_agent(&policy, &audit, &["read", &notes]);
    assert!(
        out.status.success(),
        "the agent runs under the starter policy"
    );
    let out = run_agent(&policy, &audit, &["read", &key]);
    assert!(!out.status.success(), "the home's key is protected");
    assert!(stdout(&out).contains("FAIL"), "{}", stdout(&out));
}

/// `curl` POSTs one JSON-RPC message to the `--listen` endpoint `url` in `session` (none for
/// `initialize`); the answer's headers (lower case) and its JSON-RPC message, from a JSON
/// body or the SSE event that carries it (none for a notification).
fn post(url: &str, session: Option<&str>, msg: &Value) -> (String, Option<Value>) {
    let mut c = Command::new("curl");
    c.args(["-s", "-D", "-", "-X", "POST", url])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-H", "mcp-protocol-version: 2025-11-25"])
        .args(["-d", &msg.to_string()]);
    if let Some(s) = session {
        c.args(["-H", &format!("mcp-session-id: {s}")]);
    }
    let out = String::from_utf8_lossy(&c.output().expect("curl").stdout).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let answer = body
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .find_map(|l| serde_json::from_str::<Value>(l).ok());
    (head.to_lowercase(), answer)
}

/// `gatewayd mcp --listen` starts one server per client session, each in a kernel profile
/// and a cgroup of its own: two sessions open at once, and in each the protected file and
/// the egress the profile lacks are refused by the kernel, each record naming the client's
/// session.
#[test]
fn each_listen_session_has_its_own_confined_server() {
    let dir = Scratch::new("mcp-listen");
    let (secret, _, _, _) = protected_fixture(&dir);
    std::fs::write(dir.path("notes.txt"), "notes").unwrap();
    let (port, got) = listener("127.0.0.1:0");
    let to = format!("127.0.0.1:{port}");
    let sandbox = mcpserver_sandbox(&dir, &secret);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
            "tools": mcpserver_tools(),
            "mcp_servers": {"nonet": {"sandbox": sandbox}}}),
    );
    // Bare, the server reads the protected file and reaches the listener.
    let bare = Command::new(agent())
        .args(["read", &secret.display().to_string()])
        .output()
        .unwrap();
    assert!(bare.status.success(), "bare read: {bare:?}");
    let bare = Command::new(agent())
        .args(["send", &to, "bare"])
        .output()
        .unwrap();
    assert!(bare.status.success(), "bare send: {bare:?}");
    assert_eq!(got.recv_timeout(Duration::from_secs(10)).unwrap(), b"bare");
    let audit = dir.path("mcp.jsonl");
    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listen.local_addr().unwrap();
    drop(listen);
    let mut proxy = Command::new(gatewayd())
        .args(["mcp", "--policy"])
        .arg(&policy)
        .args(["--server", "nonet", "--audit"])
        .arg(&audit)
        .args(["--listen", &addr.to_string(), "--"])
        .arg(agent())
        .arg("mcpserver")
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("spawn gatewayd mcp --listen");
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the proxy did not listen"
        );
        assert!(proxy.try_wait().unwrap().is_none(), "the proxy exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{addr}/mcp");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "privileged", "version": "1"}}});
    // Both sessions are open before either calls: two servers alive at once.
    let sessions: Vec<String> = (0..2)
        .map(|_| {
            let (head, answer) = post(&url, None, &init);
            assert!(answer.is_some_and(|a| a["result"].is_object()), "{head}");
            let id = head
                .lines()
                .find_map(|l| l.strip_prefix("mcp-session-id:"))
                .expect("a session id")
                .trim()
                .to_owned();
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            post(&url, Some(&id), &note);
            id
        })
        .collect();
    assert_ne!(sessions[0], sessions[1]);
    for s in &sessions {
        let call = |id: u64, name: &str, args: Value| {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": name, "arguments": args}});
            post(&url, Some(s), &msg).1.expect("an answer")["result"].clone()
        };
        let notes = call(1, "read", json!({"path": dir.path("notes.txt")}));
        assert_eq!(text(&notes), "notes", "{notes}");
        let protected = call(2, "read", json!({"path": secret}));
        assert_eq!(protected["isError"], true, "{protected}");
        assert!(text(&protected).contains("ermission denied"), "{protected}");
        let sent = call(3, "send", json!({"to": to, "text": "should not arrive"}));
        assert_eq!(sent["isError"], true, "{sent}");
    }
    assert!(got.recv_timeout(Duration::from_millis(500)).is_err());
    let kill = Command::new("kill")
        .args(["-TERM", &proxy.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(proxy.wait().unwrap().success());
    let recs = records(&audit);
    let starts: Vec<&Value> = recs
        .iter()
        .filter(|r| r["reason"] == "mcp_server_start")
        .collect();
    assert_eq!(starts.len(), 2, "a server a session: {recs:#?}");
    let profile = |i: usize| &starts[i]["detail"]["profile"];
    assert_ne!(profile(0)["cgroup"], profile(1)["cgroup"], "a cgroup each");
    assert_ne!(starts[0]["session"], starts[1]["session"]);
    for start in &starts {
        let profile = &start["detail"]["profile"];
        assert_eq!(profile["cgroup/connect4"], "attached", "{profile}");
        let connects = recs.iter().filter(|r| {
            r["source"] == "kernel"
                && r["hook"] == "cgroup/connect4"
                && r["session"] == "mcp:nonet"
                && r["detail"]["client_session"] == start["session"]
        });
        assert_eq!(
            connects.count(),
            1,
            "each session's refused connect: {recs:#?}"
        );
    }
    assert!(verify(&audit).status.success());
}
