//! Locking the egress of a session another process added: what `gatewayd serve` does when a
//! session of an agent that runs inside a kernel session (a `gatewayd run` agent calling the
//! daemon, or any cgroup under the parent that has an entry) trips the Rule of Two.
//!
//! The programs look a task's session up as the innermost cgroup among its ancestors that
//! has a `SESSIONS` entry; so the session to lock for a cgroup is the first of the cgroup and
//! its ancestors, up to the parent cgroup, that has one. Its `EGRESS` entry's lockdown switch
//! is set under the set lock (its owner may be removing it; it then has nothing left to
//! enforce on: its cgroup is empty).
use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use super::{
    KernelError, OBJECT,
    maps::{SetMaps, map_err},
    set::{PIN_BASE, SetLock, tag},
};

/// What [`lock_enclosing`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enclosing {
    /// The session with this id (its cgroup's id) is now in lockdown.
    Locked {
        /// The session's id (its cgroup's id).
        session: u64,
        /// Its cgroup.
        cgroup: PathBuf,
    },
    /// No kernel session of this build encloses the cgroup (or this build has no program
    /// set on this host, or this process cannot see it): nothing to lock. Says why.
    None(&'static str),
}

/// Turns all egress off for the kernel session that encloses `cgroup` (a cgroup v2 path as
/// `/proc/PID/cgroup` gives it, relative to the mount).
pub fn lock_enclosing(cgroup: &str) -> Result<Enclosing, KernelError> {
    if OBJECT.is_empty() {
        return Ok(Enclosing::None(
            "this gatewayd was built without its kernel programs",
        ));
    }
    let mount = crate::cgroup::cgroup2_mount()?;
    let parent = mount.join("gatewayd");
    let dir = mount.join(cgroup.trim_start_matches('/'));
    if !dir.starts_with(&parent) || dir == parent {
        return Ok(Enclosing::None(
            "the cgroup is not under gatewayd's parent cgroup",
        ));
    }
    let set = Path::new(PIN_BASE).join(tag());
    if std::fs::symlink_metadata(&set).is_err() {
        return Ok(Enclosing::None(
            "no program set of this gatewayd is pinned here (or it cannot be seen: not root)",
        ));
    }
    let _lock = SetLock::acquire()?;
    let mut maps = SetMaps::open(&set)?;
    let mut at = dir.as_path();
    while at.starts_with(&parent) && at != parent {
        if let Ok(m) = std::fs::metadata(at) {
            let id = m.ino();
            if maps.sessions.get(&id, 0).is_ok() {
                let mut policy = maps.egress.get(&id, 0).map_err(map_err("EGRESS"))?;
                policy.lockdown = 1;
                maps.egress
                    .insert(id, policy, 0)
                    .map_err(map_err("EGRESS"))?;
                return Ok(Enclosing::Locked {
                    session: id,
                    cgroup: at.to_owned(),
                });
            }
        }
        at = match at.parent() {
            Some(p) => p,
            None => break,
        };
    }
    Ok(Enclosing::None("no kernel session encloses the cgroup"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_outside_the_parent_has_nothing_to_lock() {
        // Stub builds stop at the first check, real ones at the second: neither locks.
        for cg in ["/", "/user.slice/user-0.slice", "/gatewayd"] {
            assert!(matches!(lock_enclosing(cg), Ok(Enclosing::None(_))), "{cg}");
        }
    }
}
