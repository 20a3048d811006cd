//! `gatewayd hook install`: the hook merged into an agent host's own settings, without
//! clobbering them, idempotently (docs/HOOKS.md, "Installing").
//!
//! Each host keeps its hooks in one JSON file (Claude Code and Gemini CLI in their settings,
//! Codex in `hooks.json`), as `hooks.<Event>: [{matcher, hooks: [{type, command, timeout}]}]`.
//! Installing removes every handler that is a `gatewayd hook` command (a previous install)
//! and appends one group for the pre- and the post-tool event; every other key, event and
//! handler is kept as it was.
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::Host;

/// Whose settings: the user's, or one project's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Under the home (`~/.claude`, `$CODEX_HOME`, `~/.gemini`).
    User,
    /// Under the workspace (`.claude`, `.codex`, `.gemini`).
    Project,
}

/// Why the settings could not be merged; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The file is not JSON, or not of the shape the host reads.
    #[error("{path}: {what}; fix or move it, then install again (nothing was written)")]
    Shape {
        /// The settings file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The settings file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// The `gatewayd hook` command line to install.
#[derive(Debug, Clone)]
pub struct HookCommand {
    /// This gatewayd binary (absolute).
    pub gatewayd: PathBuf,
    /// `--socket`: a `gatewayd serve` daemon.
    pub socket: Option<PathBuf>,
    /// `--policy`: no daemon (each event a session of its own).
    pub policy: Option<PathBuf>,
    /// `--audit` with `--policy`: outside the workspace.
    pub audit: Option<PathBuf>,
    /// `--deadline-ms`, below the host's hook timeout.
    pub deadline_ms: u64,
}

/// The host's hook timeout gatewayd installs: 10 s (Gemini CLI counts in milliseconds).
pub const TIMEOUT_S: u64 = 10;

impl HookCommand {
    /// The command line, each path quoted for the `sh -c` the hosts run it with.
    pub fn line(&self, host: Host) -> String {
        let mut words = vec![
            quote(&self.gatewayd),
            "hook".into(),
            "--host".into(),
            host.name().into(),
        ];
        for (flag, value) in [
            ("--socket", &self.socket),
            ("--policy", &self.policy),
            ("--audit", &self.audit),
        ] {
            if let Some(v) = value {
                words.push(flag.into());
                words.push(quote(v));
            }
        }
        words.push("--deadline-ms".into());
        words.push(self.deadline_ms.to_string());
        words.join(" ")
    }
}

/// `path` as one `sh` word: as is when plain, else single-quoted.
fn quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%".contains(c));
    if plain && !s.is_empty() {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl Host {
    /// The name `--host` takes.
    pub fn name(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::Codex => "codex",
            Host::Gemini => "gemini",
        }
    }

    /// The events gatewayd's hook answers: before and after a tool runs.
    pub fn hook_events(self) -> [&'static str; 2] {
        match self {
            Host::Claude | Host::Codex => ["PreToolUse", "PostToolUse"],
            Host::Gemini => ["BeforeTool", "AfterTool"],
        }
    }

    /// The hook `timeout` value in the host's unit (Gemini CLI: milliseconds).
    fn timeout_value(self, seconds: u64) -> u64 {
        match self {
            Host::Gemini => seconds * 1000,
            Host::Claude | Host::Codex => seconds,
        }
    }

    /// The settings file holding the host's hooks, for `scope`. `codex_home` is
    /// `$CODEX_HOME` when set.
    pub fn settings_file(
        self,
        scope: Scope,
        home: &Path,
        workspace: &Path,
        codex_home: Option<&Path>,
    ) -> PathBuf {
        match (self, scope) {
            (Host::Claude, Scope::User) => home.join(".claude/settings.json"),
            (Host::Claude, Scope::Project) => workspace.join(".claude/settings.json"),
            (Host::Codex, Scope::User) => codex_home
                .map_or_else(|| home.join(".codex"), Path::to_path_buf)
                .join("hooks.json"),
            (Host::Codex, Scope::Project) => workspace.join(".codex/hooks.json"),
            (Host::Gemini, Scope::User) => home.join(".gemini/settings.json"),
            (Host::Gemini, Scope::Project) => workspace.join(".gemini/settings.json"),
        }
    }
}

/// Whether a hook handler's command is a `gatewayd hook` (installed by gatewayd, or by
/// hand from docs/HOOKS.md).
pub fn is_gatewayd_hook(command: &str) -> bool {
    command.split_whitespace().next().is_some_and(|w| {
        w.trim_matches('\'')
            .rsplit('/')
            .next()
            .is_some_and(|n| n == "gatewayd")
    }) && command.contains(" hook ")
}

/// The settings `existing` (the file's text; `None`: no file) with gatewayd's hook for
/// `host` in place of any earlier one.
pub fn merged(
    path: &Path,
    existing: Option<&str>,
    host: Host,
    command: &str,
) -> Result<Value, InstallError> {
    let shape = |what: &str| InstallError::Shape {
        path: path.to_path_buf(),
        what: what.to_string(),
    };
    let mut root: Value = match existing.map(str::trim) {
        None | Some("") => json!({}),
        Some(text) => serde_json::from_str(text).map_err(|e| shape(&format!("not JSON ({e})")))?,
    };
    let obj = root
        .as_object_mut()
        .ok_or_else(|| shape("not a JSON object"))?;
    let hooks = obj
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| shape("`hooks` is not an object"))?;
    for event in host.hook_events() {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .ok_or_else(|| shape(&format!("`hooks.{event}` is not an array")))?;
        for g in groups.iter_mut() {
            if let Some(list) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                list.retain(|h| !h["command"].as_str().is_some_and(is_gatewayd_hook));
            }
        }
        groups.retain(|g| g["hooks"].as_array().is_none_or(|l| !l.is_empty()));
        groups.push(json!({"matcher": ".*", "hooks": [{
            "type": "command",
            "timeout": host.timeout_value(TIMEOUT_S),
            "command": command,
        }]}));
    }
    Ok(root)
}

/// What `--check` finds in a host's settings about gatewayd's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookState {
    /// Events with a `gatewayd hook` handler.
    pub events: Vec<String>,
    /// Events without one.
    pub missing: Vec<String>,
    /// Handlers whose host timeout is not above the gatewayd deadline they pass.
    pub short_timeouts: Vec<String>,
    /// Hooks disabled in the file (`disableAllHooks`).
    pub disabled: bool,
}

/// Reads gatewayd's hook out of the settings `text`.
pub fn state(text: &str, host: Host) -> HookState {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let mut s = HookState {
        events: Vec::new(),
        missing: Vec::new(),
        short_timeouts: Vec::new(),
        disabled: v["disableAllHooks"] == json!(true),
    };
    for event in host.hook_events() {
        let handlers: Vec<&Map<String, Value>> = v["hooks"][event]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["hooks"].as_array().into_iter().flatten())
            .filter_map(Value::as_object)
            .filter(|h| {
                h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(is_gatewayd_hook)
            })
            .collect();
        if handlers.is_empty() {
            s.missing.push(event.to_string());
            continue;
        }
        s.events.push(event.to_string());
        for h in handlers {
            let cmd = h.get("command").and_then(Value::as_str).unwrap_or_default();
            let deadline_ms = deadline_of(cmd);
            let timeout_ms = h
                .get("timeout")
                .and_then(Value::as_u64)
                .map(|t| match host {
                    Host::Gemini => t,
                    Host::Claude | Host::Codex => t * 1000,
                });
            if timeout_ms.is_some_and(|t| t <= deadline_ms) {
                s.short_timeouts.push(format!(
                    "{event}: the host waits {} ms, gatewayd answers within {deadline_ms} ms",
                    timeout_ms.unwrap_or_default()
                ));
            }
        }
    }
    s
}

/// The `--deadline-ms` of a hook command line (its default when absent).
fn deadline_of(cmd: &str) -> u64 {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == "--deadline-ms")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(4000)
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename
/// (a reader never sees half a file); the directory is made when missing.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), InstallError> {
    let io = |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = dir.join(format!(
        ".{}.gatewayd-{}",
        path.file_name()
            .map_or_else(|| "settings".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    std::fs::write(&tmp, text).map_err(io)?;
    if let Ok(m) = std::fs::metadata(path) {
        // Keep the mode the user gave the file.
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> String {
        HookCommand {
            gatewayd: "/usr/bin/gatewayd".into(),
            socket: None,
            policy: Some("/etc/my policy.json".into()),
            audit: None,
            deadline_ms: 4000,
        }
        .line(Host::Claude)
    }

    #[test]
    fn the_command_quotes_what_needs_it() {
        assert_eq!(
            cmd(),
            "/usr/bin/gatewayd hook --host claude --policy '/etc/my policy.json' --deadline-ms 4000"
        );
        assert!(is_gatewayd_hook(&cmd()));
        assert!(is_gatewayd_hook("gatewayd hook --host codex"));
        assert!(!is_gatewayd_hook("/usr/bin/other hook --host x"));
    }

    #[test]
    fn a_merge_keeps_the_rest_and_replaces_an_earlier_install() {
        let p = Path::new("s.json");
        let before = r#"{"model": "x", "hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]},
            {"matcher": ".*", "hooks": [{"type": "command", "command": "gatewayd hook --host claude --socket /old"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}}"#;
        let once = merged(p, Some(before), Host::Claude, &cmd()).unwrap();
        let twice = merged(p, Some(&once.to_string()), Host::Claude, &cmd()).unwrap();
        assert_eq!(once, twice, "idempotent");
        assert_eq!(once["model"], "x");
        assert_eq!(once["hooks"]["Stop"][0]["hooks"][0]["command"], "notify");
        let pre = once["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2, "{pre:?}");
        assert_eq!(pre[0]["hooks"][0]["command"], "my-linter");
        assert_eq!(pre[1]["hooks"][0]["command"], cmd());
        let st = state(&once.to_string(), Host::Claude);
        assert_eq!(st.events, ["PreToolUse", "PostToolUse"]);
        assert!(st.missing.is_empty() && st.short_timeouts.is_empty() && !st.disabled);
    }

    #[test]
    fn gemini_counts_milliseconds_and_a_short_timeout_is_found() {
        let v = merged(
            Path::new("s"),
            None,
            Host::Gemini,
            "gatewayd hook --host gemini",
        )
        .unwrap();
        assert_eq!(v["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"], 10_000);
        let short = r#"{"hooks": {"BeforeTool": [{"hooks": [{"type": "command", "timeout": 3000,
            "command": "gatewayd hook --host gemini --deadline-ms 4000"}]}]}}"#;
        let st = state(short, Host::Gemini);
        assert_eq!(st.missing, ["AfterTool"]);
        assert_eq!(st.short_timeouts.len(), 1, "{st:?}");
    }

    #[test]
    fn what_is_not_settings_is_refused_not_overwritten() {
        for bad in [
            "[1]",
            "{\"hooks\": []}",
            "not json",
            "{\"hooks\": {\"PreToolUse\": {}}}",
        ] {
            assert!(
                merged(Path::new("s"), Some(bad), Host::Claude, "x").is_err(),
                "{bad}"
            );
        }
    }
}
