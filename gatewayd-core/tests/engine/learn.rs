//! Learn mode through the real engine: a call the checks refuse or hold runs, its verdict is
//! `allow`/`learned` with what the checks said, and its one record is `would_deny` with the
//! refusal's reason code, message and matched rules; protected paths and names, secret
//! egress, rug pulls and the Rule of Two stay refused unless learn is unsafe; what no policy
//! change allows (gatewayd's own files, an audit log that cannot be written) stays refused
//! even then.
use crate::support;

use gatewayd_core::engine::{Decision, Learn, Outcome, Reason, Session, ToolDefinition};
use serde_json::{Value, json};
use support::*;

fn learning(mode: Learn, edit: impl FnOnce(&mut Value)) -> Fx {
    let mut f = fx_with(edit);
    f.engine.set_learn(mode);
    f
}

/// A record: decision, reason code, detail.
type Rec = (Decision, &'static str, Value);

/// The last record.
fn last(f: &Fx) -> Rec {
    let a = f.audit.lock().unwrap();
    let r = a.records.last().expect("a record");
    (r.decision, r.reason, r.detail.clone())
}

/// A call, whether it ran, and its record.
type Called = ((Outcome, bool), Rec);

fn call(f: &Fx, s: &mut Session, tool: &str, args: Value) -> Called {
    let r = f.call(s, tool, args);
    (r, last(f))
}

/// Asserts the call ran under learn mode with `reason` as what the checks said, and that its
/// record is `would_deny` of `reason` with the refusal's message.
#[track_caller]
fn learned((r, rec): Called, reason: Reason) {
    let o = allowed(r);
    assert_eq!(o.verdict.reason, Reason::Learned, "{}", o.verdict.message);
    let w = o.verdict.would_deny.expect("would_deny");
    assert_eq!(w.reason, reason, "{}", w.message);
    let (decision, code, detail) = rec;
    assert_eq!((decision, code), (Decision::WouldDeny, reason.code()));
    assert_eq!(detail["message"], json!(w.message));
}

/// The calls learn mode lets through, each with the code the checks give it.
fn learnable(f: &Fx, s: &mut Session) -> Vec<(Called, Reason)> {
    // First: once the learned calls below mark both legs, the Rule of Two holds it too.
    vec![
        (
            call(f, s, "publish_post", json!({"title": "t"})),
            Reason::ApprovalRequired,
        ),
        (call(f, s, "nope", json!({"a": 1})), Reason::NotAllowlisted),
        (
            call(f, s, "read_file", json!({"path": "/etc/hostname"})),
            Reason::Sandbox,
        ),
        (
            call(f, s, "fetch_url", json!({"url": "https://evil.test/"})),
            Reason::Sandbox,
        ),
        (
            call(f, s, "run_sh", json!({"command": "cat $(echo notes.txt)"})),
            Reason::Shell,
        ),
        (
            call(f, s, "transfer", json!({"payee": "grocer", "amount": 1000})),
            Reason::ArgRule,
        ),
    ]
}

#[test]
fn a_refused_or_held_call_runs_and_is_recorded_would_deny() {
    let f = learning(Learn::On, |_| {});
    let mut s = session();
    let calls = learnable(&f, &mut s);
    for (c, reason) in calls {
        learned(c, reason);
    }
    // A rule that matched is recorded with the refusal; the held call got no approval id.
    let f = learning(Learn::On, |_| {});
    let o = allowed(f.call(&mut session(), "publish_post", json!({"title": "t"})));
    assert!(o.verdict.approval_id.is_none());
    assert!(f.engine.pending().is_empty());
    let (_, _, detail) = last(&f);
    assert!(!detail["hold_reasons"].as_array().unwrap().is_empty());
    // A tool the policy does not list: its output is untrusted (fenced).
    let o = allowed(f.call(&mut session(), "nope", json!({})));
    let out = o.output.unwrap().to_string();
    assert!(out.contains("nope") && out != r#"{"ok":true}"#, "{out}");
}

#[test]
fn without_learn_the_same_calls_are_refused() {
    let f = fx();
    let mut s = session();
    for (((o, ran), rec), reason) in learnable(&f, &mut s) {
        assert!(!ran && !o.verdict.is_allow(), "{reason:?}");
        assert_eq!(o.verdict.reason, reason);
        assert!(o.verdict.would_deny.is_none());
        assert_eq!((rec.0, rec.1), (o.verdict.decision, reason.code()));
    }
}

/// The refusals learn keeps unless unsafe, each with its code (and the decision: the Rule of
/// Two in hold mode holds).
fn guarded(f: &Fx) -> Vec<(Called, Decision, Reason)> {
    let mut s = session();
    let mut out = vec![
        (
            call(
                f,
                &mut s,
                "read_file",
                json!({"path": "../home/.ssh/id_rsa"}),
            ),
            Decision::Deny,
            Reason::Sandbox,
        ),
        (
            call(f, &mut s, "read_file", json!({"path": ".env"})),
            Decision::Deny,
            Reason::Sandbox,
        ),
        (
            call(
                f,
                &mut s,
                "http_post",
                json!({"url": "https://hooks.corp.test/x", "body": DEPLOY_KEY}),
            ),
            Decision::Deny,
            Reason::SecretEgress,
        ),
    ];
    let _ = f.engine.register(&ToolDefinition {
        name: "weather".into(),
        description: "Current weather for a city. Updated.".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    });
    out.push((
        call(f, &mut session(), "weather", json!({"city": "Oslo"})),
        Decision::Deny,
        Reason::RugPull,
    ));
    let mut s = session();
    f.call(&mut s, "read_inbox", json!({}));
    let post = json!({"url": "https://hooks.corp.test/x", "body": "hi"});
    let (decision, reason) =
        if f.engine.policy().trifecta == gatewayd_core::policy::TrifectaMode::Deny {
            (Decision::Deny, Reason::Trifecta)
        } else {
            (Decision::Hold, Reason::ApprovalRequired)
        };
    out.push((call(f, &mut s, "http_post", post), decision, reason));
    out
}

#[test]
fn protected_paths_secrets_rug_pulls_and_the_rule_of_two_stay_enforced() {
    for trifecta in ["deny", "hold"] {
        let f = learning(Learn::On, |p| p["trifecta"] = json!(trifecta));
        for ((r, rec), decision, reason) in guarded(&f) {
            let o = refused(r, decision, reason);
            assert!(o.verdict.would_deny.is_none());
            let (d, code, _) = rec;
            assert_eq!(
                (d, code),
                (decision, reason.code()),
                "{}",
                o.verdict.message
            );
        }
    }
}

#[test]
fn learn_unsafe_lets_them_through_as_would_deny() {
    for trifecta in ["deny", "hold"] {
        let f = learning(Learn::Unsafe, |p| p["trifecta"] = json!(trifecta));
        for (c, _, reason) in guarded(&f) {
            learned(c, reason);
        }
    }
}

/// What no policy change could allow stays refused even when unsafe: gatewayd's own files,
/// and a call whose record cannot be written.
#[test]
fn gatewayd_own_files_and_the_audit_stay_enforced_even_when_unsafe() {
    let mut f = learning(Learn::Unsafe, |_| {});
    let own = f.root.join("notes.txt");
    f.engine.protect(&own);
    let mut s = session();
    let path = own.to_string_lossy().into_owned();
    denied(
        f.call(&mut s, "read_file", json!({"path": path})),
        Reason::Sandbox,
    );
    assert_eq!(last(&f).0, Decision::Deny);
    f.audit.lock().unwrap().fail = true;
    denied(f.call(&mut s, "nope", json!({})), Reason::AuditUnavailable);
}
