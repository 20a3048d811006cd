//! The one task that owns a session of the kernel layer (its map entries and its ring
//! buffer). Other tasks talk to it through a [`Handle`]; when every handle is gone it hands
//! the session back, so the caller decides when its entries go (after the agent is dead).
//!
//! The task does no blocking I/O: each denial goes into a bounded channel whose receiver
//! (the audit writer) runs off the runtime. When the writer falls behind, the task waits on
//! the channel without blocking the runtime, and the kernel's ring buffer absorbs the excess
//! or counts it as dropped.
use aya::maps::{MapData, RingBuf};
use gateway_common::EgressRule;
use tokio::{
    io::unix::AsyncFd,
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};

use super::{KernelError, KernelSpec, Session, events};

/// Requests to the owning task.
#[derive(Debug)]
pub enum Command {
    /// Deny (or allow again) all egress of the session.
    Lockdown {
        /// `true` denies all egress; `false` allows the allowlist again.
        on: bool,
        /// Where the result goes.
        reply: oneshot::Sender<Result<(), KernelError>>,
    },
    /// Replace the rules of the policy's resolved host names (`egress_resolved`); replies
    /// with how many did not fit.
    SetResolved {
        /// Every resolved host's rules, in policy order.
        rules: Vec<EgressRule>,
        /// Where the result goes.
        reply: oneshot::Sender<Result<usize, KernelError>>,
    },
    /// Replace the policy's own (`cidr`) egress rules (a policy reload); replies with how
    /// many rules did not fit.
    SetEgress {
        /// The new policy's `cidr` rules, in policy order.
        rules: Vec<EgressRule>,
        /// Where the result goes.
        reply: oneshot::Sender<Result<usize, KernelError>>,
    },
    /// Read every event still in the ring buffer, then reply with the count of the
    /// session's events the kernel had to drop (its ring buffer full).
    Drain {
        /// Where the dropped-event count goes.
        reply: oneshot::Sender<u64>,
    },
}

/// A cloneable way to reach the owning task.
#[derive(Debug, Clone)]
pub struct Handle {
    tx: mpsc::Sender<Command>,
    /// Whether this handle has turned the lockdown on (for what else must close with it:
    /// the session's egress proxy).
    locked: std::sync::Arc<watch::Sender<bool>>,
}

impl Handle {
    /// Turns the egress lockdown of the agent's cgroup on or off; errs when the map write fails or
    /// the task has stopped.
    pub async fn lockdown(&self, on: bool) -> Result<(), KernelError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Lockdown { on, reply })
            .await
            .map_err(|_| KernelError::TaskStopped)?;
        let result = rx.await.map_err(|_| KernelError::TaskStopped)?;
        // On even when the map write failed: what follows the switch fails closed.
        if on || result.is_ok() {
            self.locked.send_replace(on);
        }
        result
    }

    /// Follows the lockdown switch as this session's handles set it.
    pub fn lockdown_watch(&self) -> watch::Receiver<bool> {
        self.locked.subscribe()
    }

    /// Puts the addresses of the policy's host names in the session's egress allowlist
    /// (after its own `cidr` rules); returns how many rules did not fit.
    pub async fn set_resolved(&self, rules: Vec<EgressRule>) -> Result<usize, KernelError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::SetResolved { rules, reply })
            .await
            .map_err(|_| KernelError::TaskStopped)?;
        rx.await.map_err(|_| KernelError::TaskStopped)?
    }

    /// Replaces the session's own (`cidr`) egress rules with a reloaded policy's; returns how
    /// many rules did not fit.
    pub async fn set_egress(&self, rules: Vec<EgressRule>) -> Result<usize, KernelError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::SetEgress { rules, reply })
            .await
            .map_err(|_| KernelError::TaskStopped)?;
        rx.await.map_err(|_| KernelError::TaskStopped)?
    }

    /// Waits until every pending event has been sent to the sink.
    pub async fn drain(&self) -> u64 {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::Drain { reply }).await.is_err() {
            return 0;
        }
        rx.await.unwrap_or(0)
    }
}

/// Starts the owning task. Every kernel denial, in order, is turned into a `T` by `wrap` and
/// sent to `sink` (a sink that has gone away loses the records, not the denials).
pub fn spawn<T, F>(
    mut session: Session,
    spec: KernelSpec,
    sink: mpsc::Sender<T>,
    mut wrap: F,
) -> Result<(Handle, JoinHandle<Session>), KernelError>
where
    T: Send + 'static,
    F: FnMut(events::Denial) -> T + Send + 'static,
{
    let ring = session.take_events()?;
    // SAFETY: the ring buffer owns its fd and the AsyncFd owns the ring buffer, so the fd
    // stays open for as long as it is registered.
    let mut fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| KernelError::EventsPoll(e.into_parts().1))?;
    let (tx, mut rx) = mpsc::channel(16);
    let join = tokio::spawn(async move {
        let mut out = Sink {
            spec: &spec,
            tx: &sink,
            wrap: &mut wrap,
            learned_dirs: std::collections::HashSet::new(),
        };
        loop {
            tokio::select! {
                guard = fd.readable_mut() => match guard {
                    Ok(mut g) => {
                        out.read_all(g.get_inner_mut()).await;
                        g.clear_ready();
                    }
                    Err(_) => break,
                },
                cmd = rx.recv() => match cmd {
                    None => break,
                    Some(Command::Lockdown { on, reply }) => {
                        let _ = reply.send(session.set_lockdown(on));
                    }
                    Some(Command::SetResolved { rules, reply }) => {
                        let _ = reply.send(session.set_resolved(&rules));
                    }
                    Some(Command::SetEgress { rules, reply }) => {
                        let _ = reply.send(session.set_egress(&rules));
                    }
                    Some(Command::Drain { reply }) => {
                        out.read_all(fd.get_mut()).await;
                        let _ = reply.send(session.dropped());
                    }
                },
            }
        }
        out.read_all(fd.get_mut()).await;
        session
    });
    let locked = std::sync::Arc::new(watch::channel(false).0);
    Ok((Handle { tx, locked }, join))
}

/// Where decoded denials go.
struct Sink<'a, T, F> {
    spec: &'a KernelSpec,
    tx: &'a mpsc::Sender<T>,
    wrap: &'a mut F,
    /// The directories a learning session's names were recorded for: one record each (the
    /// fanotify learner's ignore marks count files the same way).
    learned_dirs: std::collections::HashSet<String>,
}

impl<T, F: FnMut(events::Denial) -> T> Sink<'_, T, F> {
    /// False for a learned name in a directory already recorded.
    fn first_of_its_directory(&mut self, denial: &events::Denial) -> bool {
        match denial.detail["directory"].as_str() {
            Some(dir) if denial.learned => self.learned_dirs.insert(dir.to_owned()),
            _ => true,
        }
    }

    /// Sends every event now in the ring buffer, in order.
    async fn read_all(&mut self, ring: &mut RingBuf<MapData>) {
        loop {
            // The item borrows the ring buffer: decode it before awaiting.
            let denial = match ring.next() {
                None => return,
                Some(item) => events::describe_item(&item, self.spec),
            };
            if let Some(denial) = denial.filter(|d| self.first_of_its_directory(d)) {
                let item = (self.wrap)(denial);
                let _ = self.tx.send(item).await;
            }
        }
    }
}
