//! `gatewayd mcp --learn`: a tool server learns its kernel profile the way `gatewayd run
//! --learn`'s agent does ([`crate::fs_learn`]; docs/MCP.md, "Learning a server's profile").
//!
//! A server has no mount namespace of its own when it is enforced, so marks on its mounts
//! would be marks on the host's, and every host process's opens would reach the group. In a
//! learning run the server's child therefore, between fork and exec:
//!
//! 1. takes a mount namespace of its own, `/` made a slave of the host's (the host's mounts
//!    still reach it, its own never reach the host), before it enters the cgroup, whose
//!    `lsm/sb_mount` program would refuse that mount ([`ServerLearn::own_mounts`]);
//! 2. enters the cgroup (the caller's step);
//! 3. at tier 2, hides the profile's protected paths with mounts and makes the cgroup and BPF
//!    filesystems read-only, as `gatewayd run` does for its agent: the Landlock allowlist
//!    that protected them is left out while learning. At tier 1 it makes no mount
//!    ([`ServerLearn::without_mounts`]): the BPF LSM programs keep refusing the protected
//!    paths and the cgroup's files, and their `lsm/sb_mount` refuses a mount in the cgroup;
//! 4. marks each mount of its namespace for the learn group ([`LearnMarks`]);
//! 5. restricts itself to the learning ruleset, which forbids changing the mounts (the
//!    caller's step).
use std::{os::fd::RawFd, path::PathBuf};

use crate::agent_privileges::{hide::Hiding, learn_marks::LearnMarks};

/// What a learning server's child does around entering its cgroup.
#[derive(Debug, Clone)]
pub struct ServerLearn {
    marks: LearnMarks,
    hiding: Hiding,
}

impl ServerLearn {
    /// For the learn group `fd`; `protected` are hidden by mounts (tier 2), or `&[]`. The
    /// paths that cannot be hidden come back with why (a protected path that is a symlink).
    pub fn new(fd: RawFd, protected: &[PathBuf]) -> (ServerLearn, Vec<(PathBuf, String)>) {
        let (hiding, unhidden) = Hiding::plan(protected, &[]);
        let marks = LearnMarks::new(fd);
        (ServerLearn { marks, hiding }, unhidden)
    }

    /// For the learn group `fd`, with no mount (tier 1: the BPF LSM programs keep refusing
    /// the protected paths, and refuse mounts in the cgroup).
    pub fn without_mounts(fd: RawFd) -> ServerLearn {
        ServerLearn {
            marks: LearnMarks::new(fd),
            hiding: Hiding::default(),
        }
    }

    /// What the hiding mounts cover, for the start record.
    pub fn describe(&self) -> serde_json::Value {
        self.hiding.describe()
    }

    /// Step 1, before the cgroup. Only async-signal-safe syscalls.
    pub fn own_mounts(&self) -> std::io::Result<()> {
        // SAFETY: plain syscalls on a static C string, in the single-threaded forked child.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Steps 3 and 4, in the cgroup, before the ruleset. Only async-signal-safe syscalls.
    pub fn hide_and_mark(&self) -> std::io::Result<()> {
        self.hiding.apply()?;
        self.marks.apply()
    }
}
