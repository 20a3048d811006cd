//! A decision, explained: the [`Decision`], its [`Reason`] code and a message for the model.
use serde::{Deserialize, Serialize};

pub use crate::audit::Decision;

/// The reason code of a decision (docs/POLICY.md lists them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Allow: every check passed.
    Allowed,
    /// Allow: held earlier, and a valid approval was presented.
    Approved,
    /// Deny: the tool is not in the policy's registry.
    NotAllowlisted,
    /// Deny: the tool's definition differs from its pinned fingerprint.
    RugPull,
    /// Deny: the tool's description or schema looks poisoned (strict mode).
    DescriptionScan,
    /// Deny: the session lacks a scope the tool needs.
    MissingScope,
    /// Deny: the input schema or an argument rule failed, a URL did not parse, or a deny rule
    /// matched.
    ArgRule,
    /// Deny: a path is protected, outside the roots or unresolvable, or a URL's destination is not
    /// allowed.
    Sandbox,
    /// Deny: a command line runs something not allowed or reaches a protected path.
    Shell,
    /// Deny: too many calls of the tools matching a rate limit in its window.
    RateLimit,
    /// Deny: the call would exceed the session budget.
    Budget,
    /// Deny: too many calls with one of the tool's labels this session.
    ActionLimit,
    /// Deny: the arguments repeat a run of words from untrusted output.
    UntrustedEcho,
    /// Deny: a secret in a `sends_out` call, or a credential in any call.
    SecretEgress,
    /// Deny: the Rule of Two, in `deny` mode.
    Trifecta,
    /// Hold: a person must approve (reasons in [`Verdict::hold_reasons`]).
    ApprovalRequired,
    /// Deny: the approval presented is unknown, used, expired, rejected or for another call.
    ApprovalDenied,
    /// Deny: the audit record could not be written.
    AuditUnavailable,
    /// Deny: something could not be evaluated (fail closed).
    CheckError,
}

impl Reason {
    /// The code as audit records and docs/POLICY.md spell it, e.g. `rug_pull`.
    pub fn code(self) -> &'static str {
        match self {
            Reason::Allowed => "allowed",
            Reason::Approved => "approved",
            Reason::NotAllowlisted => "not_allowlisted",
            Reason::RugPull => "rug_pull",
            Reason::DescriptionScan => "description_scan",
            Reason::MissingScope => "missing_scope",
            Reason::ArgRule => "arg_rule",
            Reason::Sandbox => "sandbox",
            Reason::Shell => "shell",
            Reason::RateLimit => "rate_limit",
            Reason::Budget => "budget",
            Reason::ActionLimit => "action_limit",
            Reason::UntrustedEcho => "untrusted_echo",
            Reason::SecretEgress => "secret_egress",
            Reason::Trifecta => "trifecta",
            Reason::ApprovalRequired => "approval_required",
            Reason::ApprovalDenied => "approval_denied",
            Reason::AuditUnavailable => "audit_unavailable",
            Reason::CheckError => "check_error",
        }
    }
}

/// A decision, explained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Allow, deny or hold.
    pub decision: Decision,
    /// The code saying which check decided.
    pub reason: Reason,
    /// For the model: what was refused and why, in one or two sentences.
    pub message: String,
    /// Ids of the policy rules that matched the call.
    pub matched_rules: Vec<String>,
    /// Why the call is held (`trifecta`, `rule:ID`, `default:hold`); empty unless held or
    /// allowed by an approval.
    pub hold_reasons: Vec<String>,
    /// Set when the call is held: the id a person approves or rejects.
    pub approval_id: Option<String>,
}

impl Verdict {
    pub(crate) fn deny(reason: Reason, message: impl Into<String>) -> Verdict {
        Verdict {
            decision: Decision::Deny,
            reason,
            message: message.into(),
            matched_rules: Vec::new(),
            hold_reasons: Vec::new(),
            approval_id: None,
        }
    }

    /// Whether the call may run.
    pub fn is_allow(&self) -> bool {
        self.decision == Decision::Allow
    }
}
