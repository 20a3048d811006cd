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

/// `gatewayd run --export json:FILE`: every record of the session's log, the kernel's denial
/// among them, reaches the sink with its chain fields, and the heads exported at the end let
/// `audit verify --anchors` vouch for the whole log, and catch it cut short.
#[test]
fn a_run_session_exports_its_whole_chain_and_its_head() {
    let _ = tier();
    let dir = Scratch::new("run-export");
    let (denied, _rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let export = dir.path("export.jsonl");
    let mut c = gatewayd_run();
    c.arg("--policy")
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .arg("--export")
        .arg(format!("json:{}", export.display()))
        .arg("--")
        .arg(agent())
        .args(["send", &format!("127.0.0.1:{denied}"), "x"]);
    let out = c.output().expect("spawn gatewayd");
    assert!(!out.status.success(), "the send is refused: {out:?}");
    let logged: Vec<String> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let exported = records(&export);
    let (recs, heads): (Vec<_>, Vec<_>) = exported.iter().partition(|l| l["type"] == "record");
    let as_logged: Vec<String> = recs
        .iter()
        .map(|r| {
            let mut r = (*r).clone();
            for k in ["type", "host", "ocsf"] {
                r.as_object_mut().unwrap().remove(k);
            }
            gatewayd_core::audit::canonical_json(&r)
        })
        .collect();
    assert_eq!(
        as_logged, logged,
        "every logged line is exported, in order, once"
    );
    assert!(
        recs.iter().any(|r| r["reason"] == "egress_not_allowed"),
        "the kernel's denial is exported: {recs:?}"
    );
    assert!(
        !heads.is_empty(),
        "a head at the session's end: {exported:?}"
    );
    let anchored = |log: &Path| {
        Command::new(gatewayd())
            .args(["audit", "verify"])
            .arg(log)
            .arg("--anchors")
            .arg(&export)
            .output()
            .unwrap()
    };
    let ok = anchored(&audit);
    assert!(ok.status.success(), "{}", stdout(&ok));
    // The log cut short no longer matches the exported head.
    let cut = dir.path("cut.jsonl");
    std::fs::write(&cut, logged[..logged.len() - 1].join("\n") + "\n").unwrap();
    let bad = anchored(&cut);
    assert_eq!(bad.status.code(), Some(1), "{}", stdout(&bad));
}
