//! The records `gatewayd run` writes itself, and the path kernel denials take to the audit
//! log: one group-commit writer ([`gatewayd_core::audit::writer::AuditWriter`]) on its own thread, so
//! the runtime that forwards signals and serves the agent's gateway never waits on a disk.
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::daemon::Gateway;
use gateway_common::Reason;
use gatewayd_core::audit::{
    Entry, aggregate,
    writer::{WriteError, WriterHandle},
};

/// Appends `entry` and waits (without blocking the runtime) until it is durable.
pub(super) async fn append(audit: &WriterHandle, entry: Entry) -> Result<(), WriteError> {
    let ticket = audit.submit(entry)?;
    audit.wait_async(ticket).await
}

/// Kernel records queued between the kernel task and the writer; past this many not yet
/// durable, the forwarder waits for the disk, the kernel task then waits on the channel, and
/// events stay in the kernel's ring buffer (which counts what it cannot hold).
pub(super) const AUDIT_QUEUE: usize = 1024;

/// A kernel denial on its way to the audit log, with the reason it was decoded with (None: a
/// Landlock denial, whose blockers name no program's reason, or a code gatewayd does not
/// know).
pub(super) struct KernelRecord {
    pub(super) entry: Entry,
    pub(super) reason: Option<Reason>,
}

/// Where a kernel denial's suspicion goes: the agent's gateway, and the agent's cgroup as
/// its peers see it (`/proc/PID/cgroup`).
pub(super) struct Suspicion {
    pub(super) gateway: Arc<Gateway>,
    pub(super) cgroup: String,
}

/// What a session does when a kernel record cannot be written: the policy's
/// `on_audit_failure`.
pub(super) struct WhenUnrecorded {
    /// `stop` (the default): the agent's cgroup is killed; `continue`: it runs on.
    pub(super) stop: bool,
    /// The session's cgroup.
    pub(super) cgroup: std::path::PathBuf,
    /// Whether the agent was stopped already (it is stopped once).
    pub(super) stopped: bool,
}

impl WhenUnrecorded {
    /// Says on the terminal why, and (when the policy says stop) ends the agent: a session
    /// must not go on unrecorded.
    /// The kill is not waited for: the session's end (the agent's exit, seen by the runtime
    /// this runs on) tears down as usual.
    fn failed(&mut self, what: &str, e: &WriteError) {
        if self.stop {
            if !self.stopped {
                self.stopped = true;
                eprintln!(
                    "gatewayd: the audit log cannot be written ({e}; the record of {what} is lost): stopping the agent, as the policy's on_audit_failure says"
                );
                gatewayd_kernel::cgroup::signal_kill_tree(&self.cgroup);
            }
        } else {
            eprintln!(
                "gatewayd: audit write failed for {what}: {e} (the agent runs on: on_audit_failure is continue)"
            );
        }
    }
}

/// Hands the kernel task's records to the writer, in order, aggregated
/// ([`gatewayd_core::audit::aggregate`]: the first denial of each kind per window in full,
/// the rest counted, so a flood cannot fill the log). Submitting never waits for the disk;
/// every [`AUDIT_QUEUE`] records it waits for them to be durable. A record the writer refuses
/// is lost (the kernel has already decided): it is reported on stderr, and the agent is
/// stopped unless the policy's `on_audit_failure` is `continue`. A `protected_path` denial,
/// once recorded, counts toward the Rule of Two of the agent's gateway session (the policy's
/// `suspicion`; `Gateway::note_kernel_denial`). Ends, with everything submitted and every
/// open window's count recorded, once every sender is gone.
pub(super) async fn forward_kernel_records(
    mut rx: mpsc::Receiver<KernelRecord>,
    audit: WriterHandle,
    suspicion: Option<Suspicion>,
    mut unrecorded: WhenUnrecorded,
) {
    let mut out = Submitter {
        audit,
        pending: 0,
        unrecorded: &mut unrecorded,
    };
    let mut windows = aggregate::Timed::new();
    loop {
        let record = tokio::select! {
            r = rx.recv() => r,
            due = windows.window_end() => {
                out.submit_all(due, rx.is_empty()).await;
                continue;
            }
        };
        let Some(KernelRecord { entry, reason }) = record else {
            out.submit_all(windows.flush(), true).await;
            return;
        };
        let written = windows.offer(entry);
        let suspect = reason.filter(|r| r.is_secret_attempt() && !written.is_empty());
        out.submit_all(written, rx.is_empty()).await;
        if let (Some(reason), Some(s)) = (suspect, &suspicion) {
            // Its own task: the trip hook it may run waits on the kernel task, which may be
            // waiting for this loop to take its next record.
            let (gateway, cgroup) = (s.gateway.clone(), s.cgroup.clone());
            tokio::spawn(async move {
                if let Err(e) = gateway.note_kernel_denial(&cgroup, reason).await {
                    eprintln!("gatewayd: a kernel denial's suspicion: {}", e.message);
                }
            });
        }
    }
}

/// Submits records to the writer, waiting for durability every [`AUDIT_QUEUE`] records and
/// whenever nothing more is queued.
struct Submitter<'a> {
    audit: WriterHandle,
    pending: usize,
    unrecorded: &'a mut WhenUnrecorded,
}

impl Submitter<'_> {
    async fn submit_all(&mut self, entries: Vec<Entry>, idle: bool) {
        let n = entries.len();
        for (i, entry) in entries.into_iter().enumerate() {
            let what = format!(
                "{} {}",
                entry.hook.as_deref().unwrap_or("gateway"),
                entry.reason
            );
            match self.audit.submit(entry) {
                Ok(ticket) => {
                    self.pending += 1;
                    if self.pending >= AUDIT_QUEUE || (idle && i + 1 == n) {
                        self.pending = 0;
                        if let Err(e) = self.audit.wait_async(ticket).await {
                            self.unrecorded.failed(&what, &e);
                        }
                    }
                }
                Err(e) => self.unrecorded.failed(&what, &e),
            }
        }
    }
}
