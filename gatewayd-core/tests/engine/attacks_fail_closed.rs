//! Failing closed, and the audit log the engine writes: an unavailable audit sink, credential
//! or secret and a session without a user deny; a real hash-chained log holds no secret and
//! names the first edited, deleted or reordered record (a truncation is caught by the anchor).
use crate::support;

use gatewayd_core::engine::{Reason, Session, ToolCall, secrets::base64};
use serde_json::json;
use support::*;

// ---- fail closed ----

#[test]
fn audit_unavailable_denies() {
    let f = fx();
    let mut s = session();
    f.audit.lock().unwrap().fail = true;
    denied(
        f.call(&mut s, "weather", json!({"city": "Oslo"})),
        Reason::AuditUnavailable,
    );
}

#[test]
fn unavailable_credential_is_a_check_error() {
    let f = fx_with(|p| {
        p["credentials"]["smtp_password"] = json!({"env": "GATEWAYD_TEST_UNSET_VARIABLE"});
    });
    let mut s = session();
    denied(
        f.call(
            &mut s,
            "send_email",
            json!({"to": ["a@corp.test"], "subject": "s", "body": "b"}),
        ),
        Reason::CheckError,
    );
}

#[test]
fn session_without_user_is_a_check_error() {
    let f = fx();
    let mut s = Session::new("s1", "", ALL_SCOPES);
    denied(f.call(&mut s, "weather", json!({})), Reason::CheckError);
}

#[test]
fn unloadable_secret_denies_every_sends_out_call() {
    let f = fx_with(|p| p["secrets"]["deploy_key"] = json!({"env": "GATEWAYD_TEST_UNSET_SECRET"}));
    let mut s = session();
    denied(
        f.call(
            &mut s,
            "http_post",
            json!({"url": "https://hooks.corp.test/x", "body": "hello"}),
        ),
        Reason::CheckError,
    );
    allowed(f.call(&mut s, "read_file", json!({"path": "notes.txt"})));
}

// ---- the audit log the engine writes ----

/// An engine writing to a real hash-chained log; runs a few calls (one of them leaking a
/// secret) and returns the log's path and head.
fn audited_run(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    use gatewayd_core::{audit::AuditLog, clock::ManualClock, engine::Engine, policy::Policy};
    use std::sync::{Arc, Mutex};
    let root = std::fs::canonicalize(dir).unwrap();
    make_tree(&root);
    let policy = Policy::parse(
        &policy_value(&root).to_string(),
        std::path::Path::new("p.json"),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let path = root.join("audit.jsonl");
    let log = Arc::new(Mutex::new(AuditLog::open(&path, clock.clone()).unwrap()));
    let engine = Engine::new(Arc::new(policy), clock, Some(log.clone())).unwrap();
    let mut s = session();
    let calls = [
        ("weather", json!({"city": "Oslo"})),
        (
            "send_email",
            json!({"to": ["a@corp.test"], "subject": "k", "body": format!("key {DEPLOY_KEY}")}),
        ),
        (
            "http_post",
            json!({"url": "https://hooks.corp.test/x", "body": base64(SMTP.as_bytes())}),
        ),
        ("read_file", json!({"path": ".env"})),
        ("weather", json!({"city": "Bergen"})),
    ];
    for (tool, args) in calls {
        let ran = std::cell::Cell::new(false);
        let _ = engine.call(&mut s, &ToolCall::new(tool, args), |_, _| {
            ran.set(true);
            Ok(json!({}))
        });
    }
    let head = log.lock().unwrap().head().unwrap().to_string();
    (path, head)
}

fn lines(p: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(p: &std::path::Path, l: &[String]) {
    std::fs::write(p, l.iter().map(|x| format!("{x}\n")).collect::<String>()).unwrap();
}

#[test]
fn audit_records_are_chained_and_hold_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (path, head) = audited_run(dir.path());
    let report = gatewayd_core::audit::verify(&path, Some(&head)).unwrap();
    assert_eq!(report.records, 5);
    let text = std::fs::read_to_string(&path).unwrap();
    for needle in [
        DEPLOY_KEY.to_string(),
        SMTP.to_string(),
        base64(SMTP.as_bytes()),
        base64(DEPLOY_KEY.as_bytes()),
    ] {
        assert!(!text.contains(&needle), "{needle} in the audit log");
    }
    assert!(text.contains("\"reason\":\"secret_egress\""));
}

#[test]
fn audit_tamper_edit_delete_reorder_truncate() {
    use gatewayd_core::audit::verify;
    let dir = tempfile::tempdir().unwrap();
    let (path, head) = audited_run(dir.path());
    let orig = lines(&path);

    // edit: a deny turned into an allow
    let mut l = orig.clone();
    l[3] = l[3].replace("\"decision\":\"deny\"", "\"decision\":\"allow\"");
    assert_ne!(l[3], orig[3]);
    write_lines(&path, &l);
    assert_eq!(verify(&path, None).unwrap_err().seq(), Some(4));

    // deletion of record 2
    let mut l = orig.clone();
    l.remove(1);
    write_lines(&path, &l);
    assert_eq!(verify(&path, None).unwrap_err().seq(), Some(2));

    // reordering of records 2 and 3
    let mut l = orig.clone();
    l.swap(1, 2);
    write_lines(&path, &l);
    assert_eq!(verify(&path, None).unwrap_err().seq(), Some(2));

    // truncation: only the anchor catches it
    write_lines(&path, &orig[..3]);
    assert!(verify(&path, None).is_ok());
    assert!(verify(&path, Some(&head)).unwrap_err().is_broken());

    write_lines(&path, &orig);
    assert!(verify(&path, Some(&head)).is_ok());
}
