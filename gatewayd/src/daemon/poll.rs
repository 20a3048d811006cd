//! Bounded, adaptive polling for the next message on a connection, on both ends: the daemon
//! for the next request line after it answered one, the client for its answer.
//!
//! Why: on the virtual machine this project is measured on, every blocking wait that lets a
//! vCPU halt costs about 20 µs to wake up, and an idle round trip pays two of them (the client
//! blocked in `read`, the daemon's worker in `epoll_wait`): a socket round trip with no work
//! at all measured 46 µs p50 there. Polling the socket for a few tens of microseconds before
//! blocking keeps the waiting thread on its vCPU when the other side answers quickly (see
//! docs/internals/PROTOCOL.md, Bounded polling, for the figures).
//!
//! Bounds: a wait polls for at most its window, and stops early when the polling thread
//! stalls ([`STALL`]: it lost its CPU, so the machine is busy and polling would only keep a
//! CPU from the thread that answers). A poll that misses (the daemon behind a durable audit
//! sync, a client that thinks between calls, a busy machine) makes the next waits block at
//! once, more of them after each miss in a row; a hit resets that. An idle daemon polls
//! nowhere: it polls a connection only right after answering on it.
use std::{
    future::Future,
    io,
    os::fd::{AsRawFd as _, BorrowedFd},
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use tokio::io::{AsyncRead, ReadBuf};

/// How long the daemon polls a connection for the next request line after it answered one
/// (and for the first line of a new connection) before it waits for it in `epoll`. A client
/// that polls for its answer (as [`super::client::Client`] does) sends its next request a
/// few µs after the answer left; 25 µs covers that with room to spare. A client that slept
/// in `read` takes about 20 µs more to wake on the measured machine, which this window
/// mostly misses on purpose: the misses back polling off, and a longer window would only add
/// CPU on a busy machine.
pub const SERVER_POLL: Duration = Duration::from_micros(25);

/// How long [`super::client::Client`] polls for its answer before it blocks in `read`. An
/// answer without a durable audit record comes back in 10 to 20 µs when neither side
/// sleeps; one with a record waits for an `fdatasync` (hundreds of µs), where the adaptive
/// rule stops polling after the first.
pub const CLIENT_POLL: Duration = Duration::from_micros(50);

/// A gap between two tries longer than this means the polling thread lost its CPU (or the
/// daemon's worker ran other work meanwhile): the machine is busy, where a poll only keeps a
/// CPU from the thread that would answer, so the wait blocks at once and polling backs off.
/// A try costs about 1 µs on the measured machine.
pub(crate) const STALL: Duration = Duration::from_micros(10);

/// The most waits in a row that block without polling after misses (doubling per miss).
const MAX_SKIP: u32 = 128;

/// How a wait ended, for [`Window::learn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Data came while polling.
    Hit,
    /// The window ended, or the polling thread stalled ([`STALL`]), before data came.
    Miss,
    /// The wait did not poll.
    Blocked,
}

/// The adaptive part (after the guest `haltpoll` governor): a wait polls unless recent
/// polls missed; each miss doubles the number of waits that then block without polling (up
/// to [`MAX_SKIP`]), a hit resets it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    length: Duration,
    /// Waits left to block without polling.
    skip: u32,
    /// The skip the next miss sets.
    backoff: u32,
}

impl Window {
    /// A window of `window` (zero: never poll).
    pub(crate) fn new(window: Duration) -> Window {
        Window {
            length: window,
            skip: 0,
            backoff: 1,
        }
    }

    /// Until when a wait that starts at `start` polls (None: it blocks at once).
    pub(crate) fn deadline(self, start: Instant) -> Option<Instant> {
        (self.skip == 0 && !self.length.is_zero()).then(|| start + self.length)
    }

    /// Learns from how a wait ended.
    pub(crate) fn learn(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Hit => self.backoff = 1,
            Outcome::Miss => {
                self.skip = self.backoff;
                self.backoff = (self.backoff * 2).min(MAX_SKIP);
            }
            Outcome::Blocked => self.skip = self.skip.saturating_sub(1),
        }
    }
}

/// One `recv` that never blocks (`MSG_DONTWAIT`, plus `flags`): `WouldBlock` when nothing
/// is there. It reads the socket itself, not tokio's cached readiness (which only the
/// runtime's `epoll` sets again after a `WouldBlock`).
pub(crate) fn recv_now(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<usize> {
    loop {
        // SAFETY: `fd` is a descriptor borrowed for the call; `buf` is valid for writes of
        // `buf.len()` bytes, and recv writes at most that many.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags | libc::MSG_DONTWAIT,
            )
        };
        if let Ok(n) = usize::try_from(n) {
            return Ok(n);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The daemon's read half of a connection: after [`PollingRead::arm`], reads poll the socket
/// (yielding to the runtime between tries, so other connections on the same worker run)
/// until data comes or the window ends, and only then wait for readiness from `epoll`.
pub(crate) struct PollingRead<R> {
    inner: R,
    window: Window,
    /// The poll in progress: until when, and when it last tried.
    polling: Option<(Instant, Instant)>,
    /// The yield between two tries: tokio's own, which lets the worker run other tasks and
    /// poll its I/O driver without waking another worker.
    yielding: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl<R> PollingRead<R> {
    /// Wraps `inner`, polling for at most `window` (zero: never).
    pub(crate) fn new(inner: R, window: Duration) -> PollingRead<R> {
        PollingRead {
            inner,
            window: Window::new(window),
            polling: None,
            yielding: None,
        }
    }

    /// A wait for the next message starts now (after an answer was sent, or on accept).
    pub(crate) fn arm(&mut self) {
        let now = Instant::now();
        self.polling = self.window.deadline(now).map(|until| (until, now));
        if self.polling.is_none() {
            self.window.learn(Outcome::Blocked);
        }
        self.yielding = None;
    }

    fn ended(&mut self, outcome: Outcome) {
        self.window.learn(outcome);
        self.polling = None;
        self.yielding = None;
    }
}

impl<R> AsyncRead for PollingRead<R>
where
    R: AsyncRead + AsRef<tokio::net::UnixStream> + Unpin,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        while let Some((until, last)) = me.polling {
            if let Some(y) = me.yielding.as_mut() {
                if y.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                me.yielding = None;
            }
            // Tried first even after a stall: the data may be what woke this task.
            let now = Instant::now();
            let fd = std::os::fd::AsFd::as_fd(me.inner.as_ref());
            match recv_now(fd, buf.initialize_unfilled(), 0) {
                Ok(n) => {
                    buf.advance(n);
                    me.ended(Outcome::Hit);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if now >= until || now - last > STALL {
                        // The window is over, or the machine is busy: wait in epoll.
                        me.ended(Outcome::Miss);
                        break;
                    }
                    me.polling = Some((until, now));
                    me.yielding = Some(Box::pin(tokio::task::yield_now()));
                }
                Err(e) => {
                    me.ended(Outcome::Miss);
                    return Poll::Ready(Err(e));
                }
            }
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_back_off_and_a_hit_resets() {
        let t = Instant::now();
        let mut w = Window::new(Duration::from_micros(50));
        assert_eq!(w.deadline(t), Some(t + Duration::from_micros(50)));
        // Each miss doubles the waits that then block.
        for skip in [1, 2, 4] {
            w.learn(Outcome::Miss);
            for _ in 0..skip {
                assert_eq!(w.deadline(t), None);
                w.learn(Outcome::Blocked);
            }
            assert!(w.deadline(t).is_some());
        }
        w.learn(Outcome::Hit);
        w.learn(Outcome::Miss);
        assert_eq!(w.deadline(t), None);
        w.learn(Outcome::Blocked);
        assert!(
            w.deadline(t).is_some(),
            "a hit resets the backoff to one wait"
        );
        // Bounded: after many misses polling is still tried again.
        for _ in 0..64 {
            w.learn(Outcome::Miss);
        }
        for _ in 0..MAX_SKIP {
            assert_eq!(w.deadline(t), None);
            w.learn(Outcome::Blocked);
        }
        assert!(w.deadline(t).is_some());
        let off = Window::new(Duration::ZERO);
        assert_eq!(off.deadline(t), None);
    }
}
