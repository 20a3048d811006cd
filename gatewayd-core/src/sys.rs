//! The few system calls the core makes itself, each behind a safe function (the kernel
//! crate's `sys` module holds the rest), so the logic around them reads without `unsafe`.
use std::{
    ffi::{CStr, CString, OsStr},
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
};

/// A file's identity, as `fstat` gives it on a descriptor that reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) nlink: u64,
    pub(crate) is_file: bool,
}

/// Reaches `path` (absolute), an existing file, without following a symbolic link at any
/// component, the last one included (`openat2` with `RESOLVE_NO_SYMLINKS`), and returns the
/// identity of the file reached (`fstat` of the `O_PATH` descriptor, closed at once). When it
/// does, the path's lexical form is its real path: one path walk instead of realpath(3)'s
/// readlink of each component, and the identity is of the very file the walk proved (no
/// second walk that a rename could send elsewhere). An error otherwise: `ELOOP` for a symlink
/// on the way, `ENOENT` for a missing component, `ENOSYS` before Linux 5.6, `EPERM` under a
/// seccomp filter that refuses it.
pub(crate) fn reach_without_symlinks(path: &Path) -> std::io::Result<FileId> {
    let name = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `open_how` is a plain C struct for which all zeroes is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `name` is a NUL-terminated string and `how` a valid `open_how` of the size
    // passed; both outlive the call, which keeps no pointer to them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            name.as_ptr(),
            &raw const how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = fd as libc::c_int;
    // SAFETY: `stat` is a plain C struct for which all zeroes is valid; `fd` is the
    // descriptor openat2 just returned (fstat accepts an O_PATH descriptor since Linux 3.6).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a valid `stat` that outlives the call.
    let rc = unsafe { libc::fstat(fd, &raw mut st) };
    let stat_error = (rc != 0).then(std::io::Error::last_os_error);
    // SAFETY: `fd` is the descriptor openat2 returned to us, closed once.
    unsafe { libc::close(fd) };
    if let Some(e) = stat_error {
        return Err(e);
    }
    Ok(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
        nlink: st.st_nlink,
        is_file: st.st_mode & libc::S_IFMT == libc::S_IFREG,
    })
}

/// The home directory of `user` in the user database (`getpwnam_r`); `None` when it has no
/// entry.
pub fn user_home(user: &str) -> Option<PathBuf> {
    let name = CString::new(user).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: getpwnam_r fills `pw` with pointers into `buf`, which outlives their use; the
    // C strings it points at are NUL-terminated within `buf`.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(
            name.as_ptr(),
            &raw mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &raw mut found,
        );
        if rc != 0 || found.is_null() || pw.pw_dir.is_null() {
            return None;
        }
        let dir = CStr::from_ptr(pw.pw_dir);
        Some(PathBuf::from(OsStr::from_bytes(dir.to_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn a_path_through_a_symlink_is_not_reached_directly() {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(base.join("real")).unwrap();
        std::fs::write(base.join("real/f"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        std::os::unix::fs::symlink(base.join("real/f"), base.join("flink")).unwrap();
        let reached = reach_without_symlinks(&base.join("real/f")).unwrap();
        let m = std::fs::metadata(base.join("real/f")).unwrap();
        assert_eq!((reached.dev, reached.ino), (m.dev(), m.ino()));
        assert!(reached.is_file);
        assert!(!reach_without_symlinks(&base.join("real")).unwrap().is_file);
        let code = |p: &str| {
            reach_without_symlinks(&base.join(p))
                .unwrap_err()
                .raw_os_error()
        };
        assert_eq!(code("link/f"), Some(libc::ELOOP));
        assert_eq!(code("flink"), Some(libc::ELOOP));
        assert_eq!(code("missing"), Some(libc::ENOENT));
    }
}
