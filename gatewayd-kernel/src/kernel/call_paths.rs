//! Where a refused call's path leads, for `raw_tp/sys_exit`'s `EACCES` events: the path the
//! agent passed, made absolute against its working directory or directory descriptor (read
//! from `/proc` when the event is read: a process gone by then leaves a relative path
//! unresolved), and lexically cleaned (`.` and `..`; symbolic links are not followed). An
//! `EACCES` under one of the session's protected paths is gatewayd's refusal (at tier 2 a
//! hidden path); any other is the file's own permissions, not recorded.
use std::path::{Component, Path, PathBuf};

use gateway_common::AT_FDCWD;

use super::spec::ProtectedInode;

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
