//! The audit chain written by a kernel session: a tampered record is found by `audit verify`.

use super::*;

#[test]
fn tampered_audit_log_is_detected() {
    let _ = tier();
    let dir = Scratch::new("tamper");
    let (denied, _rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    run_agent(
        &policy,
        &audit,
        &["send", &format!("127.0.0.1:{denied}"), "x"],
    );
    assert!(verify(&audit).status.success());
    // The kernel's record (after `session_start` and the agent's `session_open`) is edited.
    let seq = records(&audit)
        .iter()
        .find(|r| r["reason"] == "egress_not_allowed")
        .map(|r| r["seq"].as_u64().unwrap())
        .unwrap();
    assert_eq!(seq, 3);
    let text = std::fs::read_to_string(&audit).unwrap();
    let edited = text.replacen("egress_not_allowed", "egress_allowed_ok", 1);
    assert_ne!(edited, text);
    std::fs::write(&audit, edited).unwrap();
    let out = verify(&audit);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("seq {seq}")),
        "{}",
        stdout(&out)
    );
}
