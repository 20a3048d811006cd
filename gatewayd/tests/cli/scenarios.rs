//! `gatewayd test`: the project's own scenario files (gatewayd/tests/scenarios/*.json: the attack and
//! benign suites as data) pass on the fixture policy; a wrong expectation fails the run
//! (exit 1) and a malformed file is a usage error (exit 2) naming `FILE:LINE:COLUMN`; every
//! reason code is exercised; and after the suites no registered secret is in the audit log.
use gatewayd_testkit::tree as support;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use gatewayd_core::engine::secrets::base64;
use serde_json::Value;

fn scenario_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
    v.sort();
    assert!(v.len() >= 3, "{v:?}");
    v
}

/// The fixture tree in a fresh directory, and `gatewayd test` on the fixture policy.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    support::make_tree(&root);
    Tree { _dir: dir, root }
}

fn gatewayd_test(t: &Tree, files: &[PathBuf], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .arg("test")
        .arg(gatewayd_testkit::tree::ENGINE_POLICY_PATH)
        .args(files)
        .arg("--var")
        .arg(format!("ROOT={}", t.root.display()))
        .args(extra)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The summary line's counts.
fn summary(o: &Output) -> (usize, usize) {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().last().unwrap_or_default();
    let mut words = line.split_whitespace();
    let passed = words.next().and_then(|w| w.parse().ok()).unwrap();
    let failed = words.nth(1).and_then(|w| w.parse().ok()).unwrap();
    (passed, failed)
}

#[test]
fn the_project_scenarios_pass_and_leave_no_secret_in_the_audit_log() {
    let t = tree();
    let audit = t.root.join("audit.jsonl");
    let files = scenario_files();
    let o = gatewayd_test(&t, &files, &["--audit", audit.to_str().unwrap()]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let (passed, failed) = summary(&o);
    assert_eq!(failed, 0, "{out}");
    assert!(passed >= 300, "{passed} steps: {out}");
    assert_eq!(out.matches(" PASS\n").count(), passed, "one row per step");
    // The log is a valid chain and holds a record of every call.
    let report = gatewayd_core::audit::verify(&audit, None).unwrap();
    assert!(report.records >= 250, "{} records", report.records);
    // No registered secret, in any form the engine knows, is in it.
    let log = std::fs::read_to_string(&audit).unwrap();
    let secrets = registered_secrets(&files);
    assert!(secrets.len() >= 10, "{secrets:?}");
    for s in &secrets {
        for form in [s.clone(), base64(s.as_bytes())] {
            assert!(!log.contains(&form), "secret {s:?} is in the audit log");
        }
    }
}

/// Every value any scenario session holds as a secret: the policy's secrets and
/// credentials, the protected files' values, and what the scenario files add (session
/// secrets, environment values of credential-like names).
fn registered_secrets(files: &[PathBuf]) -> Vec<String> {
    let policy: Value = serde_json::from_str(gatewayd_testkit::tree::ENGINE_POLICY).unwrap();
    let mut v: Vec<String> = ["secrets", "credentials"]
        .iter()
        .flat_map(|k| policy[k].as_object().unwrap().values())
        .map(|s| s["value"].as_str().unwrap().to_owned())
        .collect();
    for line in support::ID_RSA.lines().filter(|l| !l.starts_with("-----")) {
        v.push(line.to_owned());
    }
    v.push("AKIAIOSFODNN7EXAMPLE".into());
    v.push("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into());
    for f in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        for sc in doc["scenarios"].as_array().unwrap() {
            for step in sc["steps"].as_array().unwrap() {
                if let Some(val) = step["secret"]["value"].as_str().filter(|x| x.len() >= 8) {
                    v.push(val.to_owned());
                }
            }
            for s in sc["sessions"].as_array().into_iter().flatten() {
                for (k, val) in s["env"].as_object().into_iter().flatten() {
                    if gatewayd_core::engine::session_secrets::looks_like_credential_name(k) {
                        v.push(val.as_str().unwrap().to_owned());
                    }
                }
            }
        }
    }
    v.sort();
    v.dedup();
    v
}

/// POLICY.md's reason codes, each expected by some step of the project's scenarios.
#[test]
fn the_project_scenarios_expect_every_reason_code() {
    let doc = include_str!("../../../docs/POLICY.md");
    let start = doc.find("## Reason codes").unwrap();
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").unwrap()];
    let codes: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert!(codes.len() >= 19, "{codes:?}");
    let mut seen = std::collections::BTreeSet::new();
    for f in scenario_files() {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        for sc in doc["scenarios"].as_array().unwrap() {
            for step in sc["steps"].as_array().unwrap() {
                if let Some(r) = step["expect"]["reason"].as_str() {
                    seen.insert(r.to_owned());
                }
            }
        }
    }
    // `learned` is learn mode's (a front end's switch, not a scenario's): tested by the
    // engine's `learn` suite and the MCP round trip.
    let missing: Vec<&&str> = codes
        .iter()
        .filter(|c| !seen.contains(**c) && **c != "learned")
        .collect();
    assert!(missing.is_empty(), "no scenario expects {missing:?}");
}

/// A scenario file written for this test.
fn temp_file(t: &Tree, name: &str, body: &str) -> PathBuf {
    let p = t.root.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn a_wrong_expectation_fails_the_run() {
    let t = tree();
    let f = temp_file(
        &t,
        "wrong.json",
        r#"{"scenarios": [{"name": "one right, one wrong", "steps": [
            {"call": {"tool": "weather", "arguments": {"city": "Oslo"}}, "expect": {"decision": "allow", "reason": "allowed"}},
            {"call": {"tool": "read_file", "arguments": {"path": ".env"}}, "expect": {"decision": "allow", "reason": "allowed"}}
        ]}]}"#,
    );
    let o = gatewayd_test(&t, std::slice::from_ref(&f), &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(summary(&o), (1, 1), "{out}");
    let row = out.lines().find(|l| l.ends_with("FAIL")).unwrap();
    assert!(row.contains("2 call read_file"), "{row}");
    assert!(
        row.contains("allow allowed") && row.contains("deny sandbox"),
        "{row}"
    );
    assert!(
        out.contains("protected path"),
        "the message is shown: {out}"
    );
    // --quiet shows the failing row only
    let o = gatewayd_test(&t, &[f], &["--quiet"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.contains("PASS") && out.contains("FAIL"), "{out}");
}

#[test]
fn extra_expectations_are_checked_too() {
    let t = tree();
    let f = temp_file(
        &t,
        "extras.json",
        r#"{"scenarios": [{"name": "extras", "steps": [
            {"call": {"tool": "transfer", "arguments": {"payee": "landlord", "amount": 80}}, "expect": {"decision": "hold", "reason": "approval_required", "hold_reasons": ["trifecta"]}},
            {"call": {"tool": "weather"}, "expect": {"decision": "allow", "reason": "allowed", "message": "nope", "spent": 5, "legs": {"private": true}}},
            {"approve": "$nothing"},
            {"register": {"name": "weather", "description": "changed"}}
        ]}]}"#,
    );
    let o = gatewayd_test(&t, &[f], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(summary(&o), (0, 4), "{out}");
    for want in [
        "hold_reasons [\"rule:big-transfer\"]",
        "message lacks \"nope\"",
        "spent 1",
        "legs untrusted=false private=false",
        "no approval id saved as $nothing",
        "rug_pull",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[test]
fn malformed_files_and_policies_are_usage_errors() {
    let t = tree();
    let f = temp_file(
        &t,
        "bad.json",
        "{\"scenarios\": [{\"name\": \"x\", \"steps\": [\n  {\"call\": {\"tool\": \"weather\"}, \"expect\": {\"decision\": \"allow\", \"reason\": \"fine\"}}\n]}]}",
    );
    let o = gatewayd_test(&t, std::slice::from_ref(&f), &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("bad.json:2:"), "{out}");
    assert!(out.contains("/scenarios/0/steps/0/expect/reason"), "{out}");
    let f = temp_file(
        &t,
        "patch.json",
        r#"{"scenarios": [{"name": "x", "policy_patch": [{"op": "replace", "path": "/nope", "value": 1}], "steps": []}]}"#,
    );
    let o = gatewayd_test(&t, &[f], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("policy_patch"), "{}", text(&o));
    // Without --var ROOT the fixture's paths are not absolute: the policy is refused.
    let o = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .arg("test")
        .arg(gatewayd_testkit::tree::ENGINE_POLICY_PATH)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("gatewayd/tests/scenarios/benign.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("engine_policy.json:"), "{}", text(&o));
}

/// docs/POLICY.md's worked example ("Testing a policy") prints what the document shows.
#[test]
fn the_worked_example_in_policy_md_runs_as_shown() {
    let doc = include_str!("../../../docs/POLICY.md");
    let start = doc.find("## Testing a policy").unwrap();
    let section = &doc[start..start + 3 + doc[start + 3..].find("\n## ").unwrap()];
    let block = |fence: &str, nth: usize| -> &str {
        let mut rest = section;
        for _ in 0..nth {
            rest = &rest[rest.find(fence).unwrap() + fence.len()..];
        }
        let body = &rest[rest.find(fence).unwrap() + fence.len()..];
        &body[..body.find("```").unwrap()]
    };
    let t = tree();
    let policy = temp_file(&t, "policy.json", block("```json\n", 0));
    let mail = temp_file(&t, "mail.json", block("```json\n", 1));
    let shown = block("```text\n", 0);
    let (command, want) = shown.split_once('\n').unwrap();
    assert_eq!(command, "$ gatewayd test policy.json mail.json");
    let o = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .arg("test")
        .arg(&policy)
        .arg(&mail)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), want);
}
