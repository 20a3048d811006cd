//! A session does not run unrecorded (docs/POLICY.md, `on_audit_failure`): with the audit
//! log on a filesystem that fills up under a flood of kernel denials, `gatewayd run` stops
//! the agent and says why on the terminal; with `continue` the agent runs on. And a flood
//! of one kind is aggregated: the first denial in full, then counts, nothing lost.
use std::process::Command;

use crate::{Scratch, best_effort, listener, records, run_agent, stdout, tier, write_policy};

/// A 256 KiB tmpfs at `dir`, unmounted on drop.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn at(dir: std::path::PathBuf) -> SmallDisk {
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(ok.success(), "mount a tmpfs on {}", dir.display());
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_session_whose_records_cannot_be_written_is_stopped() {
    let _ = tier();
    let dir = Scratch::new("audit-full");
    let (port, _rx) = listener("127.0.0.1:0");
    let target = format!("127.0.0.1:{port}");
    // Every attempt to another port: a kind of its own, recorded in full (up to the
    // aggregator's cap per window), which fills 256 KiB within the first window.
    for (mode, attempts) in [("continue", "3000"), ("stop", "1000000")] {
        let disk = SmallDisk::at(dir.path(mode));
        let mut body = best_effort(serde_json::json!([]));
        body["on_audit_failure"] = serde_json::json!(mode);
        let policy = write_policy(&dir, body);
        let out = run_agent(
            &policy,
            &disk.0.join("audit.jsonl"),
            &["tryports", &target, attempts],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        let finished = stdout(&out).contains(&format!("{attempts} attempts, {attempts} failed"));
        if mode == "continue" {
            assert!(
                finished,
                "with continue, the agent runs to its end: {out:?}"
            );
            assert!(err.contains("audit write failed"), "{err}");
        } else {
            assert!(!finished, "the agent was not stopped: {out:?}");
            assert!(
                err.contains("the audit log cannot be written")
                    && err.contains("stopping the agent"),
                "{err}"
            );
        }
    }
}

/// 20,000 denied connects to one address: a handful of records, the first in full, and
/// counts that add up to every denial (`session_end.kernel_denials`).
#[test]
fn a_flood_of_one_kind_is_aggregated_and_nothing_is_lost() {
    let _ = tier();
    let dir = Scratch::new("audit-flood");
    let (port, _rx) = listener("127.0.0.1:0");
    let target = format!("127.0.0.1:{port}");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let t0 = std::time::Instant::now();
    let out = run_agent(&policy, &audit, &["tryconnect", &target, "20000"]);
    let seconds = usize::try_from(t0.elapsed().as_secs()).unwrap() + 1;
    assert!(
        stdout(&out).contains("20000 attempts, 20000 failed"),
        "{out:?}"
    );
    let recs = records(&audit);
    let of_kind: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| {
            r["source"] == "kernel"
                && (r["reason"] == "egress_not_allowed" || r["reason"] == "denials_aggregated")
        })
        .collect();
    let counted = crate::denials_in(&of_kind.iter().map(|r| (*r).clone()).collect::<Vec<_>>());
    // What the ring buffer could not hold is counted apart (`events_dropped`).
    let dropped = recs
        .iter()
        .find(|r| r["reason"] == "events_dropped")
        .map_or(0, |r| r["detail"]["count"].as_u64().unwrap());
    let end = recs.last().unwrap();
    assert_eq!(end["reason"], "session_end");
    assert_eq!(end["detail"]["kernel_denials"], counted, "{end}");
    assert_eq!(
        counted + dropped,
        20000,
        "every denial is a record, counted in one, or dropped and counted"
    );
    let full = of_kind
        .iter()
        .filter(|r| r["reason"] == "egress_not_allowed")
        .count();
    // One record in full and one count per window of a second, at most.
    assert!(
        full >= 1 && of_kind.len() <= 2 * seconds + 2,
        "{} records of one kind for 20,000 denials in {seconds} s ({full} in full)",
        of_kind.len()
    );
}
