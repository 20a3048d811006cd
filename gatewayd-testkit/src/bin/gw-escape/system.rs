//! The kernel's interfaces in `/proc`, `/sys` and `/dev`: opening for writing what would
//! change the host (nothing is ever written: the open is the attempt), listing `/dev`, and
//! the benign uses an agent needs.
use std::{
    ffi::CString,
    io::{Read as _, Write as _},
    os::fd::{FromRawFd as _, OwnedFd},
};

use super::Outcome;

/// The attempts of this module, with what they do.
pub(crate) const ATTEMPTS: [(&str, &str); 11] = [
    (
        "sysctl_write",
        "open /proc/sys/kernel/core_pattern (or ARG) O_WRONLY: a sysctl that runs a program as root on the host",
    ),
    (
        "sysfs_write",
        "open ARG (default /sys/module/printk/parameters/time), a sysfs attribute, O_WRONLY",
    ),
    ("sysrq_write", "open /proc/sysrq-trigger O_WRONLY"),
    ("kmsg_write", "open /dev/kmsg O_WRONLY"),
    ("dev_list", "list /dev (a `DEV name` line per entry)"),
    ("dev_null", "write to and read from /dev/null"),
    ("urandom_read", "read 16 bytes of /dev/urandom"),
    ("pty", "posix_openpt, grantpt, unlockpt, open the ptsname"),
    (
        "shm_open",
        "shm_open a new object in /dev/shm, ftruncate, unlink",
    ),
    ("sysctl_read", "read /proc/sys/kernel/ostype"),
    ("self_status", "read /proc/self/status"),
];

/// Makes the attempt `name` (one of [`ATTEMPTS`]) with `arg`.
pub(crate) fn attempt(name: &str, arg: &str) -> Outcome {
    let or = |default: &'static str| if arg.is_empty() { default } else { arg };
    match name {
        "sysctl_write" => open_for_writing(or("/proc/sys/kernel/core_pattern")),
        "sysfs_write" => open_for_writing(or(SYSFS_ATTRIBUTE)),
        "sysrq_write" => open_for_writing("/proc/sysrq-trigger"),
        "kmsg_write" => open_for_writing("/dev/kmsg"),
        "dev_list" => list_dev(),
        "dev_null" => dev_null(),
        "urandom_read" => urandom(),
        "pty" => pty(),
        "shm_open" => shm(),
        "sysctl_read" => outcome(std::fs::read("/proc/sys/kernel/ostype")),
        "self_status" => outcome(std::fs::read("/proc/self/status")),
        _ => Outcome::Errno(libc::EINVAL),
    }
}

/// A sysfs attribute mode 0644 on every kernel with `printk` (which Debian's and the usual
/// distribution kernels all have): writable by uid 0 without any capability.
const SYSFS_ATTRIBUTE: &str = "/sys/module/printk/parameters/time";

fn outcome<T>(r: std::io::Result<T>) -> Outcome {
    r.map_or_else(
        |e| Outcome::Errno(e.raw_os_error().unwrap_or(0)),
        |_| Outcome::Ok,
    )
}

/// `open(path, O_WRONLY)`, closed at once: never a byte written.
fn open_for_writing(path: &str) -> Outcome {
    outcome(std::fs::OpenOptions::new().write(true).open(path))
}

/// `readdir` of `/dev`: prints `DEV name` for each entry, sorted (not an outcome line).
fn list_dev() -> Outcome {
    let names = std::fs::read_dir("/dev").and_then(|d| {
        d.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<String>>>()
    });
    match names {
        Ok(mut names) => {
            names.sort();
            let mut out = std::io::stdout().lock();
            for n in names {
                let _ = writeln!(out, "DEV {n}");
            }
            let _ = out.flush();
            Outcome::Ok
        }
        Err(e) => Outcome::Errno(e.raw_os_error().unwrap_or(0)),
    }
}

/// `/dev/null` opened read-write: a write and a read (end of file).
fn dev_null() -> Outcome {
    outcome((|| {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        f.write_all(b"gw-escape")?;
        let n = f.read(&mut [0u8; 8])?;
        if n == 0 {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        }
    })())
}

/// 16 bytes of `/dev/urandom`.
fn urandom() -> Outcome {
    outcome(std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut [0u8; 16])))
}

/// A pty: `posix_openpt`, `grantpt`, `unlockpt`, then its other end opened by the name
/// `ptsname` gives.
fn pty() -> Outcome {
    // SAFETY: plain libc calls; the master is owned (closed on drop) once opened.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if m < 0 {
            return errno();
        }
        let _master = OwnedFd::from_raw_fd(m);
        if libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
            return errno();
        }
        let mut name = [0 as libc::c_char; 64];
        if libc::ptsname_r(m, name.as_mut_ptr(), name.len()) != 0 {
            return errno();
        }
        let s = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if s < 0 {
            return errno();
        }
        libc::close(s);
    }
    Outcome::Ok
}

/// `shm_open` of a new object in `/dev/shm`, sized, then unlinked.
fn shm() -> Outcome {
    let Ok(name) = CString::new(format!("/gw-escape-{}", std::process::id())) else {
        return Outcome::Errno(libc::EINVAL);
    };
    // SAFETY: plain libc calls on a NUL-terminated name; the descriptor is owned.
    unsafe {
        let fd = libc::shm_open(
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
            0o600,
        );
        if fd < 0 {
            return errno();
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let sized = libc::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&fd), 4096);
        let e = errno();
        libc::shm_unlink(name.as_ptr());
        if sized != 0 {
            return e;
        }
    }
    Outcome::Ok
}

fn errno() -> Outcome {
    Outcome::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}
