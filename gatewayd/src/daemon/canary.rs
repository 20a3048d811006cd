//! Canary credentials at the gateway: a supervisor that placed decoys for its agent
//! (`gatewayd run`, `supervisor::canary`) sets a [`CanaryCheck`], and every `call/decide`
//! is looked at for them before the engine decides it. A call that carries one is refused
//! (`secret_egress`), after the check has locked the session's egress and recorded `canary`.
use std::sync::Arc;

use serde_json::Value;

use super::Gateway;

/// What [`CanaryCheck::check`] returns: the refusal's message when a decoy was found.
pub type CanaryFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send + 'a>>;

/// Looks at a tool call's arguments for the session's decoys.
pub trait CanaryCheck: Send + Sync {
    /// `Some(message)` when the call of `tool` carries a decoy (then the check has locked
    /// the egress and recorded it, durably); the call is refused with the message.
    fn check<'a>(&'a self, tool: &'a str, arguments: &'a Value) -> CanaryFuture<'a>;
}

impl Gateway {
    /// Sets the check every `call/decide` goes through first.
    pub fn set_canary_check(&self, check: Arc<dyn CanaryCheck>) {
        *self
            .canary
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(check);
    }

    /// Drops the check (and what it holds: `gatewayd run`'s kernel task handle).
    pub fn clear_canary_check(&self) {
        self.canary
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// The refusal's message when the call carries a decoy.
    pub(super) async fn canary_in(&self, tool: &str, arguments: &Value) -> Option<String> {
        let check = self
            .canary
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        check.check(tool, arguments).await
    }
}
