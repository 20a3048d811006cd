//! gw-testagent's actions on the file tree: links, creation and mounts, each one raw syscall
//! (or two) so a denial is the kernel's answer to exactly that call.
//!
//! ```text
//! link SRC DST          # link(SRC, DST): a hard link
//! mkfile PATH           # open(PATH, O_CREAT | O_EXCL | O_WRONLY): a new empty file
//! mkdir PATH            # mkdir(PATH)
//! list DIR              # open(DIR, O_DIRECTORY) + getdents64: a listing
//! symlink TARGET PATH   # symlink(TARGET, PATH)
//! mkfifo PATH           # mknod(PATH, S_IFIFO)
//! umount DIR            # umount2(DIR, 0)
//! movemount SRC DST     # open_tree(SRC, OPEN_TREE_CLONE) + move_mount onto DST (then a
//!                       # lazy unmount of DST)
//! ```
use std::ffi::CString;

use super::{Failure, Outcome};

fn c(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|e| e.to_string())
}

fn check(r: libc::c_long) -> Result<libc::c_long, String> {
    if r < 0 {
        Err(std::io::Error::last_os_error().to_string())
    } else {
        Ok(r)
    }
}

/// Runs `action` when it is one of this module's (its name, then its arguments).
pub(crate) fn run(action: &[String]) -> Outcome {
    let (name, args) = (action[0].as_str(), &action[1..]);
    let arg = |i: usize| {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("{name}: missing argument"))
    };
    // Each arm reads its own arguments: an action of another module has none of these.
    match name {
        "link" => {
            let a = c(arg(0)?)?;
            let b = c(arg(1)?)?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            check(unsafe { libc::link(a.as_ptr(), b.as_ptr()) }.into())?;
        }
        "mkfile" => {
            let a = c(arg(0)?)?;
            let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            let fd = check(unsafe { libc::open(a.as_ptr(), flags, 0o600) }.into())?;
            // SAFETY: the descriptor just returned by open.
            unsafe { libc::close(fd as i32) };
        }
        "mkdir" => {
            let a = c(arg(0)?)?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            check(unsafe { libc::mkdir(a.as_ptr(), 0o700) }.into())?;
        }
        "list" => {
            let n = std::fs::read_dir(arg(0)?)
                .map_err(|e| e.to_string())?
                .count();
            return Ok(format!("list {}: {n} entries", arg(0)?));
        }
        "symlink" => {
            let a = c(arg(0)?)?;
            let b = c(arg(1)?)?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            check(unsafe { libc::symlink(a.as_ptr(), b.as_ptr()) }.into())?;
        }
        "mkfifo" => {
            let a = c(arg(0)?)?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            check(unsafe { libc::mknod(a.as_ptr(), libc::S_IFIFO | 0o600, 0) }.into())?;
        }
        "umount" => {
            let a = c(arg(0)?)?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            check(unsafe { libc::umount2(a.as_ptr(), 0) }.into())?;
        }
        "movemount" => {
            let a = c(arg(0)?)?;
            let b = c(arg(1)?)?;
            const OPEN_TREE_CLONE: libc::c_uint = 1;
            const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            let tree = check(unsafe {
                libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
                )
            })?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            let moved = check(unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    tree,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            });
            // SAFETY: the descriptor just returned by open_tree.
            unsafe { libc::close(tree as i32) };
            moved?;
            // SAFETY: valid NUL-terminated strings that outlive the call; a plain syscall.
            unsafe { libc::umount2(b.as_ptr(), libc::MNT_DETACH) };
        }
        _ => return Err(Failure::NotMine),
    }
    Ok(format!("{name} {}", args.join(" ")))
}
