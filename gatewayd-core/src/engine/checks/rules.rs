//! Policy rules: of the rules whose tool glob and conditions match, the most restrictive
//! decision wins (deny > hold > allow; a deny is `arg_rule`); with no matching rule, the
//! tool's default. Conditions see the canonicalised arguments.
use super::{Ctx, Step, arg_ref};
use crate::{
    engine::{EngineError, Reason, args, with_next},
    policy::{DefaultDecision, Policy, Rule, RuleDecision},
};

/// A policy rule with its conditions compiled.
pub(in crate::engine) struct CRule {
    rule: Rule,
    when: Vec<(String, args::CCond)>,
}

/// Every rule of the policy, compiled, in policy order.
pub(in crate::engine) fn compile(policy: &Policy) -> Result<Vec<CRule>, EngineError> {
    policy
        .rules
        .iter()
        .map(|r| {
            let when = r
                .when
                .iter()
                .map(|(k, c)| args::CCond::new(c).map(|c| (k.clone(), c)))
                .collect::<Result<_, _>>()
                .map_err(|reason| EngineError::RuleCondition {
                    rule: r.id.clone(),
                    reason,
                })?;
            Ok(CRule {
                rule: r.clone(),
                when,
            })
        })
        .collect()
}

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    let engine = cx.engine;
    let mut worst: Option<&CRule> = None;
    for r in tool.rules.iter().filter_map(|&i| engine.rules.get(i)) {
        let all = r.rule.decision == RuleDecision::Allow;
        if r.when
            .iter()
            .all(|(k, c)| c.matches(arg_ref(&cx.args, k), all))
        {
            cx.matched.push(r.rule.id.clone());
            if worst.is_none_or(|w| r.rule.decision > w.rule.decision) {
                worst = Some(r);
            }
            if r.rule.decision == RuleDecision::Hold {
                cx.hold.push(format!("rule:{}", r.rule.id));
            }
        }
    }
    cx.rule_msg = worst
        .filter(|w| w.rule.decision != RuleDecision::Allow)
        .and_then(|w| Some(format!("{} (rule {})", w.rule.message.as_ref()?, w.rule.id)));
    match worst.map(|w| (w.rule.decision, &w.rule.id)) {
        Some((RuleDecision::Deny, id)) => {
            let what = cx
                .rule_msg
                .clone()
                .unwrap_or_else(|| format!("refused by policy rule `{id}`"));
            let message = with_next(
                &what,
                "do not repeat the call with these arguments; if the task needs it, ask the user",
            );
            Err(cx.deny(Reason::ArgRule, message))
        }
        None if tool.def.default == DefaultDecision::Hold => {
            cx.hold.push("default:hold".into());
            Ok(())
        }
        _ => Ok(()),
    }
}
