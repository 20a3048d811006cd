//! Anchored chain heads: the daemon exports its head at each session's close and at stop;
//! `gatewayd audit verify LOG --anchors FILE` then catches a log rewritten with a recomputed
//! chain (which verifies without the anchors) and one cut short. An export sink that fails
//! never holds a decision back; its drops are counted.
use std::{path::Path, process::Command, time::Duration};

use gatewayd::daemon::{ExportOptions, ExportSpec};
use gatewayd_core::audit::{GENESIS, Record};
use serde_json::{Value, json};

use crate::support::{Daemon, records};

fn verify(log: &Path, anchors: Option<&Path>) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gatewayd"));
    c.args(["audit", "verify"]).arg(log);
    if let Some(a) = anchors {
        c.arg("--anchors").arg(a);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes `recs` as a log with the chain recomputed from the first record on.
fn write_chain(path: &Path, mut recs: Vec<Record>) {
    let mut prev = GENESIS.to_owned();
    let mut text = String::new();
    for r in &mut recs {
        r.prev.clone_from(&prev);
        r.hash = r.compute_hash();
        prev.clone_from(&r.hash);
        text.push_str(&r.canonical_line());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn session(d: &Daemon, id: &str) {
    d.three_counted_calls(id);
}

#[test]
fn exported_heads_catch_a_rewritten_log_and_a_truncated_one() {
    let out = tempfile::tempdir().unwrap();
    let anchors = out.path().join("anchors.jsonl");
    let log = out.path().join("audit.jsonl");
    let d = Daemon::start_exporting(
        log.clone(),
        ExportOptions {
            sinks: vec![ExportSpec::File(anchors.clone())],
            anchor_every: Duration::ZERO,
            host_id: None,
            ..Default::default()
        },
    );
    session(&d, "first");
    session(&d, "second");
    d.stop().unwrap();
    // The file has every record too (`type: record`); `--anchors` reads only the heads.
    let heads: Vec<Value> = lines(&anchors)
        .into_iter()
        .filter(|h| h["type"] == "anchor")
        .collect();
    let whys: Vec<&str> = heads.iter().map(|h| h["why"].as_str().unwrap()).collect();
    assert_eq!(whys, ["session_close", "session_close", "stop"]);
    let recs = records(&log);
    for h in &heads {
        assert_eq!(h["type"], "anchor");
        assert!(!h["host"].as_str().unwrap().is_empty());
        assert_eq!(h["policy"].as_str().unwrap().len(), 64);
        let at = &recs[h["seq"].as_u64().unwrap() as usize - 1];
        assert_eq!(at["hash"], h["hash"]);
    }
    assert_eq!(recs.last().unwrap()["seq"], heads[2]["seq"]);
    let (code, text) = verify(&log, Some(&anchors));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("matches all 3 exported head(s)"), "{text}");

    // Rewritten: a decision of the first session made to look like another user's, and
    // every hash after it recomputed.
    let mut parsed: Vec<Record> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let i = parsed
        .iter()
        .position(|r| r.tool.as_deref() == Some("count"))
        .unwrap();
    parsed[i].detail["user"] = json!("mallory");
    let rewritten = out.path().join("rewritten.jsonl");
    write_chain(&rewritten, parsed);
    let (code, text) = verify(&rewritten, None);
    assert_eq!(code, 0, "without anchors the rewrite verifies: {text}");
    let (code, text) = verify(&rewritten, Some(&anchors));
    assert_eq!(code, 1, "{text}");
    assert!(text.starts_with("BROKEN at anchor 1 "), "{text}");
    assert!(text.contains("rewritten"), "{text}");

    // Truncated after the first session's close: a valid chain, one exported head short.
    let cut = heads[0]["seq"].as_u64().unwrap() as usize;
    let original_text = std::fs::read_to_string(&log).unwrap();
    let original: Vec<&str> = original_text.lines().collect();
    let truncated = out.path().join("truncated.jsonl");
    std::fs::write(&truncated, original[..cut].join("\n") + "\n").unwrap();
    let (code, text) = verify(&truncated, None);
    assert_eq!(code, 0, "without anchors the cut log verifies: {text}");
    let (code, text) = verify(&truncated, Some(&anchors));
    assert_eq!(code, 1, "{text}");
    assert!(text.starts_with("BROKEN at anchor 2 "), "{text}");
    assert!(text.contains("truncated"), "{text}");
}

#[test]
fn a_failing_sink_never_holds_a_decision_and_its_drops_are_recorded_at_stop() {
    // Every write to /dev/full fails (ENOSPC): the sink is retried with back-off, its items
    // wait in its queue, and at stop (after a grace) they are dropped and recorded.
    let out = tempfile::tempdir().unwrap();
    let d = Daemon::start_exporting(
        out.path().join("audit.jsonl"),
        ExportOptions {
            sinks: vec![ExportSpec::File("/dev/full".into())],
            anchor_every: Duration::ZERO,
            host_id: None,
            ..Default::default()
        },
    );
    for i in 0..5 {
        session(&d, &format!("s{i}"));
    }
    // The sink's first attempt comes once its batch has gathered (up to 200 ms).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !d.gw.export_stats()[0].failing {
        assert!(
            std::time::Instant::now() < deadline,
            "the sink never failed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = &d.gw.export_stats()[0];
    assert_eq!(stats.sink, "json:/dev/full");
    assert_eq!(stats.exported, 0);
    assert!(stats.failing, "{stats:?}");
    assert!(
        stats
            .last_error
            .as_deref()
            .unwrap()
            .contains("No space left"),
        "{stats:?}"
    );
    let gw = d.gw.clone();
    let log = d.audit.clone().unwrap();
    d.stop().unwrap();
    let after = &gw.export_stats()[0];
    assert_eq!(after.dropped, after.queued, "{after:?}");
    // Every call was decided and recorded all the same.
    let recs = records(&log);
    let decided = recs
        .iter()
        .filter(|r| r["tool"] == "count" && r["decision"] == "allow")
        .count();
    assert_eq!(decided, 15);
    let failing: Vec<_> = recs
        .iter()
        .filter(|r| r["reason"] == "export_failing")
        .collect();
    assert_eq!(failing.len(), 1);
    assert_eq!(failing[0]["detail"]["sink"], "json:/dev/full");
    let last = recs.last().unwrap();
    assert_eq!(last["reason"], "export_dropped");
    assert_eq!(
        last["detail"],
        json!({"sink": "json:/dev/full", "count": after.dropped, "at": "stop"})
    );
}
