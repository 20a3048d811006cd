//! Export wired into a daemon or a `gatewayd run` session ([`Export`]): the exporters
//! started before the first record they must see, the audit writer's tap, the gateway's
//! heads (every `--anchor-every-s`, at each session close) and, at the end, the last head
//! and the exporters' close.
use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use super::{Anchors, ExportOptions, Exporters, HostInfo, every};
use crate::{daemon::gateway::Gateway, shutdown::Shutdown};
use gatewayd_core::audit::writer::WriterHandle;

/// The exporters of one daemon or session, and what they are attached to.
pub struct Export {
    exporters: Arc<Exporters>,
    opts: ExportOptions,
    host: String,
    log: Option<PathBuf>,
    writer: Option<WriterHandle>,
    gateway: Mutex<Option<Arc<Gateway>>>,
}

impl Export {
    /// Starts one exporter per sink of `opts` and has `writer` (the audit log at `log`) hand
    /// them every durable record from now on.
    pub fn start(
        opts: &ExportOptions,
        log: Option<PathBuf>,
        writer: Option<WriterHandle>,
    ) -> std::io::Result<Export> {
        let mut host = HostInfo::here();
        if let Some(id) = &opts.host_id {
            host.id.clone_from(id);
        }
        let exporters = Arc::new(Exporters::start(
            &opts.sinks,
            &host,
            opts.ca.as_deref(),
            writer.as_ref(),
        )?);
        if let Some(w) = &writer {
            w.set_tap(Some(exporters.clone()));
        }
        Ok(Export {
            exporters,
            opts: opts.clone(),
            host: host.id,
            log,
            writer,
            gateway: Mutex::new(None),
        })
    }

    /// The gateway exports its heads through these exporters: at each session close, and
    /// every `--anchor-every-s` when the log grew, until `stop`. Must run inside a runtime.
    pub(crate) fn attach(&self, gw: &Arc<Gateway>, stop: Shutdown) {
        gw.set_anchors(Anchors {
            exporters: self.exporters.clone(),
            host: self.host.clone(),
            log: self.log.clone(),
        });
        tokio::spawn(every(gw.clone(), self.opts.anchor_every, stop));
        *self
            .gateway
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(gw.clone());
    }

    /// The last head (`stop`), what is queued delivered (a failing sink gets its grace),
    /// the exporters stopped and the writer's tap removed.
    pub fn finish(&self) {
        let gw = self
            .gateway
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(gw) = gw {
            gw.export_head("stop");
        }
        self.exporters.close();
        if let Some(w) = &self.writer {
            w.set_tap(None);
        }
    }
}
