//! Which open descriptors reach the agent: 0, 1 and 2, and those `--preserve-fd` names.
//! Every other descriptor above 2 is marked close-on-exec in the agent's process right before
//! its credentials change, so a file or socket gatewayd's caller left open (a protected file,
//! a connection to a host the policy does not allow) never reaches the agent's program.
//! gatewayd's own descriptors are close-on-exec already.
use super::PrivilegesError;

/// The descriptors above 2 the agent keeps, sorted, without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Descriptors {
    keep: Vec<libc::c_uint>,
}

impl Descriptors {
    /// Checks, in gatewayd, that each is an open descriptor above 2.
    pub(crate) fn keeping(fds: &[i32]) -> Result<Descriptors, PrivilegesError> {
        let mut keep = Vec::with_capacity(fds.len());
        for &fd in fds {
            if fd <= 2 {
                return Err(PrivilegesError::PreserveFd {
                    fd,
                    why: "0, 1 and 2 are passed anyway",
                });
            }
            // SAFETY: F_GETFD on a number; reads the descriptor's flags, changes nothing.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(PrivilegesError::PreserveFd {
                    fd,
                    why: "it is not open in gatewayd",
                });
            }
            keep.push(fd as libc::c_uint);
        }
        keep.sort_unstable();
        keep.dedup();
        Ok(Descriptors { keep })
    }

    /// The descriptors kept, for the `session_start` record.
    pub(crate) fn kept(&self) -> &[libc::c_uint] {
        &self.keep
    }

    /// In the agent's process, before exec: every descriptor above 2 but the kept ones is
    /// marked close-on-exec, and each kept one is cleared of it. Async-signal-safe.
    pub(crate) fn close_the_rest_at_exec(&self) -> std::io::Result<()> {
        let mut first: libc::c_uint = 3;
        for &fd in &self.keep {
            if fd > first {
                cloexec_range(first, fd - 1)?;
            }
            // SAFETY: F_SETFD with flags 0 on a descriptor checked open before the fork.
            if unsafe { libc::fcntl(fd as libc::c_int, libc::F_SETFD, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            first = fd + 1;
        }
        cloexec_range(first, libc::c_uint::MAX)
    }
}

/// `close_range(first, last, CLOSE_RANGE_CLOEXEC)` (Linux 5.11+); on an older kernel, each
/// descriptor below the soft limit is marked one by one.
fn cloexec_range(first: libc::c_uint, last: libc::c_uint) -> std::io::Result<()> {
    // SAFETY: close_range marks descriptors of this process only; nothing is closed here.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            last,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct on the stack.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let end = u64::from(last).min(limit.rlim_cur.saturating_sub(1));
    for fd in u64::from(first)..=end {
        // SAFETY: marks a descriptor of this process; EBADF for a closed one is ignored.
        unsafe { libc::fcntl(fd as libc::c_int, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_open_descriptors_above_2_can_be_kept() {
        assert!(matches!(
            Descriptors::keeping(&[1]),
            Err(PrivilegesError::PreserveFd { fd: 1, .. })
        ));
        assert!(matches!(
            Descriptors::keeping(&[999_999]),
            Err(PrivilegesError::PreserveFd { fd: 999_999, .. })
        ));
        let f = std::fs::File::open("/dev/null").expect("open");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let d = Descriptors::keeping(&[fd, fd]).expect("an open descriptor");
        assert_eq!(d.kept(), &[fd as libc::c_uint]);
    }
}
