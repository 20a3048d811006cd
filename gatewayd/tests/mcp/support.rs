//! Shared pieces of the MCP proxy tests: the real components `cargo xtask setup` installs
//! (the filesystem server from npm, the Python MCP SDK in a venv), found through the
//! variables xtask sets or in the setup's cache; a test FAILS when they are missing.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

pub(crate) const GATEWAYD: &str = env!("CARGO_BIN_EXE_gatewayd");

fn cache() -> PathBuf {
    std::env::var_os("GATEWAYD_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/gatewayd"),
        PathBuf::from,
    )
}

fn required(var: &str, default: PathBuf) -> PathBuf {
    let p = std::env::var_os(var).map_or(default, PathBuf::from);
    assert!(
        p.exists(),
        "{} is missing ({var}); `cargo xtask setup` installs it",
        p.display()
    );
    p
}

/// The venv's Python with the `mcp` SDK (made from /usr/bin/python3).
pub(crate) fn python() -> PathBuf {
    required("GATEWAYD_MCP_PYTHON", cache().join("venv/bin/python"))
}

/// `mcp-server-filesystem` from npm.
pub(crate) fn fs_server() -> PathBuf {
    required(
        "GATEWAYD_MCP_FS_SERVER",
        cache().join("node/node_modules/.bin/mcp-server-filesystem"),
    )
}

/// `mcp-server-everything` from npm (resources, prompts, tasks, elicitation, sampling).
pub(crate) fn everything_server() -> PathBuf {
    required(
        "GATEWAYD_MCP_EVERYTHING_SERVER",
        cache().join("node/node_modules/.bin/mcp-server-everything"),
    )
}

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp/fixtures")
        .join(name)
}

/// Runs `gatewayd/tests/mcp/fixtures/client.py` with `plan`; returns its result per step.
pub(crate) fn drive(plan: &Value) -> Vec<Value> {
    let out = Command::new(python())
        .arg(fixture("client.py"))
        .arg(plan.to_string())
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str::<Vec<Value>>(last)
        .unwrap_or_else(|e| panic!("client output {last:?}: {e}\nstderr: {stderr}"))
}

/// `gatewayd mcp` arguments for a server.
pub(crate) fn proxy_cmd(policy: &Path, server: &str, audit: &Path, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        GATEWAYD.to_owned(),
        "mcp".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--server".into(),
        server.into(),
        "--audit".into(),
        audit.display().to_string(),
    ];
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}

/// Every record of an audit log.
pub(crate) fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line"))
        .collect()
}

/// The records of the lines written whole so far (the proxy may be writing one).
pub(crate) fn records_written_whole(audit: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// (decision, reason) of every record.
pub(crate) fn reasons(path: &Path) -> Vec<(String, String)> {
    records(path)
        .iter()
        .map(|r| {
            (
                r["decision"].as_str().unwrap_or("").to_owned(),
                r["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// `gatewayd audit verify` succeeds on the log.
pub(crate) fn verify(path: &Path) {
    let out = Command::new(GATEWAYD)
        .args(["audit", "verify"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `gatewayd policy pin P --from LISTING`.
pub(crate) fn pin_from(policy: &Path, listing: &Path) {
    let out = Command::new(GATEWAYD)
        .args(["policy", "pin"])
        .arg(policy)
        .arg("--from")
        .arg(listing)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The deepest common ancestor of the npm install (what the server's profile must read).
pub(crate) fn node_tree() -> PathBuf {
    let real = std::fs::canonicalize(fs_server()).unwrap();
    real.ancestors()
        .find(|a| a.ends_with("node_modules"))
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"))
        .to_owned()
}

/// `gatewayd serve` with `policy` on `socket`, once it accepts a connection (the socket
/// file is bound before it listens).
/// A `gatewayd serve` of a test, killed when dropped, so a test that fails leaves no daemon
/// behind (an orphan would hold the test runner's output open).
pub(crate) struct Daemon(pub(crate) std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn start_daemon(policy: &Path, socket: &Path, audit: &Path) -> Daemon {
    let daemon = Command::new(GATEWAYD)
        .args(["serve", "--policy"])
        .arg(policy)
        .arg("--socket")
        .arg(socket)
        .arg("--audit")
        .arg(audit)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let daemon = Daemon(daemon);
    for _ in 0..500 {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    daemon
}
