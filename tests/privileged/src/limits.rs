//! The session cgroup's limits (docs/KERNEL.md, "Limits"): a fork bomb stops at
//! `agent.max_pids`, an allocation beyond `agent.max_memory_mib` kills the session and not
//! gatewayd, and `session_end` says which limit was met. Where the host's cgroup v2 hierarchy
//! has no `pids` or `memory` controller (this project's hybrid hosts), the test asserts that
//! `session_start` says the limit is not applied, and notes it.
use std::process::Command;

use crate::{
    Scratch, escape::escape_bin, escape_outcomes, note, records, stdout, tier, under_gatewayd,
    write_policy,
};

fn controllers() -> String {
    let root = gatewayd_kernel::cgroup::cgroup2_mount().unwrap();
    std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default()
}

fn session_record<'a>(recs: &'a [serde_json::Value], reason: &str) -> &'a serde_json::Value {
    recs.iter()
        .find(|r| r["reason"] == reason)
        .unwrap_or_else(|| panic!("no {reason} record"))
}

#[test]
fn a_session_is_held_to_its_process_and_memory_limits() {
    let _ = tier();
    let dir = Scratch::new("limits");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "agent": {"max_pids": 32, "max_memory_mib": 64}}),
    );
    let have = controllers();
    let has = |c: &str| have.split_whitespace().any(|x| x == c);
    if !(has("pids") && has("memory")) {
        let out = under_gatewayd(&policy, dir.path("none.jsonl"), "/bin/true")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let recs = records(&dir.path("none.jsonl"));
        let limits = &session_record(&recs, "session_start")["detail"]["limits"];
        for (c, key) in [("pids", "pids_max"), ("memory", "memory_max")] {
            if !has(c) {
                assert!(limits[key]["not_applied"].is_string(), "{limits}");
            }
        }
        note(&format!(
            "limits: the cgroup v2 hierarchy has controllers {have:?}, not pids and memory; the session runs without them and session_start says so"
        ));
        return;
    }
    // Bare, 100 processes at once and 192 MiB are nothing unusual.
    let bare = escape_outcomes(&stdout(
        &Command::new(escape_bin())
            .args(["fork_many=100", "alloc=192"])
            .output()
            .unwrap(),
    ));
    assert_eq!(bare["fork_many"], "ok");
    assert_eq!(bare["alloc"], "ok");

    let out = under_gatewayd(&policy, dir.path("pids.jsonl"), escape_bin())
        .arg("fork_many=100")
        .output()
        .unwrap();
    let got = escape_outcomes(&stdout(&out));
    assert_eq!(
        got["fork_many"],
        format!("errno {}", libc::EAGAIN),
        "{out:?}"
    );
    let recs = records(&dir.path("pids.jsonl"));
    let start = &session_record(&recs, "session_start")["detail"]["limits"];
    assert_eq!(start["pids_max"], 32, "{start}");
    assert_eq!(start["memory_max"], 64 << 20, "{start}");
    let met = &session_record(&recs, "session_end")["detail"]["limits_met"];
    assert!(
        met["forks_refused_at_pids_max"].as_u64().unwrap() > 0,
        "{met}"
    );

    let out = under_gatewayd(&policy, dir.path("memory.jsonl"), escape_bin())
        .arg("alloc=192")
        .output()
        .unwrap();
    // The OOM killer killed the whole session; gatewayd lived to record it.
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{out:?}");
    let recs = records(&dir.path("memory.jsonl"));
    let met = &session_record(&recs, "session_end")["detail"]["limits_met"];
    assert_eq!(met["session_killed_by_oom"], true, "{met}");
    assert!(crate::verify(&dir.path("memory.jsonl")).status.success());
}
