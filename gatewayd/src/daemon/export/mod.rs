//! Audit export that never blocks a decision (docs/FLEET.md). Every record the audit writer
//! made durable, and the chain's head at intervals, go to each configured sink through a
//! bounded queue and a thread of its own ([`Exporter`]): the writer only tries to queue, so a
//! slow or dead sink never holds a decision back, and the local chain stays whole. A sink
//! that fails gets the same batch again after a back-off (100 ms doubling to 30 s); records
//! that find its queue full are dropped from that sink only and counted, and the count is
//! written into the chain (`export_dropped`) when the sink takes records again.
//!
//! Layout: this file, the queue and its thread; `exported.rs`, each write's records made
//! ready for the sinks on the writer's thread; `attach.rs`, the exporters wired into a daemon
//! or a `gatewayd run` session (writer's tap, heads, the end); `spec.rs`, `--export
//! KIND:TARGET`; one file per sink behind [`Sink`] (`json.rs`, `syslog.rs`, `journal.rs`,
//! `otlp.rs` with `otlp/wire.rs`, `otlp_grpc.rs`); `ocsf.rs`, the OCSF class of a record;
//! `heads.rs`, the exported heads.
use std::{
    collections::VecDeque,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::json;

pub use crate::protocol::ExporterStats;

use gatewayd_core::audit::{
    Decision as AD, Entry, Record, anchors::Anchor, writer::RecordTap, writer::WriterHandle,
};

mod attach;
mod exported;
pub(crate) mod heads;
mod journal;
mod json;
mod ocsf;
mod otlp;
mod otlp_grpc;
mod spec;
mod syslog;

pub use attach::Export;
use exported::Durable;
pub use exported::Exported;
pub use heads::host_id;
pub(crate) use heads::{Anchors, every};
pub use spec::{ExportSpec, SpecError, SyslogTransport};

/// Items waiting for one sink at most; one more is dropped (and counted).
pub const EXPORT_QUEUE: usize = 4096;
/// Items sent to a sink at once at most.
const MAX_BATCH: usize = 1024;
/// How long the thread lets items gather after the first of a batch, unless [`MAX_BATCH`]
/// are there sooner: few, large batches (one OTLP request, one TCP write for hundreds of
/// records under load), so that what each batch costs the daemon and the receiver is paid
/// rarely; the export lag this adds stays well under a second.
const LINGER: Duration = Duration::from_millis(200);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// At stop, how long a failing sink is still retried before what is queued is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// What `gatewayd serve` (or `run`) exports.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Where (one exporter each).
    pub sinks: Vec<ExportSpec>,
    /// How often the head is exported when the log grew (zero: only at session close and
    /// at stop).
    pub anchor_every: Duration,
    /// This host's id in every item (`--host-id`; a Kubernetes node's name); None:
    /// `/etc/machine-id`, else the host name ([`host_id`]).
    pub host_id: Option<String>,
    /// `--export-ca`: a PEM file of CA certificates that TLS sinks trust besides the
    /// system's roots.
    pub ca: Option<std::path::PathBuf>,
}

/// One thing exported: a durable record of the chain, or the chain's head.
#[derive(Debug, Clone)]
pub enum Item {
    /// A record, as written to the log.
    Record(Exported),
    /// The head ([`heads`]).
    Head(Arc<Anchor>),
}

/// Why a sink did not take a batch.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Down, unreachable or too slow: the same batch is tried again after a back-off.
    #[error("{0}")]
    Retry(String),
    /// The sink answered that it will not take these items: they are dropped (counted).
    #[error("{0}")]
    Refused(String),
}

/// Where exported items go: one implementation per kind of sink, each on its exporter's
/// thread (so it may block, within its own timeouts).
pub trait Sink: Send {
    /// Delivers `batch`, in order.
    fn send(&mut self, batch: &[Item]) -> Result<(), SinkError>;
}

/// Who this host is, in every sink's items.
#[derive(Debug, Clone)]
pub struct HostInfo {
    /// `/etc/machine-id`, else the host name ([`host_id`]).
    pub id: String,
    /// The host name.
    pub name: String,
}

impl HostInfo {
    /// This host.
    pub fn here() -> HostInfo {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        HostInfo {
            id: host_id(),
            name: if name.is_empty() { "-".into() } else { name },
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    queued: AtomicU64,
    exported: AtomicU64,
    /// Dropped because the queue was full.
    full: AtomicU64,
    /// Dropped because the sink refused them, or was still failing at stop.
    failed: AtomicU64,
    /// Dropped since the chain was last told.
    unreported: AtomicU64,
    /// Queue to sink, of the last batch delivered, in ms.
    lag_ms: AtomicU64,
    failing: AtomicBool,
    last_error: Mutex<Option<String>>,
    /// When close was asked for.
    closing: Mutex<Option<Instant>>,
}

struct Queued {
    item: Item,
    at: Instant,
}

/// The items waiting for one sink: the audit writer adds a whole durable batch under one
/// lock, the exporter's thread takes up to [`MAX_BATCH`] at once.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    /// Wakes the thread: the first item of an empty queue, a full batch, or closing.
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Queued>,
    closed: bool,
}

impl Queue {
    /// The next batch: waits for a first item, then up to [`LINGER`] from its queueing for
    /// [`MAX_BATCH`] of them (not once close was asked for); None when closed and empty.
    fn next_batch(&self, give_up: bool) -> Option<Vec<Queued>> {
        let mut st = lock(&self.state);
        loop {
            if st.items.is_empty() {
                if st.closed {
                    return None;
                }
                st = self
                    .ready
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            let hurry = give_up || st.closed || st.items.len() >= MAX_BATCH;
            let waited = st.items.front().map_or(LINGER, |q| q.at.elapsed());
            if hurry || waited >= LINGER {
                let n = st.items.len().min(MAX_BATCH);
                return Some(st.items.drain(..n).collect());
            }
            st = self
                .ready
                .wait_timeout(st, LINGER.saturating_sub(waited))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// One sink's queue and thread.
pub struct Exporter {
    name: String,
    queue: Arc<Queue>,
    counts: Arc<Counts>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Exporter {
    /// Opens the sink of `spec` (a file is opened now, a TLS sink's CA file `ca` read;
    /// network sinks connect on first use) and starts its thread; failures and drops are
    /// recorded through `audit`.
    pub fn start(
        spec: &ExportSpec,
        host: &HostInfo,
        ca: Option<&std::path::Path>,
        audit: Option<WriterHandle>,
    ) -> std::io::Result<Exporter> {
        Self::start_on(spec.open(host, ca)?, spec.to_string(), audit)
    }

    /// [`Exporter::start`] on a sink of the caller's.
    pub fn start_on(
        sink: Box<dyn Sink>,
        name: String,
        audit: Option<WriterHandle>,
    ) -> std::io::Result<Exporter> {
        let queue = Arc::new(Queue::default());
        let counts = Arc::new(Counts::default());
        let (q, c, n) = (queue.clone(), counts.clone(), name.clone());
        let thread = std::thread::Builder::new()
            .name("gatewayd-export".into())
            .spawn(move || {
                Drain {
                    sink,
                    counts: &c,
                    audit: audit.as_ref(),
                    name: &n,
                }
                .run(&q);
            })?;
        Ok(Exporter {
            name,
            queue,
            counts,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues one item; never waits: a full queue drops it (counted). After close, nothing.
    pub fn push(&self, item: Item) {
        self.push_all(std::iter::once(item));
    }

    /// Queues `items` in order under one lock, waking the thread at most once; never waits:
    /// what finds the queue full is dropped (counted). After close, nothing.
    fn push_all(&self, items: impl Iterator<Item = Item>) {
        let at = Instant::now();
        let mut st = lock(&self.queue.state);
        if st.closed {
            return;
        }
        let before = st.items.len();
        let (mut queued, mut full) = (0, 0);
        for item in items {
            if st.items.len() < EXPORT_QUEUE {
                st.items.push_back(Queued { item, at });
                queued += 1;
            } else {
                full += 1;
            }
        }
        let after = st.items.len();
        drop(st);
        let c = &self.counts;
        c.queued.fetch_add(queued, Ordering::Relaxed);
        if full > 0 {
            c.full.fetch_add(full, Ordering::Relaxed);
            c.unreported.fetch_add(full, Ordering::Relaxed);
        }
        if (before == 0 && after > 0) || (before < MAX_BATCH && after >= MAX_BATCH) {
            self.queue.ready.notify_one();
        }
    }

    /// The counts now.
    pub fn stats(&self) -> ExporterStats {
        let c = &self.counts;
        let queued = c.queued.load(Ordering::Relaxed);
        let exported = c.exported.load(Ordering::Relaxed);
        let failed = c.failed.load(Ordering::Relaxed);
        ExporterStats {
            sink: self.name.clone(),
            queued,
            exported,
            dropped: c.full.load(Ordering::Relaxed) + failed,
            lag: queued.saturating_sub(exported + failed),
            lag_ms: c.lag_ms.load(Ordering::Relaxed),
            failing: c.failing.load(Ordering::Relaxed),
            last_error: lock(&c.last_error).clone(),
        }
    }

    /// Delivers what is queued (a failing sink gets [`CLOSE_GRACE`] more, then the rest is
    /// dropped and recorded) and stops the thread; later items are not exported.
    pub fn close(&self) {
        lock(&self.counts.closing).get_or_insert_with(Instant::now);
        lock(&self.queue.state).closed = true;
        self.queue.ready.notify_one();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

/// Every exporter of the daemon: sees each durable record (the writer's tap) and each head.
#[derive(Default)]
pub struct Exporters {
    list: Vec<Exporter>,
    /// This host's id as a JSON string, for every exported line.
    host_json: String,
}

impl Exporters {
    /// Starts one exporter per spec; the first that cannot start is the error.
    pub fn start(
        specs: &[ExportSpec],
        host: &HostInfo,
        ca: Option<&std::path::Path>,
        audit: Option<&WriterHandle>,
    ) -> std::io::Result<Exporters> {
        specs
            .iter()
            .map(|s| {
                Exporter::start(s, host, ca, audit.cloned())
                    .map_err(|e| std::io::Error::new(e.kind(), format!("--export {s}: {e}")))
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map(|list| Exporters {
                list,
                host_json: json::host_json(&host.id),
            })
    }

    /// To every exporter.
    pub fn push(&self, item: &Item) {
        for x in &self.list {
            x.push(item.clone());
        }
    }

    /// `items`, in order, to every exporter (one lock of each queue).
    fn push_all(&self, items: &[Item]) {
        for x in &self.list {
            x.push_all(items.iter().cloned());
        }
    }

    /// Each exporter's counts, in the order configured.
    pub fn stats(&self) -> Vec<ExporterStats> {
        self.list.iter().map(Exporter::stats).collect()
    }

    /// Closes every exporter (each gets its grace at once).
    pub fn close(&self) {
        for x in &self.list {
            lock(&x.counts.closing).get_or_insert_with(Instant::now);
        }
        for x in &self.list {
            x.close();
        }
    }
}

impl RecordTap for Exporters {
    fn durable(&self, records: Vec<(Record, String)>) {
        let items: Vec<Item> = Durable::new(&records, &self.host_json).items().collect();
        // The records, a dozen small blocks each, freed here, on the thread that made them.
        drop(records);
        self.push_all(&items);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The exporter's thread: batches from the queue to the sink, retried with back-off.
struct Drain<'a> {
    sink: Box<dyn Sink>,
    counts: &'a Counts,
    audit: Option<&'a WriterHandle>,
    name: &'a str,
}

impl Drain<'_> {
    fn run(mut self, queue: &Queue) {
        let mut give_up = false;
        while let Some(batch) = queue.next_batch(give_up) {
            if give_up {
                self.lost(batch.len());
                continue;
            }
            give_up = !self.deliver(&batch);
        }
        let lost = self.counts.unreported.swap(0, Ordering::Relaxed);
        if lost > 0 {
            self.record(
                "export_dropped",
                json!({"sink": self.name, "count": lost, "at": "stop"}),
            );
        }
    }

    /// Sends `batch` until the sink takes or refuses it; false when the sink still failed
    /// after the stop's grace (the batch is then dropped).
    fn deliver(&mut self, batch: &[Queued]) -> bool {
        let items: Vec<Item> = batch.iter().map(|q| q.item.clone()).collect();
        let mut backoff = BACKOFF_MIN;
        loop {
            match self.sink.send(&items) {
                Ok(()) => {
                    let c = self.counts;
                    c.exported.fetch_add(items.len() as u64, Ordering::Relaxed);
                    let lag = batch.first().map_or(0, |q| q.at.elapsed().as_millis());
                    c.lag_ms.store(lag as u64, Ordering::Relaxed);
                    self.recovered();
                    return true;
                }
                Err(SinkError::Refused(e)) => {
                    self.failed(&format!("{e}; {} record(s) dropped", items.len()));
                    self.lost(items.len());
                    return true;
                }
                Err(SinkError::Retry(e)) => {
                    self.failed(&e);
                    if self.past_grace() {
                        self.lost(items.len());
                        return false;
                    }
                    self.sleep(backoff);
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    fn lost(&self, n: usize) {
        self.counts.failed.fetch_add(n as u64, Ordering::Relaxed);
        self.counts
            .unreported
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The first failure after a success: one line on stderr and an `export_failing` record.
    fn failed(&self, error: &str) {
        *lock(&self.counts.last_error) = Some(error.to_owned());
        if self.counts.failing.swap(true, Ordering::Relaxed) {
            return;
        }
        eprintln!(
            "gatewayd: export to {}: {error}; retrying with back-off (up to {} s); records wait in a queue of {EXPORT_QUEUE}, past that they are dropped from this export only and counted",
            self.name,
            BACKOFF_MAX.as_secs()
        );
        self.record("export_failing", json!({"sink": self.name, "error": error}));
    }

    /// A batch delivered: the drops since the chain was last told go into it.
    fn recovered(&self) {
        if self.counts.failing.swap(false, Ordering::Relaxed) {
            eprintln!("gatewayd: export to {}: delivering again", self.name);
        }
        let lost = self.counts.unreported.swap(0, Ordering::Relaxed);
        if lost > 0 {
            self.record("export_dropped", json!({"sink": self.name, "count": lost}));
        }
    }

    fn record(&self, reason: &str, detail: serde_json::Value) {
        if let Some(h) = self.audit {
            let _ = h.submit(Entry::gateway("-", AD::Info, reason, detail));
        }
    }

    fn past_grace(&self) -> bool {
        lock(&self.counts.closing).is_some_and(|t| t.elapsed() >= CLOSE_GRACE)
    }

    /// Sleeps `d`, or less once close was asked for and its grace ran out.
    fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until && !self.past_grace() {
            std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests;
