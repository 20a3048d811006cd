//! The chain's head exported as its own item ([`Anchor`]): every `--anchor-every-s` when the
//! log grew, at each session's close and at the daemon's stop. A collector that keeps them
//! can prove a host's log was rewritten or cut short (`gatewayd audit verify --anchors`).
use std::{path::PathBuf, sync::Arc, time::Duration};

use super::{ExporterStats, Exporters, Item};
use crate::{daemon::gateway::Gateway, shutdown::Shutdown};
use gatewayd_core::audit::anchors::Anchor;

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
    pub(crate) exporters: Arc<Exporters>,
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
        anchors.exporters.push(&Item::Head(Arc::new(a)));
        Some(head.seq)
    }

    /// Sets where heads are exported.
    pub(crate) fn set_anchors(&self, anchors: Anchors) {
        *self
            .anchors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(anchors));
    }

    /// Each exporter's counts (empty: no export).
    pub fn export_stats(&self) -> Vec<ExporterStats> {
        self.anchors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|a| a.exporters.stats())
            .unwrap_or_default()
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
