//! The one audit writer of a daemon: a thread of its own (not the async runtime) that owns
//! the [`AuditLog`] and writes whatever was submitted since its last write with one
//! `write_all` and one `fdatasync` (group commit). Many decisions waiting at once share a
//! sync; a burst of them never blocks the runtime that serves signals and other clients.
//!
//! Submitting is quick and never waits for the disk ([`WriterHandle::submit`] returns a
//! [`Ticket`]); a caller then waits for its ticket to be durable, blocking
//! ([`WriterHandle::wait`]) or async ([`WriterHandle::wait_async`]). After the first write or
//! sync failure the writer is *failed*: the waiters of that batch and every later submission
//! get [`WriteError`], and nothing more is written (the log is poisoned, see [`AuditLog`]).
//! Closing ([`AuditWriter::close`]) writes what is queued, then stops the thread.
use std::{
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread::JoinHandle,
};

use tokio::sync::watch;

use super::{AuditLog, Entry, MAX_DETAIL_DEPTH, Record, log::depth};

/// Sees every record once it is durable, on the writer thread, in chain order (the daemon's
/// exporters). It must not block: it runs before the writer takes the next batch.
pub trait RecordTap: Send + Sync {
    /// `records` are durable, in order, and follow the ones of the previous call; each
    /// with its line as the log holds it (no newline).
    fn durable(&self, records: Vec<(Record, String)>);
}

/// Why a record is not (or will not be) durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// A write or sync failed; the log accepts nothing more.
    #[error("audit log unavailable: {0}")]
    Failed(String),
    /// The writer was closed before the record was submitted.
    #[error("audit writer closed")]
    Closed,
    /// The entry's `detail` nests deeper than [`MAX_DETAIL_DEPTH`]; refused at submission, nothing
    /// written.
    #[error(
        "record detail nested deeper than {MAX_DETAIL_DEPTH} levels: not written (it could not be read back)"
    )]
    TooDeep,
}

/// The position of one submitted record: durable once the writer's durable count reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// The last durable record: what to anchor elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Head {
    /// `seq` of the last durable record (0: empty log).
    pub seq: u64,
    /// Its hash; None for an empty log.
    pub hash: Option<String>,
}

/// What the writer has done so far, as async waiters see it.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// Tickets up to this one are durable.
    durable: u64,
    failed: Option<String>,
}

#[derive(Debug)]
struct State {
    queue: Vec<Entry>,
    /// The last ticket handed out.
    submitted: u64,
    durable: u64,
    failed: Option<String>,
    closing: bool,
    head: Head,
    /// Batches written and records in them (for tests and the benchmark).
    batches: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: something queued, or closing.
    work: Condvar,
    /// Wakes blocking waiters: the durable count moved or the writer failed.
    done: Condvar,
    progress: watch::Sender<Progress>,
    /// Who sees the durable records ([`WriterHandle::set_tap`]).
    tap: std::sync::RwLock<Option<Arc<dyn RecordTap>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Owns the writer thread; dropping it closes the writer (what is queued is written).
pub struct AuditWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A cheap, cloneable handle to submit records and wait for them.
#[derive(Clone)]
pub struct WriterHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WriterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterHandle")
            .field("head", &self.head())
            .finish_non_exhaustive()
    }
}

impl AuditWriter {
    /// Starts the writer thread on an opened log (which continues its chain).
    pub fn start(log: AuditLog) -> std::io::Result<AuditWriter> {
        let head = Head {
            seq: log.last_seq(),
            hash: log.head().map(str::to_owned),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: Vec::new(),
                submitted: 0,
                durable: 0,
                failed: None,
                closing: false,
                head,
                batches: 0,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            progress: watch::channel(Progress::default()).0,
            tap: std::sync::RwLock::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("gatewayd-audit".into())
            .spawn(move || writer_loop(&s, log))?;
        Ok(AuditWriter {
            shared,
            thread: Some(thread),
        })
    }

    /// A new handle for submitting records to this writer and waiting for them.
    pub fn handle(&self) -> WriterHandle {
        WriterHandle {
            shared: self.shared.clone(),
        }
    }

    /// Writes what is queued, stops the thread and waits for it. Later submissions get
    /// [`WriteError::Closed`]. Returns the writer's failure, if it failed.
    pub fn close(mut self) -> Result<Head, WriteError> {
        self.stop();
        let st = self.shared.lock();
        match &st.failed {
            Some(e) => Err(WriteError::Failed(e.clone())),
            None => Ok(st.head.clone()),
        }
    }

    fn stop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.work.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AuditWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Marks the writer failed if its thread ends (a panic) with records not yet durable, so
/// that no waiter waits forever.
struct ExitGuard<'a>(&'a Shared);

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if st.durable < st.submitted && st.failed.is_none() {
            st.failed = Some("the audit writer thread stopped".into());
        }
        st.closing = true;
        let p = Progress {
            durable: st.durable,
            failed: st.failed.clone(),
        };
        drop(st);
        self.0.done.notify_all();
        self.0.progress.send_replace(p);
    }
}

fn writer_loop(shared: &Shared, mut log: AuditLog) {
    let _guard = ExitGuard(shared);
    loop {
        let mut batch = {
            let mut st = shared.lock();
            while st.queue.is_empty() && !st.closing {
                st = shared
                    .work
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if st.queue.is_empty() {
                return;
            }
            std::mem::take(&mut st.queue)
        };
        // Group commit: before the sync, the threads that are ready to run on this CPU (those
        // deciding) get it first, and what they queue meanwhile shares this `fdatasync`.
        // With nothing else ready this returns at once; on a busy CPU it made each sync
        // carry more records, and durable decisions/s went up by two thirds in the fleet
        // bench (docs/FLEET.md).
        std::thread::yield_now();
        // Every record submitted so far is in `batch` now.
        let last = {
            let mut st = shared.lock();
            batch.append(&mut st.queue);
            st.submitted
        };
        let result = log.append_lines(batch);
        let mut st = shared.lock();
        let written = match result {
            Ok(recs) => {
                st.durable = last;
                st.batches += 1;
                if let Some((r, _)) = recs.last() {
                    st.head = Head {
                        seq: r.seq,
                        hash: Some(r.hash.clone()),
                    };
                }
                recs
            }
            Err(e) => {
                st.failed = Some(e.to_string());
                st.queue.clear();
                Vec::new()
            }
        };
        let p = Progress {
            durable: st.durable,
            failed: st.failed.clone(),
        };
        drop(st);
        // Before the waiters wake: whatever a waiter does next (closing the exporters at
        // stop) comes after its record was handed on.
        if !written.is_empty()
            && let Some(tap) = shared
                .tap
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
        {
            tap.durable(written);
        }
        shared.done.notify_all();
        shared.progress.send_replace(p);
    }
}

impl WriterHandle {
    /// Queues a record; it is durable once [`WriterHandle::wait`] on the ticket returns Ok.
    pub fn submit(&self, entry: Entry) -> Result<Ticket, WriteError> {
        if depth(&entry.detail) > MAX_DETAIL_DEPTH {
            return Err(WriteError::TooDeep);
        }
        let mut st = self.shared.lock();
        if let Some(e) = &st.failed {
            return Err(WriteError::Failed(e.clone()));
        }
        if st.closing {
            return Err(WriteError::Closed);
        }
        st.queue.push(entry);
        st.submitted += 1;
        let t = Ticket(st.submitted);
        drop(st);
        self.shared.work.notify_one();
        Ok(t)
    }

    /// The ticket of the last record submitted so far: waiting for it covers every record
    /// submitted before this call returned.
    pub fn last_ticket(&self) -> Ticket {
        Ticket(self.shared.lock().submitted)
    }

    /// Blocks until `t` is durable, or the writer failed.
    pub fn wait(&self, t: Ticket) -> Result<(), WriteError> {
        let mut st = self.shared.lock();
        loop {
            if st.durable >= t.0 {
                return Ok(());
            }
            if let Some(e) = &st.failed {
                return Err(WriteError::Failed(e.clone()));
            }
            st = self
                .shared
                .done
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Waits (async) until `t` is durable, or the writer failed.
    pub async fn wait_async(&self, t: Ticket) -> Result<(), WriteError> {
        let mut rx = self.shared.progress.subscribe();
        let p = rx
            .wait_for(|p| p.durable >= t.0 || p.failed.is_some())
            .await
            .map_err(|_| WriteError::Closed)?
            .clone();
        match p.failed {
            Some(e) if p.durable < t.0 => Err(WriteError::Failed(e)),
            _ => Ok(()),
        }
    }

    /// Submits and blocks until durable.
    pub fn append(&self, entry: Entry) -> Result<(), WriteError> {
        let t = self.submit(entry)?;
        self.wait(t)
    }

    /// Has `tap` see every record made durable from now on (None: nobody).
    pub fn set_tap(&self, tap: Option<Arc<dyn RecordTap>>) {
        *self
            .shared
            .tap
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tap;
    }

    /// The last durable record.
    pub fn head(&self) -> Head {
        self.shared.lock().head.clone()
    }

    /// The writer's failure, if any.
    pub fn failure(&self) -> Option<String> {
        self.shared.lock().failed.clone()
    }

    /// (batches written, records durable) since start.
    pub fn stats(&self) -> (u64, u64) {
        let st = self.shared.lock();
        (st.batches, st.durable)
    }
}

/// The engine's records through the writer, blocking until each is durable (the
/// [`AuditSink`](crate::engine::AuditSink) contract). The engine holds its sink lock while
/// appending, so calls through this sink do not share a sync: see [`DeferredSink`].
impl crate::engine::AuditSink for WriterHandle {
    fn append(&mut self, r: crate::engine::AuditRecord) -> Result<(), String> {
        WriterHandle::append(self, gateway_entry(r)).map_err(|e| e.to_string())
    }
}

/// The engine's records queued without waiting: the caller must wait for
/// [`WriterHandle::last_ticket`] (taken after the engine returned) before it acts on, or
/// answers with, the decision. This is how concurrent decisions share one sync.
#[derive(Debug, Clone)]
pub struct DeferredSink(pub WriterHandle);

impl crate::engine::AuditSink for DeferredSink {
    fn append(&mut self, r: crate::engine::AuditRecord) -> Result<(), String> {
        self.0
            .submit(gateway_entry(r))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// An engine record as a `source: gateway` entry.
pub fn gateway_entry(r: crate::engine::AuditRecord) -> Entry {
    Entry::gateway(&r.session, r.decision, r.reason, r.detail).tool(r.tool.as_deref())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{audit::Source, clock::ManualClock};

    fn entry(i: u64) -> Entry {
        Entry {
            source: Source::Gateway,
            session: "s".into(),
            tool: Some("t".into()),
            hook: None,
            decision: crate::audit::Decision::Allow,
            reason: "allowed".into(),
            detail: json!({"i": i}),
        }
    }

    fn open(dir: &tempfile::TempDir) -> (std::path::PathBuf, AuditLog) {
        let p = dir.path().join("a.jsonl");
        let log = AuditLog::open(&p, Arc::new(ManualClock::new(1_700_000_000_000))).unwrap();
        (p, log)
    }

    #[test]
    fn concurrent_submissions_share_syncs_and_the_chain_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let (p, log) = open(&dir);
        let w = AuditWriter::start(log).unwrap();
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let h = w.handle();
                std::thread::spawn(move || {
                    for j in 0..50 {
                        h.append(entry(i * 100 + j)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (batches, durable) = w.handle().stats();
        assert_eq!(durable, 800);
        assert!(batches < 800, "no group commit: {batches} batches");
        let head = w.close().unwrap();
        assert_eq!(head.seq, 800);
        let rep = crate::audit::verify(&p, head.hash.as_deref()).unwrap();
        assert_eq!(rep.records, 800);
    }

    #[test]
    fn the_chain_continues_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let (p, log) = open(&dir);
        let w = AuditWriter::start(log).unwrap();
        w.handle().append(entry(1)).unwrap();
        let queued = w.handle().submit(entry(2)).unwrap();
        // Closing writes what is queued.
        let h = w.handle();
        assert_eq!(w.close().unwrap().seq, 2);
        assert_eq!(h.wait(queued), Ok(()));
        assert_eq!(h.submit(entry(3)), Err(WriteError::Closed));
        let (_, log) = open(&dir);
        let w = AuditWriter::start(log).unwrap();
        w.handle().append(entry(3)).unwrap();
        assert_eq!(w.close().unwrap().seq, 3);
        assert_eq!(crate::audit::verify(&p, None).unwrap().records, 3);
    }

    #[test]
    fn too_deep_is_refused_at_submit() {
        let dir = tempfile::tempdir().unwrap();
        let (_, log) = open(&dir);
        let w = AuditWriter::start(log).unwrap();
        let mut deep = json!(1);
        for _ in 0..=MAX_DETAIL_DEPTH {
            deep = json!([deep]);
        }
        let mut e = entry(1);
        e.detail = deep;
        assert_eq!(w.handle().submit(e), Err(WriteError::TooDeep));
        w.handle().append(entry(2)).unwrap();
    }

    /// Keeps the seqs it sees.
    struct Seen(Mutex<Vec<u64>>);

    impl RecordTap for Seen {
        fn durable(&self, records: Vec<(Record, String)>) {
            let mut v = self.0.lock().unwrap();
            v.extend(records.iter().map(|(r, _)| r.seq));
        }
    }

    #[test]
    fn the_tap_sees_every_durable_record_in_order_before_its_waiter_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (_, log) = open(&dir);
        let w = AuditWriter::start(log).unwrap();
        let seen = Arc::new(Seen(Mutex::new(Vec::new())));
        w.handle().set_tap(Some(seen.clone()));
        for i in 0..20 {
            w.handle().append(entry(i)).unwrap();
            assert_eq!(seen.0.lock().unwrap().len() as u64, i + 1);
        }
        w.handle().set_tap(None);
        w.handle().append(entry(99)).unwrap();
        w.close().unwrap();
        assert_eq!(*seen.0.lock().unwrap(), (1..=20).collect::<Vec<u64>>());
    }

    #[tokio::test]
    async fn async_waiters_see_durability() {
        let dir = tempfile::tempdir().unwrap();
        let (_, log) = open(&dir);
        let w = AuditWriter::start(log).unwrap();
        let h = w.handle();
        let t = h.submit(entry(1)).unwrap();
        h.wait_async(t).await.unwrap();
        assert_eq!(h.head().seq, 1);
        assert_eq!(h.last_ticket(), t);
    }
}
