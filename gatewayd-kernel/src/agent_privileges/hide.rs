//! Tier 2: the protected paths hidden in the agent's own mount namespace, the exec allowlist
//! and gatewayd's own kernel state made read-only there (`docs/KERNEL.md`, "Tier 2").
//!
//! Without BPF LSM nothing matches a file by inode, and Landlock (an allowlist of trees)
//! cannot say "everything except these paths" without taking the listing of their
//! ancestors away. So, as bubblewrap-based sandboxes do, the protected paths are covered
//! in the agent's private mount namespace before it starts:
//!
//! - a protected directory gets an empty tmpfs of mode `0000`, mounted read-only,
//!   `nosuid`, `nodev`, `noexec` over it: it lists as an empty directory nobody without
//!   `CAP_DAC_OVERRIDE` may enter (`EACCES`), and nothing can be made in it (`EROFS`);
//! - a protected file (or socket, FIFO, device) gets `/dev/null` bound over it, read-only
//!   and `nodev`: every open of it, for reading or writing, is refused (`EACCES`: a device
//!   on a `nodev` mount), a link from it crosses mounts (`EXDEV`), and renaming or deleting
//!   it fails (`EBUSY`: a mount point);
//! - each file of the exec allowlist and each one's ELF interpreter is bound onto itself,
//!   read-only and `nosuid`, `nodev`: writing or truncating it fails (`EROFS`), replacing or
//!   deleting it fails (`EBUSY`);
//! - the cgroup filesystem and bpffs are bound onto themselves and made read-only with every
//!   mount below them (`mount_setattr`, `AT_RECURSIVE`): the agent cannot move itself out of
//!   its cgroup nor unpin gatewayd's programs;
//! - each path-named Unix socket bound on the host when the session starts, unless listed,
//!   gets `/dev/null` bound over it like a protected file ([`host_sockets`]): connecting or
//!   sending to it fails (`ECONNREFUSED`).
//!
//! The agent cannot undo these: it holds no `CAP_SYS_ADMIN` (unless its policy keeps it),
//! the seccomp filter denies every mount call and Landlock denies every change to the mount
//! tree. The mounts are made in the forked child after it has entered its cgroup (the
//! cgroup filesystem must still be writable then), with paths prepared before the fork:
//! [`Hiding::apply`] only makes syscalls.
use std::{
    collections::BTreeMap,
    ffi::CString,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Path, PathBuf},
};

use serde_json::json;

use super::host_sockets;

/// Where gatewayd's kernel state lives: made read-only for the agent.
const READ_ONLY_TREES: &[&str] = &["/sys/fs/cgroup", "/sys/fs/bpf"];

/// How many directory entries [`hard_link_warnings`] looks at, at most, under the protected
/// directories together.
const LINK_SCAN_LIMIT: usize = 20_000;

/// The mounts that hide the protected paths from the agent, made in its mount namespace.
#[derive(Debug, Clone, Default)]
pub struct Hiding {
    dirs: Vec<CString>,
    files: Vec<CString>,
    read_only: Vec<CString>,
    read_only_trees: Vec<CString>,
    sockets: Vec<CString>,
    /// How many bound path-named sockets the kernel listed when the sockets were planned.
    sockets_listed: usize,
}

/// `paths` made canonical (those that do not exist are dropped: the kernel layer's start
/// record warns about them), sorted, without duplicates. A canonical path comes from the
/// kernel and holds no NUL byte (a path given with one does not exist).
fn canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| !p.as_os_str().as_bytes().contains(&0))
        .collect();
    v.sort();
    v.dedup();
    v
}

impl Hiding {
    /// The plan for `protected` (files and directories) and `exec` (the exec allowlist:
    /// each file and its ELF interpreter is made read-only). A path under a protected
    /// directory needs nothing of its own: the directory's tmpfs covers it.
    /// Also returns warnings about hard links to protected files it could not hide
    /// ([`hard_links`]).
    pub fn plan(protected: &[PathBuf], exec: &[PathBuf]) -> (Hiding, Vec<(PathBuf, String)>) {
        let mut hidden: Vec<PathBuf> = Vec::new();
        for p in canonical(protected) {
            // Sorted: an ancestor comes before what lies under it.
            if !hidden.iter().any(|h| p.starts_with(h)) {
                hidden.push(p);
            }
        }
        let (aliases, warnings) = hard_links(&hidden);
        let covered = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
        let bins = crate::landlock::with_interpreters(exec);
        let mut plan = Hiding::default();
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        for p in &hidden {
            if p.is_dir() {
                plan.dirs.extend(c(p));
            } else {
                plan.files.extend(c(p));
            }
        }
        plan.files.extend(aliases.iter().filter_map(|p| c(p)));
        let bins = bins.iter().filter(|b| b.is_file() && !covered(b));
        plan.read_only.extend(bins.filter_map(|b| c(b)));
        let trees = READ_ONLY_TREES.iter().map(Path::new);
        plan.read_only_trees
            .extend(trees.filter(|t| t.is_dir() && !covered(t)).filter_map(c));
        (plan, warnings)
    }

    /// Adds the host's path-named Unix sockets to cover ([`host_sockets`]), except `allowed`
    /// (the policy's `network.unix` paths and the session's own gateway socket).
    pub fn cover_sockets(&mut self, allowed: &[PathBuf]) {
        let covered: Vec<PathBuf> = self
            .dirs
            .iter()
            .map(|c| PathBuf::from(std::ffi::OsStr::from_bytes(c.as_bytes())))
            .collect();
        let (sockets, listed) = host_sockets::to_cover(allowed, &covered);
        self.sockets_listed = listed;
        let c = |p: &PathBuf| CString::new(p.as_os_str().as_bytes()).ok();
        self.sockets = sockets.iter().filter_map(c).collect();
    }

    /// What the `session_start` record says about the hiding.
    pub fn describe(&self) -> serde_json::Value {
        let list = |v: &[CString]| -> Vec<String> {
            v.iter().map(|c| c.to_string_lossy().into_owned()).collect()
        };
        json!({
            "directories": list(&self.dirs),
            "files": list(&self.files),
            "read_only": list(&self.read_only),
            "read_only_trees": list(&self.read_only_trees),
            "unix_sockets": {
                "bound_on_the_host": self.sockets_listed,
                "covered": list(&self.sockets),
            },
        })
    }

    /// Whether there is nothing to mount (tier 1, or before [`Hiding::plan`]).
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
            && self.files.is_empty()
            && self.read_only.is_empty()
            && self.read_only_trees.is_empty()
            && self.sockets.is_empty()
    }

    /// Makes the mounts, in the forked child, inside its private mount namespace, while it
    /// still holds `CAP_SYS_ADMIN`; then enters its working directory again by name, so a
    /// working directory under a hidden one is left for the mount that covers it (or `/`).
    /// Only async-signal-safe syscalls. Any failure stops the start: fail closed.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let hidden_flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        for d in &self.dirs {
            unless_absent(mount(
                Some(c"tmpfs"),
                d,
                Some(c"tmpfs"),
                hidden_flags,
                Some(c"mode=0000,size=4k,nr_inodes=2"),
            ))?;
        }
        let hidden = RDONLY | NOSUID | NODEV | NOEXEC;
        for f in &self.files {
            unless_absent(bind_read_only(c"/dev/null", f, hidden, false))?;
        }
        for b in &self.read_only {
            // Added to the flags the file's mount has (a `noexec` one stays so).
            unless_absent(bind_read_only(b, b, RDONLY | NOSUID | NODEV, false))?;
        }
        for t in &self.read_only_trees {
            bind_read_only(t, t, hidden, true)?;
        }
        for s in &self.sockets {
            // A socket whose name went away since the plan (or now lies under another mount)
            // cannot be reached by that name either.
            unless_absent(bind_read_only(c"/dev/null", s, hidden, false))?;
        }
        enter_cwd_again()
    }
}

/// A mount whose target the agent's namespace does not have (`ENOENT`) is not needed: the
/// agent cannot reach that path by its name either. So it is with a path under the host's
/// `/tmp` that a private `/tmp` does not bind (gatewayd's own audit log or policy there, a
/// home under `/tmp`).
pub(super) fn unless_absent(made: std::io::Result<()>) -> std::io::Result<()> {
    match made {
        Err(e) if is_absent(&e) => Ok(()),
        r => r,
    }
}

/// Whether a mount failed because its target is not in the agent's namespace (`ENOENT`).
pub(super) fn is_absent(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOENT)
}

pub(super) fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
) -> std::io::Result<()> {
    let ptr = |c: Option<&std::ffi::CStr>| c.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: NUL-terminated strings (or null) that outlive the call.
    let r = unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

// Mount attributes (`MOUNT_ATTR_*`, include/uapi/linux/mount.h).
pub(super) const RDONLY: u64 = 0x1;
pub(super) const NOSUID: u64 = 0x2;
pub(super) const NODEV: u64 = 0x4;
pub(super) const NOEXEC: u64 = 0x8;

/// Binds `source` on `target`, then adds `attrs` to the new mount (`mount_setattr`, which
/// keeps the flags it had, such as `noexec`); with `tree`, the mounts below `source` come
/// along and get `attrs` too.
pub(super) fn bind_read_only(
    source: &std::ffi::CStr,
    target: &std::ffi::CStr,
    attrs: u64,
    tree: bool,
) -> std::io::Result<()> {
    let rec = if tree { libc::MS_REC } else { 0 };
    mount(Some(source), target, None, libc::MS_BIND | rec, None)?;
    set_attrs(target, attrs, tree)
}

/// Adds `attrs` to the mount whose root is `target` (`mount_setattr`, which keeps the
/// flags it had), and with `tree` to every mount below it. `EINVAL` when `target` is not
/// the root of a mount.
pub(super) fn set_attrs(target: &std::ffi::CStr, attrs: u64, tree: bool) -> std::io::Result<()> {
    let at_rec = if tree { libc::AT_RECURSIVE } else { 0 };
    // struct mount_attr { attr_set, attr_clr, propagation, userns_fd } (MOUNT_ATTR_SIZE_VER0).
    let attr: [u64; 4] = [attrs, 0, 0, 0];
    // SAFETY: attr is the 32-byte struct mount_attr; target is NUL-terminated. Every kernel
    // with Landlock (5.13) has mount_setattr (5.12).
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            at_rec,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `chdir` to the working directory's own path, so that it is looked up again through the
/// new mounts; `/` when that path is gone (it lay under a hidden directory).
pub(super) fn enter_cwd_again() -> std::io::Result<()> {
    let mut buf = [0u8; libc::PATH_MAX as usize];
    // SAFETY: getcwd writes at most buf.len() bytes, NUL-terminated, into buf.
    let got = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    // SAFETY: buf holds a NUL-terminated path when getcwd succeeded.
    if got > 0 && unsafe { libc::chdir(buf.as_ptr().cast()) } == 0 {
        return Ok(());
    }
    // SAFETY: a static C string.
    if unsafe { libc::chdir(c"/".as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Hard links, made before the session, to the protected files: mounts cover names, not
/// inodes. Each protected regular file, and each one under a protected directory (looking
/// at no more than [`LINK_SCAN_LIMIT`] entries under them together, on each directory's own
/// filesystem), that has other names (`st_nlink > 1`) is looked for in the directories that
/// lead to a protected path (their own entries, not below: those were listed anyway, and a
/// link next to the protected file is the usual case); the names found there are returned
/// to be hidden too. Finding every other name would mean walking whole filesystems, so for
/// each file with names not found there, a warning (path, message) says how many stay
/// readable.
fn hard_links(hidden: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let mut warnings = Vec::new();
    // (dev, ino) → (a protected name, other names, other names found).
    let mut linked: BTreeMap<(u64, u64), (PathBuf, u64, u64)> = BTreeMap::new();
    let mut note = |p: &Path, m: &std::fs::Metadata| {
        if m.is_file() && m.nlink() > 1 {
            linked.insert((m.dev(), m.ino()), (p.to_owned(), m.nlink() - 1, 0));
        }
    };
    let mut budget = LINK_SCAN_LIMIT;
    for p in hidden {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            continue;
        };
        note(p, &m);
        let mut stack = if m.is_dir() {
            vec![p.clone()]
        } else {
            Vec::new()
        };
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if budget == 0 {
                    warnings.push((
                        p.clone(),
                        format!(
                            "stopped looking for hard links to protected files after {LINK_SCAN_LIMIT} entries"
                        ),
                    ));
                    stack.clear();
                    break;
                }
                budget -= 1;
                let Ok(em) = e.metadata() else { continue };
                if em.is_dir() && em.dev() == m.dev() {
                    stack.push(e.path());
                } else {
                    note(&e.path(), &em);
                }
            }
        }
    }
    let mut aliases = Vec::new();
    if !linked.is_empty() {
        let mut dirs: Vec<&Path> = hidden.iter().flat_map(|p| p.ancestors().skip(1)).collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = e.path();
                let Ok(m) = e.metadata() else { continue };
                if hidden.iter().any(|h| path.starts_with(h)) {
                    continue;
                }
                if let Some(l) = linked.get_mut(&(m.dev(), m.ino())) {
                    l.2 += 1;
                    aliases.push(path);
                }
            }
        }
    }
    for (name, others, found) in linked.into_values() {
        if found < others {
            warnings.push((
                name,
                format!(
                    "a protected file with {others} other hard link(s) ({found} of them next to the protected paths, hidden too): at tier 2 the rest stay readable under their other names"
                ),
            ));
        }
    }
    (aliases, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_a_hidden_directory_need_no_mount_of_their_own() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("vault/sub")).unwrap();
        std::fs::write(root.join("vault/sub/key"), "k").unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        std::fs::write(root.join("tool"), "t").unwrap();
        std::fs::write(root.join("vault/tool"), "t").unwrap();
        let (plan, warnings) = Hiding::plan(
            &[
                root.join("vault/sub/key"),
                root.join("vault"),
                root.join("secret"),
                root.join("missing"),
            ],
            &[root.join("tool"), root.join("vault/tool")],
        );
        let s = |p: &str| root.join(p).display().to_string();
        let d = plan.describe();
        assert_eq!(d["directories"], json!([s("vault")]));
        assert_eq!(d["files"], json!([s("secret")]));
        assert_eq!(d["read_only"], json!([s("tool")]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(!plan.is_empty());
        assert!(Hiding::default().is_empty());
    }

    #[test]
    fn hard_links_next_to_protected_paths_are_hidden_and_the_others_reported() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("vault")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        std::fs::write(root.join("vault/key"), "k").unwrap();
        std::fs::write(root.join("vault/alone"), "a").unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        let protected = [root.join("vault"), root.join("secret")];
        let (plan, warnings) = Hiding::plan(&protected, &[]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(plan.files.len(), 1);
        // Next to a protected path (in a directory that leads to one): hidden too.
        std::fs::hard_link(root.join("secret"), root.join("secret-link")).unwrap();
        std::fs::hard_link(root.join("vault/key"), root.join("key-link")).unwrap();
        // Elsewhere: reported.
        std::fs::hard_link(root.join("vault/key"), root.join("elsewhere/key")).unwrap();
        let (plan, warnings) = Hiding::plan(&protected, &[]);
        let s = |p: &str| root.join(p).display().to_string();
        assert_eq!(
            plan.describe()["files"],
            json!([s("secret"), s("key-link"), s("secret-link")])
        );
        let w: Vec<&PathBuf> = warnings.iter().map(|(p, _)| p).collect();
        assert_eq!(w, [&root.join("vault/key")], "{warnings:?}");
        assert!(warnings[0].1.contains("1 of them"), "{warnings:?}");
    }
}
