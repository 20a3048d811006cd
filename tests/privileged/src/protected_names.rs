//! `sandbox.protected_names`: secrets by their names, under the root and the writable roots,
//! whether they existed at the start or were made later by someone else. Bare, the agent
//! reads `.env`, a key and a `.env.local` the user makes while it runs, and links and moves
//! them; under `gatewayd run` each read fails and is recorded (`protected_name`, with the
//! pattern) at both tiers (tier 1: the BPF LSM file programs; tier 2: fanotify permission
//! events on the roots' mounts in the agent's namespace, and hard links refused), while the
//! ordinary files beside them stay readable and writable.
use std::process::Stdio;

use serde_json::json;

use super::*;

/// Each attempt prints `NAME ok` or `NAME failed`, after the test says `go` (the file made
/// later is there by then).
const ATTEMPTS: &str = "\
while [ ! -e go ]; do sleep 0.05; done
t() { n=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"$n ok\"; else echo \"$n failed\"; fi; }
t read-env cat .env
t read-later cat svc/.env.local
t read-key cat tls/server.pem
t write-new sh -c 'echo K=1 > svc/.env'
t link ln .env linked
t read-linked cat linked
t rename mv tls/server.pem tls/moved
t read-moved cat tls/moved
t read-notes cat notes.txt
t read-similar cat env.txt
t write-notes sh -c 'echo more >> notes.txt'
t list ls -a svc
t read-draft cat draft.txt
touch phase1
while [ ! -e go2 ]; do sleep 0.05; done
t read-renamed cat .env.draft
";

/// What each attempt does under gatewayd, at both tiers (the rename and the link differ by
/// tier: see [`tier_dependent`]).
const REFUSED: [&str; 5] = [
    "read-env",
    "read-later",
    "read-key",
    "write-new",
    "read-moved",
];
const ALLOWED: [&str; 4] = ["read-notes", "read-similar", "write-notes", "list"];

fn workspace(dir: &Scratch) -> PathBuf {
    let ws = dir.path("ws");
    for d in ["svc", "tls"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    for (f, text) in [
        (".env", "API_KEY=start"),
        ("tls/server.pem", "-----BEGIN PRIVATE KEY-----"),
        ("notes.txt", "notes"),
        ("env.txt", "not a secret"),
        ("draft.txt", "draft"),
    ] {
        std::fs::write(ws.join(f), text).unwrap();
    }
    ws
}

/// Runs the attempts in `ws` (under gatewayd when `gw` holds its policy and audit paths);
/// makes `svc/.env.local` once the session has started, then says `go`; once the agent has
/// read `draft.txt` (at tier 2 gatewayd then stops asking about that file), writes a secret
/// into it and renames it `.env.draft`, then says `go2`.
fn attempts(ws: &Path, gw: Option<(&Path, &Path)>) -> Output {
    let mut cmd = match gw {
        Some((policy, audit)) => under_gatewayd(policy, audit, "sh"),
        None => Command::new("sh"),
    };
    let child = cmd
        .args(["-c", ATTEMPTS])
        .current_dir(ws)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some((_, audit)) = gw {
        wait_for_start(audit);
    }
    std::fs::write(ws.join("svc/.env.local"), "API_KEY=later").unwrap();
    std::fs::write(ws.join("go"), "").unwrap();
    let t0 = std::time::Instant::now();
    while !ws.join("phase1").exists() {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the agent did not reach phase 1"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(ws.join("draft.txt"), "API_KEY=changed").unwrap();
    std::fs::rename(ws.join("draft.txt"), ws.join(".env.draft")).unwrap();
    std::fs::write(ws.join("go2"), "").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn secrets_by_name_are_refused_whenever_they_were_made() {
    let dir = Scratch::new("names-bare");
    let ws = workspace(&dir);
    let bare = attempts(&ws, None);
    let b = escape_outcomes(&stdout(&bare));
    for n in REFUSED.iter().chain(&ALLOWED).chain(&["link", "rename"]) {
        assert_eq!(
            b.get(*n).map(String::as_str),
            Some("ok"),
            "bare {n}: {bare:?}"
        );
    }

    let dir = Scratch::new("names-gw");
    let ws = workspace(&dir);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
               "sandbox": {"root": ws, "writable": [ws],
                           "protected_names": [".env", ".env.*", "*.pem"]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = attempts(&ws, Some((&policy, &audit)));
    let g = escape_outcomes(&stdout(&out));
    for n in REFUSED {
        assert_eq!(g.get(n).map(String::as_str), Some("failed"), "{n}: {out:?}");
    }
    for n in ALLOWED {
        assert_eq!(g.get(n).map(String::as_str), Some("ok"), "{n}: {out:?}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        "API_KEY=start"
    );
    tier_dependent(&g, &out, &ws);
    let recs = records(&audit);
    assert!(
        recs.iter()
            .any(|r| r["reason"] == "suspicion" && r["detail"]["reason"] == "protected_name"),
        "a refused secret counts toward the Rule of Two at both tiers"
    );
    let refused: Vec<String> = recs
        .into_iter()
        .filter(|r| r["reason"] == "protected_name")
        .map(|r| {
            r["detail"]["protected_name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    for pattern in [".env", ".env.*", "*.pem"] {
        assert!(
            refused.iter().any(|p| p == pattern),
            "no protected_name record for {pattern}: {refused:?}"
        );
    }
}

/// Tier 1 refuses the link and the rename themselves (`inode_link`, `inode_rename`); tier 2
/// refuses every hard link (seccomp) and lets the rename happen, but the moved key stays
/// refused under its new name (it was seen under a protected name at the start).
fn tier_dependent(g: &std::collections::BTreeMap<String, String>, out: &Output, ws: &Path) {
    assert_eq!(g.get("link").map(String::as_str), Some("failed"), "{out:?}");
    assert!(!ws.join("linked").exists());
    let rename = if tier() == Tier::BpfLsm {
        "failed"
    } else {
        "ok"
    };
    assert_eq!(g.get("rename").map(String::as_str), Some(rename), "{out:?}");
}
