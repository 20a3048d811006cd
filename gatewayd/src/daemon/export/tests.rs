use std::sync::Arc;

use super::*;
use gatewayd_core::{
    audit::{AuditLog, writer::AuditWriter},
    clock::SystemClock,
};

/// Fails its first `fail` sends (retryable), then takes everything.
struct Flaky {
    fail: usize,
    got: Arc<Mutex<Vec<u64>>>,
}

impl Sink for Flaky {
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError> {
        if self.fail > 0 {
            self.fail -= 1;
            return Err(SinkError::Retry("sink down".into()));
        }
        for i in batch {
            if let Item::Head(a) = i {
                lock(&self.got).push(a.seq);
            }
        }
        Ok(())
    }
}

fn head(seq: u64) -> Item {
    Item::Head(Arc::new(Anchor {
        kind: "anchor".into(),
        seq,
        hash: String::new(),
        host: String::new(),
        log: None,
        policy: None,
        ms: 0,
        why: String::new(),
    }))
}

fn last_records(log: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(log).unwrap();
    let all: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    all[all.len().saturating_sub(n)..].to_vec()
}

#[test]
fn a_failing_sink_gets_the_same_batch_again_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let writer = AuditWriter::start(AuditLog::open(&log, Arc::new(SystemClock)).unwrap()).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = Flaky {
        fail: 2,
        got: got.clone(),
    };
    let x = Exporter::start_on(Box::new(sink), "flaky".into(), Some(writer.handle())).unwrap();
    for i in 0..3 {
        x.push(head(i));
    }
    x.close();
    let s = x.stats();
    assert_eq!((s.queued, s.exported, s.dropped, s.lag), (3, 3, 0, 0));
    assert!(!s.failing);
    assert_eq!(s.last_error.as_deref(), Some("sink down"));
    assert_eq!(*lock(&got), [0, 1, 2]);
    writer.close().unwrap();
    // One record when it began failing; nothing dropped, so no export_dropped.
    let recs = last_records(&log, 1);
    assert_eq!(recs[0]["reason"], "export_failing");
    assert_eq!(
        recs[0]["detail"],
        json!({"sink": "flaky", "error": "sink down"})
    );
}

#[test]
fn drops_of_a_full_queue_are_written_into_the_chain_once_the_sink_takes_items_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let writer = AuditWriter::start(AuditLog::open(&log, Arc::new(SystemClock)).unwrap()).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    // Failing long enough (100+200+400+800 ms of back-off) for the queue to fill.
    let sink = Flaky {
        fail: 4,
        got: got.clone(),
    };
    let x = Exporter::start_on(Box::new(sink), "flaky".into(), Some(writer.handle())).unwrap();
    // The queue, and one batch (its size depends on timing) in the thread's hands.
    let total = (EXPORT_QUEUE + MAX_BATCH + 10) as u64;
    for i in 0..total {
        x.push(head(i));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while x.stats().lag > 0 {
        assert!(Instant::now() < deadline, "{:?}", x.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    x.close();
    let s = x.stats();
    assert!(s.dropped >= 10, "{s:?}");
    assert_eq!(s.exported + s.dropped, total, "{s:?}");
    assert_eq!(lock(&got).len() as u64, s.exported);
    writer.close().unwrap();
    let recs = last_records(&log, 2);
    assert_eq!(recs[0]["reason"], "export_failing");
    assert_eq!(recs[1]["reason"], "export_dropped");
    assert_eq!(
        recs[1]["detail"],
        json!({"sink": "flaky", "count": s.dropped})
    );
}

/// docs/FLEET.md's exported records (every line of a `json` block that is a record) are what
/// the exporter writes for them, OCSF attributes included; between them they show every
/// class the exporter maps to.
#[test]
fn the_siem_examples_of_fleet_md_are_what_the_exporter_writes() {
    let doc = include_str!("../../../../docs/FLEET.md");
    let mut classes = std::collections::BTreeSet::new();
    let mut in_json = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            in_json = line == "```json";
            continue;
        }
        if !in_json || !line.starts_with("{\"type\":\"record\"") {
            continue;
        }
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let host = v["host"].as_str().unwrap().to_owned();
        classes.insert(v["ocsf"]["class_uid"].as_u64().unwrap());
        let m = v.as_object_mut().unwrap();
        for k in ["type", "host", "ocsf"] {
            m.remove(k);
        }
        let r: gatewayd_core::audit::Record = serde_json::from_value(v).unwrap();
        assert_eq!(
            json::record_line(&r, &r.canonical_line(), &json::host_json(&host)),
            line
        );
    }
    assert_eq!(
        classes.into_iter().collect::<Vec<_>>(),
        [1001, 1007, 4001, 6002, 6003]
    );
}

/// Records written together share one buffer; each item still reads its own record's fields
/// and line, whatever their lengths, and the buffer lives as long as any of them.
#[test]
fn records_made_ready_together_each_keep_their_own_fields() {
    use gatewayd_core::audit::{Decision, Source};
    let record = |seq: u64, tool: Option<&str>, hook: Option<&str>| Record {
        seq,
        prev: "p".repeat(usize::try_from(seq).unwrap()),
        ts: format!("2026-12-06T0{seq}:00:00.000Z"),
        source: if hook.is_some() {
            Source::Kernel
        } else {
            Source::Gateway
        },
        session: format!("session-{seq}"),
        tool: tool.map(str::to_owned),
        hook: hook.map(str::to_owned),
        decision: if seq.is_multiple_of(2) {
            Decision::Deny
        } else {
            Decision::Allow
        },
        reason: "r".repeat(usize::try_from(seq % 3).unwrap()),
        detail: serde_json::json!({"n": seq, "é": "✓"}),
        hash: format!("{seq:064}"),
    };
    let records = vec![
        record(1, Some("read_file"), None),
        record(2, None, Some("lsm/file_open")),
        record(3, None, None),
        record(4, Some(""), None),
    ];
    let written: Vec<(Record, String)> = records
        .iter()
        .map(|r| (r.clone(), r.canonical_line()))
        .collect();
    let host = json::host_json("m1");
    let items: Vec<Item> = Durable::new(&written, &host).items().collect();
    drop(written);
    assert_eq!(items.len(), records.len());
    for (item, r) in items.iter().zip(&records) {
        let Item::Record(e) = item else {
            panic!("not a record")
        };
        assert_eq!(e.line(), json::record_line(r, &r.canonical_line(), &host));
        assert_eq!(
            (e.seq(), e.prev(), e.hash(), e.ts(), e.session(), e.reason()),
            (r.seq, &*r.prev, &*r.hash, &*r.ts, &*r.session, &*r.reason)
        );
        assert_eq!((e.source(), e.decision()), (r.source, r.decision));
        assert_eq!((e.tool(), e.hook()), (r.tool.as_deref(), r.hook.as_deref()));
        assert_eq!(e.class(), ocsf::class(r));
    }
    // The last item alone keeps the buffer alive.
    let last = items.last().cloned();
    drop(items);
    let Some(Item::Record(e)) = last else {
        panic!("no last record")
    };
    assert_eq!(e.session(), "session-4");
}
