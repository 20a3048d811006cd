//! Landlock's own denial records, read from the kernel's audit subsystem (`gatewayd doctor`,
//! `gatewayd run` at tier 2; see docs/internals/SANDBOX.md, "Tier 2's Landlock records"):
//! Landlock ABI 7 (Linux 6.15) logs each denial to the kernel's audit subsystem
//! (`AUDIT_LANDLOCK_ACCESS`, `AUDIT_LANDLOCK_DOMAIN`), which a process with `CAP_AUDIT_READ`
//! may read on the `NETLINK_AUDIT` multicast group `AUDIT_NLGRP_READLOG`, but only while
//! audit is enabled host-wide. [`Subscription::open`] joins the channel where that works (and
//! says why not where it does not; [`probe`] is its answer for `doctor`), and
//! [`records::Tracker`] keeps the records of a session's own domain.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub mod records;

const NETLINK_AUDIT: libc::c_int = 9;
const AUDIT_NLGRP_READLOG: u32 = 1;
const AUDIT_GET: u16 = 1000;
const AUDIT_SET: u16 = 1001;
/// `AUDIT_STATUS_ENABLED`, the `mask` bit of `struct audit_status` that sets `enabled`.
const AUDIT_STATUS_ENABLED: u32 = 1;
/// How long [`Subscription::next`] waits for a record before it returns `None`.
const READ_TIMEOUT_MS: i64 = 200;
/// The first Landlock ABI that logs denials to audit.
pub const AUDIT_ABI: u32 = 7;

fn netlink_audit() -> std::io::Result<OwnedFd> {
    // SAFETY: a plain syscall; the fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: &OwnedFd, groups: u32) -> std::io::Result<()> {
    // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: addr is a sockaddr_nl of the size given.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Audit's `enabled` flag (`AUDIT_GET`): 0 off, 1 on, 2 on and locked.
fn audit_enabled() -> std::io::Result<u32> {
    let fd = netlink_audit()?;
    bind(&fd, 0)?;
    // struct nlmsghdr { u32 len; u16 type; u16 flags; u32 seq; u32 pid; }
    let mut req = [0u8; 16];
    req[..4].copy_from_slice(&16u32.to_ne_bytes());
    req[4..6].copy_from_slice(&AUDIT_GET.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // SAFETY: req is a valid buffer of its length.
    if unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut buf = [0u8; 512];
    // The kernel answers with the status (`AUDIT_GET`) and an ACK, in either order.
    for _ in 0..4 {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
        if n < 20 {
            continue;
        }
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        let word = |i: usize| u32::from_ne_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        match ty {
            // NLMSG_ERROR: 0 is the ACK, anything else the error.
            2 => {
                let e = word(16).cast_signed();
                if e != 0 {
                    return Err(std::io::Error::from_raw_os_error(-e));
                }
            }
            // struct audit_status { u32 mask; u32 enabled; ... }
            AUDIT_GET if n >= 24 => return Ok(word(20)),
            _ => {}
        }
    }
    Err(std::io::Error::other("no answer to AUDIT_GET"))
}

/// Whether Landlock's denials could be read from the audit subsystem here: `Ok` says how,
/// `Err` why not. `abi` is this kernel's Landlock ABI.
pub fn probe(abi: Option<u32>) -> Result<String, String> {
    Subscription::open(abi).map(|_| {
        "readable: audit enabled, AUDIT_NLGRP_READLOG joined; `gatewayd run` records tier-2 \
         denials in the session's audit log (source kernel, hook landlock)"
            .into()
    })
}

/// Sets audit's `enabled` flag host-wide (`AUDIT_SET`, needs `CAP_AUDIT_CONTROL`) and returns
/// the value it had. gatewayd itself never calls it: turning audit on is the host's choice
/// (`auditctl -e 1`); the tests do, for their length.
pub fn set_audit_enabled(enabled: u32) -> std::io::Result<u32> {
    let before = audit_enabled()?;
    let fd = netlink_audit()?;
    bind(&fd, 0)?;
    // nlmsghdr, then struct audit_status (11 u32: mask, enabled, failure, pid, rate_limit,
    // backlog_limit, lost, backlog, feature_bitmap, backlog_wait_time, its actual).
    const LEN: u32 = 16 + 44;
    let mut req = [0u8; LEN as usize];
    req[..4].copy_from_slice(&LEN.to_ne_bytes());
    req[4..6].copy_from_slice(&AUDIT_SET.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&2u32.to_ne_bytes());
    req[16..20].copy_from_slice(&AUDIT_STATUS_ENABLED.to_ne_bytes());
    req[20..24].copy_from_slice(&enabled.to_ne_bytes());
    // SAFETY: req is a valid buffer of its length.
    if unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
    if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == 2 {
        let e = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
        if e != 0 {
            return Err(std::io::Error::from_raw_os_error(-e));
        }
    }
    Ok(before)
}

/// A member of the audit subsystem's read-only multicast group: every audit record of the
/// host, as it is emitted, while audit is enabled.
#[derive(Debug)]
pub struct Subscription {
    fd: OwnedFd,
}

impl Subscription {
    /// Joins `AUDIT_NLGRP_READLOG` (needs `CAP_AUDIT_READ`) where Landlock (`abi`) logs its
    /// denials and audit is enabled; `Err` says why not. Records are queued from now on, read
    /// or not (up to the socket's buffer; the kernel drops what does not fit).
    pub fn open(abi: Option<u32>) -> Result<Subscription, String> {
        match abi {
            None => return Err("no Landlock".into()),
            Some(v) if v < AUDIT_ABI => {
                return Err(format!(
                    "Landlock ABI {v} does not log its denials (ABI {AUDIT_ABI}, Linux 6.15)"
                ));
            }
            Some(_) => {}
        }
        let fd = netlink_audit().map_err(|e| format!("NETLINK_AUDIT socket: {e}"))?;
        bind(&fd, AUDIT_NLGRP_READLOG)
            .map_err(|e| format!("joining AUDIT_NLGRP_READLOG: {e} (it needs CAP_AUDIT_READ)"))?;
        match audit_enabled() {
            Ok(0) => {
                return Err(
                    "audit is disabled on this host (AUDIT_GET: enabled=0), so Landlock logs \
                     nothing; `auditctl -e 1` would turn it on for the whole host; meanwhile \
                     raw_tp/sys_exit records the roots' and the exec allowlist's refusals from \
                     the refused calls, where it runs (doctor: roots_and_exec)"
                        .into(),
                );
            }
            Ok(_) => {}
            Err(e) => return Err(format!("AUDIT_GET: {e}")),
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: READ_TIMEOUT_MS * 1000,
        };
        // SAFETY: tv is a timeval of the size given.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const tv).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(format!(
                "setting the read timeout: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Subscription { fd })
    }

    /// The next record (its type and text), or `None` after a short wait with none.
    pub fn next(&self, buf: &mut [u8]) -> std::io::Result<Option<(u16, String)>> {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let n = usize::try_from(n).unwrap_or(0);
        if n < 16 {
            return Ok(None);
        }
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        let end = len.clamp(16, n);
        Ok(Some((
            ty,
            String::from_utf8_lossy(&buf[16..end]).into_owned(),
        )))
    }
}
