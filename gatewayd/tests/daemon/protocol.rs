//! docs/PROTOCOL.md is replayed against the daemon: every example exchange, in order, byte
//! for byte (after the documented normalisation: 24-, 32- and 64-hex-digit tokens, i.e.
//! nonces, approval ids and hashes, stand for whatever the daemon made up, consistently
//! across the conversation; and `"pid"` values). Every example message is also validated
//! against docs/protocol.schema.json, and the Python example client runs against a daemon.
use crate::support;

use std::{collections::HashMap, path::Path, sync::Arc};

use gatewayd::protocol::Method;
use gatewayd_core::clock::ManualClock;
use regex::Regex;
use serde_json::{Value, json};
use support::{AgentRelay, Daemon, require_cgroups};

const DOC: &str = include_str!("../../../docs/PROTOCOL.md");
const SCHEMA: &str = include_str!("../../../docs/protocol.schema.json");

/// One example block: who sends it, and its (request, expected answer) pairs.
struct Block {
    role: String,
    pairs: Vec<(String, String)>,
}

fn parse_doc() -> (String, Vec<Block>) {
    let mut policy = String::new();
    let mut blocks = Vec::new();
    let mut lines = DOC.lines();
    while let Some(l) = lines.next() {
        let Some(info) = l.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|x| !x.starts_with("```"))
            .collect();
        match info.split_whitespace().collect::<Vec<_>>()[..] {
            ["json", "policy"] => policy = body.join("\n"),
            ["jsonl", role] => {
                let mut pairs = Vec::new();
                let mut req = None;
                for b in body {
                    if let Some(r) = b.strip_prefix("→ ") {
                        req = Some(r.to_owned());
                    } else if let Some(a) = b.strip_prefix("← ") {
                        pairs.push((req.take().expect("answer without request"), a.to_owned()));
                    }
                }
                blocks.push(Block {
                    role: role.to_owned(),
                    pairs,
                });
            }
            _ => {}
        }
    }
    (policy, blocks)
}

/// Compares an answer with the documented one, learning what each documented hex token
/// stands for.
fn matches(doc: &str, got: &str, map: &mut HashMap<String, String>) -> bool {
    let pid = Regex::new(r#""pid":\d+"#).unwrap();
    let (doc, got) = (
        pid.replace_all(doc, "\"pid\":0"),
        pid.replace_all(got, "\"pid\":0"),
    );
    let hex = Regex::new("[0-9a-f]+").unwrap();
    let split = |s: &str| {
        let mut parts = Vec::new();
        let mut last = 0;
        for m in hex.find_iter(s) {
            if matches!(m.len(), 24 | 32 | 64) {
                parts.push((false, s[last..m.start()].to_owned()));
                parts.push((true, m.as_str().to_owned()));
                last = m.end();
            }
        }
        parts.push((false, s[last..].to_owned()));
        parts
    };
    let (d, g) = (split(&doc), split(&got));
    if d.len() != g.len() {
        return false;
    }
    for ((dh, dt), (gh, gt)) in d.iter().zip(&g) {
        match (dh, gh) {
            (false, false) if dt == gt => {}
            (true, true) if dt.len() == gt.len() => {
                if map.entry(dt.clone()).or_insert_with(|| gt.clone()) != gt {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

fn substitute(req: &str, map: &HashMap<String, String>) -> String {
    map.iter()
        .fold(req.to_owned(), |r, (doc, got)| r.replace(doc.as_str(), got))
}

fn validator(def: &str) -> jsonschema::Validator {
    let mut schema: Value = serde_json::from_str(SCHEMA).unwrap();
    schema["$ref"] = json!(format!("#/$defs/{def}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{def}: {e}"))
}

/// Validates an example: the request against its method's schema (unless the example is of a
/// malformed request or an unknown method), the answer against the result's or the error's.
fn check_schema(req: &str, answer: &str) {
    let a: Value = serde_json::from_str(answer).unwrap();
    let r: Value = serde_json::from_str(req).unwrap_or(Value::Null);
    let method = r["method"].as_str().unwrap_or("");
    let known = Method::from_name(method).is_some();
    let method = method.replace('/', ".");
    let mut defs = Vec::new();
    let refused = [-32700, -32600, -32602].contains(&a["error"]["code"].as_i64().unwrap_or(0));
    if known && refused {
        // An example of a bad request: the schema refuses it too.
        assert!(
            !validator(&format!("{method}.request")).is_valid(&r),
            "the schema accepts a request the daemon refuses: {req}"
        );
    } else if known {
        defs.push((format!("{method}.request"), &r));
    }
    if a.get("error").is_some() {
        defs.push(("error_response".to_owned(), &a));
    } else {
        assert!(known, "a result for an unknown method: {answer}");
        defs.push((format!("{method}.response"), &a));
    }
    for (def, v) in defs {
        let errs: Vec<String> = validator(&def)
            .iter_errors(v)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errs.is_empty(), "{def}: {v}\n{}", errs.join("\n"));
    }
}

#[test]
fn every_method_has_schemas_and_an_example() {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let (_, blocks) = parse_doc();
    for m in Method::ALL.iter().map(|m| m.name()) {
        let n = m.replace('/', ".");
        for suffix in ["request", "response"] {
            assert!(
                schema["$defs"].get(format!("{n}.{suffix}")).is_some(),
                "{n}.{suffix}"
            );
        }
        let example = blocks
            .iter()
            .flat_map(|b| &b.pairs)
            .any(|(r, _)| r.contains(&format!("\"method\":\"{m}\"")));
        assert!(example, "no example for {m}");
        assert!(DOC.contains(&format!("### `{m}`")), "no section for {m}");
    }
}

#[test]
fn the_documented_exchanges_replay_byte_for_byte() {
    require_cgroups();
    let (policy, blocks) = parse_doc();
    let policy: Value = serde_json::from_str(&policy).unwrap();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = audit_dir.path().join("audit.jsonl");
    let d = Daemon::start_with(
        move |_| policy,
        Some(audit),
        Arc::new(ManualClock::new(1_767_225_600_000)),
    );
    let mut agent = AgentRelay::spawn_exact(&d.socket, "protocol-example");
    let mut operator = d.client();
    // GATEWAYD_PROTOCOL_PRINT=1: print the daemon's answers (with the documented approval
    // ids put back in) instead of checking them; for writing the examples.
    let print = std::env::var_os("GATEWAYD_PROTOCOL_PRINT").is_some();
    let approval = Regex::new(r#""approval_id":"([0-9a-f]{32})""#).unwrap();
    let hex32 = Regex::new("[0-9a-f]{32}").unwrap();
    let mut seen_ids: Vec<String> = Vec::new();
    let mut map = HashMap::new();
    for b in &blocks {
        for (req, want) in &b.pairs {
            if print {
                for m in hex32.find_iter(req) {
                    if !map.contains_key(m.as_str()) && !seen_ids.is_empty() {
                        map.insert(m.as_str().to_owned(), seen_ids.remove(0));
                    }
                }
            }
            let sent = substitute(req, &map);
            let got = match b.role.as_str() {
                "agent" => agent.raw(&sent),
                "operator" => operator.raw(&sent).unwrap(),
                other => panic!("unknown role {other}"),
            };
            if print {
                for c in approval.captures_iter(&got) {
                    if !map.values().any(|v| v == &c[1]) && !seen_ids.contains(&c[1].to_owned()) {
                        seen_ids.push(c[1].to_owned());
                    }
                }
                let back = map.iter().fold(got.clone(), |g, (doc, actual)| {
                    g.replace(actual.as_str(), doc)
                });
                println!("→ {req}\n← {back}");
                continue;
            }
            assert!(
                matches(want, &got, &mut map),
                "{}: {req}\n want {want}\n  got {got}",
                b.role
            );
            check_schema(req, want);
        }
    }
    assert!(
        !print,
        "printed the actual answers (GATEWAYD_PROTOCOL_PRINT)"
    );
}

#[test]
fn the_python_example_client_runs() {
    let d = Daemon::start();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/client.py");
    let run = |tool: &str, args: &str| {
        let out = std::process::Command::new("/usr/bin/python3")
            .arg(&example)
            .arg(&d.socket)
            .args([tool, args])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let out = run("fetch_url", "{}");
    assert!(out.contains("protocol 1"), "{out}");
    assert!(out.contains("decision: allow (allowed)"), "{out}");
    assert!(
        out.contains("<untrusted-output tool=\"fetch_url\""),
        "{out}"
    );
    assert!(out.contains("untrusted leg: True"), "{out}");
    let out = run("read_file", "{\"path\": \"/etc/shadow\"}");
    assert!(out.contains("decision: deny (sandbox)"), "{out}");
}
