//! A desktop notification for a held call, where a session bus exists: `notify-send` (libnotify,
//! which sends `org.freedesktop.Notifications.Notify` on `$DBUS_SESSION_BUS_ADDRESS`). Shelling out
//! keeps a D-Bus client (zbus and its async stack) out of a root daemon's binary for one
//! optional message. Best effort and silent: no bus, no `notify-send`, a bus that does not
//! answer — nothing is shown and nothing fails. The text names the tool, the session and the
//! reasons, never the arguments (a notification can show on a locked screen).
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use gatewayd::protocol::PendingApproval;

use super::watch::clean;

/// Sends one notification for `p` if a session bus and `notify-send` are there.
pub(super) fn held(p: &PendingApproval) {
    let bus = std::env::var_os("DBUS_SESSION_BUS_ADDRESS");
    if bus.as_deref().is_none_or(OsStr::is_empty) {
        return;
    }
    let Some(prog) = find("notify-send") else {
        return;
    };
    let a = &p.approval;
    let summary = format!("gatewayd: `{}` waits for your approval", clean(&a.tool));
    let body = format!(
        "session {} · reasons {} · `gatewayd approvals watch` to decide",
        clean(&a.session),
        clean(&a.reasons.join(", "))
    );
    let child = Command::new(prog)
        .args(["--app-name=gatewayd", "--urgency=critical", "--"])
        .arg(summary)
        .arg(body)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Ok(mut child) = child {
        // Reaped off the watch's thread: a bus that does not answer never stalls the prompt.
        std::thread::spawn(move || child.wait());
    }
}

/// `name` in $PATH, if it is there.
fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
