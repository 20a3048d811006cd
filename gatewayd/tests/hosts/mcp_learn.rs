//! Learn mode's round trip for a tool server's kernel profile (docs/MCP.md, "Learning a
//! server's profile"), with the real Node filesystem server from npm: bare, the server reads
//! the workspace and its `.env`; under a profile of the workspace alone it cannot even start
//! (Node's own files are outside it); under `gatewayd mcp --learn` it works, what the profile
//! would refuse recorded `would_deny` (session `mcp:fs`) while `.env` stays refused;
//! `gatewayd policy suggest` proposes the entries into `mcp_servers.fs`; under that policy the
//! same session works with no `would_deny` and no kernel refusal, and `suggest` has nothing
//! more to propose. (Node's event loop opens `/dev/null` to keep a descriptor in reserve and
//! tries `/` when it cannot: a profile grants the standard device files, so neither is
//! refused.)
use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde_json::{Value, json};

use crate::harness::report;

fn fs_server() -> PathBuf {
    let var = "GATEWAYD_MCP_FS_SERVER";
    PathBuf::from(
        std::env::var_os(var).unwrap_or_else(|| panic!("{var}: run through cargo xtask test")),
    )
}

fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The client's session, as JSON-RPC lines on the command's stdin: initialize, list, read
/// the workspace's file, list the workspace, read `.env`. The answers by id (`None` when the
/// command answered nothing to it).
fn session(cmd: &[String], ws: &Path) -> Vec<Option<Value>> {
    let file = |name: &str| ws.join(name).display().to_string();
    let call = |id: u32, tool: &str, path: String| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": {"path": path}}})
    };
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hosts", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        call(2, "read_text_file", file("a.txt")),
        call(3, "list_directory", ws.display().to_string()),
        call(4, "read_text_file", file(".env")),
    ];
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    {
        let mut stdin = child.stdin.take().unwrap();
        for l in &lines {
            // A server that died at start closes its input: what it answered is checked.
            if writeln!(stdin, "{l}").is_err() {
                break;
            }
        }
    }
    let out = child.wait_with_output().unwrap();
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (0..5)
        .map(|id| answers.iter().find(|a| a["id"] == json!(id)).cloned())
        .collect()
}

/// The text of a `tools/call` answer, and whether it is a success.
fn result(answer: Option<&Value>) -> (bool, String) {
    let Some(a) = answer else {
        return (false, "no answer".into());
    };
    let r = &a["result"];
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (
        r.is_object() && r["isError"] != true,
        format!("{text} {}", a["error"]),
    )
}

fn gatewayd(args: &[&str]) -> String {
    let out = Command::new(crate::gatewayd()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "gatewayd {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn proxy(policy: &Path, audit: &Path, extra: &[&str], ws: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![crate::gatewayd().display().to_string(), "mcp".into()];
    v.extend(["--policy".into(), policy.display().to_string()]);
    v.extend(["--server".into(), "fs".into()]);
    v.extend(["--audit".into(), audit.display().to_string()]);
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v.extend(["--".into(), fs_server().display().to_string()]);
    v.push(ws.display().to_string());
    v
}

/// A world under `/var/tmp`, removed on drop.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_node_servers_profile_is_learned_then_enforced() {
    let dir = Dir(PathBuf::from(format!(
        "/var/tmp/gw-mcp-learn-{}",
        std::process::id()
    )));
    let ws = dir.0.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello from the workspace\n").unwrap();
    std::fs::write(ws.join(".env"), "API_KEY=TOPSECRET\n").unwrap();
    let w = ws.display().to_string();
    let env = ws.join(".env").display().to_string();
    let profile = json!({"readable": [w], "writable": [w], "protected": [env]});
    let narrow = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": w, "readable": [w], "writable": [w], "protected": [env]},
        "tools": [], "mcp_servers": {"fs": {"kernel": "best_effort", "sandbox": profile}}});
    let policy = dir.0.join("policy.json");
    std::fs::write(&policy, serde_json::to_string_pretty(&narrow).unwrap()).unwrap();

    // Bare: the server reads the workspace and its `.env`.
    let bare = session(&[fs_server().display().to_string(), w.clone()], &ws);
    assert!(result(bare[2].as_ref()).0, "bare: {bare:?}");
    let (read, env_text) = result(bare[4].as_ref());
    assert!(
        read && env_text.contains("TOPSECRET"),
        "bare .env: {env_text}"
    );

    // The workspace alone: Node's own files are outside the profile.
    let enforced = dir.0.join("enforced.jsonl");
    let out = session(&proxy(&policy, &enforced, &[], &ws), &ws);
    let (ok, text) = result(out[2].as_ref());
    assert!(!ok, "the narrow profile lets the server read: {text}");

    // Learn: the session works; what the profile would refuse is recorded.
    let (learned, listing) = (dir.0.join("learn.jsonl"), dir.0.join("listing.json"));
    let list = listing.display().to_string();
    let out = session(
        &proxy(&policy, &learned, &["--learn", "--listing", &list], &ws),
        &ws,
    );
    let log = records(&learned);
    let start = log.iter().find(|r| r["reason"] == "mcp_server_start");
    let kernel_learns = start.is_some_and(|s| s["detail"]["learn"]["kernel"] == true);
    let would = |log: &[Value]| {
        log.iter()
            .filter(|r| r["session"] == "mcp:fs" && r["decision"] == "would_deny")
            .count()
    };
    report(&format!(
        "mcp learn: node filesystem server, kernel learns {kernel_learns}, would_deny {}",
        would(&log)
    ));
    assert!(
        kernel_learns,
        "the kernel learns the server's files: {start:?}"
    );
    let (ok, text) = result(out[2].as_ref());
    assert!(ok && text.contains("hello from the workspace"), "{out:?}");
    assert!(result(out[3].as_ref()).0, "{out:?}");
    let (_, env_text) = result(out[4].as_ref());
    assert!(
        !env_text.contains("TOPSECRET"),
        "learn keeps .env refused: {env_text}"
    );
    assert!(would(&log) > 0, "nothing learned of the server");

    // Suggest into the server's profile; pin the listing; the reviewed tools run.
    let next = dir.0.join("next.json");
    let shown = gatewayd(&[
        "policy",
        "suggest",
        &learned.display().to_string(),
        "--policy",
        &policy.display().to_string(),
        "--out",
        &next.display().to_string(),
    ]);
    eprintln!("{shown}");
    assert!(shown.contains("(tool server `fs`)"), "{shown}");
    gatewayd(&[
        "policy",
        "pin",
        &next.display().to_string(),
        "--from",
        &list,
    ]);
    let mut reviewed: Value =
        serde_json::from_str(&std::fs::read_to_string(&next).unwrap()).unwrap();
    for t in reviewed["tools"].as_array_mut().unwrap() {
        t["default"] = json!("allow");
    }
    let readable = &reviewed["mcp_servers"]["fs"]["sandbox"]["readable"];
    assert!(
        !readable.to_string().contains(".env"),
        "never the protected file: {readable}"
    );
    std::fs::write(&next, serde_json::to_string_pretty(&reviewed).unwrap()).unwrap();

    // Under the drafted policy: the same session, nothing more to propose.
    let again = dir.0.join("again.jsonl");
    let out = session(&proxy(&next, &again, &[], &ws), &ws);
    let log = records(&again);
    let kernel_refusals: Vec<&Value> = log
        .iter()
        .filter(|r| r["session"] == "mcp:fs" && r["decision"] == "deny")
        .collect();
    report(&format!(
        "mcp learn: under the suggested profile, kernel refusals {}: {:?}",
        kernel_refusals.len(),
        kernel_refusals
            .iter()
            .map(|r| format!("{} {}", r["reason"], r["detail"]["resolved_path"]))
            .collect::<Vec<_>>()
    ));
    assert!(
        kernel_refusals.is_empty(),
        "under the suggested profile, no kernel refusal: {kernel_refusals:#?}"
    );
    let (ok, text) = result(out[2].as_ref());
    assert!(ok && text.contains("hello from the workspace"), "{out:?}");
    assert!(result(out[3].as_ref()).0, "{out:?}");
    let (read, env_text) = result(out[4].as_ref());
    assert!(!read && !env_text.contains("TOPSECRET"), "{env_text}");
    let more: Value = serde_json::from_str(&gatewayd(&[
        "policy",
        "suggest",
        "--json",
        &again.display().to_string(),
        "--policy",
        &next.display().to_string(),
    ]))
    .unwrap();
    assert_eq!(
        more["suggestions"]["proposals"],
        json!([]),
        "nothing more to propose: {kernel_refusals:#?}\n{more:#}"
    );
    assert_eq!(would(&log), 0);
}
