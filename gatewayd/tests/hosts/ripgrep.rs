//! What ripgrep reads against what the gateway says it reads, with the ripgrep Claude Code
//! runs (the one built into its binary, started as `rg`): for each search, the real ripgrep
//! runs bare in a project whose `.env` and `.env.local` git ignores, and the gateway (Claude Code's
//! hook, the starter policy) decides the same search as a `Bash` line or as Claude Code's
//! `Grep`. A search that reads the secret must be refused, and one that does not, allowed.
use std::{os::unix::process::CommandExt as _, path::Path, process::Command};

use crate::harness::Host;

const SECRET: &str = "sk-live-ripgrep-4711";

#[test]
fn the_gateway_refuses_exactly_the_searches_that_ripgrep_lets_read_a_secret() {
    let Some(claude) = Host::Claude.program() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = std::fs::canonicalize(dir.path())
        .expect("canonical")
        .join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("src");
    gatewayd_testkit::git::git(&ws, &["init", "-q"]);
    for (file, text) in [
        (".gitignore", ".env\n.env.local\n"),
        (".env", &format!("API_KEY={SECRET}\n")),
        (".env.local", &format!("API_KEY={SECRET}\n")),
        ("src/main.rs", "// no secret here\n"),
    ] {
        std::fs::write(ws.join(file), text).expect("write");
    }
    let policy = dir.path().join("policy.json");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let out = gatewayd_testkit::starter::policy_init(&crate::gatewayd(), &policy, &ws, &home)
        .expect("policy init");
    assert!(out.status.success(), "{out:?}");
    // (ripgrep's words after the program, Claude Code's tool, its input).
    let bash = |line: &str| {
        let words = shell_words(line);
        (words, "Bash", serde_json::json!({"command": line}))
    };
    let grep = |globs: &[&str], glob: Option<&str>| {
        let mut words = vec!["--hidden".to_owned()];
        for g in globs {
            words.extend(["--glob".to_owned(), (*g).to_owned()]);
        }
        words.push(SECRET.to_owned());
        let mut input = serde_json::json!({"pattern": SECRET});
        if let Some(g) = glob {
            input["glob"] = g.into();
        }
        (words, "Grep", input)
    };
    let cases = [
        bash(&format!("rg {SECRET}")),
        bash(&format!("rg --hidden {SECRET}")),
        bash(&format!("rg --hidden -g '*.rs' {SECRET}")),
        bash(&format!("rg -g .env {SECRET}")),
        bash(&format!("rg --iglob .ENV {SECRET}")),
        bash(&format!("rg -g '*.local' {SECRET}")),
        bash(&format!("rg -uu {SECRET}")),
        bash(&format!("rg --hidden --no-ignore-vcs {SECRET}")),
        grep(&[], None),
        grep(&["*.rs"], Some("*.rs")),
        grep(&["*.{rs,local}"], Some("*.{rs,local}")),
        grep(&["*.rs", ".env"], Some("*.rs,.env")),
    ];
    let mut read = 0;
    for (words, tool, input) in cases {
        let out = Command::new(&claude)
            .arg0("rg")
            .args(&words)
            .current_dir(&ws)
            .output()
            .expect("ripgrep runs");
        let reads_the_secret = String::from_utf8_lossy(&out.stdout).contains(SECRET);
        read += usize::from(reads_the_secret);
        let refused = hook_refuses(&policy, &ws, tool, &input, dir.path());
        assert_eq!(
            refused, reads_the_secret,
            "rg {words:?} reads the secret: {reads_the_secret}; the gateway refuses {tool} {input}: {refused}"
        );
    }
    assert_eq!(read, 7, "the searches that read a secret without gatewayd");
}

/// Whether Claude Code's hook, answered by gatewayd with `policy`, refuses the call.
fn hook_refuses(
    policy: &Path,
    ws: &Path,
    tool: &str,
    input: &serde_json::Value,
    dir: &Path,
) -> bool {
    use std::io::Write as _;
    let event = serde_json::json!({
        "hook_event_name": "PreToolUse", "session_id": "rg", "cwd": ws,
        "tool_name": tool, "tool_input": input,
    });
    let mut child = Command::new(crate::gatewayd())
        .args(["hook", "--host", "claude", "--policy"])
        .arg(policy)
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gatewayd hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(event.to_string().as_bytes())
        .expect("event");
    let out = child.wait_with_output().expect("hook ends");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).contains("\"deny\"")
}

/// `line`'s words after `rg`, quotes removed (the cases quote with `'` only).
fn shell_words(line: &str) -> Vec<String> {
    line.split_whitespace()
        .skip(1)
        .map(|w| w.trim_matches('\'').to_owned())
        .collect()
}
