//! The watch's terminal: stdin in raw mode (one key at a time, no echo, ctrl-c as a key), the
//! alternate screen, and SIGINT/SIGTERM/SIGHUP/SIGQUIT turned into a flag, so that every way
//! out restores the terminal as it was ([`Drop`]). nix's termios and poll (already a
//! dependency) do this in a few lines; a terminal crate would add a dozen crates for it.
use std::{
    io::{self, Read as _, Write as _},
    os::fd::AsFd as _,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::Context as _;
use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::{
        signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction},
        termios::{self, InputFlags, LocalFlags, SetArg, SpecialCharacterIndices, Termios},
    },
};

/// Set by a terminating signal; the watch's loop sees it and returns.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

const SIGNALS: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// What one wait for a key brought.
pub(super) enum Input {
    /// Nothing within the time given.
    Nothing,
    /// One key: a single byte read alone.
    Key(u8),
    /// Several bytes at once (a paste, an escape sequence): ignored by the watch.
    Burst,
    /// Stdin ended, or a terminating signal came.
    End,
}

/// Stdin in raw mode and the alternate screen, until dropped.
pub(super) struct Terminal {
    saved: Termios,
    handlers: Vec<(Signal, SigAction)>,
}

impl Terminal {
    /// Puts stdin in raw mode (the caller checked that it is a terminal) and switches stdout
    /// to the alternate screen.
    pub(super) fn enter() -> anyhow::Result<Terminal> {
        let stdin = io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).context("reading the terminal's mode")?;
        let mut raw = saved.clone();
        raw.local_flags &=
            !(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG | LocalFlags::IEXTEN);
        raw.input_flags &= !(InputFlags::IXON | InputFlags::ICRNL);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        STOP.store(false, Ordering::SeqCst);
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::empty(),
            SigSet::empty(),
        );
        let mut handlers = Vec::new();
        for s in SIGNALS {
            // SAFETY: the handler only stores to an atomic (async-signal-safe).
            let old = unsafe { sigaction(s, &action) }.context("installing a signal handler")?;
            handlers.push((s, old));
        }
        let t = Terminal { saved, handlers };
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)
            .context("setting the terminal to raw mode")?;
        // The alternate screen, the cursor hidden.
        print_raw("\x1b[?1049h\x1b[?25l");
        Ok(t)
    }

    /// Waits up to `timeout` for a key. (A method: keys are read one at a time only while the
    /// terminal is raw.)
    #[allow(clippy::unused_self)]
    pub(super) fn key(&self, timeout: Duration) -> Input {
        if STOP.load(Ordering::SeqCst) {
            return Input::End;
        }
        let stdin = io::stdin();
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => return Input::Nothing,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {
                return if STOP.load(Ordering::SeqCst) {
                    Input::End
                } else {
                    Input::Nothing
                };
            }
            Err(_) => return Input::End,
        }
        let mut buf = [0u8; 64];
        match stdin.lock().read(&mut buf) {
            Ok(0) | Err(_) => Input::End,
            Ok(1) => Input::Key(buf[0]),
            Ok(_) => Input::Burst,
        }
    }

    /// Draws `lines` from the top left, each cleared to its end, and clears what is below
    /// (on the alternate screen, while it is there).
    #[allow(clippy::unused_self)]
    pub(super) fn draw(&self, lines: &[String]) {
        let mut s = String::from("\x1b[H");
        for l in lines {
            s.push_str(l);
            s.push_str("\x1b[K\r\n");
        }
        s.push_str("\x1b[J");
        print_raw(&s);
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        print_raw("\x1b[?25h\x1b[?1049l");
        let _ = termios::tcsetattr(io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
        for (s, old) in &self.handlers {
            // SAFETY: the handlers that were there before ours.
            let _ = unsafe { sigaction(*s, old) };
        }
    }
}

/// Writes to stdout as is; a failure is ignored (the terminal went away: the loop ends at its
/// next read).
fn print_raw(s: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}
