//! `sandbox.read_only`: files and directories the agent may read but never change, even
//! inside a writable root (docs/KERNEL.md, "Read-only paths"): git's config and hooks, an
//! agent host's own settings, what the user's own programs run later.
//!
//! At both tiers, in the agent's mount namespace, each that exists at the start is bound
//! read-only onto itself (`ro,nosuid,nodev`): writing, truncating or making a file in it
//! fails with `EROFS`, and removing or renaming it with `EBUSY` (it is a mount point). So
//! that it cannot be moved aside with a directory above it and replaced, every directory
//! between the writable root and it is bound onto itself too (read-write: a mount point
//! cannot be renamed or removed either). Made in the PID namespace's init with the other
//! mounts ([`super::surfaces::Surfaces::mount`]), before it enters the cgroup.
use std::{ffi::CString, os::unix::ffi::OsStrExt as _, path::PathBuf};

use serde_json::json;

use super::hide::{NODEV, NOSUID, RDONLY, bind_read_only, mount, unless_absent};

/// The binds, parents first.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadOnly {
    /// (path, read-only): read-write ones are the directories that pin a read-only path.
    binds: Vec<(PathBuf, bool)>,
}

impl ReadOnly {
    /// The binds for `read_only` (those that exist, after links), pinned below whichever of
    /// `writable` holds them.
    pub(crate) fn plan(read_only: &[PathBuf], writable: &[PathBuf]) -> ReadOnly {
        let writable: Vec<PathBuf> = writable
            .iter()
            .map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.clone()))
            .collect();
        let mut binds: Vec<(PathBuf, bool)> = Vec::new();
        for p in read_only
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
        {
            for w in writable.iter().filter(|w| p.starts_with(w) && **w != p) {
                let pins = p
                    .ancestors()
                    .skip(1)
                    .take_while(|a| a.starts_with(w) && *a != w.as_path());
                binds.extend(pins.map(|a| (a.to_path_buf(), false)));
            }
            binds.push((p, true));
        }
        // Parents before what lies below them; a path both pinned and read-only is read-only.
        binds.sort_by(|a, b| {
            (a.0.components().count(), &a.0, a.1).cmp(&(b.0.components().count(), &b.0, b.1))
        });
        binds.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 |= later.1;
                true
            } else {
                false
            }
        });
        ReadOnly { binds }
    }

    /// What the `session_start` record says.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let list = |ro: bool| -> Vec<String> {
            self.binds
                .iter()
                .filter(|b| b.1 == ro)
                .map(|b| b.0.display().to_string())
                .collect()
        };
        json!({"read_only": list(true), "pinned": list(false)})
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// The binds as C strings, for the forked child (no allocation there).
    pub(crate) fn prepared(&self) -> Vec<(CString, bool)> {
        self.binds
            .iter()
            .filter_map(|(p, ro)| Some((CString::new(p.as_os_str().as_bytes()).ok()?, *ro)))
            .collect()
    }
}

/// In the PID namespace's init: each bind, in order. Any failure stops the start.
pub(crate) fn apply(binds: &[(CString, bool)]) -> std::io::Result<()> {
    for (path, read_only) in binds {
        unless_absent(if *read_only {
            bind_read_only(path, path, RDONLY | NOSUID | NODEV, false)
        } else {
            mount(Some(path), path, None, libc::MS_BIND, None)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_below_the_writable_root_are_pinned_first() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "").unwrap();
        let plan = ReadOnly::plan(
            &[
                ws.join(".git/config"),
                ws.join(".git/hooks"),
                ws.join(".git/absent"),
            ],
            std::slice::from_ref(&ws),
        );
        assert_eq!(
            plan.binds,
            [
                (ws.join(".git"), false),
                (ws.join(".git/config"), true),
                (ws.join(".git/hooks"), true),
            ]
        );
        let d = plan.describe();
        assert_eq!(d["pinned"].as_array().unwrap().len(), 1);
        // Outside every writable root: bound, nothing pinned.
        let alone = ReadOnly::plan(&[ws.join(".git/config")], &[]);
        assert_eq!(alone.binds, [(ws.join(".git/config"), true)]);
    }
}
