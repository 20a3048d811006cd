//! Learn mode's round trip with the real filesystem server: `gatewayd mcp --learn` under a
//! policy that lists no tool lets the client's calls through (recorded `would_deny`) while
//! the protected key stays refused; `gatewayd policy suggest` drafts the tools; pinned from
//! the listing, the new policy allows the same calls without learn.
use crate::support;

use std::{path::Path, process::Command};

use serde_json::{Value, json};
use support::*;

fn policy(dir: &Path) -> Value {
    let s = |rel: &str| dir.join(rel).display().to_string();
    json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": s("ws"), "readable": [s("")], "writable": [s("ws")],
                    "protected": [s("secret")]},
        "tools": [],
        "mcp_servers": {"fs": {"kernel": "off"}}})
}

/// The client's session: list, read a file, list a directory, read the protected key.
fn session(dir: &Path, policy: &Path, audit: &Path, extra: &[&str]) -> Vec<Value> {
    let s = |rel: &str| dir.join(rel).display().to_string();
    let mut cmd = proxy_cmd(policy, "fs", audit, extra);
    cmd.push("--".into());
    cmd.push(fs_server().display().to_string());
    cmd.push(s(""));
    drive(&json!({"command": cmd, "mode": "legacy", "steps": [
        {"list": true},
        {"call": "read_text_file", "args": {"path": s("ws/a.txt")}},
        {"call": "list_directory", "args": {"path": s("ws")}},
        {"call": "read_text_file", "args": {"path": s("secret/id_rsa")}},
    ]}))
}

fn gatewayd(args: &[&str]) -> String {
    let out = Command::new(GATEWAYD).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "gatewayd {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn learn_then_suggest_then_the_same_calls_are_allowed_without_learn() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    for d in ["ws", "secret"] {
        std::fs::create_dir(dir.join(d)).unwrap();
    }
    std::fs::write(dir.join("ws/a.txt"), "hello from the workspace\n").unwrap();
    std::fs::write(dir.join("secret/id_rsa"), "TOPSECRET\n").unwrap();
    let p = dir.join("policy.json");
    std::fs::write(&p, policy(&dir).to_string()).unwrap();
    let (learned, listing) = (dir.join("learn.jsonl"), dir.join("listing.json"));
    let list = listing.display().to_string();

    // Without learn, nothing is listed and the call is refused.
    let plain = session(&dir, &p, &dir.join("plain.jsonl"), &[]);
    assert_eq!(plain[0]["tools"], json!([]));
    assert_eq!(plain[1]["isError"], true, "{plain:?}");

    let out = session(&dir, &p, &learned, &["--learn", "--listing", &list]);
    let tools = out[0]["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("read_text_file")), "{out:?}");
    assert_eq!(out[1]["isError"], false, "{out:?}");
    assert!(
        out[1]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace")
    );
    assert_eq!(out[2]["isError"], false, "{out:?}");
    let key = out[3]["text"].as_str().unwrap();
    assert_eq!(
        out[3]["isError"], true,
        "the protected key stays refused: {key}"
    );
    assert!(!key.contains("TOPSECRET"), "{key}");
    let r = reasons(&learned);
    assert_eq!(
        r.iter()
            .filter(|x| *x == &("would_deny".to_owned(), "not_allowlisted".to_owned()))
            .count(),
        2,
        "{r:?}"
    );
    // The unlisted tool's argument names the protected key: refused, not learned.
    assert!(
        r.contains(&("deny".to_owned(), "not_allowlisted".to_owned())),
        "{r:?}"
    );
    let start = records(&learned)
        .into_iter()
        .find(|x| x["reason"] == "mcp_server_start")
        .unwrap();
    assert_eq!(
        start["detail"]["learn"],
        json!({"gateway": true, "kernel": false, "unsafe": false})
    );
    verify(&learned);
    let explained = gatewayd(&["explain", &learned.display().to_string()]);
    assert!(explained.contains("would have refused"), "{explained}");

    let new = dir.join("new.json");
    gatewayd(&[
        "policy",
        "suggest",
        &learned.display().to_string(),
        "--policy",
        &p.display().to_string(),
        "--out",
        &new.display().to_string(),
    ]);
    pin_from(&new, &listing);

    // Suggested tools are held for a person (`default: hold`); the protected key is now
    // refused by the tool's own path rule.
    let out = session(&dir, &new, &dir.join("held.jsonl"), &[]);
    for i in [1, 2] {
        let t = out[i]["text"].as_str().unwrap();
        assert!(t.contains("reason `approval_required`"), "{out:?}");
    }
    assert!(
        out[3]["text"]
            .as_str()
            .unwrap()
            .contains("reason `sandbox`"),
        "{out:?}"
    );

    // The review: the person lets the drafted tools run without asking.
    let mut reviewed: Value =
        serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    for t in reviewed["tools"].as_array_mut().unwrap() {
        t["default"] = json!("allow");
    }
    std::fs::write(&new, reviewed.to_string()).unwrap();
    let again = dir.join("again.jsonl");
    let out = session(&dir, &new, &again, &[]);
    assert_eq!(out[1]["isError"], false, "{out:?}");
    assert!(
        out[1]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace")
    );
    assert_eq!(out[2]["isError"], false, "{out:?}");
    assert_eq!(out[3]["isError"], true, "{out:?}");
    let r = reasons(&again);
    assert!(
        !r.iter()
            .any(|(d, x)| d == "would_deny" || x == "not_allowlisted"),
        "{r:?}"
    );
    assert_eq!(
        r.iter()
            .filter(|(d, x)| d == "allow" && x == "allowed")
            .count(),
        2,
        "{r:?}"
    );
}
