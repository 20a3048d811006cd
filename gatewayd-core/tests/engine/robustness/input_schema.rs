//! Tool input schemas are checked by a full JSON Schema implementation: every keyword family
//! below was ignored by the former hand-written subset (the call went through); each is now
//! denied with `arg_rule`, naming the keyword, while a valid call is allowed. Schemas that
//! reach outside themselves (`$ref` to http: or file:) are policy errors and fetch nothing.
use std::{net::TcpListener, path::Path, sync::Arc};

use gatewayd_core::{
    clock::SystemClock,
    engine::{Decision, Engine, Reason, Session, ToolCall, Verdict},
    policy::{Policy, PolicyError},
};
use serde_json::{Value, json};

fn policy_with(schema: &Value) -> Result<Policy, PolicyError> {
    let text = json!({"version": 1, "tools": [{"name": "t", "input_schema": schema}]});
    Policy::parse(&text.to_string(), Path::new("schema.json"))
}

fn decide(schema: &Value, arguments: Value) -> Verdict {
    let policy = policy_with(schema).expect("policy loads");
    let engine = Engine::new(Arc::new(policy), Arc::new(SystemClock), None).expect("engine");
    let call = ToolCall {
        tool: "t".into(),
        arguments,
        approval: None,
    };
    engine.decide(&Session::new("s", "u", &[]), &call)
}

fn allowed(schema: &Value, arguments: Value) {
    let v = decide(schema, arguments.clone());
    assert_eq!(v.decision, Decision::Allow, "{arguments}: {}", v.message);
}

/// Denied as `arg_rule`, and the message names the failing keyword.
fn denied(schema: &Value, arguments: Value, keyword: &str) {
    let v = decide(schema, arguments.clone());
    assert_eq!(v.decision, Decision::Deny, "{arguments}: {}", v.message);
    assert_eq!(v.reason, Reason::ArgRule, "{arguments}: {}", v.message);
    assert!(
        v.message.contains(&format!("keyword `{keyword}`")),
        "{arguments}: {}",
        v.message
    );
}

#[test]
fn pattern() {
    let s = json!({"type": "object", "properties": {
        "branch": {"type": "string", "pattern": "^feature/[a-z0-9-]+$"}}});
    denied(&s, json!({"branch": "main; rm -rf /"}), "pattern");
    allowed(&s, json!({"branch": "feature/schema-check"}));
}

#[test]
fn one_of_any_of_all_of() {
    let one = json!({"properties": {"id": {"oneOf": [
        {"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$"}]}}});
    denied(&one, json!({"id": "12; DROP TABLE"}), "oneOf");
    allowed(&one, json!({"id": "12"}));
    allowed(&one, json!({"id": 12}));
    // valid under both branches is not "one of"
    let both = json!({"properties": {"n": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}});
    denied(&both, json!({"n": 5}), "oneOf");
    allowed(&both, json!({"n": -5}));

    let any = json!({"properties": {"code": {"anyOf": [
        {"type": "string", "maxLength": 3}, {"type": "integer"}]}}});
    denied(&any, json!({"code": "much too long"}), "anyOf");
    allowed(&any, json!({"code": "abc"}));

    let all = json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}]});
    denied(&all, json!({"a": 1}), "required");
    allowed(&all, json!({"a": 1, "b": 2}));
}

#[test]
fn local_ref() {
    let s = json!({"$defs": {"amount": {"type": "number", "maximum": 100}},
        "properties": {"amount": {"$ref": "#/$defs/amount"}}});
    denied(&s, json!({"amount": 1000}), "maximum");
    allowed(&s, json!({"amount": 99.5}));
}

#[test]
fn min_items() {
    let s = json!({"properties": {"to": {"type": "array", "minItems": 1,
        "items": {"type": "string"}}}});
    denied(&s, json!({"to": []}), "minItems");
    allowed(&s, json!({"to": ["a@corp.test"]}));
}

#[test]
fn exclusive_minimum() {
    let s = json!({"properties": {"n": {"type": "number", "exclusiveMinimum": 0}}});
    denied(&s, json!({"n": 0}), "exclusiveMinimum");
    allowed(&s, json!({"n": 0.5}));
    // Draft 4, chosen by $schema: the boolean form.
    let d4 = json!({"$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"n": {"minimum": 0, "exclusiveMinimum": true}}});
    denied(&d4, json!({"n": 0}), "exclusiveMinimum");
    allowed(&d4, json!({"n": 1}));
}

#[test]
fn additional_properties_as_a_schema() {
    let s = json!({"properties": {"path": {"type": "string"}},
        "additionalProperties": {"type": "string", "maxLength": 10}});
    denied(&s, json!({"path": "/a", "mode": 755}), "type");
    denied(
        &s,
        json!({"path": "/a", "mode": "far more than ten"}),
        "maxLength",
    );
    allowed(&s, json!({"path": "/a", "mode": "0755"}));
}

#[test]
fn other_keywords() {
    for (schema, bad, good, keyword) in [
        (
            json!({"properties": {"to": {"type": "string", "format": "email"}}}),
            json!({"to": "not an address"}),
            json!({"to": "a@corp.test"}),
            "format",
        ),
        (
            json!({"properties": {"cmd": {"not": {"const": "reboot"}}}}),
            json!({"cmd": "reboot"}),
            json!({"cmd": "uptime"}),
            "not",
        ),
        (
            json!({"if": {"properties": {"mode": {"const": "remote"}}},
                   "then": {"required": ["host"]}}),
            json!({"mode": "remote"}),
            json!({"mode": "remote", "host": "h"}),
            "required",
        ),
        (
            json!({"dependentRequired": {"cc": ["to"]}}),
            json!({"cc": "x"}),
            json!({"cc": "x", "to": "y"}),
            "required",
        ),
        (
            json!({"properties": {"ids": {"uniqueItems": true}}}),
            json!({"ids": [1, 1]}),
            json!({"ids": [1, 2]}),
            "uniqueItems",
        ),
        (
            json!({"properties": {"cents": {"multipleOf": 5}}}),
            json!({"cents": 7}),
            json!({"cents": 10}),
            "multipleOf",
        ),
        (
            json!({"propertyNames": {"pattern": "^[a-z]+$"}}),
            json!({"Bad-Name": 1}),
            json!({"good": 1}),
            "propertyNames",
        ),
        (
            json!({"maxProperties": 1}),
            json!({"a": 1, "b": 2}),
            json!({"a": 1}),
            "maxProperties",
        ),
        (
            json!({"properties": {"p": {"prefixItems": [{"type": "string"}],
                   "items": false}}}),
            json!({"p": ["a", "b"]}),
            json!({"p": ["a"]}),
            "falseSchema",
        ),
        (
            json!({"properties": {"a": {}}, "unevaluatedProperties": false}),
            json!({"a": 1, "b": 2}),
            json!({"a": 1}),
            "unevaluatedProperties",
        ),
    ] {
        denied(&schema, bad, keyword);
        allowed(&schema, good);
    }
}

#[test]
fn a_remote_ref_is_a_policy_error_and_nothing_is_fetched() {
    // An HTTP server that would see any connection attempt.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/schema.json", listener.local_addr().unwrap());
    // A file that, if read, would make a perfectly good schema.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schema.json");
    std::fs::write(&file, r#"{"type": "string"}"#).unwrap();
    let file_url = format!("file://{}", file.display());

    for r in [url.as_str(), file_url.as_str()] {
        for schema in [
            json!({"properties": {"x": {"$ref": r}}}),
            json!({"$ref": r}),
            json!({"$id": r, "properties": {"x": {"$ref": "other.json"}}}),
        ] {
            match policy_with(&schema) {
                Err(PolicyError::Invalid { source, .. }) => {
                    let m = source.to_string();
                    assert!(m.starts_with("tools[0] (t).input_schema"), "{m}");
                    assert!(m.contains("never fetches"), "{m}");
                }
                other => panic!("{schema}: expected a policy error, got {other:?}"),
            }
        }
    }
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("a schema made gatewayd connect: {other:?}"),
    }
}

#[test]
fn a_schema_that_does_not_compile_is_a_policy_error_at_its_line() {
    let text = "{\"version\": 1, \"tools\": [\n  {\"name\": \"t\", \"input_schema\": {\n    \"properties\": {\"n\": {\"minLength\": -1}}}}]}";
    match Policy::parse(text, Path::new("p.json")) {
        Err(e @ PolicyError::Invalid { .. }) => {
            let m = e.to_string();
            assert!(
                m.starts_with("p.json:3:39: tools[0] (t).input_schema.properties.n.minLength: "),
                "{m}"
            );
        }
        other => panic!("expected a policy error, got {other:?}"),
    }
}
