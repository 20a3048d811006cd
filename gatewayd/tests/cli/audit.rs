//! Black-box tests of `gatewayd audit verify`: exit codes and what it prints for an intact log
//! and for every tamper case (edit, deletion, reordering, truncation, full rewrite, partial
//! line, garbage line).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};

use gatewayd_core::{
    audit::{AuditLog, Decision, Entry, Source},
    clock::ManualClock,
};
use serde_json::json;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn gatewayd(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(args)
        .output()
        .expect("run gatewayd");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn verify(path: &Path, anchor: Option<&str>) -> Run {
    let p = path.to_str().expect("utf-8 path");
    match anchor {
        Some(a) => gatewayd(&["audit", "verify", p, "--anchor", a]),
        None => gatewayd(&["audit", "verify", p]),
    }
}

/// Writes a 5-record log with the library; returns its path and the head after each record.
fn make_log(dir: &tempfile::TempDir, start_ms: u64) -> (PathBuf, Vec<String>) {
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, Arc::new(ManualClock::new(start_ms))).expect("open");
    let heads = (1..=5)
        .map(|i| {
            let rec = log
                .append(Entry {
                    source: Source::Gateway,
                    session: "s".into(),
                    tool: Some("send_email".into()),
                    hook: None,
                    decision: if i == 3 {
                        Decision::Deny
                    } else {
                        Decision::Allow
                    },
                    reason: if i == 3 {
                        "trifecta".into()
                    } else {
                        "ok".into()
                    },
                    detail: json!({"n": i}),
                })
                .expect("append");
            rec.hash
        })
        .collect();
    (path, heads)
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, ls: &[String]) {
    fs::write(path, ls.join("\n") + "\n").expect("write");
}

fn assert_broken(r: &Run, prefix: &str) {
    assert_eq!(r.code, 1, "stdout: {} stderr: {}", r.stdout, r.stderr);
    assert!(
        r.stdout.starts_with(prefix),
        "expected `{prefix}…`, got: {}",
        r.stdout
    );
}

#[test]
fn intact_log_exits_zero_with_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, heads) = make_log(&dir, 1_700_000_000_000);
    let r = verify(&path, None);
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), format!("ok: 5 records, head {}", heads[4]));
    let r = verify(&path, Some(&heads[4]));
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
}

#[test]
fn anchor_from_earlier_accepts_later_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, heads) = make_log(&dir, 0);
    let r = verify(&path, Some(&heads[1]));
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("anchor is seq 2, 3 record(s) appended after it"),
        "{}",
        r.stdout
    );
}

#[test]
fn edited_record_names_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 0);
    let mut ls = lines(&path);
    ls[2] = ls[2].replace(r#""decision":"deny""#, r#""decision":"allow""#);
    write_lines(&path, &ls);
    assert_broken(&verify(&path, None), "BROKEN at seq 3: record edited");
}

#[test]
fn deleted_record_names_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 0);
    let mut ls = lines(&path);
    ls.remove(2);
    write_lines(&path, &ls);
    assert_broken(&verify(&path, None), "BROKEN at seq 3: record 3 deleted");
}

#[test]
fn swapped_records_are_reordering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 0);
    let mut ls = lines(&path);
    ls.swap(1, 2);
    write_lines(&path, &ls);
    assert_broken(&verify(&path, None), "BROKEN at seq 2: records reordered");
}

#[test]
fn truncation_needs_the_anchor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, heads) = make_log(&dir, 0);
    let ls = lines(&path);
    write_lines(&path, &ls[..4]);
    assert_eq!(
        verify(&path, None).code,
        0,
        "a shorter chain is still a chain"
    );
    assert_broken(
        &verify(&path, Some(&heads[4])),
        "BROKEN at seq 5: anchor not found: log truncated or rewritten",
    );
}

#[test]
fn full_rewrite_fails_against_the_old_anchor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, heads) = make_log(&dir, 0);
    fs::remove_file(&path).expect("rm");
    let (path, _) = make_log(&dir, 99);
    assert_eq!(
        verify(&path, None).code,
        0,
        "the fresh chain is internally valid"
    );
    let r = verify(&path, Some(&heads[4]));
    assert_broken(&r, "BROKEN at seq 6: anchor not found");
}

#[test]
fn partial_trailing_line_is_broken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 0);
    let text = fs::read_to_string(&path).expect("read");
    fs::write(&path, &text[..text.len() - 40]).expect("write");
    assert_broken(
        &verify(&path, None),
        "BROKEN at seq 5: partial record at line 5",
    );
}

#[test]
fn garbage_line_names_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = make_log(&dir, 0);
    let mut ls = lines(&path);
    ls.insert(1, "{\"seq\": 2, oops".into());
    write_lines(&path, &ls);
    assert_broken(
        &verify(&path, None),
        "BROKEN at line 2: not a valid audit record",
    );
}

#[test]
fn usage_errors_exit_two() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.jsonl");
    let r = verify(&missing, None);
    assert_eq!(r.code, 2, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
    let (path, _) = make_log(&dir, 0);
    let r = verify(&path, Some("not-a-hash"));
    assert_eq!(r.code, 2, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("64 hex digits"), "{}", r.stderr);
    assert_eq!(gatewayd(&["audit", "verify"]).code, 2);
}
