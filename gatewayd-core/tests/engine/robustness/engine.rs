//! Robustness of the engine: random tool-call arguments for every tool of the fixture policy
//! (`Engine::decide`, `Engine::call`), random registrations and mutated call JSON, and the
//! deepest JSON a peer can send. Each target asserts "no panic" (the panicking input is
//! reported) plus a few invariants that hold by construction of the code, among them that
//! the handler runs exactly when the verdict is allow.
use super::inputs as robustness_inputs;
use super::robustness_support;
use crate::support;

use std::{cell::Cell, path::Path, sync::Arc, time::Instant};

use gatewayd_core::{
    audit::{self, AuditLog, Entry, Source},
    clock::ManualClock,
    engine::{Decision, Reason, Session, ToolCall, ToolDefinition},
    policy::Policy,
};
use robustness_inputs::*;
use robustness_support::*;
use serde_json::{Map, Value, json};
use support::*;

// ---- tool-call arguments ----

/// Arguments for `tool`: mostly objects with its own argument names, of any type.
fn rand_args(r: &mut Rng, tool: &Value, root: &str) -> Value {
    let mut keys: Vec<String> = tool["input_schema"]["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    if let Some(a) = tool["args"].as_object() {
        keys.extend(a.keys().map(|k| {
            k.trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("")
                .to_owned()
        }));
    }
    keys.extend(["iban", "amount"].map(String::from));
    match r.below(10) {
        0 => rand_value(r, 3, &keys, root),
        1 | 2 => Value::Object(rand_object(r, 0, &keys, root)),
        _ => {
            // Every known argument present with good odds, each of a random type.
            let mut m = Map::new();
            for k in &keys {
                if r.chance(3, 4) {
                    let v = if r.chance(1, 2) {
                        Value::String(rand_string(r, root))
                    } else {
                        rand_value(r, 1, &keys, root)
                    };
                    m.insert(k.clone(), v);
                }
            }
            Value::Object(m)
        }
    }
}

#[test]
fn engine_never_panics_on_random_arguments() {
    let t = Instant::now();
    let f = fx();
    let root = f.root.to_string_lossy().into_owned();
    let policy = policy_value(&f.root);
    let tools = policy["tools"].as_array().unwrap().clone();
    let mut r = Rng::new(4);
    let mut s = session();
    let (n, mut ran_total, mut allowed_total) = (4000, 0, 0);
    for i in 0..n {
        if i % 25 == 0 {
            s = match r.below(10) {
                0 => Session::new("", "alice", ALL_SCOPES),
                1 => Session::new("s2", "bob", &["web"]),
                _ => session(),
            };
        }
        let tool = r.pick_ref(&tools);
        let mut name = tool["name"].as_str().unwrap().to_owned();
        if r.chance(1, 30) {
            name = rand_string(&mut r, &root);
        }
        let args = rand_args(&mut r, tool, &root);
        let mut call = ToolCall::new(&name, args);
        if r.chance(1, 20) {
            call = call.with_approval(&rand_string(&mut r, &root));
        }
        let v = guard("Engine::decide", &call, || f.engine.decide(&s, &call));
        // Cheap invariants, true by the order of checks.
        if !call.arguments.is_object() || !tools.iter().any(|t| t["name"] == *name) {
            assert_eq!(v.decision, Decision::Deny, "{call:?}: {v:?}");
        }
        if !s.id.is_empty()
            && tool["name"] == *name
            && let (Some(req), Some(a)) = (
                tool["input_schema"]["required"].as_array(),
                call.arguments.as_object(),
            )
            && req.iter().any(|k| !a.contains_key(k.as_str().unwrap()))
        {
            assert_eq!(v.decision, Decision::Deny, "{call:?}: {v:?}");
        }
        let ran = Cell::new(false);
        let output = rand_value(&mut r, 2, &[], &root);
        let fail = r.chance(1, 5);
        let o = guard("Engine::call", &call, || {
            f.engine.call(&mut s, &call, |_, _| {
                ran.set(true);
                if fail {
                    Err(output.to_string())
                } else {
                    Ok(output.clone())
                }
            })
        });
        assert_eq!(ran.get(), o.verdict.is_allow(), "{call:?}: {:?}", o.verdict);
        assert!(ran.get() || (o.output.is_none() && o.error.is_none()));
        if o.verdict.decision == Decision::Hold
            && let Some(id) = o.verdict.approval_id.clone()
        {
            if r.chance(1, 2) {
                let _ = f.engine.approve(&id);
            } else {
                let _ = f.engine.reject(&id);
            }
            let again = call.clone().with_approval(&id);
            guard("Engine::call (approval)", &again, || {
                f.engine.call(&mut s, &again, |_, _| Ok(json!("ok")))
            });
        }
        if r.chance(1, 15) {
            let text = rand_string(&mut r, &root);
            guard("Engine::observe_untrusted", &text, || {
                f.engine.observe_untrusted(&mut s, &text);
            });
        }
        f.clock.advance_ms(r.below(20_000) as u64);
        ran_total += usize::from(ran.get());
        allowed_total += usize::from(v.is_allow());
    }
    eprintln!("robustness engine: {allowed_total} decided allow, {ran_total} handlers ran");
    report("engine", n, t);
}

#[test]
fn tool_registration_and_call_json_never_panic() {
    let t = Instant::now();
    let f = fx();
    let root = f.root.to_string_lossy().into_owned();
    let policy = policy_value(&f.root);
    let tools = policy["tools"].as_array().unwrap().clone();
    let mut r = Rng::new(5);
    let n = 1500;
    for _ in 0..n {
        let tool = r.pick_ref(&tools);
        let def = ToolDefinition {
            name: if r.chance(1, 10) {
                rand_string(&mut r, &root)
            } else {
                tool["name"].as_str().unwrap().to_owned()
            },
            description: if r.chance(1, 2) {
                tool["description"].as_str().unwrap().to_owned()
            } else {
                rand_string(&mut r, &root)
            },
            input_schema: if r.chance(1, 2) {
                tool["input_schema"].clone()
            } else {
                rand_value(&mut r, 2, &[], &root)
            },
        };
        guard("Engine::register", &def, || f.engine.register(&def));
        // A tool call as JSON text, mutated: serde plus a decision.
        let call = json!({"tool": tool["name"], "arguments": rand_args(&mut r, tool, &root)});
        let text = mutate(&mut r, call.to_string().as_bytes());
        let text = String::from_utf8_lossy(&text).into_owned();
        if let Ok(c) = serde_json::from_str::<ToolCall>(&text) {
            let v = guard("Engine::decide", &c, || f.engine.decide(&session(), &c));
            if !c.arguments.is_object() {
                assert_eq!(v.decision, Decision::Deny);
            }
        }
    }
    // Registered definitions changed: the changed tools are blocked, never allowed.
    let v = f.engine.decide(
        &session(),
        &ToolCall::new("weather", json!({"city": "Paris"})),
    );
    assert!(
        v.is_allow() || matches!(v.reason, Reason::RugPull | Reason::DescriptionScan),
        "{v:?}"
    );
    report("register", n, t);
}

// ---- depth ----

/// The deepest JSON text `serde_json` accepts (its recursion limit), alternating arrays and
/// objects around a string.
fn deepest_json() -> Value {
    let mut depth = 200;
    loop {
        let mut s = String::new();
        for i in 0..depth {
            s.push_str(if i % 2 == 0 { "[" } else { "{\"k\":" });
        }
        s.push_str("\"../../home/.ssh/id_rsa\"");
        for i in (0..depth).rev() {
            s.push(if i % 2 == 0 { ']' } else { '}' });
        }
        if let Ok(v) = serde_json::from_str::<Value>(&s) {
            return v;
        }
        depth -= 1;
    }
}

/// The deepest values a peer can send: as every argument of every tool, as a tool's input
/// schema in a policy and in a registered definition, and in an audit record's detail.
#[test]
fn deepest_json_is_handled_everywhere() {
    let t = Instant::now();
    let deep = deepest_json();
    let f = fx();
    let policy = policy_value(&f.root);
    let mut s = session();
    for tool in policy["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let mut args = Map::new();
        for k in tool["input_schema"]["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.keys())
            .chain(["payment".to_owned()].iter())
        {
            args.insert(k.clone(), deep.clone());
        }
        for a in [Value::Object(args), deep.clone()] {
            let call = ToolCall::new(name, a);
            let o = guard("Engine::call (deep)", &name, || {
                f.engine.call(&mut s, &call, |_, _| Ok(deep.clone()))
            });
            assert!(!o.verdict.is_allow() || tool["input_schema"]["required"].is_null());
        }
    }
    // A policy whose tool schema is the deepest value.
    let mut p = policy.clone();
    p["tools"][0]["input_schema"] = json!({"type": "object", "properties": {"path": deep.clone()}});
    let text = p.to_string();
    if let Ok(pol) = guard("Policy::parse (deep)", &"deep schema", || {
        Policy::parse(&text, Path::new("deep.json"))
    }) {
        script(pol, &"deep schema");
    }
    let def = ToolDefinition {
        name: "weather".into(),
        description: "Current weather for a city.".into(),
        input_schema: deep.clone(),
    };
    guard("Engine::register (deep)", &"deep schema", || {
        f.engine.register(&def)
    });
    // An audit record whose detail is the deepest value.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.jsonl");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    {
        let mut log = AuditLog::open(&path, clock.clone()).unwrap();
        let res = log.append(Entry {
            source: Source::Gateway,
            session: "s".into(),
            tool: None,
            hook: None,
            decision: audit::Decision::Info,
            reason: "deep".into(),
            detail: deep.clone(),
        });
        // Too deep to be read back once wrapped in a record: refused, nothing written.
        assert!(matches!(res, Err(audit::AuditError::TooDeep)), "{res:?}");
    }
    let res = guard("audit::verify (deep)", &"deep detail", || {
        audit::verify(&path, None)
    });
    assert_eq!(
        res.map(|r| r.records).ok(),
        Some(0),
        "the log stays readable"
    );
    report("depth", 1, t);
}
