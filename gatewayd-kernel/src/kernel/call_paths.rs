//! Where a refused call's path leads, for `raw_tp/sys_exit`'s `EACCES` events: the path the
//! agent passed, made absolute against its working directory or directory descriptor (read
//! from `/proc` when the event is read: a process gone by then leaves a relative path
//! unresolved), and lexically cleaned (`.` and `..`; symbolic links are not followed). An
//! `EACCES` under one of the session's protected paths is gatewayd's refusal (at tier 2 a
//! hidden path); where the session's Landlock ruleset enforces the roots and the exec
//! allowlist ([`KernelSpec::landlock_refusals`]), so is one outside them
//! ([`landlock_reason`]); any other is the file's own permissions, not recorded.
use std::path::{Component, Path, PathBuf};

use gateway_common::{AT_FDCWD, ROOT_READ, ROOT_WRITE, Reason};

use super::spec::{KernelSpec, ProtectedInode};

/// The kernel's own trees, which the roots do not cover and Landlock does not refuse (an
/// `EACCES` there is the file's own permissions, a process's `/proc` entries among them).
const KERNEL_TREES: [&str; 3] = ["/proc", "/sys", "/dev"];

/// `path` cleaned of `.` and `..` without touching the file system.
pub(crate) fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The absolute path `path` names for process `pid` (`dirfd` as the call got it).
pub(crate) fn resolve(pid: u32, dirfd: i32, path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    if p.is_absolute() {
        return Some(clean(p));
    }
    let base = if dirfd == AT_FDCWD {
        std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?
    } else {
        std::fs::read_link(format!("/proc/{pid}/fd/{dirfd}")).ok()?
    };
    Some(clean(&base.join(p)))
}

/// The protected path `path` is or lies under.
pub(crate) fn protected_by<'a>(path: &Path, protected: &'a [ProtectedInode]) -> Option<&'a Path> {
    protected
        .iter()
        .map(|p| p.path.as_path())
        .find(|p| path.starts_with(p))
}

/// Whether `path` (absolute, cleaned) lies outside every root with `right` while the spec
/// enforces that side; never in the kernel's own trees.
fn outside(path: &Path, right: u32, spec: &KernelSpec) -> bool {
    !KERNEL_TREES.iter().any(|t| path.starts_with(t))
        && spec.roots_enforced & right != 0
        && !spec
            .roots
            .iter()
            .any(|r| r.rights & right != 0 && path.starts_with(&r.path))
}

/// Why the session's Landlock ruleset refused `call` on `path` (absolute, cleaned) with
/// `EACCES`: an exec of a file not in the exec allowlist (by identity); without one, an exec
/// or an open outside every readable root; a `creat` or `truncate` outside every writable
/// root (a call that makes, removes or renames a name is judged by its directory:
/// [`outside_writable_dir`]). `None` when the roots and the allowlist allow it, so the
/// file's own permissions refused it; also for an open inside a readable root but outside the
/// writable ones (the event does not carry the open's flags, so a refused write cannot be
/// told from a refused read there).
pub(crate) fn landlock_reason(path: &Path, call: &str, spec: &KernelSpec) -> Option<Reason> {
    match call {
        // With an exec allowlist, Landlock runs what it lists; without one, what the read
        // roots hold (a program outside them, a toolchain the policy does not list).
        "execve" | "execveat" if spec.exec_enforced => {
            let key = super::spec::inode_key(path).ok()?;
            (!spec.exec.iter().any(|p| p.key == key)).then_some(Reason::ExecNotAllowed)
        }
        "execve" | "execveat" | "open" | "openat" | "openat2" => {
            outside(path, ROOT_READ, spec).then_some(Reason::OutsideReadable)
        }
        "creat" | "truncate" => outside(path, ROOT_WRITE, spec).then_some(Reason::OutsideWritable),
        _ => None,
    }
}

/// The directory of the name `path` (absolute, cleaned) when it lies outside every writable
/// root the spec enforces: Landlock grants making and removing names per directory, so a
/// name made, removed or renamed there was refused, whatever the roots say of the name
/// itself (a writable file root does not let it be replaced by a rename).
pub(crate) fn outside_writable_dir(path: &Path, spec: &KernelSpec) -> Option<PathBuf> {
    let dir = path.parent()?;
    outside(dir, ROOT_WRITE, spec).then(|| dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_made_absolute_and_matched_by_component() {
        assert_eq!(clean(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(
            resolve(1, AT_FDCWD, "/home/u/.ssh/../.ssh/id"),
            Some(PathBuf::from("/home/u/.ssh/id"))
        );
        let me = std::process::id();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(resolve(me, AT_FDCWD, "x/./y"), Some(cwd.join("x/y")));
        let protected = [ProtectedInode {
            path: "/home/u/.ssh".into(),
            key: gateway_common::InodeKey { dev: 1, ino: 2 },
        }];
        assert_eq!(
            protected_by(Path::new("/home/u/.ssh/id"), &protected),
            Some(Path::new("/home/u/.ssh"))
        );
        assert_eq!(protected_by(Path::new("/home/u/.sshx"), &protected), None);
    }
}
