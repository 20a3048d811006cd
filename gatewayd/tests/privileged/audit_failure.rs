//! A session does not run unrecorded (docs/POLICY.md, `on_audit_failure`): with the audit
//! log on a filesystem that fills up under a flood of kernel denials, `gatewayd run` stops
//! the agent and says why on the terminal; with `continue` the agent runs on.
use std::process::Command;

use crate::{Scratch, best_effort, listener, run_agent, stdout, tier, write_policy};

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
    for (mode, attempts) in [("continue", "3000"), ("stop", "1000000")] {
        let disk = SmallDisk::at(dir.path(mode));
        let mut body = best_effort(serde_json::json!([]));
        body["on_audit_failure"] = serde_json::json!(mode);
        let policy = write_policy(&dir, body);
        let out = run_agent(
            &policy,
            &disk.0.join("audit.jsonl"),
            &["tryconnect", &target, attempts],
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
