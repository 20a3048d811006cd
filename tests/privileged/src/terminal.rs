//! The terminal the agent inherits. Input pushed into it with `TIOCSTI` is read by the
//! user's shell once the agent ends: a command run outside every sandbox (the classic escape
//! from `bubblewrap` and `flatpak` sandboxes, CVE-2017-5226). The seccomp filter denies it at
//! both tiers (`terminal_injection`); the terminal stays usable (`TCGETS`).
use std::{
    os::fd::{FromRawFd as _, OwnedFd},
    os::unix::process::CommandExt as _,
    process::Stdio,
    sync::{Arc, Mutex},
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

/// What a pty's master has read so far, filled by a thread until the terminal closes.
fn read_terminal(master: OwnedFd) -> (std::fs::File, Arc<Mutex<String>>) {
    let writer = std::fs::File::from(master.try_clone().expect("dup the master"));
    let seen = Arc::new(Mutex::new(String::new()));
    let fill = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut m = std::fs::File::from(master);
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut m, &mut buf) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            fill.lock().unwrap().push_str(&text);
        }
    });
    (writer, seen)
}

/// Waits until `cond` holds; `what` names it when it never does, with the terminal's text.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool, terminal: &Mutex<String>) {
    let started = std::time::Instant::now();
    while !cond() {
        let waited = started.elapsed();
        assert!(
            waited < MUST_HAPPEN_WITHIN,
            "{what}; the terminal:\n{}",
            terminal.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The state letter (`/proc/PID/stat`'s third field) of every process whose command line
/// is `argv`.
fn states_of(argv: &[&str]) -> Vec<char> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut states = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = e.path();
        if std::fs::read(dir.join("cmdline")).ok().as_deref() != Some(&want[..]) {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // After the command name's closing parenthesis: " S ...".
        if let Some(state) = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim().chars().next())
        {
            states.push(state);
        }
    }
    states
}

/// A job-control shell stops the session with Ctrl-Z and resumes it with `fg`, as it does a
/// bare agent: the real bash, interactive on a pty, runs the agent in the foreground; Ctrl-Z
/// stops it (bash reports `Stopped`, the agent's state is `T` and it prints nothing more),
/// `fg` lets it go on printing, Ctrl-C then ends it and bash reads 130.
#[test]
fn a_job_control_shell_stops_and_resumes_the_session() {
    let _ = tier();
    let dir = Scratch::new("jobs");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let agent = agent();
    let argv = [agent.as_str(), "tick", "50"];
    for under in [false, true] {
        let out = dir.path(if under { "under.txt" } else { "bare.txt" });
        let job = if under {
            let mut c = under_gatewayd(&policy, &audit, agent.as_str());
            c.args(&argv[1..]);
            std::iter::once(c.get_program())
                .chain(c.get_args())
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            argv.join(" ")
        };
        let (master, slave) = pty(24, 80);
        let mut bash = Command::new("bash");
        bash.args(["--norc", "--noprofile", "-i"])
            .env("PS1", "$ ")
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave.try_clone().unwrap()));
        controlled_by(&mut bash, slave);
        let mut shell = bash.spawn().expect("spawn bash on a terminal");
        let (mut term, seen) = read_terminal(master);
        let mut type_in =
            |keys: &str| std::io::Write::write_all(&mut term, keys.as_bytes()).unwrap();
        let ticks = || std::fs::read_to_string(&out).map_or(0, |s| s.lines().count());
        type_in(&format!("{job} > {}\n", out.display()));
        wait_until(
            &format!("the agent never printed (under gatewayd: {under})"),
            || ticks() >= 3,
            &seen,
        );
        type_in("\x1a");
        wait_until(
            &format!("bash never saw the job stop (under gatewayd: {under})"),
            || seen.lock().unwrap().contains("Stopped"),
            &seen,
        );
        let states = states_of(&argv);
        assert_eq!(
            states,
            ['T'],
            "the agent is stopped (under gatewayd: {under})"
        );
        let stopped_at = ticks();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            ticks(),
            stopped_at,
            "a stopped agent printed (under gatewayd: {under})"
        );
        type_in("fg\n");
        wait_until(
            &format!("fg did not resume the agent (under gatewayd: {under})"),
            || ticks() > stopped_at + 2,
            &seen,
        );
        type_in("\x03");
        type_in("echo status:$?\n");
        wait_until(
            &format!("no 130 after Ctrl-C (under gatewayd: {under})"),
            || seen.lock().unwrap().contains("status:130"),
            &seen,
        );
        type_in("exit\n");
        let st = shell.wait().unwrap();
        assert!(st.success(), "bash: {st:?}\n{}", seen.lock().unwrap());
    }
}
