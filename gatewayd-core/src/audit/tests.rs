//! The writer and the verifier together: chains written, then broken in every way.
use std::{
    fs::{self, File, OpenOptions},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::{Value, json};

use super::*;
use crate::{canonical::sha256_hex, clock::ManualClock};

const T0: u64 = 1_700_000_000_123;

fn entry(i: u64) -> Entry {
    Entry {
        source: if i.is_multiple_of(2) {
            Source::Kernel
        } else {
            Source::Gateway
        },
        session: "s1".into(),
        tool: (i % 2 == 1).then(|| "read_file".to_string()),
        hook: i.is_multiple_of(2).then(|| "lsm/file_open".to_string()),
        decision: Decision::Deny,
        reason: format!("r{i}"),
        detail: json!({"z": 1, "a": {"y": [3, {"k": "v", "b": null}], "x": "é\"\n"}, "i": i}),
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0))
}

/// A log of `n` records; returns its path (inside `dir`) and the records.
fn make_log(dir: &tempfile::TempDir, n: u64) -> (PathBuf, Vec<Record>) {
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, clock()).expect("open");
    let recs = (1..=n)
        .map(|i| log.append(entry(i)).expect("append"))
        .collect();
    (path, recs)
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut s = lines.join("\n");
    s.push('\n');
    fs::write(path, s).expect("write");
}

#[test]
fn timestamps_are_rfc3339_utc_millis() {
    assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339_ms(T0), "2023-11-14T22:13:20.123Z");
    assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(rfc3339_ms(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    assert_eq!(rfc3339_ms(951_868_799_001), "2000-02-29T23:59:59.001Z");
}

#[test]
fn canonical_json_sorts_nested_keys() {
    let v = json!({"b": 1, "a": {"d": [ {"z": 0, "y": 1} ], "c": "x y"}});
    assert_eq!(
        canonical_json(&v),
        r#"{"a":{"c":"x y","d":[{"y":1,"z":0}]},"b":1}"#
    );
}

#[test]
fn append_writes_a_chain_with_clock_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a.jsonl");
    let clk = clock();
    let mut log = AuditLog::open(&path, clk.clone()).expect("open");
    assert_eq!(log.head(), None);
    let r1 = log.append(entry(1)).expect("append");
    clk.advance_ms(1500);
    let r2 = log.append(entry(2)).expect("append");
    assert_eq!((r1.seq, r2.seq), (1, 2));
    assert_eq!(r1.prev, GENESIS);
    assert_eq!(r2.prev, r1.hash);
    assert_eq!(r1.ts, "2023-11-14T22:13:20.123Z");
    assert_eq!(r2.ts, "2023-11-14T22:13:21.623Z");
    assert_eq!(log.head(), Some(r2.hash.as_str()));
    assert_eq!(r1.hash.len(), 64);
    assert!(
        r1.hash
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    );
    // Written lines are the records, canonical, with tool/hook omitted when absent.
    let ls = lines(&path);
    assert_eq!(ls, vec![r1.canonical_line(), r2.canonical_line()]);
    assert!(ls[0].contains(r#""tool":"read_file""#) && !ls[0].contains("hook"));
    assert!(ls[1].contains(r#""hook":"lsm/file_open""#) && !ls[1].contains("tool"));
    let parsed: Record = serde_json::from_str(&ls[0]).expect("parse");
    assert_eq!(parsed, r1);
    // The derived Serialize says the same thing as the canonical form.
    assert_eq!(serde_json::to_value(&r1).expect("value"), r1.to_value(true));
    // The hash is SHA-256 of the canonical record without `hash`.
    let mut v: Value = serde_json::from_str(&ls[0]).expect("value");
    v.as_object_mut().expect("object").remove("hash");
    assert_eq!(sha256_hex(canonical_json(&v).as_bytes()), r1.hash);
}

#[cfg(unix)]
/// The record written straight from its fields ([`Record::seal`], `canonical_line`,
/// `compute_hash`) is byte for byte the canonical JSON of its `Value`, whatever it holds.
#[test]
fn a_record_written_from_its_fields_is_its_canonical_json() {
    let strings = [
        "",
        "plain",
        "quote \" back \\ slash",
        "ctl \u{1}\n\t",
        "é ✓ 𝄞",
        "</script>",
    ];
    let details = [
        json!({}),
        json!(null),
        json!({"z": 1, "a": [1.5, -2, 1e300, {"y": null, "b": true}], "é": "\u{7f}"}),
        json!({"nested": {"k": {"j": [[], {}]}}, "n": 18446744073709551615u64}),
    ];
    for (i, s) in strings.iter().enumerate() {
        for (j, detail) in details.iter().enumerate() {
            for (tool, hook) in [
                (None, None),
                (Some(*s), None),
                (None, Some(*s)),
                (Some("t"), Some("h")),
            ] {
                let mut r = Record {
                    seq: (i * 10 + j) as u64,
                    prev: s.to_string(),
                    ts: "2026-12-06T00:00:00.000Z".into(),
                    source: if hook.is_some() {
                        Source::Kernel
                    } else {
                        Source::Gateway
                    },
                    session: s.to_string(),
                    tool: tool.map(str::to_owned),
                    hook: hook.map(str::to_owned),
                    decision: Decision::WouldDeny,
                    reason: s.to_string(),
                    detail: detail.clone(),
                    hash: String::new(),
                };
                let want_hash = sha256_hex(canonical_json(&r.to_value(false)).as_bytes());
                assert_eq!(r.compute_hash(), want_hash);
                let line = r.seal();
                assert_eq!(r.hash, want_hash);
                assert_eq!(line, canonical_json(&r.to_value(true)));
                assert_eq!(r.canonical_line(), line);
                assert_eq!(serde_json::from_str::<Record>(&line).expect("parse"), r);
            }
        }
    }
}

#[test]
fn new_file_is_private() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 1);
    let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn reopen_continues_the_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, recs) = make_log(&dir, 3);
    let mut log = AuditLog::open(&path, clock()).expect("reopen");
    assert_eq!(log.last_seq(), 3);
    assert_eq!(log.head(), Some(recs[2].hash.as_str()));
    let r4 = log.append(entry(4)).expect("append");
    assert_eq!(r4.seq, 4);
    assert_eq!(r4.prev, recs[2].hash);
    let rep = verify(&path, None).expect("verify");
    assert_eq!(rep.records, 4);
    assert_eq!(rep.head.as_deref(), Some(r4.hash.as_str()));
}

#[test]
fn second_writer_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a.jsonl");
    let _first = AuditLog::open(&path, clock()).expect("open");
    let err = AuditLog::open(&path, clock()).expect_err("second open");
    assert!(matches!(err, AuditError::Locked { .. }), "{err}");
}

#[test]
fn refuses_world_writable_and_non_regular_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a.jsonl");
    fs::write(&path, "").expect("write");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
    let err = AuditLog::open(&path, clock()).expect_err("world-writable");
    assert!(matches!(err, AuditError::Permissions { .. }), "{err}");
    let err = AuditLog::open(dir.path(), clock()).expect_err("directory");
    assert!(
        matches!(err, AuditError::Io { .. } | AuditError::NotRegular { .. }),
        "{err}"
    );
    let err = verify(Path::new("/dev/null"), None).expect_err("device");
    assert!(matches!(err, VerifyError::NotRegular { .. }), "{err}");
}

/// A learn mode's record is `"decision":"would_deny"` and verifies; a decision the format
/// does not name is still refused.
#[test]
fn a_would_deny_record_verifies_and_an_unknown_decision_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, clock()).expect("open");
    let mut e = entry(1);
    e.decision = Decision::WouldDeny;
    log.append(e).expect("append");
    drop(log);
    let line = &lines(&path)[0];
    assert!(line.contains(r#""decision":"would_deny""#), "{line}");
    assert_eq!(verify(&path, None).expect("verify").records, 1);
    // The same record with a decision the format does not know (its hash recomputed).
    let mut v: Value = serde_json::from_str(line).expect("json");
    v["decision"] = json!("would_allow");
    let obj = v.as_object_mut().expect("object");
    obj.remove("hash");
    let hash = sha256_hex(canonical_json(&v).as_bytes());
    v["hash"] = json!(hash);
    write_lines(&path, &[canonical_json(&v)]);
    assert!(verify(&path, None).is_err());
}

#[test]
fn empty_file_verifies_but_not_against_an_anchor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 0);
    let rep = verify(&path, None).expect("verify");
    assert_eq!((rep.records, rep.head), (0, None));
    let err = verify(&path, Some(&"a".repeat(64))).expect_err("anchor on empty log");
    assert!(
        matches!(
            err,
            VerifyError::AnchorNotFound {
                seq: 1,
                records: 0,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn bad_anchor_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 1);
    let err = verify(&path, Some("abc")).expect_err("bad anchor");
    assert!(matches!(err, VerifyError::BadAnchor(_)) && !err.is_broken());
}

#[test]
fn anchor_inside_the_chain_reports_what_follows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, recs) = make_log(&dir, 5);
    let rep = verify(&path, Some(&recs[2].hash)).expect("verify");
    assert_eq!(
        rep.anchored,
        Some(Anchored {
            seq: 3,
            following: 2
        })
    );
    let rep = verify(&path, Some(&recs[4].hash.to_uppercase())).expect("verify");
    assert_eq!(
        rep.anchored,
        Some(Anchored {
            seq: 5,
            following: 0
        })
    );
}

fn broken(path: &Path, anchor: Option<&str>) -> VerifyError {
    let err = verify(path, anchor).expect_err("must not verify");
    assert!(err.is_broken(), "{err}");
    err
}

#[test]
fn edited_field_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls[2] = ls[2].replace(r#""decision":"deny""#, r#""decision":"allow""#);
    write_lines(&path, &ls);
    let err = broken(&path, None);
    assert!(
        matches!(err, VerifyError::Edited { seq: 3, line: 3 }),
        "{err}"
    );
    assert!(err.to_string().starts_with("seq 3: record edited"), "{err}");
}

#[test]
fn edited_nested_detail_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls[2] = ls[2].replace(r#""k":"v""#, r#""k":"w""#);
    write_lines(&path, &ls);
    assert!(matches!(
        broken(&path, None),
        VerifyError::Edited { seq: 3, .. }
    ));
}

#[test]
fn re_encoded_line_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls[2] = ls[2].replacen(',', ", ", 1);
    write_lines(&path, &ls);
    assert!(matches!(
        broken(&path, None),
        VerifyError::NotCanonical { seq: 3, .. }
    ));
}

#[test]
fn edit_with_recomputed_hash_breaks_the_next_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, mut recs) = make_log(&dir, 5);
    recs[2].decision = Decision::Allow;
    recs[2].hash = recs[2].compute_hash();
    let mut ls = lines(&path);
    ls[2] = recs[2].canonical_line();
    write_lines(&path, &ls);
    let err = broken(&path, None);
    assert!(
        matches!(err, VerifyError::BrokenLink { seq: 4, line: 4 }),
        "{err}"
    );
}

#[test]
fn deleted_record_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls.remove(2);
    write_lines(&path, &ls);
    let err = broken(&path, None);
    assert!(
        matches!(
            err,
            VerifyError::Deleted {
                seq: 3,
                line: 3,
                found: 4
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("seq 3: record 3 deleted"),
        "{err}"
    );
}

#[test]
fn deleted_first_records_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let ls = lines(&path);
    write_lines(&path, &ls[2..]);
    let err = broken(&path, None);
    assert!(
        matches!(
            err,
            VerifyError::Deleted {
                seq: 1,
                found: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("records 1 to 2 deleted"), "{err}");
}

#[test]
fn swapped_records_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls.swap(1, 2);
    write_lines(&path, &ls);
    let err = broken(&path, None);
    assert!(
        matches!(
            err,
            VerifyError::Reordered {
                seq: 2,
                line: 2,
                found: 3,
                later_line: Some(3)
            }
        ),
        "{err}"
    );
}

#[test]
fn duplicated_record_goes_backwards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 3);
    let mut ls = lines(&path);
    ls.push(ls[1].clone());
    write_lines(&path, &ls);
    let err = broken(&path, None);
    assert!(
        matches!(
            err,
            VerifyError::Reordered {
                seq: 4,
                found: 2,
                later_line: None,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn truncation_is_caught_by_the_anchor_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, recs) = make_log(&dir, 5);
    let anchor = recs[4].hash.clone();
    let ls = lines(&path);
    write_lines(&path, &ls[..4]);
    // Without the anchor a truncated chain is a valid, shorter chain.
    assert_eq!(verify(&path, None).expect("verify").records, 4);
    let err = broken(&path, Some(&anchor));
    assert!(
        matches!(
            err,
            VerifyError::AnchorNotFound {
                seq: 5,
                records: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("anchor not found: log truncated or rewritten")
    );
}

#[test]
fn full_rewrite_is_caught_by_the_anchor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, recs) = make_log(&dir, 5);
    let anchor = recs[4].hash.clone();
    fs::remove_file(&path).expect("rm");
    let mut log = AuditLog::open(&path, Arc::new(ManualClock::new(T0 + 1))).expect("open");
    for i in 1..=5 {
        log.append(entry(i)).expect("append");
    }
    drop(log);
    assert_eq!(
        verify(&path, None).expect("fresh chain verifies").records,
        5
    );
    let err = broken(&path, Some(&anchor));
    assert!(
        matches!(err, VerifyError::AnchorNotFound { records: 5, .. }),
        "{err}"
    );
}

#[test]
fn partial_trailing_line_is_broken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 3);
    let mut ls = lines(&path);
    let half = ls[2].len() / 2;
    ls[2].truncate(half);
    fs::write(&path, ls.join("\n")).expect("write");
    let err = broken(&path, None);
    assert!(
        matches!(err, VerifyError::PartialLine { seq: 3, line: 3 }),
        "{err}"
    );
    // Even a complete record without its newline was not confirmed durable.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir2, 3);
    let full = fs::read_to_string(&path).expect("read");
    fs::write(&path, full.trim_end_matches('\n')).expect("write");
    assert!(matches!(
        broken(&path, None),
        VerifyError::PartialLine { seq: 3, line: 3 }
    ));
}

#[test]
fn garbage_line_is_named_by_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls.insert(3, "this is not json".into());
    write_lines(&path, &ls);
    let err = broken(&path, None);
    assert!(
        matches!(
            err,
            VerifyError::Malformed {
                line: 4,
                seq: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("line 4: not a valid audit record"),
        "{err}"
    );
    // A JSON object that is not a record (extra field) is malformed too.
    let mut ls = lines(&path);
    ls[3] = ls[4].replacen('{', r#"{"extra":1,"#, 1);
    write_lines(&path, &ls);
    assert!(matches!(
        broken(&path, None),
        VerifyError::Malformed { line: 4, .. }
    ));
}

#[test]
fn broken_file_refuses_to_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 5);
    let mut ls = lines(&path);
    ls[2] = ls[2].replace(r#""reason":"r3""#, r#""reason":"ok""#);
    write_lines(&path, &ls);
    let before = fs::read(&path).expect("read");
    let err = AuditLog::open(&path, clock()).expect_err("broken");
    assert!(
        matches!(
            err,
            AuditError::Broken {
                error: VerifyError::Edited { seq: 3, .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("broken at seq 3"), "{err}");
    assert_eq!(fs::read(&path).expect("read"), before, "file untouched");
}

#[test]
fn too_deep_detail_is_refused_and_the_log_stays_usable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 2);
    let mut log = AuditLog::open(&path, clock()).expect("open");
    let mut deep = Value::Null;
    for _ in 0..=MAX_DETAIL_DEPTH {
        deep = Value::Array(vec![deep]);
    }
    let mut e = entry(3);
    e.detail = deep;
    assert!(matches!(log.append(e), Err(AuditError::TooDeep)));
    log.append(entry(3)).expect("the next record is written");
    assert_eq!(verify(&path, None).expect("verifies").records, 3);
}

#[test]
fn failed_write_poisons_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 2);
    let mut log = AuditLog::open(&path, clock()).expect("open");
    // Swap in a descriptor that cannot be written (read-only, locked, another file).
    let other = dir.path().join("ro");
    fs::write(&other, "").expect("write");
    let ro = File::open(&other).expect("open ro");
    ro.try_lock().expect("lock");
    log.file = ro;
    let err = log.append(entry(3)).expect_err("write fails");
    assert!(matches!(err, AuditError::Write { .. }), "{err}");
    assert!(log.is_poisoned());
    assert_eq!(log.last_seq(), 2);
    // Later appends fail too, even if the cause went away.
    let writable = dir.path().join("rw");
    let rw = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&writable)
        .expect("open rw");
    rw.try_lock().expect("lock");
    log.file = rw;
    let err = log.append(entry(3)).expect_err("poisoned");
    assert!(matches!(err, AuditError::Poisoned { .. }), "{err}");
    assert_eq!(
        fs::read(&writable).expect("read").len(),
        0,
        "nothing written once poisoned"
    );
}

#[test]
fn a_lockdown_record_names_the_call_and_says_what_it_means() {
    let e = Entry::egress_lockdown("s", Some("read_inbox"), json!({"trigger": "rule_of_two"}));
    assert_eq!(e.reason, "egress_lockdown");
    assert_eq!(e.tool.as_deref(), Some("read_inbox"));
    assert_eq!(e.decision, Decision::Deny);
    assert_eq!(e.source, Source::Gateway);
    assert_eq!(e.detail["trigger"], "rule_of_two");
    assert!(e.detail["message"].as_str().unwrap().contains("denied"));
    let k = Entry::kernel("s", "lsm/file_open", "protected_path", json!({}));
    assert_eq!(
        (k.source, k.decision, k.hook.as_deref()),
        (Source::Kernel, Decision::Deny, Some("lsm/file_open"))
    );
}
