//! `gatewayd policy init`: a starter policy for one workspace on a developer machine — the
//! workspace as the sandbox, the usual secrets of a home directory protected, an egress
//! allowlist for code hosting and package registries, and the gateway tools the agent hosts'
//! built-in tools map to (`gatewayd hook`, docs/HOOKS.md). A person reviews it; it validates
//! as written.
use std::path::{Path, PathBuf};

pub mod hosts;
pub mod toolchains;

pub use hosts::{AgentHost, Entry};
pub use toolchains::Toolchains;

use serde_json::{Value, json};

/// Files and directories of a home directory that hold credentials.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
];

/// Programs the `shell` tool may run (found on this machine; bare names match by file name).
pub const DEV_PROGRAMS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "find",
    "sort",
    "uniq",
    "diff",
    "cut",
    "tr",
    "stat",
    "file",
    "tree",
    "du",
    "jq",
    "git",
    "cargo",
    "rustc",
    "make",
    "npm",
    "node",
    "python3",
    "pytest",
    "go",
    "bash",
    "sh",
    "echo",
    "printf",
    "pwd",
    "true",
    "false",
    "test",
    "[",
    "which",
    "basename",
    "dirname",
    "mkdir",
    "mktemp",
    "touch",
    "cp",
    "mv",
    "rm",
    "sed",
    "pnpm",
    "yarn",
    "npx",
    "nl",
    "sleep",
    "tee",
    "awk",
    "curl",
    "docker",
    "date",
    "uname",
    "whoami",
    "id",
    "nproc",
    "df",
    "free",
    "uptime",
    "realpath",
    "readlink",
    "seq",
    "md5sum",
    "sha256sum",
    "chmod",
    "tar",
    // Its members read when the call is decided, as tar's (`shell::unzip`).
    "unzip",
    "zip",
    "python",
    "pip",
    "pip3",
    "cmake",
    "timeout",
    "nice",
    "nohup",
    "env",
    "stdbuf",
    "xargs",
    "paste",
    "comm",
    "join",
    "fold",
    "expand",
    "unexpand",
    "cmp",
    "tac",
    "od",
    "base64",
    "sha1sum",
    "sha512sum",
    "cksum",
    "b2sum",
    // Readers of their operands alone (no option of theirs writes a file).
    "column",
    "strings",
    "hexdump",
    "zcat",
    "xxd",
    "gzip",
    "gunzip",
    "less",
    "more",
    "yes",
    "hostname",
    // `printenv NAME`: only variables that hold no key (`shell`'s TEXT_VARIABLES).
    "printenv",
    // Processes: `ps` without their environments, `kill` of the line's own jobs
    // (`shell::processes`).
    "ps",
    "kill",
    // Sockets and open files: `ss` without `-K` (`shell::processes`); `lsof`, `pgrep` and
    // `netstat` only print, their operands read as paths.
    "ss",
    "lsof",
    "pgrep",
    "netstat",
    // A link and its target are both writes; an empty directory's removal is one.
    "ln",
    "rmdir",
    // Compilers: their sources read, what they make written (`shell::compilers`).
    "cc",
    "gcc",
    "g++",
    "c++",
    "clang",
    "clang++",
    "javac",
    "java",
    "perl",
    // Formatters and linters: each reads the files it is given and rewrites them in place
    // (`black`, `ruff format`, `isort`, `gofmt -w`, `rustfmt`), as `cargo fmt` does.
    "black",
    "ruff",
    "mypy",
    "flake8",
    "isort",
    "pylint",
    "gofmt",
    "rustfmt",
    // The same from npm, when installed where `PATH` finds them (`npx NAME` runs them from
    // the workspace's `node_modules`).
    "tsc",
    "eslint",
    "prettier",
    "jest",
    "vitest",
    // SQLite's shell: its database, SQL that stays in it (`shell::sqlite`).
    "sqlite3",
    // Python's web servers, which run the workspace's application as `pytest` runs its tests.
    "flask",
    "uvicorn",
    "gunicorn",
    // Java's builds, beside `javac`.
    "mvn",
    "gradle",
    // Codex's file edits: the files its patch names are the writes (`shell::patch`).
    "apply_patch",
    "applypatch",
];

/// Package managers' caches in the session's own `/tmp` (`private_tmp`), with the reason:
/// the user's own caches stay unwritable, so the agent leaves nothing there that the user's
/// later installs and builds take, and `npm install` works (it stops without a writable
/// cache). Removed with the session.
pub const SESSION_CACHES: &[(&str, &str, &str)] = &[
    (
        "npm_config_cache",
        "/tmp/.npm",
        "npm's cache (`npm install`, `npx`)",
    ),
    (
        "XDG_CACHE_HOME",
        "/tmp/.cache",
        "the XDG cache of pip, Go's build cache, and others",
    ),
];

/// Hosts the agent may reach over HTTPS, by exact name: the kernel resolves them for the
/// agent's own connections (a `*.domain` entry is the gateway's alone).
pub const EGRESS_HOSTS: &[&str] = &[
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "raw.githubusercontent.com",
    "objects.githubusercontent.com",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "registry.npmjs.org",
    "pypi.org",
    "files.pythonhosted.org",
    "docs.rs",
];

fn schema(props: &[(&str, bool)]) -> Value {
    let required: Vec<&str> = props.iter().filter(|(_, r)| *r).map(|(n, _)| *n).collect();
    let properties: serde_json::Map<String, Value> = props
        .iter()
        .map(|(n, _)| ((*n).to_owned(), json!({"type": "string"})))
        .collect();
    json!({"type": "object", "required": required, "additionalProperties": false,
           "properties": properties})
}

/// The gateway tools the hosts' built-in tools map to (docs/HOOKS.md).
pub fn host_tools() -> Value {
    json!([
        {"name": "shell", "description": "A command line the agent host runs with a shell.",
         "input_schema": schema(&[("command", true)]),
         "labels": ["reads_private"],
         "args": {"command": {"required": true, "max_len": 8192,
                              "shell": {"through_shell": true, "exec": DEV_PROGRAMS}}}},
        {"name": "read_file", "description": "Read one file.",
         "input_schema": schema(&[("path", true)]),
         "labels": ["reads_private"],
         "args": {"path": {"required": true, "path": "read"}}},
        {"name": "write_file", "description": "Create, edit or patch one file.",
         "input_schema": schema(&[("path", true), ("content", false)]),
         "labels": ["destructive"], "echo_ok": true,
         "args": {"path": {"required": true, "path": "write"}}},
        {"name": "search", "description": "Search or list files under a directory.",
         "input_schema": schema(&[("path", true), ("pattern", false)]),
         "args": {"path": {"required": true, "path": "tree"}}},
        {"name": "grep", "description": "Search file contents under a directory as ripgrep does with hidden files: what the ignore files name is not read, what `glob` (one ripgrep glob a line) names is.",
         "input_schema": schema(&[("path", true), ("pattern", false), ("glob", false)]),
         "args": {"path": {"required": true, "path": "search"}}},
        {"name": "list_files", "description": "List file names under a directory (a glob, a listing).",
         "input_schema": schema(&[("path", true), ("pattern", false)]),
         "args": {"path": {"required": true, "path": "names"}}},
        {"name": "web_fetch", "description": "Fetch a web page.",
         "input_schema": schema(&[("url", true), ("prompt", false)]),
         "labels": ["untrusted_output", "sends_out"],
         "args": {"url": {"required": true, "url": true}}},
        {"name": "web_search", "description": "Search the web.",
         "input_schema": schema(&[("query", true)]),
         "labels": ["untrusted_output", "sends_out"]},
        {"name": "agent", "description": "Start a sub-agent with a prompt.",
         "input_schema": schema(&[("prompt", true)])},
        // Built-in tools of the hosts that touch nothing outside the host: decided under
        // their own names (docs/HOOKS.md).
        {"name": "TodoWrite", "description": "Claude Code: the session's to-do list."},
        {"name": "ExitPlanMode", "description": "Claude Code: leave plan mode."},
        {"name": "EnterPlanMode", "description": "Claude Code: enter plan mode."},
        {"name": "ToolSearch", "description": "Claude Code: load the definitions of tools it keeps deferred (Glob, Grep, WebFetch, ...); each tool is then decided when called."},
        {"name": "ListAgents", "description": "Claude Code: list the sub-agent types."},
        {"name": "AskUserQuestion", "description": "Claude Code: ask the user a question."},
        {"name": "TaskCreate", "description": "Claude Code: add to the session's to-do list."},
        {"name": "TaskUpdate", "description": "Claude Code: update the session's to-do list."},
        {"name": "TaskList", "description": "Claude Code: read the session's to-do list."},
        {"name": "TaskGet", "description": "Claude Code: read an item of the session's to-do list."},
        {"name": "TaskOutput", "description": "Claude Code: read what a background command (decided when it started) printed."},
        {"name": "BashOutput", "description": "Claude Code (older): read what a background command printed."},
        {"name": "TaskStop", "description": "Claude Code: stop one of the session's background commands."},
        {"name": "KillShell", "description": "Claude Code (older): stop one of the session's background commands."},
        {"name": "ReportFindings", "description": "Claude Code: report a review's findings to the user."},
        {"name": "write_todos", "description": "Gemini CLI: the session's to-do list."},
        {"name": "update_topic", "description": "Gemini CLI: name the session's topic."},
        {"name": "enter_plan_mode", "description": "Gemini CLI: enter plan mode."},
        {"name": "exit_plan_mode", "description": "Gemini CLI: leave plan mode."},
        {"name": "ask_user", "description": "Gemini CLI: ask the user."},
        {"name": "list_background_processes", "description": "Gemini CLI: list the session's background commands."},
        {"name": "read_background_output", "description": "Gemini CLI: read what a background command (decided when it started) printed."},
        {"name": "update_plan", "description": "Codex: the session's plan."},
        {"name": "request_user_input", "description": "Codex: ask the user."},
        {"name": "get_goal", "description": "Codex: read the session's goal."},
        {"name": "create_goal", "description": "Codex: set the session's goal."},
        {"name": "update_goal", "description": "Codex: update the session's goal."}
    ])
}

/// What ordinary programs read outside the workspace, with the reason (kept where they exist
/// on this machine): without them `git`, `bash -lc`, TLS and name lookups fail under
/// `gatewayd run`, whose kernel layer bounds reads to `readable`.
pub const SYSTEM_READABLE: &[(&str, &str)] = &[
    (
        "/usr",
        "programs, their scripts and shared data (locales, terminfo, time zones, CA bundles, git's templates)",
    ),
    (
        "/etc/ssl",
        "CA certificates and OpenSSL's configuration (TLS)",
    ),
    ("/etc/ca-certificates", "CA certificates"),
    ("/etc/resolv.conf", "name resolution"),
    ("/etc/hosts", "name resolution"),
    ("/etc/nsswitch.conf", "name resolution and user lookups"),
    ("/etc/host.conf", "name resolution"),
    ("/etc/gai.conf", "name resolution"),
    (
        "/etc/passwd",
        "user names (ls -l, git, ssh, a host's own home lookup)",
    ),
    ("/etc/group", "group names"),
    ("/etc/localtime", "the time zone"),
    ("/etc/timezone", "the time zone"),
    ("/etc/gitconfig", "git's system configuration"),
    ("/etc/profile", "login shells (bash -lc)"),
    ("/etc/profile.d", "login shells (bash -lc)"),
    ("/etc/bash.bashrc", "interactive bash"),
    ("/etc/inputrc", "readline"),
    ("/etc/environment", "login shells"),
    (
        "/etc/mime.types",
        "file types by extension (Python's mimetypes: http.server, a web framework's static files)",
    ),
    (
        "/etc/services",
        "service names and their ports (getservbyname)",
    ),
    ("/etc/protocols", "protocol names (getprotobyname)"),
    (
        "/etc/debian_version",
        "the distribution's version, which pip reads for its user agent (`pip install` stops without it)",
    ),
    (
        "/etc/os-release",
        "the distribution's name (Python's platform and pip, Node.js)",
    ),
    (
        "/etc/lsb-release",
        "the distribution's name (pip, on Ubuntu)",
    ),
    ("/etc/pip.conf", "pip's system configuration"),
    ("/etc/xdg/pip", "pip's system configuration"),
    (
        "/proc/cpuinfo",
        "the processors (`nproc` alone does not say which; build tools size their jobs by it)",
    ),
    ("/proc/meminfo", "the memory (`free` reads it)"),
    ("/proc/loadavg", "the load (`uptime` reads it)"),
    ("/proc/uptime", "the time since boot (`uptime` reads it)"),
    ("/proc/version", "the kernel's version"),
];

/// The same for the user's home: git's own configuration.
pub const HOME_READABLE: &[(&str, &str)] = &[
    (".gitconfig", "git's user configuration"),
    (".config/git", "git's user configuration"),
    (".config/pip", "pip's user configuration"),
];

/// What git runs on the user's behalf later, in the workspace: readable (git reads its
/// config on every command), never changed by the agent. Listed where they exist.
pub const WORKSPACE_READ_ONLY: &[&str] = &[".git/config", ".git/hooks"];

/// Under `/etc`'s readable trees but secret: the TLS private keys.
pub const SYSTEM_PROTECTED: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/gatewayd",
    "/etc/ssl/private",
];

/// One agent host to make the starter for, with where it was found.
#[derive(Debug, Clone)]
pub struct HostInstall {
    /// The host.
    pub host: AgentHost,
    /// Its install folder ([`hosts::install_dir`]), when its program was found.
    pub install: Option<PathBuf>,
    /// The Node.js it runs on, when found outside `/usr`.
    pub runtime: Option<PathBuf>,
}

/// Secrets by their names anywhere under the workspace, whether they exist when a session
/// starts or appear later (`sandbox.protected_names`). Not `*.pem`: a project's virtual
/// environment holds certificate bundles (`certifi/cacert.pem`) its tools must read.
pub const WORKSPACE_SECRET_NAMES: [&str; 12] = [
    ".env",
    ".env.local",
    ".env.*.local",
    ".env.production",
    "id_rsa",
    "id_ecdsa",
    "id_ed25519",
    ".netrc",
    "*.key",
    "*-key.pem",
    "*.p12",
    "*.pfx",
];

/// The starter policy for `workspace`, protecting the secrets under `home`, with no agent host
/// profile.
pub fn starter(workspace: &Path, home: &Path) -> Value {
    starter_for(workspace, home, &[], &Toolchains::default()).0
}

/// The starter policy, with the profiles of `hosts` ([`hosts`]) and the install trees of
/// `toolchains` ([`toolchains`]), and every entry added beyond the workspace with its reason
/// (what `policy init` prints).
pub fn starter_for(
    workspace: &Path,
    home: &Path,
    hosts: &[HostInstall],
    toolchains: &Toolchains,
) -> (Value, Vec<Entry>) {
    let ws = workspace.display().to_string();
    let protected = protected_paths(workspace, home);
    let mut entries = readable_entries(home, hosts);
    let covered: Vec<PathBuf> = std::iter::once(workspace.to_path_buf())
        .chain(
            entries
                .iter()
                .filter(|e| e.kind == "readable" || e.kind == "writable")
                .map(|e| PathBuf::from(&e.value)),
        )
        .collect();
    entries.extend(toolchains.entries(home, &covered));
    entries.extend(SESSION_CACHES.iter().map(|(name, value, reason)| Entry {
        kind: "env",
        value: format!("{name}={value}"),
        reason,
    }));
    let listed = |kind: &str| -> Vec<String> {
        let mut v: Vec<String> = entries
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.value.clone())
            .collect();
        v.dedup();
        v
    };
    // Where they exist: the built-in read-only paths cover them anyway, and one that does
    // not exist is only a warning on every run (a workspace with no repository).
    let mut read_only: Vec<String> = WORKSPACE_READ_ONLY
        .iter()
        .map(|s| workspace.join(s))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    read_only.extend(listed("read_only"));
    let mut readable = vec![ws.clone()];
    readable.extend(listed("readable"));
    let mut writable = vec![ws.clone()];
    writable.extend(listed("writable"));
    let egress: Vec<Value> = EGRESS_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .chain(listed("egress"))
        .map(|h| json!({"host": h, "port": 443}))
        .collect();
    let policy = json!({
        "version": 1,
        "name": format!("starter for {ws}"),
        "kernel": "best_effort",
        "trifecta": "hold",
        "sandbox": {"root": ws, "readable": readable, "writable": writable,
                    "protected": protected, "protected_names": WORKSPACE_SECRET_NAMES,
                    "read_only": read_only, "private_tmp": true},
        // By name: the agent's own look-ups go to the session's resolver, which answers the
        // listed names only; without it the agent's DNS is refused and no listed host is
        // reached by name (docs/KERNEL.md, "Egress by name").
        "network": {"egress": egress, "proxy": true},
        "agent": {"env": SESSION_CACHES.iter().map(|(k, v, _)| ((*k).to_owned(), json!(v)))
            .collect::<serde_json::Map<_, _>>()},
        "tools": host_tools(),
        "limits": {"rate": [{"tool": "web_*", "max": 60, "window_s": 60}],
                   "actions": {"destructive": 500}}
    });
    (policy, entries)
}

/// The secrets the starter protects: the home's, the workspace's `.env` files, the system's.
fn protected_paths(workspace: &Path, home: &Path) -> Vec<String> {
    let mut protected: Vec<String> = HOME_SECRETS
        .iter()
        .map(|s| home.join(s).display().to_string())
        .collect();
    protected.extend(
        [".env", ".env.local"]
            .iter()
            .map(|s| workspace.join(s).display().to_string()),
    );
    protected.extend(SYSTEM_PROTECTED.iter().map(|s| (*s).to_string()));
    protected
}

/// Every entry added beyond the workspace, with its reason: the system's and the home's
/// readable paths that exist, then each host's profile.
fn readable_entries(home: &Path, hosts: &[HostInstall]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = SYSTEM_READABLE
        .iter()
        .filter(|(p, _)| Path::new(p).exists())
        .map(|(p, why)| Entry {
            kind: "readable",
            value: (*p).to_string(),
            reason: why,
        })
        .chain(
            HOME_READABLE
                .iter()
                .filter(|(p, _)| home.join(p).exists())
                .map(|(p, why)| Entry {
                    kind: "readable",
                    value: home.join(p).display().to_string(),
                    reason: why,
                }),
        )
        .collect();
    for h in hosts {
        entries.extend(
            h.host
                .entries(home, h.install.as_deref(), h.runtime.as_deref()),
        );
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_validates() {
        let v = starter(Path::new("/home/dev/project"), Path::new("/home/dev"));
        let text = serde_json::to_string_pretty(&v).unwrap();
        let p = crate::policy::Policy::parse(&text, Path::new("starter.json")).unwrap();
        assert!(p.sandbox.protected.iter().any(|x| x.ends_with(".ssh")));
        // Egress by name: the agent's own look-ups reach the session's resolver.
        assert_eq!(v["network"]["proxy"], true);
        assert!(
            p.sandbox
                .protected_names
                .iter()
                .any(|n| n == ".env.*.local")
        );
        let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "shell",
                "read_file",
                "write_file",
                "search",
                "grep",
                "list_files",
                "web_fetch",
                "web_search",
                "agent",
                "TodoWrite",
                "ExitPlanMode",
                "EnterPlanMode",
                "ToolSearch",
                "ListAgents",
                "AskUserQuestion",
                "TaskCreate",
                "TaskUpdate",
                "TaskList",
                "TaskGet",
                "TaskOutput",
                "BashOutput",
                "TaskStop",
                "KillShell",
                "ReportFindings",
                "write_todos",
                "update_topic",
                "enter_plan_mode",
                "exit_plan_mode",
                "ask_user",
                "list_background_processes",
                "read_background_output",
                "update_plan",
                "request_user_input",
                "get_goal",
                "create_goal",
                "update_goal"
            ]
        );
    }

    /// The session's own `/tmp` is on wherever the workspace and the hosts lie: what the
    /// starter names under the host's `/tmp` is bound into it, the workspace read-write and
    /// an install read-only ([`crate::policy::Sandbox::tmp_binds`]).
    #[test]
    fn private_tmp_is_on_and_binds_a_workspace_and_an_install_under_tmp() {
        let home = Path::new("/home/dev");
        let under_tmp = HostInstall {
            host: hosts::AgentHost::Claude,
            install: Some(PathBuf::from(
                "/tmp/tools/claude/node_modules/@anthropic-ai/claude-code",
            )),
            runtime: None,
        };
        let (v, _) = starter_for(
            Path::new("/tmp/p"),
            home,
            &[under_tmp],
            &Toolchains::default(),
        );
        let text = serde_json::to_string(&v).unwrap();
        let p = crate::policy::Policy::parse(&text, Path::new("starter.json")).unwrap();
        assert!(p.sandbox.private_tmp, "{v:#}");
        let binds: Vec<(String, bool)> = p
            .sandbox
            .tmp_binds(None)
            .into_iter()
            .map(|b| (b.inside.display().to_string(), b.writable))
            .collect();
        assert!(binds.contains(&("/tmp/p".to_owned(), true)), "{binds:?}");
        assert!(
            binds
                .iter()
                .any(|(p, w)| p.starts_with("/tmp/tools/claude") && !w),
            "{binds:?}"
        );
    }
}
