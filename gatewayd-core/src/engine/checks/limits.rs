//! Rate, budget and action limits (`rate_limit`, `budget`, `action_limit`). Only allowed calls
//! are counted ([`count`], after the audit record): a denied call costs nothing.
use super::{Ctx, Step};
use crate::{
    engine::{Reason, Session, registry::Tool, session::RateKey, with_next},
    policy::{Policy, RateLimit, glob_match_str},
};

/// The rate-limit entries that cover `tool`: (the session's key of the entry, entry, window
/// in ms). Keyed by tool glob and window, so that a policy reload that keeps an entry keeps
/// its counts (docs/POLICY.md, "Reloading the policy").
fn rates<'p>(
    policy: &'p Policy,
    tool: &'p str,
) -> impl Iterator<Item = (RateKey, &'p RateLimit, u64)> {
    policy
        .limits
        .rate
        .iter()
        .filter(move |r| glob_match_str(&r.tool, tool))
        .map(|r| {
            let window = r.window_s.saturating_mul(1000);
            ((r.tool.clone(), window), r, window)
        })
}

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    let tool = cx.tool()?;
    let (s, policy) = (cx.session, &*cx.engine.policy);
    let name = &tool.def.name;
    for (i, r, window) in rates(policy, name) {
        let now = cx.now();
        let recent = s.recent_calls(&i, now, window);
        if recent.count >= r.max as usize {
            let wait = recent
                .first_ms
                .map_or(0, |t| t.saturating_add(window).saturating_sub(now));
            let message = with_next(
                &format!(
                    "rate limit: at most {} calls of `{}` per {} s",
                    r.max, r.tool, r.window_s
                ),
                &format!("retry in {} s", wait.div_ceil(1000)),
            );
            return Err(cx.deny(Reason::RateLimit, message));
        }
    }
    if let Some(b) = policy
        .limits
        .budget
        .filter(|b| s.spent().saturating_add(tool.def.cost) > *b)
    {
        let message = format!(
            "session budget exhausted: {} of {b} units spent, `{name}` costs {}",
            s.spent(),
            tool.def.cost
        );
        return Err(cx.deny(Reason::Budget, message));
    }
    for l in &tool.def.labels {
        let done = s.actions(*l);
        if let Some(max) = policy.limits.actions.get(l).filter(|m| done >= **m) {
            let message = format!(
                "at most {max} `{}` call(s) per session; the limit is reached",
                l.as_str()
            );
            return Err(cx.deny(Reason::ActionLimit, message));
        }
    }
    Ok(())
}

/// Counts an allowed call: its rate windows, its cost, its labels.
pub(in crate::engine) fn count(policy: &Policy, s: &mut Session, tool: &Tool, now: u64) {
    let mut counted: Vec<RateKey> = Vec::new();
    for (key, _, window) in rates(policy, &tool.def.name) {
        // Two entries of one glob and window (different `max`) count the same calls once.
        if !counted.contains(&key) {
            counted.push(key.clone());
            s.count_call(key, now, window);
        }
    }
    s.spend(tool.def.cost);
    for l in &tool.def.labels {
        s.count_action(*l);
    }
}
