//! A call that anything asked to hold waits for a person (`approval_required`); repeated with
//! the id of an approval, it runs when that approval is granted, unexpired, and for exactly
//! this session, tool, canonical arguments and hold reasons (`approved`), and is refused
//! otherwise (`approval_denied`). Repeated without an id (a host's hook carries none), it
//! runs when a person granted an approval for exactly that call in that session. [`settle`]
//! issues approval ids and spends approvals.
use super::{Ctx, Step};
use crate::engine::{
    Approval, ApprovalState, Decision, Engine, Reason, Session, ToolCall, Verdict, fence,
    fingerprint, with_next,
};

pub(in crate::engine) fn check(cx: &mut Ctx<'_, '_>) -> Step {
    if cx.hold.is_empty() {
        return Ok(());
    }
    let rule_msg = cx.rule_msg.take();
    let mut v = cx.allow()?;
    let name = &cx.tool()?.def.name;
    let why = format!(
        "Reasons: {}.{}",
        v.hold_reasons.join(", "),
        rule_msg.map(|m| format!(" {m}.")).unwrap_or_default()
    );
    let now = cx.now();
    let digest = fingerprint::sha256_hex(fingerprint::canonical_json(&cx.args).as_bytes());
    let approvals = cx.engine.lock_approvals();
    let Some(id) = &cx.call.approval else {
        // The same call repeated without the id (a hook cannot carry one): the approval a
        // person gave exactly this call in this session, if any.
        if let Some(id) = approvals.find(
            ApprovalState::Approved,
            &cx.session.id,
            name,
            &digest,
            &v.hold_reasons,
            now,
        ) {
            v.reason = Reason::Approved;
            v.message = format!("`{name}` allowed by approval {id}");
            v.approval_id = Some(id);
            return Err(v);
        }
        v.decision = Decision::Hold;
        v.reason = Reason::ApprovalRequired;
        v.message = format!("`{name}` is held for a person's approval. {why}");
        return Err(v);
    };
    let fail = |m: &str, v: Verdict| refused(id, m, v);
    let Some(a) = approvals.get(id) else {
        return fail("unknown, expired or already used", v);
    };
    if now > a.expires_ms {
        return fail("expired", v);
    }
    if a.session != cx.session.id
        || a.tool != *name
        || a.args_sha256 != digest
        || a.reasons != v.hold_reasons
    {
        return fail(
            "it was given for a different session, tool, arguments or reasons",
            v,
        );
    }
    match a.state {
        ApprovalState::Rejected => fail("rejected by a person", v),
        ApprovalState::Pending => {
            v.decision = Decision::Hold;
            v.reason = Reason::ApprovalRequired;
            v.approval_id = Some(id.clone());
            v.message =
                format!("`{name}` is still waiting for a person's approval (id {id}). {why}");
            Err(v)
        }
        ApprovalState::Approved => {
            v.reason = Reason::Approved;
            v.message = format!("`{name}` allowed by approval {id}");
            Err(v)
        }
    }
}

/// The refusal of a call repeated with approval `id`, for `why` (`v`: the held verdict, whose
/// rules and hold reasons it keeps).
fn refused(id: &str, why: &str, v: Verdict) -> Step {
    let next = if why.starts_with("rejected") {
        "a person refused this call: do not repeat it; ask the user how to go on"
    } else {
        "repeat the call without an approval id to be held for a new approval, or ask the user"
    };
    let mut d = Verdict::deny(
        Reason::ApprovalDenied,
        with_next(&format!("approval {id}: {why}; the call is refused"), next),
    );
    d.matched_rules = v.matched_rules;
    d.hold_reasons = v.hold_reasons;
    Err(d)
}

/// After the checks, in `Engine::call`: a held call gets an approval id (the pending one of
/// the same call, or a new one, which keeps the canonical `arguments` for the person to see;
/// no randomness = `check_error`) and the message names it; an
/// approval that allowed the call is spent (a second use is `approval_denied`).
pub(in crate::engine) fn settle(
    engine: &Engine,
    s: &Session,
    call: &ToolCall,
    verdict: &mut Verdict,
    arguments: &serde_json::Value,
    digest: &str,
    now: u64,
) {
    if verdict.decision == Decision::Hold && verdict.approval_id.is_none() {
        // The same call held again while its approval is pending: the same id.
        verdict.approval_id = engine.lock_approvals().find(
            ApprovalState::Pending,
            &s.id,
            &call.tool,
            digest,
            &verdict.hold_reasons,
            now,
        );
    }
    if verdict.decision == Decision::Hold && verdict.approval_id.is_none() {
        match fence::random_hex(16) {
            Ok(id) => {
                let ttl = engine.policy.approval_ttl_ms();
                engine.lock_approvals().insert(
                    Approval {
                        id: id.clone(),
                        session: s.id.clone(),
                        tool: call.tool.clone(),
                        args_sha256: digest.to_owned(),
                        arguments: arguments.clone(),
                        reasons: verdict.hold_reasons.clone(),
                        created_ms: now,
                        expires_ms: now.saturating_add(ttl),
                        state: ApprovalState::Pending,
                    },
                    now,
                );
                verdict.approval_id = Some(id);
            }
            Err(e) => *verdict = Verdict::deny(Reason::CheckError, e),
        }
    }
    if verdict.decision == Decision::Hold
        && let Some(id) = &verdict.approval_id
        && verdict.next().is_none()
    {
        let what = if verdict.message.contains(id.as_str()) {
            verdict.message.clone()
        } else {
            format!("{} Approval id: {id}.", verdict.message)
        };
        verdict.message = with_next(
            &what,
            &format!(
                "ask the user to approve it (`gatewayd approvals approve {id}`), then repeat the same call with approval id {id}"
            ),
        );
    }
    if verdict.reason == Reason::Approved {
        let id = (call.approval.as_deref())
            .or(verdict.approval_id.as_deref())
            .unwrap_or_default();
        if engine.lock_approvals().take(id).is_none() {
            *verdict = Verdict::deny(Reason::ApprovalDenied, "the approval was already used");
        }
    }
}
