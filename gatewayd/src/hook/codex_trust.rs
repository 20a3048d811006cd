//! Codex runs a hook only once it is trusted, and skips an untrusted one silently. Trust is
//! `hooks.state."KEY".trusted_hash` in Codex's `config.toml`, the hash of the hook entry as
//! Codex computes it. gatewayd asks Codex itself: `codex app-server` (JSON-RPC over stdio)
//! lists the hooks with their key, hash and trust status (`hooks/list`), and writes its own
//! config (`config/value/write`, `upsert` on `hooks.state`), so neither the hash nor the TOML
//! is computed or edited by gatewayd (docs/HOOKS.md, "Installing").
use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{Value, json};

use super::install::is_gatewayd_hook;

/// How long Codex may take to answer one request.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// Why Codex's hooks could not be read or trusted.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// `codex app-server` could not be started.
    #[error("cannot start `{program} app-server`: {source}")]
    Start {
        /// The codex program.
        program: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Codex answered with an error, not at all, or not in the shape expected.
    #[error("codex app-server, {method}: {what}")]
    Answer {
        /// The request.
        method: &'static str,
        /// What went wrong.
        what: String,
    },
}

/// One hook as Codex lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexHook {
    /// Codex's key (`FILE:event:group:index`).
    pub key: String,
    /// Its command line.
    pub command: String,
    /// Codex's hash of the entry (`sha256:...`).
    pub hash: String,
    /// Whether Codex trusts it (and so runs it).
    pub trusted: bool,
    /// Whether it is enabled.
    pub enabled: bool,
}

/// A running `codex app-server`, killed on drop.
struct AppServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl AppServer {
    fn start(codex: &Path, codex_home: Option<&Path>) -> Result<AppServer, TrustError> {
        let mut c = Command::new(codex);
        c.arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(h) = codex_home {
            c.env("CODEX_HOME", h);
        }
        let start = |source| TrustError::Start {
            program: codex.to_path_buf(),
            source,
        };
        let mut child = c.spawn().map_err(start)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(start(std::io::Error::other("no pipes")));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = AppServer {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        s.request(
            "initialize",
            json!({"clientInfo": {"name": "gatewayd", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        s.send(
            &json!({"jsonrpc": "2.0", "method": "initialized"}),
            "initialized",
        )?;
        Ok(s)
    }

    fn send(&mut self, msg: &Value, method: &'static str) -> Result<(), TrustError> {
        writeln!(self.stdin, "{msg}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| TrustError::Answer {
                method,
                what: e.to_string(),
            })
    }

    /// One request and its result (notifications in between are skipped).
    fn request(&mut self, method: &'static str, params: Value) -> Result<Value, TrustError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            method,
        )?;
        let fail = |what: String| TrustError::Answer { method, what };
        loop {
            let line = self
                .lines
                .recv_timeout(ANSWER_WITHIN)
                .map_err(|_| fail(format!("no answer within {} s", ANSWER_WITHIN.as_secs())))?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] != json!(id) {
                continue;
            }
            if let Some(e) = v.get("error") {
                return Err(fail(e.to_string()));
            }
            return Ok(v["result"].clone());
        }
    }

    fn hooks(&mut self, cwd: &Path) -> Result<Vec<CodexHook>, TrustError> {
        let r = self.request("hooks/list", json!({"cwds": [cwd]}))?;
        let list = r["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|d| d["hooks"].as_array().into_iter().flatten())
            .map(|h| CodexHook {
                key: h["key"].as_str().unwrap_or_default().to_string(),
                command: h["command"].as_str().unwrap_or_default().to_string(),
                hash: h["currentHash"].as_str().unwrap_or_default().to_string(),
                trusted: h["trustStatus"] == "trusted",
                enabled: h["enabled"] != json!(false),
            })
            .collect();
        Ok(list)
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// gatewayd's hooks as Codex sees them from `cwd`.
pub fn gatewayd_hooks(
    codex: &Path,
    codex_home: Option<&Path>,
    cwd: &Path,
) -> Result<Vec<CodexHook>, TrustError> {
    let mut server = AppServer::start(codex, codex_home)?;
    let all = server.hooks(cwd)?;
    Ok(all
        .into_iter()
        .filter(|h| is_gatewayd_hook(&h.command))
        .collect())
}

/// Trusts every gatewayd hook Codex lists from `cwd` that it does not trust yet, through
/// Codex's own config writer; returns them as Codex lists them afterwards (each trusted, or
/// an error).
pub fn trust(
    codex: &Path,
    codex_home: Option<&Path>,
    cwd: &Path,
) -> Result<Vec<CodexHook>, TrustError> {
    let mut server = AppServer::start(codex, codex_home)?;
    let ours: Vec<CodexHook> = server
        .hooks(cwd)?
        .into_iter()
        .filter(|h| is_gatewayd_hook(&h.command))
        .collect();
    let untrusted: serde_json::Map<String, Value> = ours
        .iter()
        .filter(|h| !h.trusted && !h.hash.is_empty())
        .map(|h| (h.key.clone(), json!({"trusted_hash": h.hash})))
        .collect();
    if !untrusted.is_empty() {
        server.request(
            "config/value/write",
            json!({"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": untrusted}),
        )?;
    }
    let after: Vec<CodexHook> = server
        .hooks(cwd)?
        .into_iter()
        .filter(|h| is_gatewayd_hook(&h.command))
        .collect();
    if after.is_empty() {
        return Err(TrustError::Answer {
            method: "hooks/list",
            what: format!("Codex lists no gatewayd hook from {}", cwd.display()),
        });
    }
    if let Some(h) = after.iter().find(|h| !h.trusted) {
        return Err(TrustError::Answer {
            method: "hooks/list",
            what: format!("the hook {} is still untrusted after the write", h.key),
        });
    }
    Ok(after)
}
