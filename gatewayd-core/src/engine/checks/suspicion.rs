//! Suspicion (docs/POLICY.md, "Suspicion"): a denied attempt on a protected path or a
//! registered secret counts toward the Rule of Two, as the policy's `suspicion` says. An
//! injected agent that tries `cat ~/.ssh/id_rsa` and fails is not trusted with egress
//! afterwards.
//!
//! This is the state update of the arguments check (`sandbox`, `shell` denials of a path that
//! is or lies in a protected path) and of the secrets check (`secret_egress`), called by
//! `Engine::call` after the denial's audit record. Kernel denials of protected files reach
//! [`apply`] through the daemon (`Gateway::note_kernel_denial`).
use serde_json::Value;

use super::arg_ref;
use crate::{
    engine::{Engine, Reason, Session, ToolCall, Verdict, sandbox::SandboxView},
    policy::SuspicionMode,
    shell,
};

/// After a denied call: if it was an attempt on a protected path or a secret, apply the
/// policy's suspicion mode to the session. Returns whether the session's legs changed.
pub(in crate::engine) fn after_denial(
    engine: &Engine,
    s: &mut Session,
    call: &ToolCall,
    verdict: &Verdict,
) -> bool {
    let attempt = match verdict.reason {
        Reason::SecretEgress => true,
        Reason::Sandbox | Reason::Shell => touches_protected(engine, call),
        _ => false,
    };
    attempt && apply(engine.policy.suspicion, s)
}

/// Applies a suspicion mode to a session: `private` sets the private leg, `lockdown` both
/// legs (the session is tripped), `off` nothing. Returns whether the legs changed.
pub(in crate::engine) fn apply(mode: SuspicionMode, s: &mut Session) -> bool {
    let before = s.legs();
    match mode {
        SuspicionMode::Private => s.mark_private(),
        SuspicionMode::Lockdown => {
            s.mark_private();
            s.mark_untrusted();
        }
        SuspicionMode::Off => {}
    }
    s.legs() != before
}

/// Whether a path argument of the call, or a file a command-line argument reads, writes or
/// walks from, is or lies in a protected path (also through a symlink or a hard link). A walk
/// or a write that merely contains a protected path below it does not count.
pub(in crate::engine) fn touches_protected(engine: &Engine, call: &ToolCall) -> bool {
    let tools = engine
        .tools
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(tool) = tools.get(&call.tool) else {
        return false;
    };
    let sb = &engine.sandbox;
    tool.args.iter().any(|(name, c)| {
        let Some(v) = arg_ref(&call.arguments, name) else {
            return false;
        };
        let values: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            x => vec![x],
        };
        values.into_iter().filter_map(Value::as_str).any(|text| {
            if c.rule.path.is_some() {
                is_protected(sb, text)
            } else if let Some(rule) = &c.rule.shell {
                command_touches_protected(sb, text, rule.through_shell)
            } else {
                false
            }
        })
    })
}

fn is_protected(sb: &SandboxView, raw: &str) -> bool {
    sb.resolve(raw)
        .is_ok_and(|real| sb.protected_hit(&real).is_some())
}

/// A line refused for shell metacharacters (`ls; cat .env`) is looked at as the words it
/// would be without a shell.
fn command_touches_protected(sb: &SandboxView, line: &str, through_shell: bool) -> bool {
    let Ok(argv) = shell::split(line, through_shell).or_else(|_| shell::split(line, false)) else {
        return false;
    };
    let Ok(a) = shell::analyze(&argv) else {
        return false;
    };
    a.reads
        .iter()
        .chain(&a.writes)
        .chain(&a.recursive_roots)
        .any(|p| is_protected(sb, &p.to_string_lossy()))
}
