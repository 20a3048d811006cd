//! Tier 2, in the agent's init: each root where `sandbox.protected_names` apply is bound onto
//! itself in the agent's mount namespace (with what is mounted below it) and that mount is
//! marked for fanotify permission events on gatewayd's group ([`crate::name_guard`]). Only
//! the agent's opens go through that mount: the host's do not reach gatewayd.
use std::{ffi::CString, os::fd::RawFd, os::unix::ffi::OsStrExt, path::PathBuf};

/// The group's descriptor (inherited across the fork) and the roots, prepared before it.
#[derive(Debug, Clone, Default)]
pub struct NameMarks {
    fd: Option<RawFd>,
    roots: Vec<CString>,
}

impl NameMarks {
    /// Marks for `roots` on the group `fd`; a root whose path holds a NUL is left out (no
    /// such path exists).
    pub fn new(fd: RawFd, roots: &[PathBuf]) -> NameMarks {
        NameMarks {
            fd: Some(fd),
            roots: roots
                .iter()
                .filter_map(|r| CString::new(r.as_os_str().as_bytes()).ok())
                .collect(),
        }
    }

    /// In the forked init, after the hiding mounts and before Landlock: binds and marks each
    /// root, enters the working directory again (through the new mounts), and closes the
    /// init's copy of the group. Only async-signal-safe syscalls.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        let Some(fd) = self.fd else {
            return Ok(());
        };
        for root in &self.roots {
            // Recursive: the hiding and read-only mounts below the root stay in place. A root
            // the agent's namespace does not have needs no mark: nothing is opened there.
            let tree = libc::MS_BIND | libc::MS_REC;
            match super::hide::mount(Some(root), root, None, tree, None) {
                Err(e) if super::hide::is_absent(&e) => continue,
                made => made?,
            }
            // SAFETY: a NUL-terminated path that outlives the call; `fd` is the group's
            // descriptor, inherited from gatewayd.
            let rc = unsafe {
                libc::fanotify_mark(
                    fd,
                    libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                    libc::FAN_OPEN_PERM,
                    libc::AT_FDCWD,
                    root.as_ptr(),
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        super::hide::enter_cwd_again()?;
        // SAFETY: closing the init's own copy; gatewayd's stays open.
        unsafe { libc::close(fd) };
        Ok(())
    }
}
