//! The checks of a tool call, one module each, run in the order of [`PIPELINE`] by [`run`]:
//! the first check that decides ends it (a deny, a hold or an approval); a call that passes
//! every check is allowed. [`PIPELINE`] is the one place the order is written; the list in
//! docs/POLICY.md ("The order of checks") mirrors it, and a test holds the two together.
//!
//! Checks have no side effects. What a check counts or marks once a call is allowed (rate
//! windows, budget, action counts, Rule-of-Two legs, untrusted text for the echo check,
//! approvals) is updated by a function next to the check, called by `Engine::call`.
use std::{borrow::Cow, collections::HashMap, mem};

use serde_json::Value;

use super::{
    Decision, Engine, Reason, Session, ToolCall, Verdict, registry::Tool, secrets::strings_ref,
};

pub(super) mod approval_hold;
pub(super) mod arguments;
pub(super) mod credentials;
pub(super) mod description_scan;
pub(super) mod fingerprint;
pub(super) mod limits;
pub(super) mod registry;
pub(super) mod rule_of_two;
pub(super) mod rules;
pub(super) mod scopes;
pub(super) mod secret_egress;
pub(super) mod session;
pub(super) mod suspicion;
pub(super) mod untrusted_echo;

/// What a check says: `Ok` = on to the next check; `Err` = this verdict ends the pipeline.
pub(super) type Step = Result<(), Verdict>;

type Check = fn(&mut Ctx<'_, '_>) -> Step;

/// Every check of a call, in the order they run (names as docs/POLICY.md lists them).
pub(super) const PIPELINE: [(&str, Check); 13] = [
    ("session", session::check),
    ("registry", registry::check),
    ("fingerprint", fingerprint::check),
    ("description scan", description_scan::check),
    ("scopes", scopes::check),
    ("arguments", arguments::check),
    ("limits", limits::check),
    ("untrusted echo", untrusted_echo::check),
    ("secrets", secret_egress::check),
    ("Rule of Two", rule_of_two::check),
    ("rules", rules::check),
    ("credentials", credentials::check),
    ("approval", approval_hold::check),
];

/// What the checks of one call share.
pub(super) struct Ctx<'e, 'c> {
    engine: &'e Engine,
    session: &'e Session,
    call: &'c ToolCall,
    /// The time of the call: given by `Engine::call`, read from the clock on first use
    /// otherwise.
    now: Option<u64>,
    /// The registry; `None` when its lock is poisoned.
    tools: Option<&'e HashMap<String, Tool>>,
    /// The tool called, once the registry check found it.
    tool: Option<&'e Tool>,
    /// Arguments with path values canonicalised: what rules see and what the handler gets
    /// (borrowed from the call when nothing was canonicalised).
    args: Cow<'c, Value>,
    /// Every string of the arguments as the model sent them (object keys and numbers too).
    texts: Option<Vec<Cow<'c, str>>>,
    /// Why the call must be held so far (`trifecta`, `rule:ID`, `default:hold`).
    hold: Vec<String>,
    /// Ids of the policy rules that matched.
    matched: Vec<String>,
    /// The message of the deciding hold or deny rule, when it has one.
    rule_msg: Option<String>,
    /// A command line of the arguments connects to a URL (curl): the call sends data out
    /// whatever its tool's labels say.
    line_sends_out: bool,
}

impl<'e, 'c> Ctx<'e, 'c> {
    /// The tool called. Only a pipeline in the wrong order could ask before the registry
    /// check found it: that denies.
    /// Whether the call sends data out: its tool is `sends_out`, or a command line of its
    /// arguments connects to a URL.
    fn sends_out(&self) -> Result<bool, Verdict> {
        Ok(self.tool()?.has(crate::policy::Label::SendsOut) || self.line_sends_out)
    }

    fn tool(&self) -> Result<&'e Tool, Verdict> {
        self.tool.ok_or_else(|| {
            Verdict::deny(
                Reason::CheckError,
                "internal: a check ran before the registry check",
            )
        })
    }

    fn now(&mut self) -> u64 {
        let clock = &self.engine.clock;
        *self.now.get_or_insert_with(|| clock.now_ms())
    }

    /// A deny, naming the rules matched so far.
    fn deny(&mut self, reason: Reason, message: impl Into<String>) -> Verdict {
        let mut v = Verdict::deny(reason, message);
        v.matched_rules = mem::take(&mut self.matched);
        v
    }

    /// The allow verdict of a call that passed every check.
    fn allow(&mut self) -> Result<Verdict, Verdict> {
        let name = &self.tool()?.def.name;
        Ok(Verdict {
            decision: Decision::Allow,
            reason: Reason::Allowed,
            message: format!("`{name}` allowed"),
            matched_rules: mem::take(&mut self.matched),
            hold_reasons: mem::take(&mut self.hold),
            approval_id: None,
            would_deny: None,
        })
    }

    /// The strings of the arguments, collected on first use.
    fn arg_texts(&mut self) -> &[Cow<'c, str>] {
        let call = self.call;
        self.texts.get_or_insert_with(|| {
            let mut texts = Vec::new();
            strings_ref(&call.arguments, &mut texts);
            texts
        })
    }
}

/// Runs [`PIPELINE`] on a call at time `now` (None: read the clock when a check needs it):
/// the verdict, and the arguments as checked. No side effects.
pub(super) fn run<'c>(
    engine: &Engine,
    session: &Session,
    call: &'c ToolCall,
    now: Option<u64>,
) -> (Verdict, Cow<'c, Value>) {
    let tools = engine.tools.read();
    let mut cx = Ctx {
        engine,
        session,
        call,
        now,
        tools: tools.as_deref().ok(),
        tool: None,
        args: Cow::Borrowed(&call.arguments),
        texts: None,
        hold: Vec::new(),
        matched: Vec::new(),
        rule_msg: None,
        line_sends_out: false,
    };
    let verdict = match PIPELINE.iter().try_for_each(|(_, check)| check(&mut cx)) {
        Ok(()) => cx.allow().unwrap_or_else(|v| v),
        Err(v) => v,
    };
    (verdict, cx.args)
}

/// An argument by name, or by JSON Pointer (`/payment/amount`) for nested values.
fn arg_ref<'a>(args: &'a Value, key: &str) -> Option<&'a Value> {
    if key.starts_with('/') {
        args.pointer(key)
    } else {
        args.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::PIPELINE;

    /// docs/POLICY.md lists the checks in the order of [`PIPELINE`], one bold name each.
    #[test]
    fn policy_doc_lists_the_pipeline_in_order() {
        let doc = include_str!("../../../../docs/POLICY.md");
        let start = doc.find("## The order of checks").expect("section");
        let section = &doc[start..];
        let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
        let names: Vec<&str> = section[..end]
            .lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .filter_map(|l| l.split("**").nth(1))
            .collect();
        let want: Vec<&str> = PIPELINE.iter().map(|(n, _)| *n).collect();
        assert_eq!(names[..want.len()], want[..], "{names:?}");
        assert_eq!(
            names.len(),
            want.len() + 1,
            "then the audit record: {names:?}"
        );
    }
}
