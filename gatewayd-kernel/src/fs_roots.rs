//! `sandbox.readable` and `sandbox.writable` as the kernel enforces them on the agent's own
//! syscalls, at both tiers (docs/KERNEL.md, "Readable and writable roots").
//!
//! Each list is enforced on its own: a listed `readable` restricts reading, a listed
//! `writable` restricts writing, an empty one leaves its side unrestricted. (The gateway reads
//! empty lists as "nothing through tools"; an agent process, unlike a tool call, must read
//! its own libraries, so the kernel cannot read them that way.) The readable side is wider
//! than `readable`: what a process needs to start and what it may write are readable too.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use gateway_common::{ROOT_NAMES, ROOT_READ, ROOT_WRITE};

use gatewayd_core::policy::Sandbox;

/// The dynamic loader's cache, read by every dynamically linked program.
const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// The agent's file roots, from its policy's `sandbox` ([`FsRoots::of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsRoots {
    /// With `sandbox.readable` listed: every tree the agent may read: `readable`, `writable`,
    /// `root`, the library trees (`sandbox.exec_libs` in force), the `exec` binaries and
    /// their ELF interpreters, and the dynamic loader's cache. `None`: reading is not
    /// restricted.
    pub read: Option<Vec<PathBuf>>,
    /// With `sandbox.writable` listed: the trees the agent may write. `None`: writing is not
    /// restricted.
    pub write: Option<Vec<PathBuf>>,
    /// With `sandbox.protected_names` listed: where the names apply (`root` and the
    /// writable roots). `None`: no name is protected.
    pub names: Option<Vec<PathBuf>>,
}

impl FsRoots {
    /// The roots of a policy's sandbox.
    pub fn of(sandbox: &Sandbox) -> FsRoots {
        let read = (!sandbox.readable.is_empty()).then(|| {
            let mut v = sandbox.readable.clone();
            v.extend(sandbox.writable.iter().cloned());
            v.extend(sandbox.root.iter().cloned());
            v.extend(sandbox.exec_libs());
            v.extend(crate::landlock::with_interpreters(&sandbox.exec));
            if Path::new(LD_SO_CACHE).exists() {
                v.push(LD_SO_CACHE.into());
            }
            dedup(v)
        });
        let write = (!sandbox.writable.is_empty()).then(|| dedup(sandbox.writable.clone()));
        let names = (!sandbox.protected_names.is_empty()).then(|| {
            let mut v = sandbox.writable.clone();
            v.extend(sandbox.root.iter().cloned());
            dedup(v)
        });
        FsRoots { read, write, names }
    }

    /// Whether the kernel restricts anything by roots.
    pub fn enforced(&self) -> bool {
        self.flags() != 0
    }

    /// The sides enforced: [`ROOT_READ`] | [`ROOT_WRITE`] (`SessionInfo::roots`).
    pub fn flags(&self) -> u32 {
        let mut f = 0;
        if self.read.is_some() {
            f |= ROOT_READ;
        }
        if self.write.is_some() {
            f |= ROOT_WRITE;
        }
        f
    }

    /// Every path the kernel matches, with its rights ([`ROOT_READ`] | [`ROOT_WRITE`] |
    /// [`ROOT_NAMES`]): each
    /// root that exists (made canonical), then each of `mounts` (mount points) lying strictly
    /// under a root, with the union of the rights of the roots it lies under. A walk up the
    /// dentry parents stops at its filesystem's root, so the root of a filesystem mounted
    /// under a root needs an entry of its own. Sorted by path, one entry per path.
    pub fn entries(&self, mounts: &[PathBuf]) -> Vec<(PathBuf, u32)> {
        let mut roots: BTreeMap<PathBuf, u32> = BTreeMap::new();
        for (paths, rights) in [
            (&self.read, ROOT_READ),
            (&self.write, ROOT_WRITE),
            (&self.names, ROOT_NAMES),
        ] {
            for p in paths.iter().flatten() {
                if let Ok(c) = std::fs::canonicalize(p) {
                    *roots.entry(c).or_default() |= rights;
                }
            }
        }
        let mut all = roots.clone();
        for m in mounts {
            let rights = roots
                .iter()
                .filter(|(r, _)| m != *r && m.starts_with(r))
                .fold(0, |acc, (_, rights)| acc | rights);
            if rights != 0 {
                *all.entry(m.clone()).or_default() |= rights;
            }
        }
        all.into_iter().collect()
    }
}

fn dedup(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
    v.sort();
    v.dedup();
    v
}

/// The mount points of this process's mount namespace (`/proc/self/mountinfo`); empty when
/// it cannot be read.
pub fn mount_points() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// The mount point (fifth field, octal escapes `\040` undone) of each line of a mountinfo
/// text.
fn parse_mountinfo(text: &str) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStringExt as _;
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|field| {
            let b = field.as_bytes();
            let mut out = Vec::with_capacity(b.len());
            let mut i = 0;
            while i < b.len() {
                let octal = b.get(i + 1..i + 4).and_then(|d| {
                    std::str::from_utf8(d)
                        .ok()
                        .and_then(|d| u8::from_str_radix(d, 8).ok())
                });
                match (b[i], octal) {
                    (b'\\', Some(c)) => {
                        out.push(c);
                        i += 4;
                    }
                    (c, _) => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            PathBuf::from(std::ffi::OsString::from_vec(out))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(json: serde_json::Value) -> Sandbox {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn empty_lists_leave_their_side_unrestricted() {
        let none = FsRoots::of(&sandbox(serde_json::json!({"root": "/tmp"})));
        assert_eq!(none, FsRoots::default());
        assert!(!none.enforced());
        let write_only = FsRoots::of(&sandbox(serde_json::json!({"writable": ["/w"]})));
        assert_eq!(write_only.read, None, "reading stays unrestricted");
        assert_eq!(write_only.write, Some(vec![PathBuf::from("/w")]));
        assert_eq!(write_only.flags(), ROOT_WRITE);
        let read_only = FsRoots::of(&sandbox(serde_json::json!({"readable": ["/r"]})));
        assert_eq!(read_only.write, None, "writing stays unrestricted");
        assert_eq!(read_only.flags(), ROOT_READ);
    }

    #[test]
    fn the_read_side_holds_what_a_process_needs_to_start_and_what_it_may_write() {
        let exe = std::env::current_exe().unwrap();
        let r = FsRoots::of(&sandbox(serde_json::json!({
            "root": "/work", "readable": ["/r"], "writable": ["/w"],
            "exec": [exe], "exec_libs": ["/libs"]})));
        let read = r.read.clone().unwrap();
        for p in ["/r", "/w", "/work", "/libs"] {
            assert!(read.contains(&PathBuf::from(p)), "{p}: {read:?}");
        }
        let exe = std::fs::canonicalize(&exe).unwrap();
        assert!(read.contains(&exe), "the listed binary: {read:?}");
        let interp = crate::landlock::elf_interpreter(&exe).unwrap();
        let interp = std::fs::canonicalize(interp).unwrap();
        assert!(read.contains(&interp), "its interpreter: {read:?}");
        if Path::new(LD_SO_CACHE).exists() {
            assert!(read.contains(&PathBuf::from(LD_SO_CACHE)), "{read:?}");
        }
        assert_eq!(r.write, Some(vec![PathBuf::from("/w")]));
        assert_eq!(r.flags(), ROOT_READ | ROOT_WRITE);
    }

    #[test]
    fn default_library_trees_are_readable() {
        let r = FsRoots::of(&sandbox(serde_json::json!({"readable": ["/r"]})));
        let read = r.read.unwrap();
        for lib in Sandbox::DEFAULT_EXEC_LIBS {
            assert_eq!(
                read.contains(&PathBuf::from(lib)),
                Path::new(lib).exists(),
                "{lib}: {read:?}"
            );
        }
    }

    #[test]
    fn mount_points_under_a_root_get_its_rights() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(b.join("in")).unwrap();
        std::fs::create_dir_all(&a).unwrap();
        let r = FsRoots {
            read: Some(vec![a.clone(), b.clone()]),
            write: Some(vec![b.clone(), base.join("missing")]),
            names: Some(vec![b.join("in")]),
        };
        let mounts = [
            a.join("mnt"),
            b.join("in/mnt"),
            base.join("c/mnt"),
            a.clone(),
            PathBuf::from("/"),
        ];
        let got = r.entries(&mounts);
        assert_eq!(
            got,
            [
                (a.clone(), ROOT_READ),
                (a.join("mnt"), ROOT_READ),
                (b.clone(), ROOT_READ | ROOT_WRITE),
                (b.join("in"), ROOT_NAMES),
                (b.join("in/mnt"), ROOT_READ | ROOT_WRITE | ROOT_NAMES),
            ],
            "a missing root and mounts elsewhere have no entry"
        );
    }

    #[test]
    fn mountinfo_gives_mount_points_with_escapes_undone() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    40 22 0:35 / /tmp/with\\040space rw - tmpfs tmpfs rw\n";
        assert_eq!(
            parse_mountinfo(text),
            [PathBuf::from("/"), PathBuf::from("/tmp/with space")]
        );
        assert!(mount_points().contains(&PathBuf::from("/")));
    }
}
