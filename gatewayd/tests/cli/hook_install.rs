//! `gatewayd hook install` for Claude Code and Gemini CLI as a user runs it: a dry run
//! changes nothing, an install keeps the user's settings and other hooks, a second install
//! changes nothing, `--check` finds the hook (and says when it is missing or given too
//! little time), and a settings file that is not JSON is refused, not overwritten. Codex's
//! install, with its trust through the real Codex, runs in gatewayd/tests/hosts.
use std::{path::Path, process::Command};

const GATEWAYD: &str = env!("CARGO_BIN_EXE_gatewayd");

fn install(home: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(GATEWAYD)
        .args(["hook", "install", "--home"])
        .arg(home)
        .arg("--workspace")
        .arg(home)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn install_merges_keeps_and_checks() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path();
    let settings = home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mine = r#"{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}"#;
    std::fs::write(&settings, mine).unwrap();

    let check = install(home, &["--host", "claude", "--check"]);
    assert_eq!(check.status.code(), Some(1), "{check:?}");
    assert!(String::from_utf8_lossy(&check.stdout).contains("no gatewayd hook for PreToolUse"));

    let dry = install(
        home,
        &["--host", "claude", "--socket", "/run/g.sock", "--dry-run"],
    );
    assert!(dry.status.success(), "{dry:?}");
    assert!(
        String::from_utf8_lossy(&dry.stdout).contains("hook --host claude --socket /run/g.sock")
    );
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        mine,
        "a dry run writes nothing"
    );

    let first = install(
        home,
        &[
            "--host",
            "claude",
            "--host",
            "gemini",
            "--socket",
            "/run/g.sock",
        ],
    );
    assert!(first.status.success(), "{first:?}");
    let after = std::fs::read_to_string(&settings).unwrap();
    let v: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(
        v["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-send done"
    );
    let pre = v["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        pre.starts_with('/') && pre.contains("hook --host claude --socket /run/g.sock"),
        "{pre}"
    );
    let gemini = std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap();
    assert!(
        gemini.contains("\"BeforeTool\"") && gemini.contains("10000"),
        "{gemini}"
    );

    let second = install(home, &["--host", "claude", "--socket", "/run/g.sock"]);
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("installed already"),
        "{second:?}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), after);
    let check = install(home, &["--host", "claude", "--host", "gemini", "--check"]);
    assert!(check.status.success(), "{check:?}");

    // A deadline the host's timeout does not cover is refused.
    let slow = install(home, &["--host", "claude", "--deadline-ms", "15000"]);
    assert!(!slow.status.success());
}

#[test]
fn settings_that_are_not_json_are_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let settings = d.path().join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{ half").unwrap();
    let out = install(d.path(), &["--host", "gemini", "--socket", "/s"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not JSON"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{ half");
}

/// With `--policy` and no `--audit`, the hook's audit log is written out in full, in the
/// state directory of the home it is installed for (made, mode 0700): never the workspace.
#[test]
fn the_audit_log_goes_to_the_homes_state_directory() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = tempfile::tempdir().unwrap();
    let out = install(d.path(), &["--host", "gemini", "--policy", "/etc/p.json"]);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(d.path().join(".gemini/settings.json")).unwrap();
    let state = d.path().join(".local/state/gatewayd");
    let want = format!("--audit {}", state.join("hook-audit.jsonl").display());
    assert!(text.contains(&want), "{text}");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}
