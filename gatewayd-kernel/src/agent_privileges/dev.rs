//! The agent's `/dev`: a fresh, minimal one, as bubblewrap's `--dev` makes (`docs/KERNEL.md`,
//! "What the agent sees of /proc, /sys and /dev").
//!
//! The host's `/dev` holds its disks, `kmsg`, `mem`, loop devices, consoles and every other
//! device node; uid 0 passes the permission check on all of them. In the agent's mount
//! namespace a tmpfs covers it (`nosuid`, `noexec`, mode 0755), holding:
//!
//! - `null`, `zero`, `full`, `random`, `urandom` and `tty`, and the policy's
//!   `sandbox.devices`, each the host's device node bound onto an empty file;
//! - `pts`, a devpts instance of its own (`newinstance,ptmxmode=0666,mode=620`): the agent
//!   can open new ptys (`ptmx` is a link to `pts/ptmx`) and sees none of the host's;
//! - `shm`, a tmpfs of its own (mode 1777, `nosuid`, `nodev`) for `shm_open`;
//! - `mqueue`, the POSIX message queues of the agent's own IPC namespace;
//! - the links `fd` → `/proc/self/fd`, `stdin`, `stdout`, `stderr` → `/proc/self/fd/0|1|2`;
//!
//! and is then made read-only: nothing can be created in it but in `shm`, `mqueue` and `pts`.
//!
//! Paths are prepared in gatewayd ([`Dev::plan`]); [`Dev::build`] runs in the PID
//! namespace's init before it enters the cgroup (tier 1's `lsm/sb_mount` refuses the
//! session's mounts) and only makes syscalls. The host's nodes are bound from the host's
//! `/dev` as the working directory: `chdir("/dev")` before the tmpfs covers it, so relative
//! sources still reach the host's nodes under it.
use std::{
    ffi::{CStr, CString},
    io,
    os::unix::{ffi::OsStrExt, fs::FileTypeExt},
    path::{Path, PathBuf},
};

use serde_json::json;

use super::hide::{NOEXEC, NOSUID, RDONLY, bind_read_only, mount, set_attrs};

/// The devices every agent gets, where the host has them.
const STANDARD: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// The links of the agent's `/dev`: (link, target).
const LINKS: [(&CStr, &CStr); 5] = [
    (c"/dev/ptmx", c"pts/ptmx"),
    (c"/dev/fd", c"/proc/self/fd"),
    (c"/dev/stdin", c"/proc/self/fd/0"),
    (c"/dev/stdout", c"/proc/self/fd/1"),
    (c"/dev/stderr", c"/proc/self/fd/2"),
];

/// One host device bound into the agent's `/dev`.
#[derive(Debug, Clone)]
struct Device {
    /// Its path relative to the host's `/dev` (the working directory of the bind).
    source: CString,
    /// Its path in the agent's `/dev`.
    target: CString,
}

/// The plan of the agent's `/dev`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dev {
    /// Directories to make below `/dev` for the devices, parents first.
    dirs: Vec<CString>,
    devices: Vec<Device>,
}

impl Dev {
    /// The standard devices the host has, and `extra` (the policy's `sandbox.devices`,
    /// checked at policy load: character devices under `/dev`), each at its canonical path;
    /// those that are gone since, or are not character devices under `/dev`, are left out.
    pub(crate) fn plan(extra: &[PathBuf]) -> Dev {
        let mut paths: Vec<PathBuf> = STANDARD
            .iter()
            .map(|n| Path::new("/dev").join(n))
            .filter(|p| is_char_device(p))
            .collect();
        let mut more: Vec<PathBuf> = extra
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .filter(|p| is_char_device(p) && !paths.contains(p))
            .collect();
        more.sort();
        more.dedup();
        paths.extend(more);
        let mut plan = Dev::default();
        for p in paths {
            let Ok(rel) = p.strip_prefix("/dev") else {
                continue;
            };
            if rel.as_os_str().is_empty() || rel.as_os_str().as_bytes().contains(&0) {
                continue;
            }
            // `/dev/pts/N` and `/dev/shm/...` would lie in the agent's own mounts.
            if rel.starts_with("pts") || rel.starts_with("shm") {
                continue;
            }
            let mut parents: Vec<&Path> = rel
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .collect();
            parents.reverse();
            for d in parents {
                let c = cstring(&Path::new("/dev").join(d));
                if !plan.dirs.contains(&c) {
                    plan.dirs.push(c);
                }
            }
            plan.devices.push(Device {
                source: cstring(rel),
                target: cstring(&p),
            });
        }
        plan
    }

    /// What the `session_start` record says about the agent's `/dev`.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let devices: Vec<String> = self
            .devices
            .iter()
            .map(|d| d.target.to_string_lossy().into_owned())
            .collect();
        json!({
            "mount": "a read-only tmpfs of its own (nosuid, noexec)",
            "devices": devices,
            "pts": "a devpts instance of its own (ptmx mode 0666)",
            "shm": "a tmpfs of its own (mode 1777, nosuid, nodev)",
            "mqueue": "the POSIX message queues of its own IPC namespace",
        })
    }

    /// Builds the agent's `/dev` over the host's, in the agent's mount namespace, while the
    /// process holds `CAP_SYS_ADMIN`. Leaves the working directory where it was (by
    /// descriptor). Only syscalls; any failure stops the start.
    pub(crate) fn build(&self) -> io::Result<()> {
        // SAFETY: open and chdir of static C strings; the descriptor is this function's.
        let cwd = unsafe {
            libc::open(
                c".".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if cwd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        let r = check(unsafe { libc::chdir(c"/dev".as_ptr()) }).and_then(|()| self.build_here());
        // SAFETY: back to the working directory the process had; then the descriptor closes.
        let back = check(unsafe { libc::fchdir(cwd) });
        // SAFETY: closing this function's descriptor.
        unsafe { libc::close(cwd) };
        r.and(back)
    }

    /// [`Dev::build`] with the host's `/dev` as the working directory.
    fn build_here(&self) -> io::Result<()> {
        mount(
            Some(c"tmpfs"),
            c"/dev",
            Some(c"tmpfs"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some(c"mode=0755"),
        )?;
        for d in &self.dirs {
            mkdir(d, 0o755)?;
        }
        for d in &self.devices {
            // SAFETY: creating an empty file at a prepared path; the descriptor is closed.
            let fd = unsafe {
                libc::open(
                    d.target.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o666,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: as above.
            unsafe { libc::close(fd) };
            // The relative source is the host's node, under the working directory.
            bind_read_only(&d.source, &d.target, NOSUID | NOEXEC, false)?;
        }
        mkdir(c"/dev/pts", 0o755)?;
        mount(
            Some(c"devpts"),
            c"/dev/pts",
            Some(c"devpts"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some(c"newinstance,ptmxmode=0666,mode=620"),
        )?;
        mkdir(c"/dev/shm", 0o1777)?;
        mount(
            Some(c"tmpfs"),
            c"/dev/shm",
            Some(c"tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(c"mode=1777"),
        )?;
        // POSIX message queues of the agent's IPC namespace (made before this, in
        // `private_namespaces`): a mqueue mount shows the queues of the mounter's namespace.
        mkdir(c"/dev/mqueue", 0o1777)?;
        mount(
            Some(c"mqueue"),
            c"/dev/mqueue",
            Some(c"mqueue"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        )?;
        for (link, target) in LINKS {
            // SAFETY: static C strings.
            check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })?;
        }
        // The tmpfs alone: `pts`, `shm` and `mqueue` below it stay writable.
        set_attrs(c"/dev", RDONLY, false)
    }
}

fn is_char_device(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

/// A path without NUL bytes (callers filter them out) as a C string.
fn cstring(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

fn mkdir(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::mkdir(path.as_ptr(), mode) })?;
    // The umask may have cut the mode (1777 for `shm`).
    // SAFETY: as above.
    check(unsafe { libc::chmod(path.as_ptr(), mode) })
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_holds_the_standard_devices_and_the_listed_ones_with_their_directories() {
        let plan = Dev::plan(&[
            "/dev/null".into(),
            "/dev/zero".into(),
            "/proc/version".into(),
        ]);
        let targets: Vec<&CStr> = plan.devices.iter().map(|d| d.target.as_c_str()).collect();
        assert!(targets.contains(&c"/dev/null"), "{targets:?}");
        // Listed twice, bound once; not a device: left out.
        assert_eq!(targets.iter().filter(|t| **t == c"/dev/zero").count(), 1);
        assert!(targets.iter().all(|t| t.to_bytes().starts_with(b"/dev/")));
        assert!(plan.dirs.is_empty(), "{:?}", plan.dirs);
        let null = plan
            .devices
            .iter()
            .find(|d| d.target.as_c_str() == c"/dev/null");
        assert_eq!(null.map(|d| d.source.as_c_str()), Some(c"null"));
        let d = plan.describe();
        assert!(
            d["devices"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("/dev/null")))
        );
    }
}
