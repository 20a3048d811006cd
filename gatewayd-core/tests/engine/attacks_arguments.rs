//! Attacks through a call's scopes and arguments: missing scopes, argument rules (caps, enums,
//! deny rules, nested arguments) and the rate, budget and action limits. Every refusal asserts
//! the decision, the reason code, and that the tool's handler never ran.
use crate::support;

use gatewayd_core::engine::{Decision, Reason, Session};
use serde_json::json;
use support::*;

// ---- scopes and arguments ----

#[test]
fn missing_scope() {
    let f = fx();
    let mut s = Session::new("s1", "bob", &["files:read"]);
    denied(
        f.call(&mut s, "transfer", json!({"payee": "grocer", "amount": 5})),
        Reason::MissingScope,
    );
}

#[test]
fn delete_with_read_scope_only() {
    let f = fx();
    let mut s = Session::new("s1", "bob", &["files:read", "files:write"]);
    denied(
        f.call(&mut s, "delete_file", json!({"path": "out/old.txt"})),
        Reason::MissingScope,
    );
}

#[test]
fn amount_over_cap_and_just_over() {
    let f = fx();
    let mut s = session();
    for amount in [json!(150), json!(100.01), json!(1e9), json!(-5), json!(0)] {
        denied(
            f.call(
                &mut s,
                "transfer",
                json!({"payee": "grocer", "amount": amount}),
            ),
            Reason::ArgRule,
        );
    }
    // a number smuggled as a string fails the schema
    denied(
        f.call(
            &mut s,
            "transfer",
            json!({"payee": "grocer", "amount": "99"}),
        ),
        Reason::ArgRule,
    );
    // an unknown payee fails the enum
    denied(
        f.call(
            &mut s,
            "transfer",
            json!({"payee": "attacker", "amount": 5}),
        ),
        Reason::ArgRule,
    );
}

#[test]
fn arguments_that_are_not_an_object() {
    let f = fx();
    let mut s = session();
    denied(f.call(&mut s, "weather", json!("Oslo")), Reason::ArgRule);
    denied(
        f.call(
            &mut s,
            "read_file",
            json!({"path": "notes.txt", "extra": 1}),
        ),
        Reason::ArgRule,
    );
    denied(f.call(&mut s, "read_file", json!({})), Reason::ArgRule);
}

#[test]
fn nested_arguments_are_ruled_too() {
    let f = fx();
    let mut s = session();
    let pay = |iban: &str, amount: f64| json!({"payment": {"iban": iban, "amount": amount}});
    denied(
        f.call(&mut s, "pay_batch", pay("DE89370400440532013000", 100.5)),
        Reason::ArgRule,
    );
    denied(
        f.call(&mut s, "pay_batch", pay("de89 3704", 10.0)),
        Reason::ArgRule,
    );
    let o = denied(
        f.call(&mut s, "pay_batch", pay("XX89370400440532013000", 10.0)),
        Reason::ArgRule,
    );
    assert_eq!(
        o.verdict.matched_rules,
        vec!["no-sanctioned-iban".to_string()]
    );
    denied(
        f.call(
            &mut s,
            "pay_batch",
            json!({"payment": {"iban": "DE89370400440532013000"}}),
        ),
        Reason::ArgRule,
    );
}

// ---- rules ----

#[test]
fn rule_deny_and_mixed_recipients() {
    let f = fx();
    let mut s = session();
    let o = denied(
        f.call(
            &mut s,
            "send_email",
            json!({"to": ["x@pastebin.test"], "subject": "s", "body": "b"}),
        ),
        Reason::ArgRule,
    );
    assert!(o.verdict.matched_rules.contains(&"no-paste".to_string()));
    // one internal and one external recipient: the allow rule needs every recipient internal
    refused(
        f.call(
            &mut s,
            "send_email",
            json!({"to": ["a@corp.test", "x@evil.test"], "subject": "s", "body": "b"}),
        ),
        Decision::Hold,
        Reason::ApprovalRequired,
    );
    denied(
        f.call(&mut s, "weather", json!({"city": "Atlantis"})),
        Reason::ArgRule,
    );
}

// ---- limits ----

#[test]
fn rate_limit() {
    let f = fx();
    let mut s = session();
    for _ in 0..3 {
        allowed(f.call(&mut s, "weather", json!({"city": "Oslo"})));
    }
    denied(
        f.call(&mut s, "weather", json!({"city": "Oslo"})),
        Reason::RateLimit,
    );
    f.clock.advance_ms(59_000);
    denied(
        f.call(&mut s, "weather", json!({"city": "Oslo"})),
        Reason::RateLimit,
    );
}

#[test]
fn budget() {
    let f = fx();
    let mut s = session();
    allowed(f.call(&mut s, "expensive_report", json!({})));
    allowed(f.call(&mut s, "expensive_report", json!({})));
    denied(
        f.call(&mut s, "expensive_report", json!({})),
        Reason::Budget,
    );
    assert_eq!(s.spent(), 80, "a denied call costs nothing");
}

#[test]
fn action_limit() {
    let f = fx();
    let mut s = session();
    for p in ["out/a.txt", "out/b.txt", "out/c.txt"] {
        allowed(f.call(&mut s, "delete_file", json!({"path": p})));
    }
    denied(
        f.call(&mut s, "delete_file", json!({"path": "out/d.txt"})),
        Reason::ActionLimit,
    );
    // the label counts across tools
    denied(
        f.call(&mut s, "transfer", json!({"payee": "grocer", "amount": 5})),
        Reason::ActionLimit,
    );
}
