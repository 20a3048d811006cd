//! Tier 2: Landlock's denials of the agent's domain, read from the kernel's audit subsystem
//! (`crate::landlock_audit`) and sent into the session's audit log as `source: kernel`
//! records, beside those of the cgroup programs.
//!
//! The subscription is made before the agent starts, so no record is missed (the kernel
//! queues them on the socket); its reading starts once the host pid of the process that
//! makes the agent's Landlock domain is known ([`Reader::creator`]), and ends after the
//! session, once no record has come for a moment ([`Reader::stop`]).
use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use tokio::sync::mpsc;

use crate::{
    audit::{Decision, Entry, Source},
    landlock_audit::{Subscription, records::Tracker},
};

/// The reading thread of one session.
pub(super) struct Reader {
    stop: Arc<AtomicBool>,
    creator: std::sync::mpsc::Sender<u32>,
    thread: std::thread::JoinHandle<()>,
}

impl Reader {
    /// Joins the audit multicast group and starts the thread, which waits for the creator.
    /// Each denial is counted in `denials` and sent on `records`.
    pub(super) fn start(
        records: mpsc::Sender<Entry>,
        session: String,
        denials: Arc<AtomicU64>,
    ) -> std::io::Result<Reader> {
        let sub = Subscription::join()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (creator, creators) = std::sync::mpsc::channel::<u32>();
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("landlock-audit".into())
            .spawn(move || {
                let pid = loop {
                    match creators.recv_timeout(std::time::Duration::from_millis(100)) {
                        Ok(pid) => break pid,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                            if !halt.load(Ordering::Relaxed) => {}
                        Err(_) => return,
                    }
                };
                read(&sub, Tracker::new(vec![pid]), &halt, |d| {
                    denials.fetch_add(1, Ordering::Relaxed);
                    let entry = Entry {
                        source: Source::Kernel,
                        session: session.clone(),
                        tool: None,
                        hook: Some("landlock".into()),
                        decision: Decision::Deny,
                        reason: d.reason.to_string(),
                        detail: d.detail,
                    };
                    // The forwarder ends only after this thread has stopped.
                    let _ = records.blocking_send(entry);
                });
            })?;
        Ok(Reader {
            stop,
            creator,
            thread,
        })
    }

    /// The host pid of the process that makes the agent's domain.
    pub(super) fn creator(&self, pid: u32) {
        let _ = self.creator.send(pid);
    }

    /// After the session: reads what is still queued, then ends.
    pub(super) async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

/// Reads records until `halt` is set and a read then finds none.
fn read(
    sub: &Subscription,
    mut tracker: Tracker,
    halt: &AtomicBool,
    mut send: impl FnMut(crate::landlock_audit::records::Denial),
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match sub.next(&mut buf) {
            Ok(Some((ty, text))) => {
                for d in tracker.take(ty, &text) {
                    send(d);
                }
            }
            Ok(None) if halt.load(Ordering::Relaxed) => return,
            Ok(None) => {}
            Err(e) => {
                eprintln!("gatewayd: reading Landlock's audit records stopped: {e}");
                return;
            }
        }
    }
}
