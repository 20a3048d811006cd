//! Policy tests as data (`gatewayd test POLICY SCENARIOS...`, docs/POLICY.md "Testing a
//! policy"): a scenario file describes sessions and steps — live tool definitions, session
//! secrets, calls, a tool's output, approvals, the clock — each with the decision and reason
//! code it expects. [`run::run_file`] runs them on the real [`Engine`](crate::engine::Engine)
//! (counters, approvals, taint) with a manual clock, one fresh engine per scenario, and
//! reports one [`run::Row`] per step.
//!
//! Files are checked against `policies/scenario.schema.json` (errors carry `FILE:LINE:COLUMN`)
//! before they are read into the shapes below. `@NAME@` in the policy and scenario texts is
//! replaced by `--var NAME=VALUE` first ([`substitute`]).
//!
//! Layout: this file (shapes, loading), `run` (the runner), `patch` (a scenario's
//! `policy_patch`).
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::LazyLock,
};

use serde::Deserialize;
use serde_json::Value;

use crate::{
    engine::{EngineError, ToolCall, ToolDefinition},
    policy::{JsonPath, PolicyError, spans},
};

mod patch;
pub mod run;

pub use patch::PatchOp;

/// The JSON Schema of scenario files.
pub const SCHEMA: &str = include_str!("../../../policies/scenario.schema.json");

/// Why scenarios could not be run (as opposed to a step that did not get what it expected).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A file cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not JSON, or not a scenario file (its schema): where and why.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending value.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What is wrong, after the JSON Pointer of the value.
        message: String,
    },
    /// A `--var` that is not `NAME=VALUE`.
    #[error("`--var {0}`: expected NAME=VALUE with NAME of letters, digits and `_`")]
    Var(String),
    /// A scenario's `policy_patch` does not apply, or the patched policy is invalid.
    #[error("{}: scenario `{scenario}`: {message}", path.display())]
    Scenario {
        /// The scenario file.
        path: PathBuf,
        /// The scenario's name.
        scenario: String,
        /// What went wrong.
        message: String,
    },
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The engine cannot be built from the policy.
    #[error("the engine cannot be built: {0}")]
    Engine(#[from] EngineError),
    /// The `--audit` log cannot be opened.
    #[error("the audit log: {0}")]
    Audit(#[from] crate::audit::AuditError),
}

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Where its schema is (editors use it; the runner always uses its own).
    #[serde(default, rename = "$schema")]
    pub schema: Option<String>,
    /// What the file is for (shown nowhere; for readers).
    #[serde(default)]
    pub description: Option<String>,
    /// Its scenarios, run in order.
    pub scenarios: Vec<Scenario>,
}

/// One scenario: a fresh engine on the policy (patched), its sessions, its steps in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name in the table.
    pub name: String,
    /// What it shows (for readers).
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Patch operations (RFC 6902: `add`, `replace`, `remove`) applied to the policy
    /// for this scenario.
    #[serde(default)]
    pub policy_patch: Vec<PatchOp>,
    /// The sessions; the first is the default of every step. None given: one session `s1`
    /// of user `alice` holding every scope the policy names.
    #[serde(default)]
    pub sessions: Vec<SessionSpec>,
    /// The clock at the start, in ms since the epoch (default 1,700,000,000,000).
    #[serde(default)]
    pub start_ms: Option<u64>,
    /// Its steps, run in order.
    pub steps: Vec<Step>,
}

/// A session, as the application would open it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// The session id steps name in `session`.
    pub id: String,
    /// The session's user (default `alice`).
    #[serde(default = "default_user")]
    pub user: String,
    /// Default: every scope the policy names.
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// The agent's environment at session start (its credential-like values become the
    /// session's secrets, as the policy's `secrets_from_env` says). Default: empty.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

fn default_user() -> String {
    "alice".into()
}

/// One step: exactly one action, and what it expects.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A label for the table (default: the action).
    #[serde(default)]
    pub name: Option<String>,
    /// The session it acts on (default: the first).
    #[serde(default)]
    pub session: Option<String>,
    /// A tool call, through `Engine::call`.
    #[serde(default)]
    pub call: Option<ToolCall>,
    /// A live tool definition (`tools/list`), through `Engine::register`.
    #[serde(default)]
    pub register: Option<ToolDefinition>,
    /// A secret of the session (`Engine::add_session_secret`).
    #[serde(default)]
    pub secret: Option<SecretSpec>,
    /// A tool's output, reported after it ran elsewhere (`Engine::finish`).
    #[serde(default)]
    pub output: Option<OutputSpec>,
    /// Text the application knows is untrusted (`Engine::observe_untrusted`).
    #[serde(default)]
    pub untrusted: Option<String>,
    /// A person approves the approval id (`$last`, `$NAME` or the id itself).
    #[serde(default)]
    pub approve: Option<String>,
    /// A person rejects the approval id.
    #[serde(default)]
    pub reject: Option<String>,
    /// The clock moves this many seconds.
    #[serde(default)]
    pub advance_s: Option<u64>,
    /// The clock moves this many milliseconds.
    #[serde(default)]
    pub advance_ms: Option<u64>,
    /// From now on every audit append fails (true) or works again (false).
    #[serde(default)]
    pub audit_fails: Option<bool>,
    /// The kernel denied a process of the session this (its reason code, e.g.
    /// `protected_path`), as the daemon reports it (`Engine::note_suspicion`).
    #[serde(default)]
    pub kernel_denial: Option<String>,
    /// For a call: what the handler returns (default `{"ok": true}`).
    #[serde(default)]
    pub returns: Option<Value>,
    /// For a call: the handler fails with this error instead.
    #[serde(default)]
    pub fails: Option<String>,
    /// For a call: keep the verdict's approval id as `$NAME`.
    #[serde(default)]
    pub save: Option<String>,
    /// What the step expects (required for a call).
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// A session secret.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// Its name, in messages and records.
    pub name: String,
    /// Its value (at least 8 characters, or the step is refused).
    pub value: String,
}

/// A tool's result: `output` or `error`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// The tool that ran.
    pub tool: String,
    /// What it returned.
    #[serde(default)]
    pub output: Option<Value>,
    /// Or the error it failed with.
    #[serde(default)]
    pub error: Option<String>,
}

/// What a step expects. A call expects `decision` and `reason`; everything else is optional
/// and checked only when given.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// `allow`, `deny` or `hold`.
    #[serde(default)]
    pub decision: Option<String>,
    /// The reason code (docs/POLICY.md, "Reason codes").
    #[serde(default)]
    pub reason: Option<String>,
    /// A substring of the message.
    #[serde(default)]
    pub message: Option<String>,
    /// Substrings the message must not hold.
    #[serde(default)]
    pub message_lacks: Vec<String>,
    /// The verdict's hold reasons, exactly.
    #[serde(default)]
    pub hold_reasons: Option<Vec<String>>,
    /// The verdict's matched rules, exactly.
    #[serde(default)]
    pub matched_rules: Option<Vec<String>>,
    /// The verdict's approval id is the one saved as this (`$last`, `$NAME`).
    #[serde(default)]
    pub approval_id: Option<String>,
    /// A substring of the output (or error) the model gets, as JSON text.
    #[serde(default)]
    pub output: Option<String>,
    /// Substrings the output must not hold.
    #[serde(default)]
    pub output_lacks: Vec<String>,
    /// A registration's result: `accepted`, `not_in_policy`, `rug_pull`, `flagged`.
    #[serde(default)]
    pub status: Option<String>,
    /// A secret, approval or rejection was accepted (default true).
    #[serde(default)]
    pub ok: Option<bool>,
    /// The session's Rule-of-Two legs after the step (only those given).
    #[serde(default)]
    pub legs: Option<LegsExpect>,
    /// Approvals waiting for a person after the step.
    #[serde(default)]
    pub pending: Option<usize>,
    /// Budget units the session has spent after the step.
    #[serde(default)]
    pub spent: Option<u64>,
}

/// Some of the legs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LegsExpect {
    /// Untrusted content seen.
    #[serde(default)]
    pub untrusted: Option<bool>,
    /// Private data read.
    #[serde(default)]
    pub private: Option<bool>,
    /// Data sent out.
    #[serde(default)]
    pub egress: Option<bool>,
}

/// Replaces every `@NAME@` in `text` by the value of `NAME` in `vars`, escaped as the inside
/// of a JSON string (the placeholders sit in JSON strings).
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (name, value) in vars {
        let quoted = Value::String(value.clone()).to_string();
        out = out.replace(&format!("@{name}@"), &quoted[1..quoted.len() - 1]);
    }
    out
}

/// Parses `NAME=VALUE`.
pub fn parse_var(s: &str) -> Result<(String, String), ScenarioError> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| ScenarioError::Var(s.to_owned()))?;
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(ScenarioError::Var(s.to_owned()));
    }
    Ok((name.to_owned(), value.to_owned()))
}

static VALIDATOR: LazyLock<Result<jsonschema::Validator, String>> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(SCHEMA).map_err(|e| e.to_string())?;
    jsonschema::validator_for(&schema).map_err(|e| e.to_string())
});

/// Reads a scenario file (after `@NAME@` substitution), checks it against the schema and
/// returns it; errors name `FILE:LINE:COLUMN`.
pub fn load(path: &Path, vars: &BTreeMap<String, String>) -> Result<ScenarioFile, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&substitute(&text, vars), path)
}

/// Parses and checks scenario text; `path` is for messages.
pub fn parse(text: &str, path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let invalid = |line, column, message| ScenarioError::Invalid {
        path: path.to_owned(),
        line,
        column,
        message,
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| invalid(e.line(), e.column(), e.to_string()))?;
    let validator = VALIDATOR
        .as_ref()
        .map_err(|e| invalid(1, 1, format!("the scenario schema does not compile: {e}")))?;
    if let Some(e) = validator.iter_errors(&value).next() {
        let pointer = e.instance_path().as_str().to_owned();
        let at = JsonPath::root().pointer(&pointer);
        let (line, column) = spans::locate(text, &at).unwrap_or((1, 1));
        let shown = if pointer.is_empty() {
            "(top level)"
        } else {
            pointer.as_str()
        };
        let why = if e.schema_path().as_str().ends_with("/oneOf") && pointer.contains("/steps/") {
            format!("a step has exactly one action: {}", run::ACTIONS.join(", "))
        } else {
            e.masked().to_string()
        };
        return Err(invalid(line, column, format!("{shown}: {why}")));
    }
    serde_json::from_value(value).map_err(|e| invalid(1, 1, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vars_are_json_escaped() {
        let vars = BTreeMap::from([("ROOT".to_owned(), "/tmp/a \"b\"\\c".to_owned())]);
        let text = substitute(r#"{"p": "@ROOT@/x", "q": "@OTHER@"}"#, &vars);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["p"], "/tmp/a \"b\"\\c/x");
        assert_eq!(v["q"], "@OTHER@");
        assert!(parse_var("ROOT=/x=y").is_ok());
        assert!(parse_var("RO OT=/x").is_err());
        assert!(parse_var("ROOT").is_err());
    }

    #[test]
    fn schema_errors_point_at_the_step() {
        let text = "{\"scenarios\": [\n  {\"name\": \"a\", \"steps\": [\n    {\"advance_s\": 1},\n    {\"approve\": \"$last\", \"reject\": \"$last\"}\n  ]}\n]}";
        let e = parse(text, Path::new("f.json")).unwrap_err().to_string();
        assert!(
            e.starts_with("f.json:4:5: /scenarios/0/steps/1: a step has exactly one action"),
            "{e}"
        );
        let text = "{\"scenarios\": [{\"name\": \"a\", \"steps\": [\n {\"call\": {\"tool\": \"t\"}, \"expect\": {\"decision\": \"allow\"}}]}]}";
        let e = parse(text, Path::new("f.json")).unwrap_err().to_string();
        assert!(e.starts_with("f.json:2:"), "{e}");
        assert!(e.contains("reason"), "{e}");
        let e = parse("{\"scenarios\": [}", Path::new("f.json"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.json:1:"), "{e}");
    }

    #[test]
    fn the_schema_names_every_field() {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let props = |at: &str| -> Vec<String> {
            let mut k: Vec<String> = schema.pointer(at).unwrap()["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            k.sort();
            k
        };
        let step: Vec<&str> = vec![
            "advance_ms",
            "advance_s",
            "approve",
            "audit_fails",
            "call",
            "expect",
            "fails",
            "kernel_denial",
            "name",
            "output",
            "register",
            "reject",
            "returns",
            "save",
            "secret",
            "session",
            "untrusted",
        ];
        assert_eq!(props("/$defs/step"), step);
        let expect = [
            "approval_id",
            "decision",
            "hold_reasons",
            "legs",
            "matched_rules",
            "message",
            "message_lacks",
            "ok",
            "output",
            "output_lacks",
            "pending",
            "reason",
            "spent",
            "status",
        ];
        assert_eq!(props("/$defs/expect"), expect);
        assert_eq!(
            props("/$defs/scenario"),
            [
                "description",
                "name",
                "policy_patch",
                "sessions",
                "start_ms",
                "steps"
            ]
        );
        assert_eq!(props("/$defs/session"), ["env", "id", "scopes", "user"]);
    }
}
