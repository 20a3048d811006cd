//! `gatewayd serve` under systemd (packaging/gatewayd.service, gatewayd.socket): the
//! listening socket inherited through socket activation (`LISTEN_PID`/`LISTEN_FDS`), the
//! readiness and stopping notifications (`NOTIFY_SOCKET`: `READY=1`, `STOPPING=1`), and the
//! watchdog (`WATCHDOG_USEC`: `WATCHDOG=1` every half period). The `sd-notify` crate speaks
//! the protocol. Without systemd (none of the variables set) every function here does
//! nothing.
use std::{
    os::fd::{FromRawFd as _, OwnedFd, RawFd},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use sd_notify::NotifyState;

use crate::shutdown::Shutdown;

/// Why an inherited socket cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// The variables could not be read or parsed.
    #[error("reading LISTEN_FDS/LISTEN_PID: {0}")]
    Env(std::io::Error),
    /// More than one socket was passed.
    #[error("systemd passed {0} sockets; gatewayd serves exactly one (one ListenStream=)")]
    Count(usize),
    /// The descriptor passed is not a listening Unix stream socket.
    #[error(
        "the inherited descriptor {fd} is not a listening Unix stream socket ({why}); check ListenStream= in the socket unit"
    )]
    NotUnixListener {
        /// The descriptor.
        fd: RawFd,
        /// What it is instead.
        why: String,
    },
}

/// Set once the inherited descriptor has been taken, so it is never owned twice.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The listening socket systemd passed (`LISTEN_PID` names this process), if any: exactly
/// one, a Unix stream socket in the listening state. Later calls return `None`.
pub fn inherited_listener() -> Result<Option<std::os::unix::net::UnixListener>, ActivationError> {
    let fds: Vec<RawFd> = sd_notify::listen_fds()
        .map_err(ActivationError::Env)?
        .collect();
    match fds.as_slice() {
        [] => Ok(None),
        [fd] => {
            if TAKEN.swap(true, Ordering::SeqCst) {
                return Ok(None);
            }
            check_unix_listener(*fd)?;
            // SAFETY: systemd handed this descriptor to this process (LISTEN_PID matched),
            // it is open (getsockopt just succeeded on it), and TAKEN makes this the only
            // owner.
            let owned = unsafe { OwnedFd::from_raw_fd(*fd) };
            Ok(Some(std::os::unix::net::UnixListener::from(owned)))
        }
        many => Err(ActivationError::Count(many.len())),
    }
}

fn sockopt(fd: RawFd, opt: libc::c_int) -> std::io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of the sizes given; the kernel checks fd.
    let r =
        unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, (&raw mut v).cast(), &raw mut len) };
    if r == 0 {
        Ok(v)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn check_unix_listener(fd: RawFd) -> Result<(), ActivationError> {
    let not = |why: String| ActivationError::NotUnixListener { fd, why };
    let domain = sockopt(fd, libc::SO_DOMAIN).map_err(|e| not(e.to_string()))?;
    let kind = sockopt(fd, libc::SO_TYPE).map_err(|e| not(e.to_string()))?;
    let listening = sockopt(fd, libc::SO_ACCEPTCONN).map_err(|e| not(e.to_string()))?;
    if domain != libc::AF_UNIX {
        return Err(not(format!("address family {domain}")));
    }
    if kind != libc::SOCK_STREAM {
        return Err(not(format!("socket type {kind}")));
    }
    if listening == 0 {
        return Err(not("not listening".into()));
    }
    Ok(())
}

/// Tells systemd the daemon is ready (`Type=notify`), with a status line.
pub fn notify_ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// Tells systemd the daemon is stopping.
pub fn notify_stopping() {
    notify(&[NotifyState::Stopping]);
}

fn notify(state: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(state) {
        eprintln!("gatewayd: cannot notify systemd: {e}");
    }
}

/// How often to ping the watchdog: half of `WATCHDOG_USEC` (when `WATCHDOG_PID`, if set,
/// names this process); None when systemd did not ask for pings.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled()
        .filter(|d| !d.is_zero())
        .map(|d| d / 2)
}

/// Pings the watchdog (`WATCHDOG=1`) every `interval` until `shutdown` fires. It runs on the
/// daemon's runtime, so the pings stop when the runtime can no longer run tasks, and systemd
/// then restarts the daemon.
pub async fn watchdog(interval: Duration, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => notify(&[NotifyState::Watchdog]),
            () = shutdown.recv() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listening_unix_stream_sockets_are_taken() {
        use std::os::fd::AsRawFd as _;
        let dir = tempfile::tempdir().unwrap();
        let l = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
        check_unix_listener(l.as_raw_fd()).unwrap();
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(
            matches!(check_unix_listener(a.as_raw_fd()), Err(ActivationError::NotUnixListener { why, .. }) if why == "not listening")
        );
        let d = std::os::unix::net::UnixDatagram::unbound().unwrap();
        assert!(check_unix_listener(d.as_raw_fd()).is_err());
        let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(
            matches!(check_unix_listener(t.as_raw_fd()), Err(ActivationError::NotUnixListener { why, .. }) if why.starts_with("address family"))
        );
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(check_unix_listener(f.as_raw_fd()).is_err());
    }
}
