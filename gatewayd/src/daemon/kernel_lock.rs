//! The Rule-of-Two lockdown: when a session trips, the kernel session it runs in has all its
//! egress turned off, and `egress_lockdown` is recorded durably, before the tripping call is
//! answered. One hook ([`LockdownHook`]) does the timing and the record; what it locks is an
//! [`EgressLock`]:
//! - `gatewayd serve`: [`EnclosingSession`], the kernel session that encloses the session's
//!   owner cgroup (`kernel::enclosing`), if this gatewayd has one; a cgroup no kernel session
//!   encloses has nothing to lock (the trip is still recorded, `session_tripped`, and the
//!   gateway still holds or denies the session's `sends_out` calls);
//! - `gatewayd run`: its own agent's kernel session (`supervisor::agent_gateway`).
use std::{future::Future, pin::Pin, time::Instant};

use serde_json::{Map, Value, json};

use super::{HookFuture, TripHook, TrippedSession};
use gatewayd_core::audit::{Entry, writer::WriterHandle};
use gatewayd_kernel::kernel::{
    self,
    enclosing::{Enclosing, lock_enclosing},
};

/// What [`EgressLock::lock`] returns: `Ok(Some(detail))` locked (with what the record adds),
/// `Ok(None)` nothing of ours to lock, `Err` why the lock failed.
pub(crate) type LockFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Map<String, Value>>, String>> + Send + 'a>>;

/// Turns off all egress of the kernel session a tripped session's owner cgroup runs in.
pub(crate) trait EgressLock: Send + Sync {
    /// Locks for `cgroup` (the owner cgroup, as peers see it).
    fn lock<'a>(&'a self, cgroup: &'a str) -> LockFuture<'a>;
}

/// The trip hook: locks through `L`, then records `egress_lockdown` and waits until it is
/// durable.
pub(crate) struct LockdownHook<L> {
    /// What locks.
    pub lock: L,
    /// Where `egress_lockdown` is recorded (None: not recorded; tests and benchmarks).
    pub audit: Option<WriterHandle>,
}

impl<L: EgressLock> TripHook for LockdownHook<L> {
    fn session_tripped<'a>(&'a self, s: &'a TrippedSession<'a>) -> HookFuture<'a> {
        Box::pin(async move {
            let t0 = Instant::now();
            let Some(locked) = self.lock.lock(s.cgroup).await? else {
                return Ok(());
            };
            let took = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
            let Some(audit) = &self.audit else {
                return Ok(());
            };
            let mut detail = json!({
                "trigger": "rule_of_two",
                "method": s.method,
                "legs": s.legs,
                "cgroup": s.cgroup,
                "lockdown_us": took,
            });
            if let Some(d) = detail.as_object_mut() {
                d.extend(locked);
            }
            let entry = Entry::egress_lockdown(s.id, s.tool, detail);
            let ticket = audit.submit(entry).map_err(|e| e.to_string())?;
            audit.wait_async(ticket).await.map_err(|e| e.to_string())
        })
    }
}

/// `gatewayd serve`'s lock: the innermost kernel session of this gatewayd's program set that
/// encloses the cgroup.
pub(crate) struct EnclosingSession;

impl EgressLock for EnclosingSession {
    fn lock<'a>(&'a self, cgroup: &'a str) -> LockFuture<'a> {
        Box::pin(async move {
            let cgroup = cgroup.to_owned();
            let found = tokio::task::spawn_blocking(move || lock_enclosing(&cgroup))
                .await
                .map_err(|e| format!("the lockdown task failed: {e}"))?
                .map_err(|e| kernel::chain(&e))?;
            let Enclosing::Locked { session, cgroup } = found else {
                return Ok(None);
            };
            let mut detail = Map::new();
            detail.insert("kernel_session".into(), json!(session));
            detail.insert("kernel_cgroup".into(), json!(cgroup));
            Ok(Some(detail))
        })
    }
}
