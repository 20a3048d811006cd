//! A shutdown signal that many tasks can wait on (after tokio's mini-redis).
use tokio::sync::watch;

/// Sender side: [`Trigger::fire`] tells every [`Shutdown`] to stop.
#[derive(Debug, Clone)]
pub struct Trigger(watch::Sender<bool>);

/// Receiver side, cloned into each task.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A connected pair.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Shutdown(rx))
}

impl Trigger {
    /// Tells every [`Shutdown`] to stop; firing again does nothing more.
    pub fn fire(&self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    /// Whether shutdown has been fired.
    pub fn is_shutdown(&self) -> bool {
        *self.0.borrow()
    }
    /// Completes once shutdown has been fired (or every trigger is gone).
    pub async fn recv(&mut self) {
        let _ = self.0.wait_for(|v| *v).await;
    }
}
