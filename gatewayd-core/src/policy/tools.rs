//! The gateway layer's part of the policy: the tool registry, rules as data, limits, secrets
//! and credentials. Semantics live in [`crate::engine`]; this module holds shapes and the
//! checks serde cannot express. Field reference: `docs/POLICY.md`.
use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};

use super::schema::{ArgSchema, CompiledSchema, SchemaError};

/// What a tool does, as far as the session's taint and the action limits care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Its output may carry attacker-controlled text (web pages, emails, issues).
    UntrustedOutput,
    /// It reads data the user would not publish (mail, files, records).
    ReadsPrivate,
    /// It sends data out of the machine (email, HTTP, messages).
    SendsOut,
    /// It destroys or overwrites something.
    Destructive,
}

impl Label {
    /// The policy file's spelling, e.g. `untrusted_output`.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::UntrustedOutput => "untrusted_output",
            Label::ReadsPrivate => "reads_private",
            Label::SendsOut => "sends_out",
            Label::Destructive => "destructive",
        }
    }
}

/// The decision for a registered tool when no rule matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultDecision {
    /// Run the call.
    #[default]
    Allow,
    /// Hold the call for a person's approval.
    Hold,
}

/// A rule's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    /// Allow the call (unless a more restrictive rule also matches).
    Allow,
    /// Hold the call for a person's approval.
    Hold,
    /// Refuse the call (`arg_rule`).
    Deny,
}

/// How a path argument is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathAccess {
    /// Read one file or list one directory: inside a readable/writable root or `sandbox.root`.
    Read,
    /// Create, write or delete: inside a writable root, and not an ancestor of a protected path.
    Write,
    /// A recursive read (search, archive): readable, and not an ancestor of a protected path.
    Tree,
    /// A recursive read as ripgrep makes it with `--hidden` (Claude Code's Grep): readable,
    /// and no protected path below it that ripgrep's walk reaches (it skips what the ignore
    /// files name: `.gitignore` in a git work tree, `.git/info/exclude`, `.ignore`, `.rgignore`).
    Search,
    /// A recursive listing of names (a glob, a listing): readable, and not an ancestor of a
    /// protected directory (a directory's entries are its contents; a file's name is not).
    Names,
}

/// A shell-command argument.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellRule {
    /// The host runs the line through `sh -c`: shell metacharacters are refused.
    #[serde(default)]
    pub through_shell: bool,
    /// Binaries this argument may run (absolute paths, or bare names matched by file name);
    /// absent = `sandbox.exec`.
    #[serde(default)]
    pub exec: Option<Vec<String>>,
}

/// Constraints on one argument. Every constraint given must hold; constraints apply to a
/// string, or to each string of an array of strings (numbers for `min`/`max`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgRule {
    /// The argument must be present.
    #[serde(default)]
    pub required: bool,
    /// A path, canonicalised, then checked against the sandbox for this access.
    #[serde(default)]
    pub path: Option<PathAccess>,
    /// A URL whose destination must be in `network.egress`.
    #[serde(default)]
    pub url: bool,
    /// A command line (see [`ShellRule`]).
    #[serde(default)]
    pub shell: Option<ShellRule>,
    /// Must start with this (for paths: compared after canonicalisation, by component).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Must match this glob (`*` any run of characters, `?` one character).
    #[serde(default)]
    pub glob: Option<String>,
    /// Must match this regex (anchor it yourself with `^…$`).
    #[serde(default)]
    pub regex: Option<String>,
    /// Must match none of these regexes.
    #[serde(default)]
    pub forbid: Vec<String>,
    /// Must equal one of these values.
    #[serde(default, rename = "enum")]
    pub one_of: Option<Vec<serde_json::Value>>,
    /// Numeric bounds, inclusive.
    #[serde(default)]
    pub min: Option<f64>,
    /// Numeric upper bound, inclusive.
    #[serde(default)]
    pub max: Option<f64>,
    /// Longest string accepted, in characters.
    #[serde(default)]
    pub max_len: Option<usize>,
}

/// A registered tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    /// The name the agent calls the tool by; unique in the registry.
    pub name: String,
    /// What the tool does, as shown to the model; scanned for injected instructions.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments; absent = `{"type": "object"}`. Compiled once (see
    /// [`ToolDef::arg_schema`]); not to be changed after that.
    #[serde(default)]
    pub input_schema: Option<serde_json::Value>,
    /// `sha256:HEX` over name, description and canonical schema; absent = pinned from this
    /// entry when the engine starts. Written by `gatewayd policy pin`.
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// Scopes the session must hold (all of them).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// What the tool does, for the session's taint and the action limits.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Per-argument rules, by argument name.
    #[serde(default)]
    pub args: BTreeMap<String, ArgRule>,
    /// Decision when no rule matches.
    #[serde(default)]
    pub default: DefaultDecision,
    /// Budget units one allowed call costs.
    #[serde(default = "one")]
    pub cost: u64,
    /// Credentials injected into the handler (names in `credentials`).
    #[serde(default)]
    pub credentials: Vec<String>,
    /// Skip the untrusted-echo check for this tool (e.g. a note-taking tool).
    #[serde(default)]
    pub echo_ok: bool,
    /// `input_schema`, compiled.
    #[serde(skip)]
    compiled: CompiledSchema,
}

impl ToolDef {
    /// The compiled input schema (compiled on the first call; [`super::Policy::parse`]
    /// makes that call for every tool, so a schema that does not compile is a policy error).
    pub fn arg_schema(&self) -> Result<&ArgSchema, &SchemaError> {
        self.compiled.get(self.input_schema.as_ref())
    }
}

fn one() -> u64 {
    1
}

/// A condition on one argument in a rule's `when`. Every field given must hold; an absent
/// argument matches only `{"present": false}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cond {
    /// `false`: matches only when the argument is absent; `true`: only when present.
    #[serde(default)]
    pub present: Option<bool>,
    /// Equal to this JSON value.
    #[serde(default)]
    pub equals: Option<serde_json::Value>,
    /// Equal to one of these values.
    #[serde(default, rename = "enum")]
    pub one_of: Option<Vec<serde_json::Value>>,
    /// Starts with this (paths: after canonicalisation, by component).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Matches this glob (`*` any run of characters, `?` one character).
    #[serde(default)]
    pub glob: Option<String>,
    /// Matches this regex (unanchored).
    #[serde(default)]
    pub regex: Option<String>,
    /// Greater than this number (a numeric string counts as its number).
    #[serde(default)]
    pub gt: Option<f64>,
    /// Greater than or equal to this number.
    #[serde(default)]
    pub gte: Option<f64>,
    /// Less than this number.
    #[serde(default)]
    pub lt: Option<f64>,
    /// Less than or equal to this number.
    #[serde(default)]
    pub lte: Option<f64>,
}

/// A rule as data: matched by tool glob and argument conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique name of the rule, shown in `matched_rules` and as `rule:ID` in holds.
    pub id: String,
    /// Tool name glob.
    pub tool: String,
    /// Conditions by argument name (or JSON Pointer); all must hold.
    #[serde(default)]
    pub when: BTreeMap<String, Cond>,
    /// What the rule decides when it matches.
    pub decision: RuleDecision,
    /// Shown to the model when this rule denies or holds.
    #[serde(default)]
    pub message: Option<String>,
}

/// A sliding-window rate limit, per session, over all tools matching the glob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Tool name glob; the limit counts all matching tools together.
    pub tool: String,
    /// Most calls allowed in any one window.
    pub max: u32,
    /// Window length, in seconds.
    pub window_s: u64,
}

/// Per-session limits on allowed calls (`limits` in the policy).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Sliding-window rate limits.
    #[serde(default)]
    pub rate: Vec<RateLimit>,
    /// Total budget units per session (tools' `cost`); absent = unlimited.
    #[serde(default)]
    pub budget: Option<u64>,
    /// At most N allowed calls per session of tools carrying each label.
    #[serde(default)]
    pub actions: BTreeMap<Label, u32>,
}

/// What the Rule of Two does to a `sends_out` call after untrusted input and private data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrifectaMode {
    /// Hold for a person's approval.
    Hold,
    /// Refuse.
    #[default]
    Deny,
}

/// What a suspicious tool description does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanMode {
    /// The tool is refused (`description_scan`).
    #[default]
    Strict,
    /// The tool works; every call's audit record carries the findings.
    Warn,
    /// No scan.
    Off,
}

/// What a denied attempt on a protected path or a registered secret does to the session
/// (docs/POLICY.md, "Suspicion").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspicionMode {
    /// It counts as private data read: the Rule of Two's private leg is set.
    #[default]
    Private,
    /// It trips the session: both Rule-of-Two legs are set (the daemon's trip hook, the
    /// kernel egress lockdown, runs).
    Lockdown,
    /// It changes nothing.
    Off,
}

/// Where a secret or credential value comes from. Exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// An environment variable of the gatewayd process.
    #[serde(default)]
    pub env: Option<String>,
    /// A file whose content (trailing newline trimmed) is the value.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// The value itself (tests and demos only: it then lives in the policy file).
    #[serde(default)]
    pub value: Option<String>,
}

impl SecretSource {
    /// The value, or why it is not available.
    pub fn resolve(&self) -> Result<String, String> {
        if let Some(v) = &self.value {
            return Ok(v.clone());
        }
        if let Some(e) = &self.env {
            return std::env::var(e).map_err(|_| format!("environment variable {e} is not set"));
        }
        if let Some(f) = &self.file {
            return std::fs::read_to_string(f)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
                .map_err(|e| format!("cannot read {}: {e}", f.display()));
        }
        Err("no source".into())
    }
}

/// Shortest secret value the egress check accepts: shorter values would match everywhere.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// Whether `glob` (`*`, `?`) matches the whole of `s`.
pub fn glob_match_str(glob: &str, s: &str) -> bool {
    if glob.is_ascii() && s.is_ascii() {
        glob_match(glob.as_bytes(), s.as_bytes())
    } else {
        let (g, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), s.chars().collect());
        glob_match(&g, &t)
    }
}

/// Iterative matching with one backtrack point: linear in practice, no recursion.
fn glob_match<T: PartialEq + Copy + From<u8>>(g: &[T], t: &[T]) -> bool {
    let (star, any) = (T::from(b'*'), T::from(b'?'));
    let (mut gi, mut ti, mut back, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if gi < g.len() && (g[gi] == any || g[gi] == t[ti]) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == star {
            back = Some(gi);
            mark = ti;
            gi += 1;
        } else if let Some(sp) = back {
            gi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == star)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The JSON Schema next to the policies names exactly the fields the parser accepts.
    #[test]
    fn schema_names_every_field() {
        let schema: Value =
            serde_json::from_str(include_str!("../../../policies/policy.schema.json")).unwrap();
        let keys = |v: &Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let props = |at: &str| keys(&schema.pointer(at).unwrap()["properties"]);
        let tool: ToolDef = serde_json::from_value(json!({"name": "x"})).unwrap();
        let rule: Rule =
            serde_json::from_value(json!({"id": "r", "tool": "*", "decision": "deny"})).unwrap();
        let rate = RateLimit {
            tool: "*".into(),
            max: 1,
            window_s: 1,
        };
        // Every optional field set, so that none is skipped when written.
        let egress: super::super::EgressEntry = serde_json::from_value(json!({"host": "h",
            "inspect": true, "http": [{"methods": ["GET"], "path": "/*"}],
            "inject": [{"credential": "c", "header": "A", "env": "E"}]}))
        .unwrap();
        let network: super::super::Network =
            serde_json::from_value(json!({"proxy": true, "upstream_ca": "/ca.pem"})).unwrap();
        for (at, v) in [
            (
                "",
                serde_json::to_value(super::super::Policy::default()).unwrap(),
            ),
            (
                "/$defs/sandbox",
                serde_json::to_value(super::super::Sandbox::default()).unwrap(),
            ),
            ("/$defs/network", serde_json::to_value(network).unwrap()),
            (
                "/$defs/network/properties/egress/items",
                serde_json::to_value(egress).unwrap(),
            ),
            ("/$defs/http_rule", json!({"methods": [], "path": null})),
            (
                "/properties/canaries",
                serde_json::to_value(super::super::Canaries::default()).unwrap(),
            ),
            (
                "/$defs/network/properties/egress/items/properties/inject/items",
                json!({"credential": "", "header": "", "env": ""}),
            ),
            ("/$defs/tool", serde_json::to_value(tool).unwrap()),
            (
                "/$defs/arg_rule",
                serde_json::to_value(ArgRule::default()).unwrap(),
            ),
            (
                "/$defs/arg_rule/properties/shell",
                serde_json::to_value(ShellRule::default()).unwrap(),
            ),
            ("/$defs/rule", serde_json::to_value(rule).unwrap()),
            (
                "/$defs/cond",
                serde_json::to_value(Cond::default()).unwrap(),
            ),
            (
                "/$defs/limits",
                serde_json::to_value(Limits::default()).unwrap(),
            ),
            (
                "/$defs/limits/properties/rate/items",
                serde_json::to_value(rate).unwrap(),
            ),
            (
                "/$defs/secret_source",
                serde_json::to_value(SecretSource::default()).unwrap(),
            ),
        ] {
            assert_eq!(props(at), keys(&v), "schema at `{at}`");
        }
    }

    #[test]
    fn example_policy_loads() {
        let p = super::super::Policy::parse(
            include_str!("../../../policies/example.json"),
            std::path::Path::new("example.json"),
        )
        .unwrap();
        assert!(p.tools.len() >= 8);
    }

    #[test]
    fn globs() {
        assert!(glob_match_str("*", ""));
        assert!(glob_match_str("send_*", "send_email"));
        assert!(!glob_match_str("send_*", "resend_email"));
        assert!(glob_match_str("*@example.com", "a@example.com"));
        assert!(!glob_match_str("*@example.com", "a@example.com.evil"));
        assert!(glob_match_str("a?c", "abc"));
        assert!(glob_match_str("*a*b*", "xxaxxbxx"));
        assert!(!glob_match_str("a", "ab"));
        assert!(glob_match_str("é*ü", "éaaü"));
        assert!(glob_match_str("?", "é"));
        assert!(!glob_match_str("??", "é"));
    }
}
