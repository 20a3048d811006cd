//! Where the engine's records go: one [`AuditRecord`] per call, and per blocked definition,
//! to an [`AuditSink`] (the hash-chained [`AuditLog`](crate::audit::AuditLog) in the daemon).
use serde::Serialize;
use serde_json::{Value, json};

use super::{Decision, Engine, Session, ToolCall, Verdict, checks::secret_egress};
use crate::policy::ScanMode;

/// One audit record as the engine writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Id of the session (secrets scrubbed); `-` for a tool definition's registration.
    pub session: String,
    /// The tool called, or whose definition was registered.
    pub tool: Option<String>,
    /// What was decided.
    pub decision: Decision,
    /// The reason code ([`Reason::code`](super::Reason::code)).
    pub reason: &'static str,
    /// An object with specifics: argument names and digest, never values; secrets scrubbed.
    pub detail: Value,
}

/// Where audit records go; `append` returns once the record is durable.
pub trait AuditSink: Send {
    /// Appends `record`; returns only once it is durable, or the error's text.
    fn append(&mut self, record: AuditRecord) -> Result<(), String>;
}

/// The engine's records go to the hash-chained log as `source: gateway` entries.
impl AuditSink for crate::audit::AuditLog {
    fn append(&mut self, r: AuditRecord) -> Result<(), String> {
        crate::audit::AuditLog::append(self, crate::audit::writer::gateway_entry(r))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

impl Engine {
    /// A fact about a call worth recording (not a decision), best effort: a sink that fails
    /// here already failed the call's own record, which refused it.
    pub(super) fn record_info(&self, s: &Session, tool: &str, reason: &'static str, detail: Value) {
        let _ = self.append_scrubbed(s, tool, Decision::Info, reason, detail);
    }

    /// Appends one record of session `s` about `tool`: `detail` scrubbed of the policy's and
    /// the session's secrets, and the session id and tool name too, disguised or not (a model
    /// can put a secret in a tool's name). Ok when the sink has it (or there is none).
    fn append_scrubbed(
        &self,
        s: &Session,
        tool: &str,
        decision: Decision,
        reason: &'static str,
        mut detail: Value,
    ) -> Result<(), String> {
        let Some(audit) = &self.audit else {
            return Ok(());
        };
        self.secrets.all.scrub_value(&mut detail);
        s.secrets().scrub_value(&mut detail);
        if let (Some(d), Some(m)) = (&self.policy_digest, detail.as_object_mut()) {
            m.insert("policy".into(), Value::String(d.clone()));
        }
        let rec = AuditRecord {
            session: secret_egress::scrub_text(self, s, &s.id, true).into_owned(),
            tool: Some(secret_egress::scrub_text(self, s, tool, true).into_owned()),
            decision,
            reason,
            detail,
        };
        audit
            .lock()
            .map_err(|_| "audit lock poisoned".to_string())?
            .append(rec)
    }

    /// The call's one record: argument names and digest (never values), the verdict, the
    /// legs; every string scrubbed of secrets. Ok when the sink has it (or there is none).
    /// `decision`: the verdict's, or `would_deny` for a refusal learn mode let through.
    pub(super) fn record(
        &self,
        s: &Session,
        call: &ToolCall,
        v: &Verdict,
        decision: Decision,
        digest: &str,
    ) -> Result<(), String> {
        if self.audit.is_none() {
            return Ok(());
        }
        let arg_names: Vec<&String> = call
            .arguments
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        let findings: Vec<String> = if self.policy.description_scan == ScanMode::Warn {
            let tools = self
                .tools
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            tools
                .get(&call.tool)
                .map(|t| t.findings.iter().map(|f| f.kind.to_owned()).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let detail = json!({
            "user": s.user,
            "args_sha256": digest,
            "arg_names": arg_names,
            "message": v.message,
            "matched_rules": v.matched_rules,
            "hold_reasons": v.hold_reasons,
            // The id a call presents is the model's text.
            "approval_id": v.approval_id.as_deref().or(call.approval.as_deref())
                .map(|a| secret_egress::scrub_text(self, s, a, true).into_owned()),
            "legs": s.legs(),
            "scan_findings": findings,
        });
        self.append_scrubbed(s, &call.tool, decision, v.reason.code(), detail)
    }
}
