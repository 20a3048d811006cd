//! The records `gatewayd run` writes itself, and the path kernel denials take to the audit
//! log: one group-commit writer ([`gatewayd_core::audit::writer::AuditWriter`]) on its own thread, so
//! the runtime that forwards signals and serves the agent's gateway never waits on a disk.
use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use crate::daemon::{Gateway, suspicion::PROTECTED_PATH};
use gatewayd_core::audit::{
    Decision, Entry, Source,
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

/// Hands the kernel task's records to the writer, in order. Submitting never waits for the
/// disk; every [`AUDIT_QUEUE`] records it waits for them to be durable. A record the writer
/// refuses is lost (the kernel has already decided): it is reported on stderr, and the
/// agent is stopped unless the policy's `on_audit_failure` is `continue`. A
/// `protected_path` denial, once recorded, counts toward the Rule of Two of the agent's
/// gateway session (the policy's `suspicion`; `Gateway::note_kernel_denial`). Ends, with
/// everything submitted, once the kernel task has dropped its sender.
pub(super) async fn forward_kernel_records(
    mut rx: mpsc::Receiver<Entry>,
    audit: WriterHandle,
    suspicion: Option<Suspicion>,
    mut unrecorded: WhenUnrecorded,
) {
    let mut pending = 0;
    while let Some(entry) = rx.recv().await {
        let what = format!(
            "{} {}",
            entry.hook.as_deref().unwrap_or("gateway"),
            entry.reason
        );
        let suspect = entry.reason == PROTECTED_PATH;
        match audit.submit(entry) {
            Ok(ticket) => {
                pending += 1;
                if pending >= AUDIT_QUEUE || rx.is_empty() {
                    pending = 0;
                    if let Err(e) = audit.wait_async(ticket).await {
                        unrecorded.failed(&what, &e);
                    }
                }
            }
            Err(e) => unrecorded.failed(&what, &e),
        }
        if let (true, Some(s)) = (suspect, &suspicion) {
            // Its own task: the trip hook it may run waits on the kernel task, which may be
            // waiting for this loop to take its next record.
            let (gateway, cgroup) = (s.gateway.clone(), s.cgroup.clone());
            tokio::spawn(async move {
                if let Err(e) = gateway.note_kernel_denial(&cgroup, PROTECTED_PATH).await {
                    eprintln!("gatewayd: a kernel denial's suspicion: {}", e.message);
                }
            });
        }
    }
}

/// A gateway record of something refused on the agent's behalf (not a tool call).
pub(super) fn denial(session: &str, reason: &str, detail: serde_json::Value) -> Entry {
    Entry {
        decision: Decision::Deny,
        ..info(session, reason, detail)
    }
}

/// A gateway record of something that happened to the session.
pub(super) fn info(session: &str, reason: &str, detail: serde_json::Value) -> Entry {
    Entry {
        source: Source::Gateway,
        session: session.to_string(),
        tool: None,
        hook: None,
        decision: Decision::Info,
        reason: reason.to_string(),
        detail,
    }
}

/// An `egress_lockdown` record: all of the agent's egress is off from now on. `tool` names
/// the call that caused it, when a call did.
pub(super) fn lockdown_record(
    session: &str,
    tool: Option<&str>,
    mut detail: serde_json::Value,
) -> Entry {
    if let Some(d) = detail.as_object_mut() {
        d.insert(
            "message".into(),
            json!("all egress of the agent's cgroup is denied from now on"),
        );
    }
    Entry {
        tool: tool.map(str::to_owned),
        ..denial(session, "egress_lockdown", detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lockdown_record_names_the_call() {
        let e = lockdown_record("s", Some("read_inbox"), json!({"trigger": "rule_of_two"}));
        assert_eq!(e.reason, "egress_lockdown");
        assert_eq!(e.tool.as_deref(), Some("read_inbox"));
        assert_eq!(e.decision, Decision::Deny);
        assert_eq!(e.source, Source::Gateway);
        assert!(e.detail["message"].as_str().unwrap().contains("denied"));
    }
}
