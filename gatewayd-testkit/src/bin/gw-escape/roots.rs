//! Reading and writing files outside the policy's readable and writable roots, one raw
//! syscall per attempt (so a denial is the kernel's answer to exactly that call).
use std::ffi::CString;

use super::{Outcome, check, cstr};

/// The attempts of this module, with what each does.
pub(crate) const ATTEMPTS: [(&str, &str); 6] = [
    (
        "list",
        "open the directory ARG and read its entries (getdents64)",
    ),
    (
        "create",
        "open(ARG, O_CREAT | O_EXCL | O_WRONLY): a new file",
    ),
    ("append", "open(ARG, O_WRONLY | O_APPEND) and write a line"),
    ("unlink", "unlink(ARG)"),
    ("rename", "rename(SRC, DST) (ARG: SRC,DST)"),
    ("mkdir", "mkdir(ARG)"),
];

fn open(path: &CString, flags: i32) -> Result<i32, Outcome> {
    // SAFETY: a NUL-terminated path that outlives the call; a plain syscall.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 { Err(check(-1)) } else { Ok(fd) }
}

/// Runs the attempt `name` of [`ATTEMPTS`] on `arg`; `None` for a name not in it.
pub(crate) fn attempt(name: &str, arg: &str) -> Option<Outcome> {
    let path = cstr(arg);
    let with_fd = |flags: i32, then: &dyn Fn(i32) -> i64| -> Outcome {
        match open(&path, flags) {
            Ok(fd) => {
                let rc = then(fd);
                // SAFETY: the descriptor just opened, closed once.
                unsafe { libc::close(fd) };
                check(rc)
            }
            Err(e) => e,
        }
    };
    Some(match name {
        "list" => with_fd(libc::O_RDONLY | libc::O_DIRECTORY, &|fd| {
            let mut buf = [0u8; 4096];
            // SAFETY: reads into a local buffer of the length given.
            unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) }
        }),
        "create" => with_fd(libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, &|_| 0),
        "append" => with_fd(libc::O_WRONLY | libc::O_APPEND, &|fd| {
            let line = b"gw-escape\n";
            // SAFETY: writes from a static buffer of the length given.
            unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) as i64 }
        }),
        // SAFETY: a NUL-terminated path that outlives the call; a plain syscall.
        "unlink" => check(unsafe { libc::unlink(path.as_ptr()) }.into()),
        // SAFETY: as above.
        "mkdir" => check(unsafe { libc::mkdir(path.as_ptr(), 0o700) }.into()),
        "rename" => {
            let (src, dst) = arg.split_once(',').unwrap_or((arg, ""));
            let (src, dst) = (cstr(src), cstr(dst));
            // SAFETY: NUL-terminated paths that outlive the call; a plain syscall.
            check(unsafe { libc::rename(src.as_ptr(), dst.as_ptr()) }.into())
        }
        _ => return None,
    })
}
