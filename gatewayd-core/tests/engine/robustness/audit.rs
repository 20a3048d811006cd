//! Robustness of the audit log reader: mutated audit files (`audit::verify`,
//! `AuditLog::open`). Asserts "no panic" (the panicking input is reported), that a changed
//! log never verifies against its anchor, and that `verify` and `open` agree.
use super::inputs as robustness_inputs;
use super::robustness_support;

use std::{sync::Arc, time::Instant};

use gatewayd_core::{
    audit::{self, AuditLog, Entry, Source},
    clock::ManualClock,
};
use robustness_inputs::*;
use robustness_support::*;
use serde_json::{Map, Value, json};

// ---- audit files ----

fn audit_entry(r: &mut Rng, root: &str) -> Entry {
    Entry {
        source: if r.chance(1, 2) {
            Source::Gateway
        } else {
            Source::Kernel
        },
        session: short_string(r, root),
        tool: r.chance(1, 2).then(|| short_string(r, root)),
        hook: r.chance(1, 3).then(|| "lsm/file_open".to_owned()),
        decision: r.pick(&[
            audit::Decision::Allow,
            audit::Decision::Deny,
            audit::Decision::Hold,
            audit::Decision::Info,
        ]),
        reason: short_string(r, root),
        detail: json!({"a": short_string(r, root), "z": rand_number(r), "m": [short_string(r, root), null, true]}),
    }
}

/// A random string of at most 200 characters.
fn short_string(r: &mut Rng, root: &str) -> String {
    rand_string(r, root).chars().take(200).collect()
}

/// A random line: garbage, or a record-shaped object.
fn audit_line(r: &mut Rng) -> String {
    match r.below(3) {
        0 => String::from_utf8_lossy(&r.bytes(80)).into_owned(),
        1 => (0..r.below(60)).map(|_| r.char()).collect(),
        _ => {
            let mut m = Map::new();
            for k in [
                "seq", "prev", "ts", "source", "session", "tool", "hook", "decision", "reason",
                "detail", "hash", "extra",
            ] {
                if r.chance(4, 5) {
                    let v = match k {
                        "seq" => rand_number(r),
                        "source" => json!(r.pick(&["gateway", "kernel", "x"])),
                        "decision" => json!(r.pick(&["allow", "deny", "hold", "info", "x"])),
                        "prev" | "hash" => json!(r.pick(&[audit::GENESIS, "", "zz"])),
                        _ => rand_value(r, 3, &[], "/"),
                    };
                    m.insert(k.to_owned(), v);
                }
            }
            Value::Object(m).to_string()
        }
    }
}

fn audit_mutate(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    let lines: Vec<&[u8]> = base.split_inclusive(|b| *b == b'\n').collect();
    match r.below(6) {
        0 if lines.len() > 1 => {
            // Line-level edit: swap, delete or duplicate.
            let mut l: Vec<Vec<u8>> = lines.iter().map(|x| x.to_vec()).collect();
            let (a, b) = (r.below(l.len()), r.below(l.len()));
            match r.below(3) {
                0 => l.swap(a, b),
                1 => {
                    l.remove(a);
                }
                _ => {
                    let x = l[a].clone();
                    l.insert(b, x);
                }
            }
            l.concat()
        }
        1 => {
            // A random line inserted somewhere (with or without its newline).
            let mut l: Vec<Vec<u8>> = lines.iter().map(|x| x.to_vec()).collect();
            let mut new = audit_line(r).into_bytes();
            if r.chance(4, 5) {
                new.push(b'\n');
            }
            let at = r.below(l.len() + 1);
            l.insert(at, new);
            l.concat()
        }
        _ => mutate(r, base),
    }
}

#[test]
fn audit_verify_never_panics_on_mutated_logs() {
    let t = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Rng::new(6);
    let log_path = dir.path().join("audit.jsonl");
    let clock = Arc::new(ManualClock::new(1_700_000_000_123));
    let (records, head) = {
        let mut log = AuditLog::open(&log_path, clock.clone()).unwrap();
        for _ in 0..8 {
            log.append(audit_entry(&mut r, "/r")).unwrap();
            clock.advance_ms(r.below(100_000) as u64);
        }
        (log.last_seq(), log.head().unwrap().to_owned())
    };
    let original = std::fs::read(&log_path).unwrap();
    let ok = audit::verify(&log_path, Some(&head)).unwrap();
    assert_eq!(ok.records, records);
    let path = dir.path().join("mutant.jsonl");
    let n = 2000;
    for _ in 0..n {
        let bytes = if r.chance(1, 20) {
            (0..r.below(4))
                .map(|_| audit_line(&mut r) + "\n")
                .collect::<String>()
                .into_bytes()
        } else {
            audit_mutate(&mut r, &original)
        };
        std::fs::write(&path, &bytes).unwrap();
        let anchor = match r.below(5) {
            0 => None,
            1 | 2 => Some(head.clone()),
            3 => Some(format!("{:016x}", r.next()).repeat(4)),
            _ => Some((0..r.below(70)).map(|_| r.char()).collect()),
        };
        let res = guard("audit::verify", &(&bytes, &anchor), || {
            audit::verify(&path, anchor.as_deref())
        });
        let input = String::from_utf8_lossy(&bytes);
        if bytes != original && anchor.as_deref() == Some(head.as_str()) {
            assert!(
                res.is_err(),
                "a changed log verified against its anchor: {input:?}"
            );
        }
        if bytes == original && anchor.as_deref() == Some(head.as_str()) {
            assert_eq!(res.as_ref().map(|v| v.records).ok(), Some(records));
        }
        if r.chance(1, 4) {
            let plain = audit::verify(&path, None);
            let open = guard("AuditLog::open", &input, || {
                AuditLog::open(&path, clock.clone())
            });
            assert_eq!(
                plain.is_ok(),
                open.is_ok(),
                "verify and open disagree: {input:?}"
            );
        }
    }
    report("audit", n, t);
}
