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
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes the two fds; no name, settings or window size are asked for.
    let rc = unsafe {
        libc::openpty(
            &raw mut master,
            &raw mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: two fresh fds from openpty, each owned once.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    cmd.stdin(Stdio::from(slave));
    // SAFETY: setsid and ioctl are async-signal-safe; stdin is the pty's slave by now.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
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
