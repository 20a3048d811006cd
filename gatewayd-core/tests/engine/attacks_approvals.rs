//! Attacks on approvals: replayed, changed, expired, foreign, rejected, unknown and not yet
//! given approvals, and approvals that do not cover a new reason. Every refusal asserts the
//! decision, the reason code, and that the tool's handler never ran.
use crate::support;

use gatewayd_core::engine::{Decision, Reason, Session, ToolCall};
use serde_json::json;
use support::*;

// ---- approvals ----

fn held_transfer(f: &Fx, s: &mut Session, amount: f64) -> String {
    let o = refused(
        f.call(
            s,
            "transfer",
            json!({"payee": "landlord", "amount": amount}),
        ),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    o.verdict.approval_id.unwrap()
}

#[test]
fn approval_replay() {
    let f = fx();
    let mut s = session();
    let id = held_transfer(&f, &mut s, 80.0);
    f.engine.approve(&id).unwrap();
    let call =
        ToolCall::new("transfer", json!({"payee": "landlord", "amount": 80.0})).with_approval(&id);
    allowed(f.call_full(&mut s, call.clone(), json!({"ok": true})));
    denied(
        f.call_full(&mut s, call, json!({"ok": true})),
        Reason::ApprovalDenied,
    );
}

/// A host's hook cannot carry an approval id: the same call, repeated without one in the
/// same session, runs once under the approval a person gave it; a changed call, another
/// session, a rejected or a spent approval do not.
#[test]
fn approved_call_repeated_without_its_id_runs_once() {
    let f = fx();
    let mut s = session();
    let args = json!({"payee": "landlord", "amount": 80.0});
    let id = held_transfer(&f, &mut s, 80.0);
    let mut other = Session::new("s2", "alice", ALL_SCOPES);
    f.engine.approve(&id).unwrap();
    refused(
        f.call(&mut other, "transfer", args.clone()),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    refused(
        f.call(
            &mut s,
            "transfer",
            json!({"payee": "landlord", "amount": 81.0}),
        ),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    let o = allowed(f.call(&mut s, "transfer", args.clone()));
    assert_eq!(o.verdict.approval_id.as_deref(), Some(id.as_str()));
    let again = refused(
        f.call(&mut s, "transfer", args.clone()),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    assert_ne!(
        again.verdict.approval_id.as_deref(),
        Some(id.as_str()),
        "spent"
    );
    let rejected = again.verdict.approval_id.unwrap();
    f.engine.reject(&rejected).unwrap();
    refused(
        f.call(&mut s, "transfer", args),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
}

#[test]
fn approval_with_changed_arguments() {
    let f = fx();
    let mut s = session();
    let id = held_transfer(&f, &mut s, 80.0);
    f.engine.approve(&id).unwrap();
    let call =
        ToolCall::new("transfer", json!({"payee": "landlord", "amount": 99.0})).with_approval(&id);
    denied(f.call_full(&mut s, call, json!({})), Reason::ApprovalDenied);
    let call =
        ToolCall::new("transfer", json!({"payee": "grocer", "amount": 80.0})).with_approval(&id);
    denied(f.call_full(&mut s, call, json!({})), Reason::ApprovalDenied);
}

#[test]
fn expired_approval() {
    let f = fx();
    let mut s = session();
    let id = held_transfer(&f, &mut s, 80.0);
    f.engine.approve(&id).unwrap();
    f.clock.advance_ms(15 * 60 * 1000 + 1);
    let call =
        ToolCall::new("transfer", json!({"payee": "landlord", "amount": 80.0})).with_approval(&id);
    denied(f.call_full(&mut s, call, json!({})), Reason::ApprovalDenied);
    // approving after the TTL is refused too
    let id2 = held_transfer(&f, &mut s, 70.0);
    f.clock.advance_ms(16 * 60 * 1000);
    assert!(f.engine.approve(&id2).is_err());
}

#[test]
fn approval_from_another_session_rejected_or_unknown() {
    let f = fx();
    let mut s = session();
    let id = held_transfer(&f, &mut s, 80.0);
    f.engine.approve(&id).unwrap();
    let mut other = Session::new("s2", "alice", ALL_SCOPES);
    let call =
        ToolCall::new("transfer", json!({"payee": "landlord", "amount": 80.0})).with_approval(&id);
    denied(
        f.call_full(&mut other, call, json!({})),
        Reason::ApprovalDenied,
    );

    let id = held_transfer(&f, &mut s, 60.0);
    f.engine.reject(&id).unwrap();
    let call =
        ToolCall::new("transfer", json!({"payee": "landlord", "amount": 60.0})).with_approval(&id);
    denied(f.call_full(&mut s, call, json!({})), Reason::ApprovalDenied);

    let call = ToolCall::new("transfer", json!({"payee": "landlord", "amount": 60.0}))
        .with_approval("00ff");
    denied(f.call_full(&mut s, call, json!({})), Reason::ApprovalDenied);
}

#[test]
fn approval_not_yet_given_stays_held() {
    let f = fx();
    let mut s = session();
    let id = held_transfer(&f, &mut s, 80.0);
    let call =
        ToolCall::new("transfer", json!({"payee": "landlord", "amount": 80.0})).with_approval(&id);
    let o = refused(
        f.call_full(&mut s, call, json!({})),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    assert_eq!(o.verdict.approval_id.as_deref(), Some(id.as_str()));
}

#[test]
fn approval_for_other_reasons_does_not_cover_new_ones() {
    let f = fx();
    let mut s = session();
    let args = json!({"title": "t", "body": "b"});
    let o = refused(
        f.call(&mut s, "publish_post", args.clone()),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    let id = o.verdict.approval_id.unwrap();
    f.engine.approve(&id).unwrap();
    // the session now also trips the Rule of Two: the approval was not given for that
    allowed(f.call_out(&mut s, "read_inbox", json!({}), json!("hi")));
    let call = ToolCall::new("publish_post", args).with_approval(&id);
    denied(f.call_full(&mut s, call, json!({})), Reason::ApprovalDenied);
}
