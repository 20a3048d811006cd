//! `gatewayd approvals watch` in a real terminal: tmux (a private server on its own socket)
//! runs the watch against a daemon with held calls; the test reads the screen
//! (`capture-pane -p`) and presses keys (`send-keys`). After the watch, the pane's shell
//! prints the exit code and the terminal's mode (`stty -a`), so a watch that leaves the
//! terminal raw fails too.
use crate::{
    cli::{held, repeat},
    support,
};

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use serde_json::json;
use support::{Daemon, require_cgroups};

/// A tmux server of this test's own, with one session `w` running one command.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Runs `cmd` in a 200x60 terminal; `path`: the pane's $PATH.
    fn start(dir: &Path, cmd: &str, path: &str) -> Tmux {
        assert!(
            Path::new("/usr/bin/tmux").exists(),
            "this test needs tmux (`cargo xtask setup` installs it)"
        );
        let t = Tmux {
            socket: dir.join("tmux.sock"),
        };
        // The pane's shell reports how the watch ended and the terminal's mode, then stays
        // open to be read.
        let script = format!(
            "{cmd}; echo \"watch exited $?\"; \
             echo \"tty: $(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' ')\"; \
             sleep 600"
        );
        let out = t
            .command()
            .args([
                "new-session",
                "-d",
                "-s",
                "w",
                "-x",
                "200",
                "-y",
                "60",
                &script,
            ])
            .env("PATH", path)
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux: {}", text(&out));
        t
    }

    fn command(&self) -> Command {
        let mut c = Command::new("/usr/bin/tmux");
        c.arg("-S").arg(&self.socket).env_remove("TMUX");
        c
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "w"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (up to 20 s) until the screen contains every one of `want`; the screen.
    fn wait_for(&self, want: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if want.iter().all(|w| s.contains(w)) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the screen never showed {want:?}; it shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Presses `key` (tmux's name of it: `a`, `C-c`), once the call on screen has been there
    /// longer than the watch's guard against keys meant for the call before.
    fn press(&self, key: &str) {
        std::thread::sleep(Duration::from_millis(500));
        let out = self
            .command()
            .args(["send-keys", "-t", "w", key])
            .output()
            .unwrap();
        assert!(out.status.success(), "send-keys: {}", text(&out));
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `gatewayd approvals watch` against `socket`, quoted for the pane's shell.
fn watch_command(socket: &Path) -> String {
    format!(
        "'{}' approvals watch --socket '{}' --interval-ms 100",
        env!("CARGO_BIN_EXE_gatewayd"),
        socket.display()
    )
}

/// A directory with a `notify-send` that writes its arguments to `notified` beside it; the
/// $PATH with it first.
fn fake_notify_send(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = bin.join("notify-send");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{}'\n",
            dir.join("notified").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_watch_shows_held_calls_and_one_key_approves_or_denies_them() {
    require_cgroups();
    let d = Daemon::start();
    let (mut agent, first) = held(&d, "watch-1", "lunch at noon");
    let dir = tempfile::tempdir().unwrap();
    let path = fake_notify_send(dir.path());
    let t = Tmux::start(dir.path(), &watch_command(&d.socket), &path);

    // The call held before the watch started: tool, arguments, reasons, legs.
    let s = t.wait_for(&[&first]);
    for want in [
        "tool       send_email",
        "session    watch-1",
        "reasons    trifecta",
        "legs       untrusted: yes  private: yes  egress: no",
        "\"body\": \"lunch at noon\"",
        "1 waiting",
    ] {
        assert!(s.contains(want), "no {want:?} on the screen:\n{s}");
    }
    t.press("a");
    t.wait_for(&[&format!("approved {first} (send_email)"), "No held calls"]);
    let r = repeat(&mut agent, "watch-1", "lunch at noon", &first);
    assert_eq!(r["reason"], "approved", "{r}");

    // A call held while the watch runs shows up (the session has sent out by now), and is
    // announced on the desktop without its arguments.
    let r = agent.call(
        "call/decide",
        json!({"session": "watch-1", "call": {"tool": "send_email", "arguments": {"body": "second"}}}),
    );
    let second = r["result"]["approval_id"].as_str().unwrap().to_owned();
    t.wait_for(&[
        &second,
        "\"body\": \"second\"",
        "egress: yes",
        "Rule of Two tripped",
    ]);
    // notify-send runs beside the watch: its file may come a moment after the screen.
    let start = Instant::now();
    let notified = loop {
        let n = std::fs::read_to_string(dir.path().join("notified")).unwrap_or_default();
        if n.contains("session watch-1") || start.elapsed() > Duration::from_secs(10) {
            break n;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        notified.contains("`send_email` waits for your approval")
            && notified.contains("session watch-1")
            && !notified.contains("second"),
        "notification: {notified:?}"
    );
    t.press("d");
    t.wait_for(&[&format!("denied {second} (send_email)")]);
    let r = repeat(&mut agent, "watch-1", "second", &second);
    assert_eq!(r["reason"], "approval_denied", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("rejected by a person"),
        "{r}"
    );

    // Decided elsewhere while shown: the watch says so and moves on.
    let r = agent.call(
        "call/decide",
        json!({"session": "watch-1", "call": {"tool": "send_email", "arguments": {"body": "third"}}}),
    );
    let third = r["result"]["approval_id"].as_str().unwrap().to_owned();
    t.wait_for(&[&third, "\"body\": \"third\""]);
    d.client()
        .call("approvals/approve", json!({"id": third}))
        .unwrap();
    t.wait_for(&[
        &format!("{third} was decided elsewhere or expired"),
        "No held calls",
    ]);

    // The daemon goes away: a clear error, exit 2, the terminal as it was, and what was
    // decided here left on the screen.
    drop(agent);
    d.stop().unwrap();
    let s = t.wait_for(&["watch exited 2", "tty: "]);
    assert!(s.contains("went away"), "{s}");
    assert!(
        s.contains("tty: icanon echo"),
        "the terminal was not restored:\n{s}"
    );
    assert!(s.contains(&format!("approved {first}")), "{s}");
    assert!(s.contains(&format!("denied {second}")), "{s}");
}

#[test]
fn ctrl_c_ends_the_watch_and_restores_the_terminal() {
    require_cgroups();
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let t = Tmux::start(dir.path(), &watch_command(&d.socket), &path);
    t.wait_for(&["No held calls", "0 waiting"]);
    t.press("C-c");
    let s = t.wait_for(&["watch exited 0", "tty: "]);
    assert!(
        s.contains("tty: icanon echo"),
        "the terminal was not restored:\n{s}"
    );
}

#[test]
fn without_a_terminal_the_watch_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["approvals", "watch", "--socket"])
        .arg(dir.path().join("none.sock"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("needs a terminal on stdin"),
        "{}",
        text(&out)
    );
}
