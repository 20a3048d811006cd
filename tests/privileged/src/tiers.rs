//! Tiers: each environment has the tier it expects, `doctor` says what this kernel enforces, `best_effort` records the tier reached, Landlock stands in without BPF LSM.

use super::*;

#[test]
fn best_effort_records_the_tier_reached() {
    let tier = tier();
    let dir = Scratch::new("tier");
    let (secret, ..) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(&policy, &audit, &["read", secret.to_str().unwrap()]);
    let recs = records(&audit);
    assert_eq!(recs[0]["reason"], "session_start");
    let recorded = recs[0]["detail"]["tier"].as_str().unwrap();
    let lsm = recs[0]["detail"]["kernel"]["lsm/file_open"]
        .as_str()
        .unwrap();
    let level = recs[0]["detail"]["tier_level"].as_u64();
    assert_eq!(level, doctor()["tier"].as_u64(), "run and doctor agree");
    match tier {
        Tier::Landlock => {
            // No BPF LSM here: Landlock stands in for the file sandbox (tier 2).
            assert!(recorded.starts_with('2'), "{recorded}");
            assert!(lsm.contains("Operation not permitted"), "{lsm}");
            let landlock = recs[0]["detail"]["kernel"]["landlock"].as_str().unwrap();
            assert!(landlock.starts_with("applied"), "{landlock}");
            assert!(
                stdout(&out).contains("FAIL read: Permission denied"),
                "{}",
                stdout(&out)
            );
            assert_eq!(out.status.code(), Some(1));
        }
        Tier::BpfLsm => {
            assert!(recorded.starts_with('1'), "{recorded}");
            assert_eq!(lsm, "attached");
            assert_eq!(out.status.code(), Some(1));
        }
    }
}

#[test]
fn the_environment_has_the_tier_it_expects() {
    let want: u64 = std::env::var("GATEWAYD_EXPECT_TIER")
        .expect(
            "GATEWAYD_EXPECT_TIER must say which tier this environment has (cargo xtask test \
             sets it: 2 on the host, 1 in the guest)",
        )
        .parse()
        .expect("GATEWAYD_EXPECT_TIER is a tier number");
    let v = doctor();
    assert_eq!(v["tier"].as_u64(), Some(want), "{v}");
}

#[test]
fn doctor_reports_what_this_kernel_enforces() {
    let tier = tier();
    let v = doctor();
    for p in [
        "cgroup/connect4",
        "cgroup/connect6",
        "cgroup/sendmsg4",
        "cgroup/sendmsg6",
    ] {
        assert_eq!(v[p]["ok"], true, "{p}: {v}");
    }
    assert_eq!(v["eBPF object + ring buffer"]["ok"], true);
    // One row per program of the table, and nothing the table lacks.
    for p in &gatewayd_kernel::kernel::PROGRAMS {
        assert!(v[p.name]["ok"].is_boolean(), "{}: {v}", p.name);
    }
    let lsm_rows = v
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("lsm/"))
        .count();
    assert_eq!(
        lsm_rows,
        gatewayd_kernel::kernel::PROGRAMS
            .iter()
            .filter(|p| p.is_lsm())
            .count()
    );
    assert_eq!(v["lsm/file_open"]["ok"], tier == Tier::BpfLsm, "{v}");
    let text = v["tier_text"].as_str().unwrap();
    match tier {
        Tier::BpfLsm => assert!(text.starts_with("1 "), "{text}"),
        Tier::Landlock => assert!(text.starts_with("2 (cgroup egress + Landlock"), "{text}"),
    }
    // Below tier 1, doctor says how to get there, naming the program the kernel refused.
    let advice = v["tier1_advice"]
        .as_array()
        .expect("tier1_advice is an array");
    match tier {
        Tier::BpfLsm => assert!(advice.is_empty(), "{v}"),
        Tier::Landlock => assert!(
            advice
                .iter()
                .any(|a| a.as_str().is_some_and(|a| a.contains("lsm/"))),
            "{v}"
        ),
    }
}

#[test]
fn landlock_stands_in_without_bpf_lsm() {
    let tier = tier();
    let dir = Scratch::new("landlock");
    let (secret, inner, other, link) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret, dir.path("vault")]}}),
    );
    let audit = dir.path("audit.jsonl");
    let read = |p: &PathBuf| p.to_str().unwrap().to_string();
    let out = run_agent(
        &policy,
        &audit,
        &[
            "read",
            &read(&secret),
            "+",
            "read",
            &read(&inner),
            "+",
            "read",
            &read(&link),
            "+",
            "read",
            &read(&other),
            "+",
            "read",
            &read(&audit),
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    let start = &records(&audit)[0];
    let landlock = start["detail"]["kernel"]["landlock"].as_str();
    match tier {
        Tier::Landlock => {
            assert!(
                landlock.is_some_and(|s| s.starts_with("applied")),
                "{landlock:?}"
            );
            for (i, what) in [
                "protected file",
                "file under a protected directory",
                "hard link to a protected file",
            ]
            .iter()
            .enumerate()
            {
                assert!(
                    lines[i].starts_with("FAIL read: Permission denied"),
                    "{what}: {text}"
                );
            }
        }
        Tier::BpfLsm => {
            assert_eq!(landlock, None, "tier 1 does not need Landlock");
            assert!(
                lines[..3]
                    .iter()
                    .all(|l| l.starts_with("FAIL read: Operation not permitted")),
                "{text}"
            );
        }
    }
    assert!(lines[3].starts_with("OK read"), "unprotected file: {text}");
    assert!(
        lines[4].starts_with("FAIL read"),
        "the audit log is protected too: {text}"
    );
}
