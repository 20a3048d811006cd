//! Dropping root's powers in the forked child, before exec. Raw syscalls only (the child of
//! a multi-threaded process may not allocate), in this order:
//!
//! 1. the bounding set loses every capability not kept (`PR_CAPBSET_DROP`), so no exec can
//!    give one back;
//! 2. the ambient set is emptied;
//! 3. securebits are set and locked: `SECBIT_NOROOT` (uid 0 gains no capability at exec;
//!    left clear, and locked clear, only for a root agent that keeps capabilities, which it
//!    then receives through the bounding set), the set-uid fixup locked on (a change of uid
//!    away from 0 drops every capability), `SECBIT_KEEP_CAPS` locked off, and
//!    `SECBIT_NO_CAP_AMBIENT_RAISE` set and locked;
//! 4. supplementary groups, then gid, then uid (real, effective and saved);
//! 5. permitted and effective sets cut to the kept capabilities (those of them gatewayd
//!    holds: a container's root may lack some), inheritable emptied;
//! 6. `no_new_privs`;
//! 7. the parent-death signal again (a change of uid clears it), and the init of the agent's
//!    PID namespace (pid 1 there) is checked to still be the parent.

/// `SECBIT_*` of `linux/securebits.h`.
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two 32-bit words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The credentials to apply, worked out in gatewayd before the fork.
pub(crate) struct Plan {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
    /// Kept capabilities, one bit per number.
    keep: u64,
    /// The parent the child must still have after the uid change: the init of its PID
    /// namespace, pid 1 there (`super::pid_namespace`).
    parent: libc::pid_t,
}

impl Plan {
    pub(crate) fn new(uid: u32, gid: u32, groups: &[u32], capabilities: &[u32]) -> Plan {
        Plan {
            uid,
            gid,
            groups: groups.to_vec(),
            keep: capabilities
                .iter()
                .filter(|c| **c < 64)
                .fold(0, |m, c| m | (1u64 << c)),
            parent: 1,
        }
    }

    /// The securebits the agent ends with.
    pub(crate) fn securebits(&self) -> libc::c_ulong {
        let bits = SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        if self.keep == 0 {
            bits | SECBIT_NOROOT
        } else {
            bits
        }
    }

    /// Applies the plan in the forked child. Async-signal-safe.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        let fail = || Err(std::io::Error::last_os_error());
        // SAFETY: plain syscalls with integer arguments or pointers to memory owned by
        // `self` or this stack frame, in the single-threaded forked child.
        unsafe {
            for cap in 0..64u32 {
                if self.keep & (1 << cap) != 0 {
                    continue;
                }
                if libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) != 0 {
                    // EINVAL: past the kernel's last capability.
                    if *libc::__errno_location() == libc::EINVAL {
                        break;
                    }
                    return fail();
                }
            }
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return fail();
            }
            if libc::prctl(libc::PR_SET_SECUREBITS, self.securebits(), 0, 0, 0) != 0 {
                return fail();
            }
            if libc::syscall(libc::SYS_setgroups, self.groups.len(), self.groups.as_ptr()) != 0 {
                return fail();
            }
            if libc::syscall(libc::SYS_setresgid, self.gid, self.gid, self.gid) != 0 {
                return fail();
            }
            if libc::syscall(libc::SYS_setresuid, self.uid, self.uid, self.uid) != 0 {
                return fail();
            }
            let mut header = CapHeader {
                version: CAPABILITY_VERSION_3,
                pid: 0,
            };
            let mut now = [CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            }; 2];
            if libc::syscall(libc::SYS_capget, &raw mut header, now.as_mut_ptr()) != 0 {
                return fail();
            }
            let words = [self.keep as u32, (self.keep >> 32) as u32];
            let data = [0, 1].map(|i| CapData {
                effective: words[i] & now[i].permitted,
                permitted: words[i] & now[i].permitted,
                inheritable: 0,
            });
            if libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) != 0 {
                return fail();
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return fail();
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return fail();
            }
            // The init died while the death signal was cleared: do not run unsupervised.
            if libc::getppid() != self.parent {
                libc::_exit(137);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noroot_is_set_unless_a_root_agent_keeps_capabilities() {
        let none = Plan::new(1000, 1000, &[1000], &[]);
        assert_eq!(none.keep, 0);
        assert_eq!(none.securebits() & SECBIT_NOROOT, SECBIT_NOROOT);
        // Every securebit is locked either way.
        assert_eq!(none.securebits(), 0b1110_1011);
        let keep = Plan::new(0, 0, &[0], &[10, 40]);
        assert_eq!(keep.keep, (1 << 10) | (1 << 40));
        assert_eq!(keep.securebits() & SECBIT_NOROOT, 0);
        assert_eq!(
            keep.securebits() & SECBIT_NOROOT_LOCKED,
            SECBIT_NOROOT_LOCKED
        );
    }
}
