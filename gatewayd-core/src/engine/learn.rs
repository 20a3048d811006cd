//! Learn mode (docs/POLICY.md, "Learn mode"): a call the checks would deny or hold is allowed
//! instead, and its one audit record is `would_deny` with the refusal's reason code, message
//! and matched rules, for `gatewayd policy suggest` to draft the policy from. What guards a
//! secret or the session itself stays enforced (see [`stays_enforced`]) unless the operator
//! chose [`Learn::Unsafe`]; what no policy change could allow is never learned.
use super::{Engine, Reason, ToolCall, Verdict, checks::suspicion};

/// Whether the engine learns, and how far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Learn {
    /// Refusals are refusals (the default).
    #[default]
    Off,
    /// Refusals become `would_deny`, except protected paths and names, secret egress, rug
    /// pulls and the Rule of Two.
    On,
    /// Those too (`--learn-unsafe`).
    Unsafe,
}

impl Learn {
    /// Whether refusals are learned at all.
    pub fn is_on(self) -> bool {
        self != Learn::Off
    }

    /// The `learn` object of a session's first record: the gateway learns; whether the
    /// kernel layer does (`gatewayd run` at tier 2; elsewhere its refusals stay refusals,
    /// recorded `deny`); whether learn is unsafe.
    pub fn detail(self, kernel: bool) -> serde_json::Value {
        serde_json::json!({
            "gateway": self.is_on(),
            "kernel": kernel && self.is_on(),
            "unsafe": self == Learn::Unsafe,
        })
    }
}

/// Why learn mode keeps a refusal, when it does: always for what no policy change allows (an
/// audit record that cannot be written, a check that cannot be evaluated, a person's
/// rejected approval, gatewayd's own files); unless [`Learn::Unsafe`], also for protected
/// paths and names, secret egress, rug pulls and the Rule of Two.
pub(super) fn stays_enforced(engine: &Engine, call: &ToolCall, v: &Verdict) -> bool {
    let unsafe_too = engine.learn == Learn::Unsafe;
    match v.reason {
        Reason::AuditUnavailable | Reason::CheckError | Reason::ApprovalDenied => true,
        Reason::RugPull | Reason::SecretEgress | Reason::Trifecta => !unsafe_too,
        Reason::Sandbox | Reason::Shell => {
            engine.sandbox.names_own_path(&v.message)
                || (!unsafe_too && protected(engine, call, &v.message))
        }
        Reason::ApprovalRequired => !unsafe_too && v.hold_reasons.iter().any(|h| h == "trifecta"),
        // A tool the policy does not list has no path rules: any string of its arguments
        // that names a protected path or name (or gatewayd's own file) keeps it refused.
        Reason::NotAllowlisted => {
            let (own, protected) = reaches(engine, call);
            own || (!unsafe_too && protected)
        }
        _ => false,
    }
}

/// Whether a string of the call's arguments, taken as a path, is or lies in one of
/// gatewayd's own files, and whether in a protected path or has a protected name.
fn reaches(engine: &Engine, call: &ToolCall) -> (bool, bool) {
    let sb = &engine.sandbox;
    let mut texts = Vec::new();
    super::secrets::strings_ref(&call.arguments, &mut texts);
    let paths: Vec<_> = texts.iter().filter_map(|t| sb.resolve(t).ok()).collect();
    let own = paths.iter().any(|p| sb.own_hit(p));
    let protected = paths.iter().any(|p| {
        sb.protected_hit(p).is_some()
            || (sb.protected_name(p).is_some() && std::fs::symlink_metadata(&p.path).is_ok())
    });
    (own, protected)
}

/// A `sandbox` or `shell` refusal of a protected path or name: by its message (what the
/// sandbox and the shell check say of one), or by the paths of its arguments.
fn protected(engine: &Engine, call: &ToolCall, message: &str) -> bool {
    message.contains("protected path")
        || message.contains("protected name")
        || suspicion::touches_protected(engine, call)
}

/// In learn mode, a refusal `v` of `call` that learn lets through: `v` becomes the allow
/// ([`Verdict::learned`]) and the refusal is returned, for its `would_deny` record.
pub(super) fn let_through(engine: &Engine, call: &ToolCall, v: &mut Verdict) -> Option<Verdict> {
    if !engine.learn.is_on() || v.is_allow() || stays_enforced(engine, call, v) {
        return None;
    }
    let allow = Verdict::learned(&call.tool, v);
    Some(std::mem::replace(v, allow))
}
