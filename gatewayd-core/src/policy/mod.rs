//! The policy: one JSON file, the single source of truth for both layers.
//!
//! This module holds the data shapes and loading. The gateway layer's semantics (registry,
//! rules, limits, ...) live in [`crate::engine`]; the kernel layer derives its maps from
//! [`Sandbox`] and [`Network`] in [`crate::kernel`]. Field reference: `docs/POLICY.md`;
//! JSON Schema: `policies/policy.schema.json`.
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub(crate) mod agent;
pub mod canary;
pub mod diff;
mod error;
pub mod inspect;
pub(crate) mod mcp;
pub mod names;
pub mod protected_names;
pub mod schema;
pub mod spans;
pub mod starter;
pub mod tmp_binds;
pub(crate) mod tools;
mod validate;
pub use agent::{Account, Agent, DEFAULT_MAX_PIDS};
pub use canary::Canaries;
pub use error::{JsonPath, PolicyError, Seg, ValidationError};
pub use inspect::{HttpRule, Inject};
pub use mcp::{McpServer, ServerKernel};
pub use tools::{
    ArgRule, Cond, DefaultDecision, Label, Limits, PathAccess, RateLimit, Rule, RuleDecision,
    ScanMode, SecretSource, ShellRule, SuspicionMode, ToolDef, TrifectaMode, glob_match_str,
};

/// What the policy accepts when the kernel cannot enforce everything it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum KernelMode {
    /// Refuse to start the agent unless every kernel program the policy needs loads and
    /// attaches (tier 1: BPF LSM + cgroup programs). The default: fail closed.
    #[default]
    Require,
    /// Start with what this kernel supports; the tier reached is written to the audit log.
    BestEffort,
}

/// What `gatewayd run` does when a kernel record cannot be written to the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AuditFailure {
    /// Stop the agent (kill its session's cgroup), saying why on the terminal: a session
    /// does not run unrecorded. The default: fail closed.
    #[default]
    Stop,
    /// Let the agent run on; each lost record is reported on stderr. Denials stay enforced.
    Continue,
}

/// Filesystem sandbox, enforced by the gateway (path arguments) and the kernel (`file_open`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sandbox {
    /// The agent's working root.
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// Trees the agent may read.
    #[serde(default)]
    pub readable: Vec<PathBuf>,
    /// Trees the agent may write.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Files and directories nobody in the agent's cgroup may open, wherever they lie
    /// (a directory protects everything under it). The kernel matches them by inode.
    #[serde(default)]
    pub protected: Vec<PathBuf>,
    /// File names nobody in the agent's cgroup may open under `root` and the `writable`
    /// roots, whether the file exists at start or is made later: `.env`, `.env.*`, `*.pem`,
    /// `id_*` ([`protected_names::NamePattern`]: at most one `*`).
    #[serde(default)]
    pub protected_names: Vec<String>,
    /// Binaries the agent may execute.
    #[serde(default)]
    pub exec: Vec<PathBuf>,
    /// With `exec` listed: the trees whose files may be mapped executable (shared libraries,
    /// the dynamic loader's search path) without being executable themselves. Absent: the
    /// system library directories ([`Sandbox::DEFAULT_EXEC_LIBS`] that exist).
    #[serde(default)]
    pub exec_libs: Option<Vec<PathBuf>>,
    /// Character devices of the host bound into the agent's minimal `/dev` (which holds
    /// only `null`, `zero`, `full`, `random`, `urandom`, `tty`, its own ptys and `shm`
    /// otherwise): each an existing character device under `/dev`, such as `/dev/kvm`.
    #[serde(default)]
    pub devices: Vec<PathBuf>,
    /// Files and directories the agent may read but never change, even inside a writable
    /// root: refused as write targets through tools, bound read-only in the agent's mount
    /// namespace under `gatewayd run` (git's config and hooks, a host's own settings).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Whether the built-in read-only paths ([`Sandbox::READ_ONLY_BELOW_ROOTS`],
    /// [`Sandbox::READ_ONLY_IN_HOME`]) are added to `read_only` (default: yes).
    #[serde(default)]
    pub read_only_defaults: Option<bool>,
    /// `gatewayd run`: the agent's `/tmp` is a directory of the session's own, empty at the
    /// start and removed at the end, readable and writable by the agent (and `/tmp` is
    /// readable and writable through tools). The paths the policy names under the host's
    /// `/tmp` are bound into it ([`Sandbox::tmp_binds`]).
    #[serde(default)]
    pub private_tmp: bool,
}

impl Sandbox {
    /// `root`, the readable and writable paths and the programs: the paths the policy
    /// names for the agent to reach.
    pub fn named_paths(&self) -> impl Iterator<Item = &Path> {
        self.root
            .iter()
            .chain(&self.readable)
            .chain(&self.writable)
            .chain(&self.exec)
            .map(PathBuf::as_path)
    }

    /// Read-only by default below each writable root and `root`: what git, direnv, editors,
    /// hook managers and agent hosts run or load from a workspace later.
    pub const READ_ONLY_BELOW_ROOTS: [&'static str; 19] = [
        ".git/config",
        ".git/config.worktree",
        ".git/commondir",
        ".git/hooks",
        ".git/info",
        ".envrc",
        ".vscode/tasks.json",
        ".vscode/launch.json",
        ".vscode/settings.json",
        ".devcontainer",
        ".husky",
        ".pre-commit-config.yaml",
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".codex/config.toml",
        ".codex/hooks.json",
        ".gemini/settings.json",
        ".mcp.json",
        "lefthook.yml",
    ];

    /// Read-only by default in the agent's home (`gatewayd run`): shell startup files, git's
    /// and ssh's configuration, systemd user units, autostart entries, agent hosts' settings.
    pub const READ_ONLY_IN_HOME: [&'static str; 17] = [
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".config/fish/config.fish",
        ".gitconfig",
        ".config/git/config",
        ".ssh/config",
        ".config/systemd/user",
        ".config/autostart",
        ".claude/settings.json",
        ".codex/config.toml",
        ".codex/hooks.json",
        ".gemini/settings.json",
    ];

    /// `read_only`, with the built-in paths unless `read_only_defaults` is `false`: those
    /// below each writable root and `root`, and those in `home` when given (the agent's home
    /// under `gatewayd run`).
    pub fn read_only_with_defaults(&self, home: Option<&Path>) -> Vec<PathBuf> {
        let mut v = self.read_only.clone();
        if self.read_only_defaults == Some(false) {
            return v;
        }
        for root in self.writable.iter().chain(&self.root) {
            v.extend(Self::READ_ONLY_BELOW_ROOTS.iter().map(|r| root.join(r)));
        }
        if let Some(h) = home {
            v.extend(Self::READ_ONLY_IN_HOME.iter().map(|r| h.join(r)));
        }
        v.sort();
        v.dedup();
        v
    }

    /// `exec_libs` when the policy leaves it out.
    pub const DEFAULT_EXEC_LIBS: [&'static str; 7] = [
        "/lib",
        "/lib32",
        "/lib64",
        "/usr/lib",
        "/usr/lib32",
        "/usr/lib64",
        "/usr/local/lib",
    ];

    /// The library trees in force: the policy's `exec_libs`, else the defaults that exist.
    pub fn exec_libs(&self) -> Vec<PathBuf> {
        match &self.exec_libs {
            Some(l) => l.clone(),
            None => Self::DEFAULT_EXEC_LIBS
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect(),
        }
    }
}

/// One allowed network destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressEntry {
    /// An address or network, `127.0.0.1/32`, `10.0.0.0/8`, `::1/128`; a bare address means
    /// that one host. Enforced by both layers.
    #[serde(default)]
    pub cidr: Option<String>,
    /// A host name, matched by the gateway against URL arguments. The kernel sees only
    /// addresses, so a host name alone gives the agent's own sockets nothing.
    #[serde(default)]
    pub host: Option<String>,
    /// Destination port; absent = any port.
    #[serde(default)]
    pub port: Option<u16>,
    /// Under `gatewayd run`'s egress proxy: terminate this host's TLS with the session's CA
    /// and read each request (secrets, `http`, `inject`). Implied by `http` or `inject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspect: Option<bool>,
    /// The requests an inspected host accepts ([`HttpRule`]: any one matches); absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Vec<HttpRule>>,
    /// Credentials the proxy puts in this host's requests for placeholders ([`Inject`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<Inject>,
}

/// Network section: the egress allowlist and the Unix sockets outside the session the agent
/// may reach. Nothing listed = no egress at all, and no Unix socket but the session's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Destinations the agent may reach; empty = none.
    #[serde(default)]
    pub egress: Vec<EgressEntry>,
    /// Unix sockets outside the session the agent may connect or send to: an absolute path
    /// (`/run/foo.sock`, matched by the socket file's inode at start) or an abstract name
    /// (`@name`). The session's own sockets and its gateway's are always reachable.
    #[serde(default)]
    pub unix: Vec<String>,
    /// Under `gatewayd run`, the session's egress proxy: the kernel sends the agent's TCP
    /// that no `cidr` entry allows to a proxy that decides it by name (TLS server name, HTTP
    /// host), and its DNS to a resolver that answers only the listed names. Absent: on when
    /// a `*.domain` entry is listed; `true`: on; `false`: off (host names become address
    /// rules, `*.domain` entries stay gateway-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<bool>,
    /// A PEM file of CA certificates the egress proxy trusts, besides the system's roots,
    /// for the servers of inspected hosts (a private CA; the tests' loopback servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_ca: Option<PathBuf>,
}

impl Network {
    /// Whether `gatewayd run` decides this egress by name (see [`Network::proxy`]).
    pub fn by_name(&self) -> bool {
        self.proxy.unwrap_or_else(|| {
            self.egress.iter().any(|e| {
                e.cidr.is_none()
                    && (e.inspected() || e.host.as_deref().is_some_and(|h| h.starts_with("*.")))
            })
        })
    }

    /// Whether the egress proxy terminates TLS for any host (a session CA is made).
    pub fn inspects(&self) -> bool {
        self.egress.iter().any(EgressEntry::inspected)
    }
}

/// One entry of `network.unix`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnixEntry {
    /// A path-named socket.
    Path(PathBuf),
    /// An abstract name, without the `@` (the kernel's leading NUL).
    Abstract(Vec<u8>),
}

impl UnixEntry {
    /// Parses `/absolute/path` or `@name` (1 to 107 bytes).
    pub fn parse(s: &str) -> Result<UnixEntry, String> {
        if let Some(name) = s.strip_prefix('@') {
            let max = gateway_common::UNIX_NAME_MAX as usize;
            if name.is_empty() || name.len() > max {
                return Err(format!(
                    "`{s}`: an abstract socket name has 1 to {max} bytes after the `@`"
                ));
            }
            return Ok(UnixEntry::Abstract(name.as_bytes().to_vec()));
        }
        let path = PathBuf::from(s);
        if !path.is_absolute() {
            return Err(format!(
                "`{s}` is neither an absolute path nor an abstract name (`@name`)"
            ));
        }
        Ok(UnixEntry::Path(path))
    }
}

/// A whole policy file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Format version; only 1 exists.
    pub version: u32,
    /// A name for the audit log.
    #[serde(default)]
    pub name: Option<String>,
    /// Whether kernel enforcement is required or best effort.
    #[serde(default)]
    pub kernel: KernelMode,
    /// What the agent may read, write and execute.
    #[serde(default)]
    pub sandbox: Sandbox,
    /// The egress allowlist.
    #[serde(default)]
    pub network: Network,
    /// Whom the agent runs as and the kernel surface it keeps (`gatewayd run`).
    #[serde(default)]
    pub agent: Agent,
    /// The tool registry: a tool not listed here is refused (`not_allowlisted`).
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    /// Rules as data; the most restrictive matching decision wins (deny > hold > allow).
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Rate limits, session budget, action limits per label.
    #[serde(default)]
    pub limits: Limits,
    /// Rule of Two: what a `sends_out` call gets after untrusted input and private data.
    #[serde(default)]
    pub trifecta: TrifectaMode,
    /// Consecutive words of untrusted output that an argument may not repeat (default 6).
    #[serde(default)]
    pub untrusted_echo_words: Option<usize>,
    /// What a suspicious tool description does (default strict).
    #[serde(default)]
    pub description_scan: ScanMode,
    /// How long an approval stays usable, in seconds (default 900).
    #[serde(default)]
    pub approval_ttl_s: Option<u64>,
    /// Values that must never leave through a `sends_out` tool, by name.
    #[serde(default)]
    pub secrets: std::collections::BTreeMap<String, SecretSource>,
    /// Values injected into tools that name them; never shown to the model.
    #[serde(default)]
    pub credentials: std::collections::BTreeMap<String, SecretSource>,
    /// At session start, register the values in small protected files as the session's
    /// secrets (default true).
    #[serde(default)]
    pub secrets_from_protected: Option<bool>,
    /// At session start, register the values of the agent's environment variables whose
    /// names look like credentials as the session's secrets (default true).
    #[serde(default)]
    pub secrets_from_env: Option<bool>,
    /// Canary credentials: decoys `gatewayd run` places for the agent; any egress that
    /// carries one locks the session down (absent: none).
    #[serde(default)]
    pub canaries: Option<Canaries>,
    /// What a denied attempt on a protected path or a secret does to the session (default
    /// `private`).
    #[serde(default)]
    pub suspicion: SuspicionMode,
    /// What `gatewayd run` does when a kernel record cannot be written (default `stop`).
    #[serde(default)]
    pub on_audit_failure: AuditFailure,
    /// Tool servers `gatewayd mcp --server NAME` may start, each with its program's pin and
    /// its own kernel profile.
    #[serde(default)]
    pub mcp_servers: std::collections::BTreeMap<String, McpServer>,
}

impl Policy {
    /// Reads, parses and validates a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Policy::parse(&text, path)
    }

    /// Parses and validates policy text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Policy, PolicyError> {
        let policy: Policy = serde_json::from_str(text).map_err(|e| {
            // The position is the error's own `FILE:LINE:COL`, not repeated after the message.
            let full = e.to_string();
            let at = format!(" at line {} column {}", e.line(), e.column());
            PolicyError::Parse {
                path: path.to_owned(),
                line: e.line(),
                column: e.column(),
                message: full.strip_suffix(&at).unwrap_or(&full).to_owned(),
            }
        })?;
        policy.validate().map_err(|source| {
            let (line, column) = spans::locate(text, source.path()).unwrap_or((1, 1));
            PolicyError::Invalid {
                path: path.to_owned(),
                line,
                column,
                source,
            }
        })?;
        Ok(policy)
    }

    /// Consecutive words of untrusted output an argument may not repeat.
    pub fn echo_words(&self) -> usize {
        self.untrusted_echo_words.unwrap_or(6)
    }

    /// Whether sessions start with the values of the protected files as secrets.
    pub fn secrets_from_protected(&self) -> bool {
        self.secrets_from_protected.unwrap_or(true)
    }

    /// Whether sessions start with the agent's credential-like environment values as secrets.
    pub fn secrets_from_env(&self) -> bool {
        self.secrets_from_env.unwrap_or(true)
    }

    /// How long an approval stays usable, in milliseconds.
    pub fn approval_ttl_ms(&self) -> u64 {
        self.approval_ttl_s.unwrap_or(900).saturating_mul(1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_read_only_paths_unless_turned_off() {
        let sb = |extra: &str| -> Sandbox {
            serde_json::from_str(&format!(
                r#"{{"root": "/w", "writable": ["/w", "/out"], "read_only": ["/w/x"]{extra}}}"#
            ))
            .unwrap()
        };
        let on = sb("").read_only_with_defaults(Some(Path::new("/home/u")));
        for p in [
            "/w/x",
            "/w/.git/config",
            "/out/.git/hooks",
            "/w/.envrc",
            "/home/u/.bashrc",
        ] {
            assert!(on.contains(&PathBuf::from(p)), "{p}: {on:?}");
        }
        assert!(
            !sb("")
                .read_only_with_defaults(None)
                .iter()
                .any(|p| p.starts_with("/home"))
        );
        let off =
            sb(r#", "read_only_defaults": false"#).read_only_with_defaults(Some(Path::new("/h")));
        assert_eq!(off, [PathBuf::from("/w/x")]);
    }

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(text, Path::new("p.json"))
    }

    #[test]
    fn minimal_policy_defaults_to_require() {
        let p = parse(r#"{"version": 1}"#).unwrap();
        assert_eq!(p.kernel, KernelMode::Require);
        assert!(p.network.egress.is_empty());
    }

    #[test]
    fn parse_error_has_line_and_column() {
        let e = parse("{\n  \"version\": 1,\n  \"kernel\": nope\n}").unwrap_err();
        let shown = e.to_string();
        match e {
            PolicyError::Parse { line, column, .. } => assert_eq!((line, column), (3, 13)),
            other => panic!("unexpected {other}"),
        }
        // Said once, as FILE:LINE:COL.
        assert!(
            shown.contains(":3:13: ") && !shown.contains("at line"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_field_is_refused() {
        assert!(parse(r#"{"version": 1, "sandbox": {"protectd": []}}"#).is_err());
    }

    #[test]
    fn relative_protected_path_is_refused() {
        let e = parse(r#"{"version": 1, "sandbox": {"protected": ["etc/shadow"]}}"#).unwrap_err();
        assert!(e.to_string().contains("sandbox.protected[0]"), "{e}");
    }

    #[test]
    fn semantic_error_points_at_its_line() {
        let text =
            "{\n  \"version\": 1,\n  \"sandbox\": {\n    \"protected\": [\"/ok\", \"rel\"]\n  }\n}";
        match parse(text).unwrap_err() {
            PolicyError::Invalid {
                line,
                column,
                source,
                ..
            } => {
                let message = source.to_string();
                assert_eq!((line, column), (4, 26), "{message}");
                assert!(message.starts_with("sandbox.protected[1]"), "{message}");
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn egress_is_decided_by_name_with_a_wildcard_or_when_asked() {
        let by_name = |net: &str| {
            parse(&format!(r#"{{"version": 1, "network": {net}}}"#))
                .unwrap()
                .network
                .by_name()
        };
        assert!(!by_name(r#"{"egress": [{"host": "a.example"}]}"#));
        assert!(by_name(r#"{"egress": [{"host": "*.example.com"}]}"#));
        assert!(by_name(
            r#"{"egress": [{"host": "a.example"}], "proxy": true}"#
        ));
        assert!(!by_name(
            r#"{"egress": [{"host": "*.example.com"}], "proxy": false}"#
        ));
        assert!(parse(r#"{"version": 1, "network": {"proxy": "yes"}}"#).is_err());
        let view = crate::engine::sandbox::EgressView::new(
            &parse(r#"{"version": 1, "network": {"egress": [{"host": "*.github.com", "port": 443}, {"host": "Crates.io."}]}}"#)
                .unwrap()
                .network,
        );
        assert!(view.names("api.github.com") && view.names("crates.io"));
        assert!(
            !view.names("github.com")
                && !view.names("evilgithub.com")
                && !view.names("x.crates.io")
        );
    }

    #[test]
    fn unix_entries_are_paths_or_abstract_names() {
        let p = parse(r#"{"version": 1, "network": {"unix": ["/run/a.sock", "@name"]}}"#).unwrap();
        assert_eq!(p.network.unix.len(), 2);
        assert_eq!(
            UnixEntry::parse("@name"),
            Ok(UnixEntry::Abstract(b"name".to_vec()))
        );
        assert_eq!(
            UnixEntry::parse("/run/a.sock"),
            Ok(UnixEntry::Path("/run/a.sock".into()))
        );
        for bad in ["relative.sock", "@", &format!("@{}", "x".repeat(108))] {
            let text = format!(r#"{{"version": 1, "network": {{"unix": ["/ok", "{bad}"]}}}}"#);
            let e = parse(&text).unwrap_err();
            assert!(e.to_string().contains("network.unix[1]"), "{bad}: {e}");
        }
        assert!(
            parse(&format!(
                r#"{{"version": 1, "network": {{"unix": ["@{}"]}}}}"#,
                "x".repeat(107)
            ))
            .is_ok()
        );
    }

    #[test]
    fn bad_cidr_is_refused() {
        let e = parse(r#"{"version": 1, "network": {"egress": [{"cidr": "300.1.1.1/32"}]}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("network.egress[0].cidr"), "{e}");
    }
}
