//! Tier 2's denials in the session's audit log (issue 9, item 6): where the kernel's Landlock
//! logs its denials to audit (ABI 7, Linux 6.15) and audit is enabled, `gatewayd run` turns
//! the denials of the session's own Landlock domain into `source: kernel` records with hook
//! `landlock`, and `gatewayd doctor` says whether that channel works. gatewayd never enables
//! audit itself; this test does, for its length, and puts the host's setting back.
use super::*;

/// Audit's `enabled` flag for the length of a test, then the host's value again.
struct AuditOn {
    before: u32,
}

impl AuditOn {
    fn new() -> AuditOn {
        let before =
            gatewayd_kernel::landlock_audit::set_audit_enabled(1).expect("AUDIT_SET enabled=1");
        AuditOn { before }
    }
}

impl Drop for AuditOn {
    fn drop(&mut self) {
        if self.before != 1 {
            let _ = gatewayd_kernel::landlock_audit::set_audit_enabled(self.before);
        }
    }
}

/// `gatewayd doctor --json`'s `features.landlock_audit`, asked now (the test binary's cached
/// answer predates the audit switch).
fn doctor_says_landlock_audit() -> bool {
    let out = Command::new(gatewayd())
        .args(["doctor", "--json"])
        .output()
        .expect("spawn gatewayd doctor");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    v["features"]["landlock_audit"] == true
}

#[test]
fn landlock_denials_reach_the_audit_log() {
    if tier() != Tier::Landlock {
        // Tier 1 denies with BPF LSM programs, which have their own records; no Landlock
        // ruleset is made, so there is nothing to read.
        note("landlock_records: tier 1 makes no Landlock ruleset (BPF LSM records instead)");
        return;
    }
    let abi = doctor()["features"]["landlock_abi"].as_u64().unwrap_or(0);
    let dir = Scratch::new("llrec");
    std::fs::create_dir_all(dir.path("work")).unwrap();
    let outside = std::env::temp_dir().join(format!("gwtest-llrec-out-{}", std::process::id()));
    let _ = std::fs::remove_file(&outside);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"writable": [dir.path("work")]}}),
    );
    let outside_s = outside.to_str().unwrap();
    let inside = dir.path("work/ok");
    let inside_s = inside.to_str().unwrap();

    // Bare: both writes work.
    let bare = Command::new(agent())
        .args(["write", outside_s, "+", "write", inside_s])
        .output()
        .unwrap();
    assert!(bare.status.success(), "bare: {}", stdout(&bare));
    std::fs::remove_file(&outside).unwrap();
    std::fs::remove_file(&inside).unwrap();

    let _audit_on = AuditOn::new();
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &["write", outside_s, "+", "write", inside_s],
    );
    let text = stdout(&out);
    assert!(text.starts_with("FAIL write"), "{text}");
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("OK write")),
        "{text}"
    );
    assert!(!outside.exists());
    let recs = records(&audit);
    let start = &recs[0]["detail"]["kernel"]["landlock_audit"];
    let ll: Vec<_> = recs.iter().filter(|r| r["hook"] == "landlock").collect();
    if abi < 7 {
        assert!(!doctor_says_landlock_audit());
        assert!(
            start.as_str().unwrap().starts_with("not recorded"),
            "{start}"
        );
        assert!(ll.is_empty(), "{ll:?}");
        note(&format!(
            "landlock_records: Landlock ABI {abi} does not log its denials; tier 2's denials have no record"
        ));
        return;
    }
    assert!(
        doctor_says_landlock_audit(),
        "doctor: the channel works with audit on"
    );
    assert_eq!(start, "recorded", "{start}");
    assert_eq!(ll.len(), 1, "one denial, one record: {ll:?}");
    let r = ll[0];
    assert_eq!(r["source"], "kernel");
    assert_eq!(r["decision"], "deny");
    assert_eq!(r["reason"], "outside_writable");
    let blockers = r["detail"]["blockers"].as_str().unwrap();
    assert!(blockers.contains("fs.make_reg"), "{blockers}");
    assert!(
        r["detail"]["message"]
            .as_str()
            .unwrap()
            .contains("Landlock"),
        "{r}"
    );
    // The record is in the chain, before the session's end, and counted.
    let end = recs.last().unwrap();
    assert_eq!(end["reason"], "session_end");
    assert_eq!(end["detail"]["kernel_denials"], 1);
    assert!(verify(&audit).status.success());

    // Another session's denials are not this one's: a session that only waits while a
    // second one is denied has no Landlock record, and the second has its own.
    let quiet_audit = dir.path("quiet.jsonl");
    let go = dir.path("go");
    let quiet = under_gatewayd(&policy, &quiet_audit, agent())
        .arg("waitfile")
        .arg(&go)
        .args(["+", "write", inside_s])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_start(&quiet_audit);
    let busy_audit = dir.path("busy.jsonl");
    let out = run_agent(&policy, &busy_audit, &["write", outside_s]);
    assert!(stdout(&out).starts_with("FAIL write"), "{}", stdout(&out));
    std::fs::write(&go, "").unwrap();
    let quiet = quiet.wait_with_output().unwrap();
    assert!(quiet.status.success(), "{}", stdout(&quiet));
    let busy: Vec<_> = records(&busy_audit)
        .into_iter()
        .filter(|r| r["hook"] == "landlock")
        .collect();
    assert_eq!(busy.len(), 1, "{busy:?}");
    assert!(
        records(&quiet_audit)
            .iter()
            .all(|r| r["hook"] != "landlock"),
        "the sleeping session took another session's denial"
    );
}
