//! The terminal the agent inherits. Input pushed into it with `TIOCSTI` is read by the
//! user's shell once the agent ends: a command run outside every sandbox (the classic escape
//! from `bubblewrap` and `flatpak` sandboxes, CVE-2017-5226). The seccomp filter denies it at
//! both tiers (`terminal_injection`); the terminal stays usable (`TCGETS`).
use std::{
    os::fd::{FromRawFd as _, OwnedFd},
    os::unix::process::CommandExt as _,
    process::Stdio,
};

use super::*;
use escape::{Outcome, escape_bin, parse};

/// Runs `cmd` in a session of its own whose controlling terminal, and stdin, is a new pty.
fn on_a_terminal(mut cmd: Command) -> Output {
    let (master, slave) = pty(0, 0);
    controlled_by(&mut cmd, slave);
    let out = cmd.output().expect("spawn on a terminal");
    // Held open until the session ends: a closed master hangs the terminal up.
    drop(master);
    out
}

#[test]
fn the_agent_cannot_push_input_into_its_terminal() {
    let attempts = ["tiocsti", "tcgets"];
    let mut bare = Command::new(escape_bin());
    bare.args(attempts);
    let text = stdout(&on_a_terminal(bare));
    let got = parse(&text);
    // Bare, as root: allowed whatever `dev.tty.legacy_tiocsti` says (CAP_SYS_ADMIN).
    assert_eq!(got.get("tiocsti"), Some(&Outcome::Ok), "bare:\n{text}");
    assert_eq!(got.get("tcgets"), Some(&Outcome::Ok), "bare:\n{text}");
    let dir = Scratch::new("terminal");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    );
    let mut under = under_gatewayd(&policy, dir.path("audit.jsonl"), escape_bin());
    under.args(attempts);
    let out = on_a_terminal(under);
    let text = stdout(&out);
    assert!(out.status.success(), "{}: {text}", out.status);
    let got = parse(&text);
    assert_eq!(
        got.get("tiocsti"),
        Some(&Outcome::Errno(libc::EPERM)),
        "under gatewayd:\n{text}"
    );
    assert_eq!(
        got.get("tcgets"),
        Some(&Outcome::Ok),
        "under gatewayd, the terminal stays usable:\n{text}"
    );
}

/// A new pty of `rows` x `cols` (0 x 0: the size a pty starts with): (master, slave).
fn pty(rows: u16, cols: u16) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes the two fds and reads the window size it is given.
    let rc = unsafe {
        libc::openpty(
            &raw mut master,
            &raw mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &raw const ws,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: two fresh fds from openpty, each owned once.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Makes `slave` the controlling terminal and stdin of `cmd`, in a session of its own.
/// SIGINT goes back to its default action, as a shell does for a job it runs in the
/// foreground (a test run started in the background of a script inherits SIGINT ignored).
fn controlled_by(cmd: &mut Command, slave: OwnedFd) {
    cmd.stdin(Stdio::from(slave));
    // SAFETY: setsid, ioctl and sigaction are async-signal-safe; stdin is the pty's slave
    // by now; the sigaction struct is plain data, zeroed then given SIG_DFL.
    unsafe {
        cmd.pre_exec(|| {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            if libc::sigaction(libc::SIGINT, &raw const dfl, std::ptr::null_mut()) < 0
                || libc::setsid() < 0
                || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// An interactive agent keeps its terminal under gatewayd as it does bare: it reads the
/// window size, and Ctrl-C typed on the terminal ends it (SIGINT, exit 130), with its
/// signals otherwise kept inside the session (`shared_objects`).
#[test]
fn an_interactive_agent_keeps_its_terminal_and_ctrl_c() {
    let _ = tier();
    let dir = Scratch::new("pty");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let args = ["winsize", "+", "sleep", "30"];
    for under in [false, true] {
        let (master, slave) = pty(41, 123);
        let mut cmd = if under {
            under_gatewayd(&policy, &audit, agent())
        } else {
            Command::new(agent())
        };
        cmd.args(args).stdout(Stdio::piped());
        controlled_by(&mut cmd, slave);
        let mut child = cmd.spawn().expect("spawn on a terminal");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(
            line.trim(),
            "OK winsize: 41 rows, 123 columns",
            "under gatewayd: {under}"
        );
        // Ctrl-C, typed on the terminal: the line discipline signals its foreground group.
        let mut m = std::fs::File::from(master);
        std::io::Write::write_all(&mut m, b"\x03").unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "Ctrl-C did not end the agent (under gatewayd: {under})"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let code = status
            .code()
            .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s));
        assert_eq!(code, Some(130), "under gatewayd: {under}: {status:?}");
    }
}
