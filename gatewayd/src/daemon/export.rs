//! Export that never blocks a decision: JSON lines to a file or stdout through a bounded
//! queue and a thread of its own. A line that finds the queue full, or that the sink fails
//! to take, is dropped and counted; once the sink takes a line again, the count is written
//! into the audit chain (`export_dropped`). What is exported: the chain's head
//! ([`Anchor`]) every `anchor_every` and at each session's close, and at the daemon's stop
//! (docs/FLEET.md).
use std::{
    io::Write,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
    time::Duration,
};

use serde_json::json;

use super::gateway::Gateway;
use crate::shutdown::Shutdown;
use gatewayd_core::audit::{Decision as AD, Entry, anchors::Anchor, writer::WriterHandle};

/// Lines waiting for the sink at most; one more is dropped (and counted).
pub const EXPORT_QUEUE: usize = 4096;

/// Where exported lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportSink {
    /// The daemon's standard output (the journal, under systemd).
    Stdout,
    /// A file, appended to (created 0640).
    File(PathBuf),
}

impl ExportSink {
    /// `-` is stdout, anything else a file.
    pub fn parse(s: &str) -> ExportSink {
        if s == "-" {
            ExportSink::Stdout
        } else {
            ExportSink::File(PathBuf::from(s))
        }
    }

    fn name(&self) -> String {
        match self {
            ExportSink::Stdout => "stdout".into(),
            ExportSink::File(p) => p.display().to_string(),
        }
    }
}

/// What `gatewayd serve` exports.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Where.
    pub sink: ExportSink,
    /// How often the head is exported when the log grew (zero: only at session close and
    /// at stop).
    pub anchor_every: Duration,
}

/// The exporter's counts, as `stats` reports them.
#[derive(Debug, Default)]
pub struct ExportCounts {
    queued: AtomicU64,
    written: AtomicU64,
    /// Dropped because the queue was full.
    full: AtomicU64,
    /// Dropped because the sink failed to take them.
    failed: AtomicU64,
    /// Dropped since the chain was last told.
    unreported: AtomicU64,
}

/// A snapshot of [`ExportCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExportStats {
    /// Lines accepted into the queue.
    pub queued: u64,
    /// Lines the sink took.
    pub written: u64,
    /// Lines dropped: the queue full, or the sink failing.
    pub dropped: u64,
    /// Lines queued and not yet written or dropped.
    pub lag: u64,
}

/// The queue and its thread.
pub struct Exporter {
    tx: Mutex<Option<SyncSender<String>>>,
    counts: Arc<ExportCounts>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Exporter {
    /// Starts the thread that writes to `sink`; drops are recorded through `audit`.
    pub fn start(sink: ExportSink, audit: Option<WriterHandle>) -> std::io::Result<Exporter> {
        let out: Box<dyn Write + Send> = match &sink {
            ExportSink::Stdout => Box::new(std::io::stdout()),
            ExportSink::File(p) => {
                use std::os::unix::fs::OpenOptionsExt;
                Box::new(
                    std::fs::OpenOptions::new()
                        .append(true)
                        .create(true)
                        .mode(0o640)
                        .open(p)?,
                )
            }
        };
        Self::start_on(out, sink.name(), audit)
    }

    /// [`Exporter::start`] on a writer of the caller's.
    fn start_on(
        out: Box<dyn Write + Send>,
        name: String,
        audit: Option<WriterHandle>,
    ) -> std::io::Result<Exporter> {
        let (tx, rx) = sync_channel(EXPORT_QUEUE);
        let counts = Arc::new(ExportCounts::default());
        let c = counts.clone();
        let thread = std::thread::Builder::new()
            .name("gatewayd-export".into())
            .spawn(move || drain(&rx, out, &c, audit.as_ref(), &name))?;
        Ok(Exporter {
            tx: Mutex::new(Some(tx)),
            counts,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues one line; never waits: a full queue drops it (counted).
    pub fn export(&self, line: &serde_json::Value) {
        let sent = match lock(&self.tx).as_ref() {
            Some(tx) => tx.try_send(line.to_string()),
            None => return,
        };
        match sent {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counts.full.fetch_add(1, Ordering::Relaxed);
                self.counts.unreported.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counts now.
    pub fn stats(&self) -> ExportStats {
        let c = &self.counts;
        let queued = c.queued.load(Ordering::Relaxed);
        let written = c.written.load(Ordering::Relaxed);
        let failed = c.failed.load(Ordering::Relaxed);
        ExportStats {
            queued,
            written,
            dropped: c.full.load(Ordering::Relaxed) + failed,
            lag: queued.saturating_sub(written + failed),
        }
    }

    /// Writes what is queued and stops the thread; later lines are not exported.
    pub fn close(&self) {
        lock(&self.tx).take();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn drain(
    rx: &Receiver<String>,
    mut out: Box<dyn Write + Send>,
    counts: &ExportCounts,
    audit: Option<&WriterHandle>,
    sink: &str,
) {
    for mut line in rx {
        line.push('\n');
        if out
            .write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            counts.failed.fetch_add(1, Ordering::Relaxed);
            counts.unreported.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        counts.written.fetch_add(1, Ordering::Relaxed);
        let lost = counts.unreported.swap(0, Ordering::Relaxed);
        if lost > 0
            && let Some(h) = audit
        {
            let detail = json!({"sink": sink, "count": lost});
            let _ = h.submit(Entry::gateway("-", AD::Info, "export_dropped", detail));
        }
    }
}

/// This host's id: `/etc/machine-id`, else the host name.
pub fn host_id() -> String {
    ["/etc/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

/// What the gateway exports its heads with.
pub(crate) struct Anchors {
    pub(crate) exporter: Arc<Exporter>,
    pub(crate) host: String,
    pub(crate) log: Option<PathBuf>,
}

impl Gateway {
    /// Exports the chain's head now (`why`: `interval`, `session_close`, `stop`), when an
    /// exporter is set; returns the seq exported.
    pub(crate) fn export_head(&self, why: &str) -> Option<u64> {
        let anchors = self
            .anchors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        let head = self.audit_head();
        let a = Anchor {
            kind: "anchor".into(),
            seq: head.seq,
            hash: head.hash?,
            host: anchors.host.clone(),
            log: anchors.log.clone(),
            policy: self.engine().policy_digest().map(str::to_owned),
            ms: self.clock().now_ms(),
            why: why.into(),
        };
        anchors
            .exporter
            .export(&serde_json::to_value(&a).unwrap_or_default());
        Some(head.seq)
    }

    /// Sets where heads are exported.
    pub(crate) fn set_anchors(&self, anchors: Anchors) {
        *self
            .anchors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(anchors));
    }

    /// The exporter's counts (None: no export).
    pub fn export_stats(&self) -> Option<ExportStats> {
        self.anchors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|a| a.exporter.stats())
    }
}

/// Exports the head every `every` when the log grew since the last one, until `shutdown`.
pub(crate) async fn every(gw: Arc<Gateway>, every: Duration, mut shutdown: Shutdown) {
    if every.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = None;
    loop {
        tokio::select! {
            () = shutdown.recv() => return,
            _ = tick.tick() => {
                if gw.audit_head().seq != last.unwrap_or(0) {
                    last = gw.export_head("interval").or(last);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use gatewayd_core::{
        audit::{AuditLog, writer::AuditWriter},
        clock::SystemClock,
    };

    /// Fails its first `fail` writes, then takes everything.
    struct Flaky {
        fail: usize,
        got: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Flaky {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.fail > 0 {
                self.fail -= 1;
                return Err(std::io::Error::other("sink down"));
            }
            lock(&self.got).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn drops_are_written_into_the_chain_once_the_sink_takes_a_line_again() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let writer =
            AuditWriter::start(AuditLog::open(&log, Arc::new(SystemClock)).unwrap()).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = Flaky {
            fail: 2,
            got: got.clone(),
        };
        let x = Exporter::start_on(Box::new(sink), "flaky".into(), Some(writer.handle())).unwrap();
        for i in 0..3 {
            x.export(&json!({"n": i}));
        }
        x.close();
        let s = x.stats();
        assert_eq!((s.queued, s.written, s.dropped, s.lag), (3, 1, 2, 0));
        assert_eq!(
            String::from_utf8(lock(&got).clone()).unwrap(),
            "{\"n\":2}\n"
        );
        writer.close().unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        let rec: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(rec["reason"], "export_dropped");
        assert_eq!(rec["detail"], json!({"sink": "flaky", "count": 2}));
    }
}
