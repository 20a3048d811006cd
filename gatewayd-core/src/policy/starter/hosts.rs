//! What each agent host needs to run as installed under `gatewayd run`
//! (`gatewayd policy init --host`): its own state under the home, the directory it was
//! installed in, and its model API by name. Every entry carries its reason, which
//! `policy init` prints and docs/POLICY.md lists ("Host profiles").
use std::path::{Path, PathBuf};

/// An agent host `policy init --host` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentHost {
    /// Claude Code (`claude`).
    Claude,
    /// Codex (`codex`).
    Codex,
    /// Gemini CLI (`gemini`).
    Gemini,
}

/// One entry a profile adds, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `readable`, `writable`, `read_only`, `egress`, or `env` (`NAME=VALUE` of `agent.env`).
    pub kind: &'static str,
    /// A path or a host name.
    pub value: String,
    /// Why the host needs it.
    pub reason: &'static str,
}

impl AgentHost {
    /// Every host, in the order `--host` lists them.
    pub const ALL: [AgentHost; 3] = [AgentHost::Claude, AgentHost::Codex, AgentHost::Gemini];

    /// The name of `--host` and of the host's program.
    pub fn name(self) -> &'static str {
        match self {
            AgentHost::Claude => "claude",
            AgentHost::Codex => "codex",
            AgentHost::Gemini => "gemini",
        }
    }

    /// The host named `name`.
    pub fn parse(name: &str) -> Option<AgentHost> {
        AgentHost::ALL.into_iter().find(|h| h.name() == name)
    }

    /// The profile's entries for a user whose home is `home`; `install` is where the host's
    /// program was found ([`install_dir`]) and `runtime` the Node.js it runs on when that
    /// lies outside `/usr`.
    pub fn entries(
        self,
        home: &Path,
        install: Option<&Path>,
        runtime: Option<&Path>,
    ) -> Vec<Entry> {
        let rows: &[Row] = match self {
            AgentHost::Claude => &CLAUDE,
            AgentHost::Codex => &CODEX,
            AgentHost::Gemini => &GEMINI,
        };
        let mut v: Vec<Entry> = rows
            .iter()
            .map(|&(kind, value, reason)| Entry {
                kind,
                value: value
                    .strip_prefix("~/")
                    .map_or_else(|| value.to_owned(), |p| home.join(p).display().to_string()),
                reason,
            })
            .collect();
        let dirs = [
            (
                install,
                "where the host is installed: its program, scripts and modules",
            ),
            (runtime, "the Node.js the host runs on"),
        ];
        for (dir, reason) in dirs {
            if let Some(dir) = dir {
                v.push(Entry {
                    kind: "readable",
                    value: dir.display().to_string(),
                    reason,
                });
            }
        }
        v
    }
}

/// One entry of a host's profile: its kind, its value (`~/` for the user's home, or a host
/// name) and why the host needs it.
type Row = (&'static str, &'static str, &'static str);

const CLAUDE: [Row; 4] = [
    (
        "writable",
        "~/.claude",
        "Claude Code's settings, sessions, to-dos and shell snapshots",
    ),
    (
        "writable",
        "~/.claude.json",
        "Claude Code's main state file (projects, onboarding)",
    ),
    (
        "read_only",
        "~/.claude/settings.json",
        "Claude Code's settings, hooks among them: the agent may not change what the user's own Claude Code runs",
    ),
    ("egress", "api.anthropic.com", "the model API"),
];

const CODEX: [Row; 6] = [
    (
        "writable",
        "~/.codex",
        "Codex's CODEX_HOME: config.toml, hooks.json, sessions, logs, auth",
    ),
    (
        "read_only",
        "~/.codex/config.toml",
        "Codex's settings: the agent may not change what the user's own Codex runs",
    ),
    (
        "read_only",
        "~/.codex/hooks.json",
        "Codex's hooks: the agent may not change what the user's own Codex runs",
    ),
    ("egress", "api.openai.com", "the model API (API key)"),
    (
        "egress",
        "chatgpt.com",
        "the model API when signed in with ChatGPT",
    ),
    ("egress", "auth.openai.com", "refreshing a ChatGPT sign-in"),
];

const GEMINI: [Row; 4] = [
    (
        "writable",
        "~/.gemini",
        "Gemini CLI's settings, history, trusted folders and temp files",
    ),
    (
        "egress",
        "generativelanguage.googleapis.com",
        "the model API (API key)",
    ),
    (
        "egress",
        "cloudcode-pa.googleapis.com",
        "the model API when signed in with Google",
    ),
    (
        "egress",
        "oauth2.googleapis.com",
        "refreshing a Google sign-in",
    ),
];

/// Where a host's program `found` (as looked up on `PATH`) is installed: after links, the
/// `node_modules` folder that holds its npm package and the package's dependencies, else
/// the folder of the program itself (a native install).
pub fn install_dir(found: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(found).ok()?;
    real.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .or_else(|| real.parent())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_install_is_its_node_modules_and_a_native_one_its_folder() {
        let d = tempfile::tempdir().unwrap();
        let pkg = d.path().join("lib/node_modules/@x/cli/bin");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("cli.js"), "").unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::os::unix::fs::symlink(pkg.join("cli.js"), d.path().join("bin/cli")).unwrap();
        let real = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(
            install_dir(&d.path().join("bin/cli")),
            Some(real.join("lib/node_modules"))
        );
        std::fs::write(d.path().join("bin/native"), "").unwrap();
        assert_eq!(
            install_dir(&d.path().join("bin/native")),
            Some(real.join("bin"))
        );
        assert_eq!(install_dir(&d.path().join("absent")), None);
    }

    #[test]
    fn every_entry_has_a_reason_and_names_parse_back() {
        for h in AgentHost::ALL {
            assert_eq!(AgentHost::parse(h.name()), Some(h));
            let e = h.entries(Path::new("/home/u"), Some(Path::new("/opt/x")), None);
            assert!(e.iter().all(|e| !e.reason.is_empty()));
            assert!(e.iter().any(|e| e.kind == "egress"));
            assert!(
                e.iter()
                    .any(|e| e.kind == "writable" && e.value.starts_with("/home/u/."))
            );
        }
    }
}
