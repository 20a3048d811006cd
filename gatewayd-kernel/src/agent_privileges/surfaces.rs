//! What the agent sees of the kernel's interfaces: `/proc`, `/sys` and `/dev`
//! (`docs/KERNEL.md`, "What the agent sees of /proc, /sys and /dev"), at both tiers and for
//! every agent user, as container runtimes mask and make read-only (runc's default masked
//! and read-only paths) and bubblewrap makes a `/dev`.
//!
//! A root agent holds no capability, but uid 0 passes the permission checks that are plain
//! file modes: the sysctls (`kernel.core_pattern` set to `|/path` runs that path as root on
//! the host at the next crash), the sysfs attributes (`/sys/power/state` suspends the host),
//! the device nodes. So, in the agent's mount namespace:
//!
//! - in the procfs of its PID namespace, [`PROC_READ_ONLY`] are bound read-only onto
//!   themselves (reading a sysctl keeps working) and [`PROC_MASKED`] are covered: a file by
//!   `/dev/null`, a directory by an empty read-only tmpfs;
//! - `/sys/firmware` is covered by an empty read-only tmpfs, and `/sys` is made read-only
//!   with every mount below it (cgroupfs, bpffs, securityfs, debugfs, ...);
//! - `/dev` is the agent's own ([`dev`](super::dev)).
//!
//! Planned in gatewayd ([`Surfaces::plan`]); applied in the PID namespace's init with plain
//! syscalls: [`Surfaces::mount`] before it enters the cgroup (tier 1's `lsm/sb_mount`
//! refuses the session's mounts), [`Surfaces::seal`] after it (the cgroup is entered by
//! writing `cgroup.procs`, under `/sys`; `mount_setattr` meets no LSM hook). The agent
//! cannot undo them: no `CAP_SYS_ADMIN`, every mount call refused by seccomp, by tier 1's
//! programs or by Landlock.
use std::{
    ffi::CString,
    io,
    os::{fd::AsRawFd as _, unix::ffi::OsStrExt},
    path::{Path, PathBuf},
};

use serde_json::json;

use super::{
    dev::Dev,
    hide::{NODEV, NOEXEC, NOSUID, RDONLY, bind_read_only, enter_cwd_again, mount, set_attrs},
    private_tmp::SessionTmp,
    read_only::{self, ReadOnly},
};

/// Bound read-only onto themselves in the agent's procfs.
pub(crate) const PROC_READ_ONLY: [&str; 5] = [
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// Covered in the agent's procfs, where the kernel has them.
pub(crate) const PROC_MASKED: [&str; 8] = [
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/latency_stats",
    "/proc/acpi",
    "/proc/scsi",
    "/proc/asound",
];

/// Covered in the agent's `/sys`, where the kernel has them.
pub(crate) const SYS_MASKED: [&str; 1] = ["/sys/firmware"];

/// The session's `/tmp` ([`super::private_tmp::SessionTmp`]) as the init mounts it.
#[derive(Debug, Clone)]
struct TmpMounts {
    dir: CString,
    /// Each bind of the host's `/tmp`.
    binds: Vec<TmpBindMount>,
    /// What the `session_start` record says of it ([`SessionTmp::describe`]).
    record: serde_json::Value,
}

/// One path of the host's `/tmp` bound into the session's.
#[derive(Debug, Clone)]
struct TmpBindMount {
    /// The detached copy of its tree, made at the start (the source).
    tree: std::os::fd::RawFd,
    /// Its mount point in the session's directory.
    target: CString,
    /// Where the agent finds it.
    inside: CString,
    read_only: bool,
}

/// The plan of the agent's `/proc`, `/sys` and `/dev`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Surfaces {
    proc_read_only: Vec<CString>,
    masked_files: Vec<CString>,
    masked_dirs: Vec<CString>,
    /// Whether `/sys` is a mount point (else there is no sysfs to make read-only).
    sys: bool,
    dev: Dev,
    /// `sandbox.private_tmp`: the session's directory bound onto `/tmp`, with the host's
    /// paths bound into it ([`private_tmp`](super::private_tmp)).
    tmp: Option<TmpMounts>,
    /// `sandbox.read_only`: the read-only binds and the directories that pin them.
    read_only: ReadOnly,
    read_only_binds: Vec<(CString, bool)>,
}

impl Surfaces {
    /// The paths this kernel has (looked up in gatewayd's procfs and sysfs: the same
    /// kernel's), and the agent's `/dev` with `devices` (the policy's `sandbox.devices`).
    pub(crate) fn plan(devices: &[PathBuf]) -> Surfaces {
        let existing = |list: &[&str]| -> Vec<PathBuf> {
            list.iter()
                .map(PathBuf::from)
                .filter(|p| std::fs::symlink_metadata(p).is_ok())
                .collect()
        };
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
        let mut plan = Surfaces {
            proc_read_only: existing(&PROC_READ_ONLY).iter().map(|p| c(p)).collect(),
            sys: is_mount_point("/sys"),
            dev: Dev::plan(devices),
            ..Surfaces::default()
        };
        let sys_masked = if plan.sys {
            existing(&SYS_MASKED)
        } else {
            Vec::new()
        };
        for p in existing(&PROC_MASKED).into_iter().chain(sys_masked) {
            if p.is_dir() {
                plan.masked_dirs.push(c(&p));
            } else {
                plan.masked_files.push(c(&p));
            }
        }
        plan
    }

    /// The read-only binds of `sandbox.read_only` ([`read_only`](super::read_only)).
    pub(crate) fn read_only(&mut self, plan: ReadOnly) {
        self.read_only_binds = plan.prepared();
        self.read_only = plan;
    }

    /// Binds the session's own directory onto the agent's `/tmp`, with the host's paths
    /// its binds name.
    pub(crate) fn private_tmp(&mut self, tmp: &SessionTmp) {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
        let binds = tmp.binds().iter();
        self.tmp = Some(TmpMounts {
            dir: c(tmp.dir()),
            binds: binds
                .map(|b| TmpBindMount {
                    tree: b.tree.as_raw_fd(),
                    target: c(&b.target),
                    inside: c(&b.inside),
                    read_only: !b.writable,
                })
                .collect(),
            record: tmp.describe(),
        });
    }

    /// What the `session_start` record says about `/proc`, `/sys` and `/dev`.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let list = |v: &[CString]| -> Vec<String> {
            v.iter().map(|c| c.to_string_lossy().into_owned()).collect()
        };
        let mut masked = list(&self.masked_files);
        masked.extend(list(&self.masked_dirs));
        masked.sort();
        json!({
            "proc_read_only": list(&self.proc_read_only),
            "masked": masked,
            "sys": if self.sys {
                "read-only, with every mount below it"
            } else {
                "not mounted"
            },
            "dev": self.dev.describe(),
            "read_only": (!self.read_only.is_empty()).then(|| self.read_only.describe()),
            "tmp": self.tmp.as_ref().map_or_else(|| json!("the host's"), |t| t.record.clone()),
        })
    }

    /// In the PID namespace's init, after its procfs is mounted and before it enters the
    /// cgroup: the read-only and masking mounts in `/proc` and `/sys`, and the agent's
    /// `/dev`. Only syscalls; any failure stops the start.
    pub(crate) fn mount(&self) -> io::Result<()> {
        let hidden = RDONLY | NOSUID | NODEV | NOEXEC;
        for p in &self.proc_read_only {
            bind_read_only(p, p, hidden, true)?;
        }
        for f in &self.masked_files {
            bind_read_only(c"/dev/null", f, hidden, false)?;
        }
        for d in &self.masked_dirs {
            mount(
                Some(c"tmpfs"),
                d,
                Some(c"tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some(c"mode=0555,size=4k,nr_inodes=2"),
            )?;
        }
        if let Some(tmp) = &self.tmp {
            tmp.mount()?;
        }
        read_only::apply(&self.read_only_binds)?;
        self.dev.build()
    }

    /// In the PID namespace's init, after it entered the cgroup: `/sys` read-only with every
    /// mount below it; then the working directory is entered again by name, so a working
    /// directory under the host's `/proc`, `/dev` or a mount now covered is left for what
    /// the agent sees there (or `/`).
    pub(crate) fn seal(&self) -> io::Result<()> {
        if self.sys {
            set_attrs(c"/sys", RDONLY | NOSUID | NODEV | NOEXEC, true)?;
        }
        enter_cwd_again()
    }
}

impl TmpMounts {
    /// Each host path's detached tree attached at its mount point in the session's
    /// directory, then that directory bound onto `/tmp` with them, `nosuid` and `nodev`
    /// throughout; then the read-only binds made read-only, each by itself (a writable path
    /// inside one is a mount of its own).
    fn mount(&self) -> io::Result<()> {
        let tree = libc::MS_BIND | libc::MS_REC;
        for b in &self.binds {
            attach(b.tree, &b.target)?;
        }
        mount(Some(&self.dir), c"/tmp", None, tree, None)?;
        set_attrs(c"/tmp", NOSUID | NODEV, true)?;
        for b in self.binds.iter().filter(|b| b.read_only) {
            set_attrs(&b.inside, RDONLY, false)?;
        }
        Ok(())
    }
}

/// Attaches the detached mount tree `tree` at `target` (`move_mount`).
fn attach(tree: std::os::fd::RawFd, target: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: `tree` is a descriptor of a detached mount that outlives the call (gatewayd
    // holds it in the session's `SessionTmp`, the fork inherited it); both paths are
    // NUL-terminated.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `path` is where a mount is attached, in gatewayd's mount namespace (which the
/// agent's copies).
fn is_mount_point(path: &str) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|m| m.lines().any(|l| l.split_whitespace().nth(4) == Some(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_takes_what_this_kernel_has() {
        let plan = Surfaces::plan(&[]);
        let d = plan.describe();
        // Every Linux procfs has these.
        let ro = d["proc_read_only"].as_array().unwrap();
        assert!(ro.contains(&json!("/proc/sys")), "{d}");
        assert!(ro.contains(&json!("/proc/fs")), "{d}");
        let masked = d["masked"].as_array().unwrap();
        assert!(masked.contains(&json!("/proc/kcore")) == Path::new("/proc/kcore").exists());
        assert!(
            masked
                .iter()
                .all(|m| Path::new(m.as_str().unwrap()).exists()),
            "{d}"
        );
        assert_eq!(plan.sys, is_mount_point("/sys"));
        assert!(is_mount_point("/proc"));
        assert!(!is_mount_point("/proc/self"));
    }
}
