//! Refused path calls: the agent's system calls on a path that the VFS failed with `EROFS`
//! or `EBUSY`, where no LSM hook runs (a write under a read-only bind of the session's mount
//! namespace, a rename or removal of one of its mount points). `raw_tp/sys_exit` records them
//! into the session's ring buffer as a [`CallEvent`]: an [`Event`] of kind
//! [`EventKind::CallRefused`](crate::EventKind::CallRefused) followed by the call and the
//! paths it named. It refuses nothing itself.
//!
//! The system call numbers and the registers are `x86_64`'s; userspace attaches the program on
//! `x86_64` only.
use crate::Event;

/// Bytes of each path a [`CallEvent`] carries (with its NUL; a longer path is cut).
pub const CALL_PATH_BYTES: usize = 192;
/// `errno` of a write to a read-only mount.
pub const EROFS: u32 = 30;
/// `errno` of a rename or removal of a mount point.
pub const EBUSY: u32 = 16;
/// `errno` of a refused permission: at tier 2 an open under a hidden (protected) path, or a
/// Landlock refusal (outside the roots, an exec outside the allowlist).
pub const EACCES: u32 = 13;
/// The directory descriptor meaning "the working directory".
pub const AT_FDCWD: i32 = -100;
/// A [`PathArgs`] position meaning "no second path".
pub const NO_ARG: u8 = 0xff;

/// Offsets in `x86_64`'s `struct pt_regs` of the system call number (`orig_ax`) and of the
/// registers holding its first four arguments (`di`, `si`, `dx`, `r10`).
pub const REGS_ORIG_AX: u64 = 120;
/// See [`REGS_ORIG_AX`].
pub const REGS_ARGS: [u64; 4] = [112, 104, 96, 56];

/// One refused path call, as the ring buffer carries it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CallEvent {
    /// The denial: its kind, `Reason::ReadOnlyPath`, pid, cgroups, `comm`.
    pub event: Event,
    /// The system call number (`x86_64`).
    pub nr: u32,
    /// The error it returned, positive ([`EROFS`], [`EBUSY`] or [`EACCES`]); 0 for a learning
    /// session's call that succeeded ([`changes_names`]).
    pub errno: u32,
    /// The directory descriptor a relative `path` starts from ([`AT_FDCWD`]: the working
    /// directory).
    pub dirfd: i32,
    /// Padding.
    pub pad: u32,
    /// The path it named, as the agent passed it (relative to its working directory or to a
    /// directory descriptor), NUL-terminated; cut at [`CALL_PATH_BYTES`].
    pub path: [u8; CALL_PATH_BYTES],
    /// The second path of a rename or link, the link's name of a symlink; empty otherwise.
    pub path2: [u8; CALL_PATH_BYTES],
}

/// Where a path call's paths are among its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathArgs {
    /// The call's name, for the audit record.
    pub name: &'static str,
    /// Which argument (0-3) is the path.
    pub path: u8,
    /// Which argument is the second path, or [`NO_ARG`].
    pub path2: u8,
    /// Which argument is the directory descriptor `path` is relative to, or [`NO_ARG`].
    pub dirfd: u8,
}

/// A call whose `path` argument is the path: for an `*at` call (`path` > 0) the argument
/// before it is its directory descriptor.
const fn one(name: &'static str, path: u8) -> PathArgs {
    two(name, path, NO_ARG)
}

const fn two(name: &'static str, path: u8, path2: u8) -> PathArgs {
    let dirfd = if path > 0 { path - 1 } else { NO_ARG };
    PathArgs {
        name,
        path,
        path2,
        dirfd,
    }
}

/// The `x86_64` system calls that open, run, change or make a file by path, with where their
/// paths are;
/// `None` for any other call (those on descriptors included: a descriptor open for writing
/// on a read-only mount cannot be had).
pub const fn path_call(nr: u32) -> Option<PathArgs> {
    match nr {
        2 => Some(one("open", 0)),
        // Exec: only `EACCES` matters (Landlock's exec allowlist at tier 2).
        59 => Some(one("execve", 0)),
        322 => Some(one("execveat", 1)),
        85 => Some(one("creat", 0)),
        257 => Some(one("openat", 1)),
        437 => Some(one("openat2", 1)),
        76 => Some(one("truncate", 0)),
        87 => Some(one("unlink", 0)),
        263 => Some(one("unlinkat", 1)),
        84 => Some(one("rmdir", 0)),
        82 => Some(two("rename", 0, 1)),
        264 => Some(two("renameat", 1, 3)),
        316 => Some(two("renameat2", 1, 3)),
        83 => Some(one("mkdir", 0)),
        258 => Some(one("mkdirat", 1)),
        86 => Some(two("link", 0, 1)),
        265 => Some(two("linkat", 1, 3)),
        // symlink(target, linkpath): its first argument is no descriptor.
        88 => Some(PathArgs {
            dirfd: NO_ARG,
            ..one("symlink", 1)
        }),
        266 => Some(one("symlinkat", 2)),
        133 => Some(one("mknod", 0)),
        259 => Some(one("mknodat", 1)),
        90 => Some(one("chmod", 0)),
        268 => Some(one("fchmodat", 1)),
        452 => Some(one("fchmodat2", 1)),
        92 => Some(one("chown", 0)),
        94 => Some(one("lchown", 0)),
        260 => Some(one("fchownat", 1)),
        132 => Some(one("utime", 0)),
        235 => Some(one("utimes", 0)),
        261 => Some(one("futimesat", 1)),
        280 => Some(one("utimensat", 1)),
        188 => Some(one("setxattr", 0)),
        189 => Some(one("lsetxattr", 0)),
        197 => Some(one("removexattr", 0)),
        198 => Some(one("lremovexattr", 0)),
        _ => None,
    }
}

/// Whether the call `nr` makes, removes or renames a name in a directory (so Landlock and the
/// file programs judge it by that directory): `mkdir`, `unlink`, `rmdir`, `rename`, `link`,
/// `symlink`, `mknod` and their `*at` forms. (A file made by `open` or `creat` is not told
/// from one opened: its write is learned by fanotify.)
pub const fn changes_names(nr: u32) -> bool {
    matches!(
        nr,
        82 | 83 | 84 | 86 | 87 | 88 | 133 | 258 | 259 | 263 | 264 | 265 | 266 | 316
    )
}

const _: () = {
    assert!(core::mem::size_of::<CallEvent>() == 96 + 16 + 2 * CALL_PATH_BYTES);
    assert!(core::mem::offset_of!(CallEvent, path) == 112);
};

#[cfg(feature = "user")]
// SAFETY: repr(C) plain data with no implicit padding and no invalid bit patterns.
unsafe impl aya::Pod for CallEvent {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_that_change_names_are_the_path_calls_of_names() {
        let want = [
            "rename",
            "mkdir",
            "rmdir",
            "link",
            "unlink",
            "symlink",
            "mknod",
            "mkdirat",
            "mknodat",
            "unlinkat",
            "renameat",
            "linkat",
            "symlinkat",
            "renameat2",
        ];
        let mut found = 0;
        for nr in 0..500 {
            if changes_names(nr) {
                assert_eq!(path_call(nr).map(|a| a.name), Some(want[found]), "{nr}");
                found += 1;
            }
        }
        assert_eq!(found, want.len());
    }
}
