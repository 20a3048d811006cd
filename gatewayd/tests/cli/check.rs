//! `gatewayd check` and `gatewayd policy validate|pin`, run as the real binary on
//! `policies/example.json`.
use std::{path::PathBuf, process::Command};

fn gatewayd(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(args)
        .env("DEPLOY_KEY", "dk_live_Q7mX2pR9vL4tZ8wK3n")
        .env("DB_PASSWORD", "Vb8qT3rKz6wJm2xH")
        .env_remove("SMTP_PASSWORD")
        .output()
        .expect("run gatewayd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn example() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../policies/example.json");
    p.to_string_lossy().into_owned()
}

#[test]
fn check_allow() {
    let (code, out, err) = gatewayd(&[
        "check",
        "--policy",
        &example(),
        "--call",
        r#"{"tool": "search_web", "arguments": {"query": "rust sandboxing"}}"#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("decision: allow"), "{out}");
    assert!(out.contains("reason:   allowed"), "{out}");
}

#[test]
fn check_deny_names_reason_and_rule() {
    let (code, out, _) = gatewayd(&[
        "check",
        "--policy",
        &example(),
        "--call",
        r#"{"tool": "read_file", "arguments": {"path": "/home/agent/.ssh/id_rsa"}}"#,
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("decision: deny") && out.contains("reason:   sandbox"),
        "{out}"
    );
    assert!(out.contains("protected path"), "{out}");

    let (code, out, _) = gatewayd(&[
        "check",
        "--policy",
        &example(),
        "--call",
        r#"{"tool": "run_shell", "arguments": {"command": "git push origin main"}}"#,
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("reason:   arg_rule") && out.contains("rules:    no-git-push"),
        "{out}"
    );

    let (code, out, _) = gatewayd(&[
        "check",
        "--policy",
        &example(),
        "--call",
        r#"{"tool": "curl", "arguments": {}}"#,
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("not_allowlisted"), "{out}");
}

#[test]
fn check_hold_and_json() {
    let (code, out, _) = gatewayd(&[
        "check",
        "--policy",
        &example(),
        "--json",
        "--call",
        r#"{"tool": "pay_invoice", "arguments": {"invoice": "INV-20931", "amount": 75}}"#,
    ]);
    assert_eq!(code, 3, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["decision"], "hold");
    assert_eq!(v["reason"], "approval_required");
    assert_eq!(v["matched_rules"][0], "payments-over-50-need-approval");
}

#[test]
fn check_rule_of_two_flags() {
    let (code, out, _) = gatewayd(&[
        "check",
        "--policy",
        &example(),
        "--untrusted-seen",
        "--private-read",
        "--call",
        r#"{"tool": "fetch_url", "arguments": {"url": "https://api.search.example/?q=x"}}"#,
    ]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("held for: trifecta"), "{out}");
}

#[test]
fn validate_reports_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.json");
    std::fs::write(
        &p,
        "{\n  \"version\": 1,\n  \"tools\": [\n    {\"name\": \"x\",}\n  ]\n}\n",
    )
    .unwrap();
    let (code, out, err) = gatewayd(&["policy", "validate", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("bad.json:4:"), "{out}{err}");

    let (code, out, _) = gatewayd(&["policy", "validate", &example()]);
    assert_eq!(code, 0, "{out}");
    // Its sandbox paths are another machine's (warned about where they do not exist); its
    // tools are clean.
    assert!(
        out.contains("valid") && !out.contains("warning: tool"),
        "{out}"
    );

    // a rule for an argument the schema does not have: a warning, not an error
    std::fs::write(
        &p,
        r#"{"version": 1, "tools": [{"name": "t",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "args": {"pth": {"path": "read"}}}]}"#,
    )
    .unwrap();
    let (code, out, _) = gatewayd(&["policy", "validate", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning: tool t: rule for argument `pth`"),
        "{out}"
    );
}

#[test]
fn pin_rewrites_a_copy_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("policy.json");
    let text = std::fs::read_to_string(example()).unwrap();
    // change one description and drop one pin
    let edited = text.replacen(
        "Search the web and return the top results with titles and links.",
        "Search the web and return the top ten results.",
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(&p, &edited).unwrap();
    let (code, out, _) = gatewayd(&["policy", "validate", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("search_web: definition differs"), "{out}");
    let (code, out, err) = gatewayd(&["policy", "pin", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("search_web: sha256:"), "{out}");
    assert!(out.contains("read_file: unchanged"), "{out}");
    assert!(out.contains("1 fingerprint(s) pinned"), "{out}");
    let after = std::fs::read_to_string(&p).unwrap();
    // only the pin line changed: same number of lines, same key order
    assert_eq!(after.lines().count(), edited.lines().count());
    let (_, out, _) = gatewayd(&["policy", "validate", p.to_str().unwrap()]);
    assert!(!out.contains("differs"), "{out}");
    let (_, out, _) = gatewayd(&["policy", "pin", p.to_str().unwrap()]);
    assert!(out.contains("nothing to change"), "{out}");
}

#[test]
fn pin_from_a_server_tool_list() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("policy.json");
    std::fs::write(
        &p,
        r#"{"version": 1, "tools": [{"name": "weather"}, {"name": "other", "description": "x"}]}"#,
    )
    .unwrap();
    let list = dir.path().join("tools.json");
    std::fs::write(
        &list,
        r#"{"tools": [{"name": "weather", "description": "Weather for a city.",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "extra", "description": "not in the policy"}]}"#,
    )
    .unwrap();
    let (code, out, err) = gatewayd(&[
        "policy",
        "pin",
        p.to_str().unwrap(),
        "--from",
        list.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("extra: offered by the server but not in the policy"),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v["tools"][0]["description"], "Weather for a city.");
    assert!(
        v["tools"][0]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        v["tools"][1]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
}

#[test]
fn unloadable_secret_denies_egress() {
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args([
            "check",
            "--policy",
            &example(),
            "--call",
            r#"{"tool": "search_web", "arguments": {"query": "rust"}}"#,
        ])
        .env_remove("DEPLOY_KEY")
        .env("DB_PASSWORD", "Vb8qT3rKz6wJm2xH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("reason:   check_error") && stdout.contains("deploy_key"),
        "{stdout}"
    );
    // tools that send nothing out are unaffected
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args([
            "check",
            "--policy",
            &example(),
            "--call",
            r#"{"tool": "list_dir", "arguments": {"path": "/home/agent/work"}}"#,
        ])
        .env_remove("DEPLOY_KEY")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Runs gatewayd with stdout (or stderr) a pipe whose reading end is already closed, so the
/// first write fails with EPIPE: what `gatewayd … | head -0` does.
fn gatewayd_into_closed_pipe(args: &[&str], close_stderr: bool) -> (Option<i32>, String) {
    let (read_end, write_end) = nix::unistd::pipe().expect("pipe");
    drop(read_end);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatewayd"));
    cmd.args(args)
        .env("DEPLOY_KEY", "dk_live_Q7mX2pR9vL4tZ8wK3n")
        .env("DB_PASSWORD", "Vb8qT3rKz6wJm2xH");
    if close_stderr {
        cmd.stderr(std::process::Stdio::from(write_end));
    } else {
        cmd.stdout(std::process::Stdio::from(write_end));
    }
    let out = cmd.output().expect("run gatewayd");
    let text = if close_stderr {
        &out.stdout
    } else {
        &out.stderr
    };
    (
        out.status.code(),
        String::from_utf8_lossy(text).into_owned(),
    )
}

#[test]
fn a_reader_that_went_away_ends_the_output_quietly() {
    let ex = example();
    // the exit code stays the command's own: allow 0, deny 1, valid 0
    for (args, code) in [
        (
            vec![
                "check",
                "--policy",
                &ex,
                "--call",
                r#"{"tool": "search_web", "arguments": {"query": "rust"}}"#,
            ],
            0,
        ),
        (
            vec![
                "check",
                "--json",
                "--policy",
                &ex,
                "--call",
                r#"{"tool": "curl", "arguments": {}}"#,
            ],
            1,
        ),
        (vec!["policy", "validate", &ex], 0),
    ] {
        let (got, stderr) = gatewayd_into_closed_pipe(&args, false);
        assert_eq!(got, Some(code), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
    // an error message into a closed stderr: still exit code 2, not a panic (101)
    let (got, stdout) =
        gatewayd_into_closed_pipe(&["policy", "validate", "/nonexistent.json"], true);
    assert_eq!(got, Some(2), "{stdout}");
}

#[test]
fn validate_warns_about_schema_keywords_no_draft_defines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("typo.json");
    std::fs::write(
        &p,
        r#"{"version": 1, "tools": [{"name": "t", "input_schema": {"type": "object",
        "properties": {"name": {"type": "string", "maxLenght": 8}}}}]}"#,
    )
    .unwrap();
    let (code, out, err) = gatewayd(&["policy", "validate", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("warning: tool t: input_schema keyword `maxLenght` is not a keyword"),
        "{out}"
    );
}
