//! The tool registry: each policy tool compiled once (schema, pin, scan findings, argument
//! rules), and definitions announced at run time compared with their pins.
use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::{
    AuditRecord, Decision, Engine, EngineError, Reason, args, fingerprint,
    scan::{self, Finding},
};
use crate::policy::{Label, Policy, ScanMode, ToolDef, glob_match_str};

/// A tool definition as a tool server announces it (e.g. MCP `tools/list`).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// Its description, as shown to the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments (`{"type": "object"}` when absent).
    #[serde(default = "fingerprint::default_schema", alias = "inputSchema")]
    pub input_schema: Value,
}

/// What registering a definition did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// Matches the pin and the scan found nothing (or the scan is not strict).
    Accepted,
    /// Not in the policy's registry: calls to it stay refused.
    NotInPolicy,
    /// Differs from the pin: the tool is blocked until re-pinned.
    RugPull {
        /// The pinned fingerprint (`sha256:HEX`).
        pinned: String,
        /// The announced definition's fingerprint.
        got: String,
    },
    /// The description scan flagged it (strict mode): the tool is blocked.
    Flagged(Vec<String>),
}

/// One policy tool, compiled.
pub(super) struct Tool {
    pub def: ToolDef,
    /// The pinned fingerprint (the policy's, or computed from the policy's definition).
    pub pin: String,
    /// The fingerprint of the definition last registered.
    pub current: String,
    pub findings: Vec<Finding>,
    pub args: Vec<(String, args::CArg)>,
    /// The policy's rules whose tool glob matches this tool, by index in policy order
    /// (matched once here instead of on every call).
    pub rules: Vec<usize>,
}

impl Tool {
    pub(super) fn has(&self, l: Label) -> bool {
        self.def.labels.contains(&l)
    }

    fn compile(t: &ToolDef, policy: &Policy) -> Result<Tool, EngineError> {
        let scan_mode = policy.description_scan;
        let schema = t
            .input_schema
            .clone()
            .unwrap_or_else(fingerprint::default_schema);
        let current = fingerprint::fingerprint(&t.name, &t.description, &schema);
        let pin = t.fingerprint.clone().unwrap_or_else(|| current.clone());
        let findings = match scan_mode {
            ScanMode::Off => Vec::new(),
            _ => scan::scan(&t.description, &schema),
        };
        let args = t
            .args
            .iter()
            .map(|(k, r)| {
                args::CArg::new(r)
                    .map(|c| (k.clone(), c))
                    .map_err(|reason| EngineError::ArgRule {
                        tool: t.name.clone(),
                        arg: k.clone(),
                        reason,
                    })
            })
            .collect::<Result<_, _>>()?;
        let rules = (policy.rules.iter().enumerate())
            .filter(|(_, r)| glob_match_str(&r.tool, &t.name))
            .map(|(i, _)| i)
            .collect();
        Ok(Tool {
            def: t.clone(),
            pin,
            current,
            findings,
            args,
            rules,
        })
    }
}

/// Every tool of the policy, compiled, by name.
pub(super) fn compile(policy: &Policy) -> Result<HashMap<String, Tool>, EngineError> {
    policy
        .tools
        .iter()
        .map(|t| Ok((t.name.clone(), Tool::compile(t, policy)?)))
        .collect()
}

/// The registered tools' names for the `not_allowlisted` message: sorted, at most 40.
pub(super) fn tool_list(policy: &Policy) -> String {
    let mut names: Vec<&str> = policy.tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let more = names.len().saturating_sub(40);
    names.truncate(40);
    let mut list = names.join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    list
}

impl Engine {
    /// The fingerprint each registered tool has now: (name, pinned, current).
    pub fn fingerprints(&self) -> Vec<(String, String, String)> {
        let tools = self
            .tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v: Vec<_> = tools
            .values()
            .map(|t| (t.def.name.clone(), t.pin.clone(), t.current.clone()))
            .collect();
        v.sort();
        v
    }

    /// Registers a definition announced at run time: the description scan runs on it and
    /// its fingerprint is compared with the pin. A change blocks the tool (`rug_pull`) until
    /// a person re-pins it; going back to the pinned definition does not unblock it.
    pub fn register(&self, d: &ToolDefinition) -> Registration {
        let result = self.register_inner(d);
        // A blocked definition is a security event: recorded (the tool stays blocked even
        // if the record cannot be written).
        let (reason, detail) = match &result {
            Registration::RugPull { pinned, got } => (
                Reason::RugPull,
                json!({"event": "register", "pinned": pinned, "got": got}),
            ),
            Registration::Flagged(kinds) => (
                Reason::DescriptionScan,
                json!({"event": "register", "findings": kinds}),
            ),
            _ => return result,
        };
        if let Some(audit) = &self.audit {
            let rec = AuditRecord {
                session: "-".into(),
                tool: Some(d.name.clone()),
                decision: Decision::Deny,
                reason: reason.code(),
                detail,
            };
            if let Ok(mut a) = audit.lock() {
                let _ = a.append(rec);
            }
        }
        result
    }

    fn register_inner(&self, d: &ToolDefinition) -> Registration {
        let mut tools = self
            .tools
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(t) = tools.get_mut(&d.name) else {
            return Registration::NotInPolicy;
        };
        let got = fingerprint::fingerprint(&d.name, &d.description, &d.input_schema);
        if t.current == t.pin {
            t.current.clone_from(&got);
        }
        if self.policy.description_scan != ScanMode::Off {
            let f = scan::scan(&d.description, &d.input_schema);
            if !f.is_empty() {
                t.findings = f;
            }
        }
        if t.current != t.pin {
            return Registration::RugPull {
                pinned: t.pin.clone(),
                got,
            };
        }
        if self.policy.description_scan == ScanMode::Strict && !t.findings.is_empty() {
            return Registration::Flagged(t.findings.iter().map(|f| f.kind.to_owned()).collect());
        }
        Registration::Accepted
    }
}
