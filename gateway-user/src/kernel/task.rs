//! The one task that owns the kernel layer (the `Ebpf` handle and the ring buffer). Other
//! tasks talk to it through a [`Handle`]; when every handle is gone it hands the layer back,
//! so the caller decides when the programs detach (after the agent is dead).
use aya::maps::{MapData, RingBuf};
use tokio::{
    io::unix::AsyncFd,
    sync::{mpsc, oneshot},
    task::JoinHandle,
};

use super::{KernelError, KernelLayer, KernelSpec, events};

/// Requests to the owning task.
#[derive(Debug)]
pub enum Command {
    /// Deny (or allow again) all egress of the agent's cgroup.
    Lockdown {
        on: bool,
        reply: oneshot::Sender<Result<(), KernelError>>,
    },
    /// Read every event still in the ring buffer, then reply with the count of events the
    /// kernel had to drop (ring buffer full).
    Drain { reply: oneshot::Sender<u64> },
}

/// A cloneable way to reach the owning task.
#[derive(Debug, Clone)]
pub struct Handle {
    tx: mpsc::Sender<Command>,
}

impl Handle {
    pub async fn lockdown(&self, on: bool) -> Result<(), KernelError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Lockdown { on, reply })
            .await
            .map_err(|_| KernelError::Object("kernel task has stopped".into()))?;
        rx.await
            .map_err(|_| KernelError::Object("kernel task has stopped".into()))?
    }

    /// Waits until every pending event has been handed to the callback.
    pub async fn drain(&self) -> u64 {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::Drain { reply }).await.is_err() {
            return 0;
        }
        rx.await.unwrap_or(0)
    }
}

/// Starts the owning task. `on_denial` is called for every kernel denial, in order.
pub fn spawn<F>(
    mut layer: KernelLayer,
    spec: KernelSpec,
    mut on_denial: F,
) -> Result<(Handle, JoinHandle<KernelLayer>), KernelError>
where
    F: FnMut(events::Denial) + Send + 'static,
{
    let ring = layer.take_events()?;
    // SAFETY: the ring buffer owns its fd and the AsyncFd owns the ring buffer, so the fd
    // stays open for as long as it is registered.
    let mut fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| KernelError::Map {
            map: "EVENTS",
            answer: e.to_string(),
        })?;
    let (tx, mut rx) = mpsc::channel(16);
    let join = tokio::spawn(async move {
        let mut read_all = |ring: &mut RingBuf<MapData>| {
            while let Some(item) = ring.next() {
                if let Some(ev) = events::parse(&item) {
                    on_denial(events::describe(&ev, &spec));
                }
            }
        };
        loop {
            tokio::select! {
                guard = fd.readable_mut() => match guard {
                    Ok(mut g) => {
                        read_all(g.get_inner_mut());
                        g.clear_ready();
                    }
                    Err(_) => break,
                },
                cmd = rx.recv() => match cmd {
                    None => break,
                    Some(Command::Lockdown { on, reply }) => {
                        let _ = reply.send(layer.set_lockdown(on));
                    }
                    Some(Command::Drain { reply }) => {
                        read_all(fd.get_mut());
                        let _ = reply.send(layer.dropped());
                    }
                },
            }
        }
        read_all(fd.get_mut());
        layer
    });
    Ok((Handle { tx }, join))
}
