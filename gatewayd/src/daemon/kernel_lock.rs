//! The daemon's Rule-of-Two hook: when a session trips, the kernel session its owner cgroup
//! runs in (if any) has all its egress turned off, and `egress_lockdown` is recorded durably,
//! before the tripping call is answered (`kernel::enclosing`). A cgroup no kernel session of
//! this gatewayd encloses has nothing to lock: the trip is recorded (`session_tripped`), and
//! the gateway still holds or denies the session's `sends_out` calls.
use std::time::Instant;

use serde_json::json;

use super::{HookFuture, TripHook, TrippedSession};
use gatewayd_core::audit::{Decision, Entry, Source, writer::WriterHandle};
use gatewayd_kernel::kernel::{
    self,
    enclosing::{Enclosing, lock_enclosing},
};

/// Locks the enclosing kernel session of a tripped session's cgroup.
pub struct KernelLockHook {
    /// Where `egress_lockdown` is recorded (None: not recorded; tests and benchmarks).
    pub audit: Option<WriterHandle>,
}

impl TripHook for KernelLockHook {
    fn session_tripped<'a>(&'a self, s: &'a TrippedSession<'a>) -> HookFuture<'a> {
        Box::pin(async move {
            let cgroup = s.cgroup.to_owned();
            let t0 = Instant::now();
            let found = tokio::task::spawn_blocking(move || lock_enclosing(&cgroup))
                .await
                .map_err(|e| format!("the lockdown task failed: {e}"))?
                .map_err(|e| kernel::chain(&e))?;
            let Enclosing::Locked { session, cgroup } = found else {
                return Ok(());
            };
            let Some(audit) = &self.audit else {
                return Ok(());
            };
            let entry = Entry {
                source: Source::Gateway,
                session: s.id.to_owned(),
                tool: s.tool.map(str::to_owned),
                hook: None,
                decision: Decision::Deny,
                reason: "egress_lockdown".into(),
                detail: json!({
                    "trigger": "rule_of_two",
                    "method": s.method,
                    "legs": s.legs,
                    "cgroup": s.cgroup,
                    "kernel_session": session,
                    "kernel_cgroup": cgroup,
                    "lockdown_us": u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX),
                    "message": "all egress of the agent's cgroup is denied from now on",
                }),
            };
            let ticket = audit.submit(entry).map_err(|e| e.to_string())?;
            audit.wait_async(ticket).await.map_err(|e| e.to_string())
        })
    }
}
