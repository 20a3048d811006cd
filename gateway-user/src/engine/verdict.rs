//! A decision, explained: the [`Decision`], its [`Reason`] code and a message for the model.
use serde::Serialize;

pub use crate::audit::Decision;

/// The reason code of a decision (docs/POLICY.md lists them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Allowed,
    Approved,
    NotAllowlisted,
    RugPull,
    DescriptionScan,
    MissingScope,
    ArgRule,
    Sandbox,
    Shell,
    RateLimit,
    Budget,
    ActionLimit,
    UntrustedEcho,
    SecretEgress,
    Trifecta,
    ApprovalRequired,
    ApprovalDenied,
    AuditUnavailable,
    CheckError,
}

impl Reason {
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub decision: Decision,
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

    pub fn is_allow(&self) -> bool {
        self.decision == Decision::Allow
    }
}
