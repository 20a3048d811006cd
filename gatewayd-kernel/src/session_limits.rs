//! The session cgroup's limits (docs/KERNEL.md, "Limits"): `pids.max`, and `memory.max` with
//! `memory.oom.group`, so that a fork bomb stops at the session's share and an allocation
//! beyond it kills the whole session, never gatewayd or another process of the host.
//!
//! The controllers must be enabled in every cgroup from the cgroup v2 root down to the
//! session's parent (`cgroup.subtree_control`). Where the host's v2 hierarchy does not have
//! one (a hybrid host keeps `pids` and `memory` in v1), the session runs without that limit
//! and [`Applied`] says why; the `session_start` record carries it.
use std::{
    fs,
    path::{Path, PathBuf},
};

use gatewayd_core::policy::{Agent, DEFAULT_MAX_PIDS};
use serde_json::{Value, json};

/// The limits a session's cgroup gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `pids.max`.
    pub max_pids: u64,
    /// `memory.max`, in bytes.
    pub max_memory: u64,
}

impl Limits {
    /// The policy's `agent.max_pids` and `agent.max_memory_mib`, or their defaults (16384
    /// pids; three quarters of `MemTotal`).
    pub fn for_agent(agent: &Agent) -> Limits {
        Limits {
            max_pids: agent.max_pids.unwrap_or(DEFAULT_MAX_PIDS),
            max_memory: agent
                .max_memory_mib
                .map_or_else(default_memory, |mib| mib.saturating_mul(1 << 20)),
        }
    }
}

/// Three quarters of the host's memory (`MemTotal` in `/proc/meminfo`); 8 GiB if unreadable.
fn default_memory() -> u64 {
    let total_kib = fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    total_kib.map_or(8 << 30, |kib| kib.saturating_mul(1024) / 4 * 3)
}

/// What was applied: each limit's value, or why it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// `pids.max`, or the reason it is missing.
    pub pids: Result<u64, String>,
    /// `memory.max`, or the reason it is missing.
    pub memory: Result<u64, String>,
}

impl Applied {
    /// For the `session_start` record and `doctor`.
    pub fn describe(&self) -> Value {
        let one = |r: &Result<u64, String>| match r {
            Ok(v) => json!(v),
            Err(why) => json!({"not_applied": why}),
        };
        json!({"pids_max": one(&self.pids), "memory_max": one(&self.memory),
               "memory_oom_group": self.memory.is_ok()})
    }
}

/// Applies `limits` to the session cgroup `dir`, below the cgroup v2 mount `root`, before
/// any process enters it.
pub fn apply(root: &Path, dir: &Path, limits: Limits) -> Applied {
    let pids = enable(root, dir, "pids").and_then(|()| {
        write(&dir.join("pids.max"), &limits.max_pids.to_string())?;
        Ok(limits.max_pids)
    });
    let memory = enable(root, dir, "memory").and_then(|()| {
        write(&dir.join("memory.max"), &limits.max_memory.to_string())?;
        write(&dir.join("memory.oom.group"), "1")?;
        Ok(limits.max_memory)
    });
    Applied { pids, memory }
}

/// Enables `controller` in `cgroup.subtree_control` of every cgroup from `root` down to
/// `dir`'s parent.
fn enable(root: &Path, dir: &Path, controller: &str) -> Result<(), String> {
    let available = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if !available.split_whitespace().any(|c| c == controller) {
        return Err(format!(
            "the cgroup v2 hierarchy at {} has no {controller} controller (cgroup.controllers: {:?}); a hybrid host keeps it in cgroup v1",
            root.display(),
            available.trim()
        ));
    }
    let parent = dir.parent().ok_or("a session cgroup has a parent")?;
    let rel = parent.strip_prefix(root).map_err(|_| {
        format!(
            "{} is not below the cgroup v2 mount {}",
            dir.display(),
            root.display()
        )
    })?;
    let mut at: PathBuf = root.to_path_buf();
    let mut levels = vec![at.clone()];
    for part in rel.components() {
        at.push(part);
        levels.push(at.clone());
    }
    for level in levels {
        let control = level.join("cgroup.subtree_control");
        let now =
            fs::read_to_string(&control).map_err(|e| format!("{}: {e}", control.display()))?;
        if !now.split_whitespace().any(|c| c == controller) {
            write(&control, &format!("+{controller}"))?;
        }
    }
    Ok(())
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("writing {value} to {}: {e}", path.display()))
}

/// What the session met of its limits, read from its cgroup's event counters before the
/// cgroup is removed: `pids.events`' `max` (forks refused) and `memory.events`' `oom_kill`
/// and `oom_group_kill`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    /// Forks refused at `pids.max`.
    pub forks_refused: u64,
    /// Processes the OOM killer killed in the session.
    pub oom_kills: u64,
    /// Times the OOM killer killed the whole session.
    pub session_killed: u64,
}

impl Hits {
    /// Reads the counters of the cgroup `dir` (zero where a file is missing).
    pub fn read(dir: &Path) -> Hits {
        let field = |file: &str, key: &str| {
            fs::read_to_string(dir.join(file)).ok().and_then(|t| {
                t.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse().ok()).flatten()
                })
            })
        };
        Hits {
            forks_refused: field("pids.events", "max").unwrap_or(0),
            oom_kills: field("memory.events", "oom_kill").unwrap_or(0),
            session_killed: field("memory.events", "oom_group_kill").unwrap_or(0),
        }
    }

    /// Whether any limit was met.
    pub fn any(self) -> bool {
        self != Hits::default()
    }

    /// For the `session_end` record.
    pub fn describe(self) -> Value {
        json!({"forks_refused_at_pids_max": self.forks_refused, "oom_kills": self.oom_kills,
               "session_killed_by_oom": self.session_killed > 0})
    }
}

/// Makes this process the OOM killer's last choice (`oom_score_adj` -999), for gatewayd's
/// own processes. Lowering it needs `CAP_SYS_RESOURCE`, so it may be refused (returned);
/// a value of -900 or lower that the caller set (systemd's `OOMScoreAdjust=`) is kept.
pub fn protect_from_oom_killer() -> std::io::Result<()> {
    const PATH: &str = "/proc/self/oom_score_adj";
    let now: i32 = fs::read_to_string(PATH)?.trim().parse().unwrap_or(0);
    if now <= -900 {
        return Ok(());
    }
    fs::write(PATH, "-999")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_the_policy_or_the_defaults() {
        let mut agent = Agent::default();
        let d = Limits::for_agent(&agent);
        assert_eq!(d.max_pids, DEFAULT_MAX_PIDS);
        assert!(d.max_memory > 0);
        agent.max_pids = Some(64);
        agent.max_memory_mib = Some(100);
        assert_eq!(
            Limits::for_agent(&agent),
            Limits {
                max_pids: 64,
                max_memory: 100 << 20
            }
        );
    }

    const SMALL: Limits = Limits {
        max_pids: 10,
        max_memory: 1 << 20,
    };

    #[test]
    fn a_hierarchy_without_the_controller_is_reported_not_applied() {
        let root = tempfile::tempdir().expect("tempdir");
        fs::write(root.path().join("cgroup.controllers"), "cpu io\n").expect("write");
        let dir = root.path().join("gatewayd/s1");
        fs::create_dir_all(&dir).expect("mkdir");
        let applied = apply(root.path(), &dir, SMALL);
        assert!(
            applied
                .pids
                .as_ref()
                .is_err_and(|e| e.contains("no pids controller"))
        );
        assert!(applied.memory.is_err());
        assert!(!dir.join("pids.max").exists());
    }

    #[test]
    fn controllers_are_enabled_down_to_the_parent_and_the_limits_written() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("gatewayd/s1");
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(root.path().join("cgroup.controllers"), "pids memory\n").expect("write");
        for level in [root.path().to_path_buf(), root.path().join("gatewayd")] {
            fs::write(level.join("cgroup.subtree_control"), "").expect("write");
        }
        let applied = apply(root.path(), &dir, SMALL);
        assert_eq!(applied.pids, Ok(10));
        assert_eq!(applied.memory, Ok(1 << 20));
        assert_eq!(
            fs::read_to_string(dir.join("pids.max")).expect("read"),
            "10"
        );
        assert_eq!(
            fs::read_to_string(dir.join("memory.oom.group")).expect("read"),
            "1"
        );
        // A plain file stands for the kernel's: the last write is what it holds.
        let control = fs::read_to_string(root.path().join("gatewayd/cgroup.subtree_control"));
        assert_eq!(control.expect("read"), "+memory");
    }

    #[test]
    fn hits_are_read_from_the_event_counters() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!Hits::read(dir.path()).any());
        fs::write(dir.path().join("pids.events"), "max 7\n").expect("write");
        fs::write(
            dir.path().join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 1\n",
        )
        .expect("write");
        let h = Hits::read(dir.path());
        assert_eq!((h.forks_refused, h.oom_kills, h.session_killed), (7, 2, 1));
        assert!(h.any());
    }
}
