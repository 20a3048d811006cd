//! What the command line prints. `println!` panics when its reader has gone away
//! (`gatewayd check … | head -1`); these macros do not. On a broken pipe the rest of the
//! output is dropped and the command finishes as it would have, with its own exit code.
use std::{
    fmt,
    io::{self, Write},
    sync::atomic::{AtomicBool, Ordering},
};

/// Set once stdout's reader has gone away.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Writes one line to stdout. A broken pipe is not an error; other write errors are.
pub(super) fn line(args: fmt::Arguments) -> io::Result<()> {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            STDOUT_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => r,
    }
}

/// Writes one line to stderr. A failure is ignored: there is nowhere left to report it.
pub(super) fn err_line(args: fmt::Arguments) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// `println!` that returns `io::Result<()>` and treats a broken pipe as success.
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::cli::out::line(format_args!($($t)*))
    };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::cli::out::err_line(format_args!($($t)*))
    };
}

pub(crate) use {errln, outln};

/// An error and its causes on one line, each cause left out when the text before it already
/// says it (errors here often include their source's text in their own).
pub(super) fn chain(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_already_said_are_not_repeated() {
        let io = io::Error::new(io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(io).context("reading p.json: no such file");
        assert_eq!(chain(&e), "reading p.json: no such file");
        let e = anyhow::Error::new(io::Error::other("disk full")).context("writing x");
        assert_eq!(chain(&e), "writing x: disk full");
    }
}
