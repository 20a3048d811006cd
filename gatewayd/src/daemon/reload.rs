//! Policy reload without a restart ([`Gateway::reload_policy`]): the new file is read,
//! parsed, validated and compiled into a whole engine before anything changes; only then is
//! its `policy_reload` record written and the engine swapped in. A file that fails any step
//! leaves the policy in force as it was, with one log line and a `policy_reload_failed`
//! record naming both digests and the error. What a reload does to open sessions:
//! docs/POLICY.md, "Reloading the policy".
use std::{path::Path, sync::Arc};

use serde_json::json;

use super::gateway::Gateway;
use gatewayd_core::{
    audit::Decision as AD,
    canonical::sha256_hex,
    engine::Engine,
    policy::{Policy, diff},
};

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The file's bytes are those of the policy in force: nothing done, nothing recorded.
    Unchanged {
        /// The digest of the policy in force.
        digest: String,
    },
    /// The new policy decides every call from now on.
    Reloaded {
        /// The digest of the policy replaced.
        old: Option<String>,
        /// The digest of the policy now in force.
        new: String,
    },
    /// The file was refused; the policy in force stays.
    Refused {
        /// The digest of the policy in force (kept).
        old: Option<String>,
        /// The digest of the file refused (None: it could not be read).
        new: Option<String>,
        /// Why it was refused.
        error: String,
    },
}

/// The `policy_reload` record lists at most this many changes ...
const MAX_CHANGES: usize = 64;
/// ... each cut to this many bytes.
const MAX_CHANGE_LEN: usize = 400;

/// What a [`ReloadHook`] returns: a future of what it did (merged into the `policy_reload`
/// record as `kernel`), or why the reload must be refused.
pub type ReloadFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<serde_json::Value, String>> + Send + 'a>,
>;

/// Called with a validated new policy before it is put in force: what holds state outside
/// the gateway that follows the policy (`gatewayd run`: the agent's kernel egress
/// allowlist). An `Err` refuses the reload; the old policy stays.
pub trait ReloadHook: Send + Sync {
    /// Applies what changes from `old` to `new` outside the gateway.
    fn policy_reloading<'a>(&'a self, old: &'a Policy, new: &'a Policy) -> ReloadFuture<'a>;
}

/// SHA-256 of a policy file's bytes, hex: what records name as `policy`.
pub fn policy_digest(bytes: &[u8]) -> String {
    sha256_hex(bytes)
}

/// The first 12 hex digits, for log lines.
fn short(d: Option<&str>) -> &str {
    d.map_or("(none)", |d| d.get(..12).unwrap_or(d))
}

impl Gateway {
    /// Reloads the policy from `path` (`trigger` says why: `sighup`, `file`), as the module
    /// docs say. Calls being decided finish under the policy they started with; the next
    /// call of every session is decided under the new one.
    pub async fn reload_policy(&self, path: &Path, trigger: &str) -> Reload {
        let current = self.engine();
        let old = current.policy_digest().map(str::to_owned);
        let outcome = match std::fs::read(path) {
            Ok(bytes) => {
                let new = policy_digest(&bytes);
                if old.as_deref() == Some(new.as_str()) {
                    return Reload::Unchanged { digest: new };
                }
                self.put_in_force(&bytes, path, trigger, old, new).await
            }
            Err(e) => Reload::Refused {
                old,
                new: None,
                error: format!("cannot read {}: {e}", path.display()),
            },
        };
        self.report(path, trigger, &outcome).await;
        outcome
    }

    /// Builds the engine of `bytes`, records the reload and swaps the engine in; or says
    /// why not.
    async fn put_in_force(
        &self,
        bytes: &[u8],
        path: &Path,
        trigger: &str,
        old: Option<String>,
        new: String,
    ) -> Reload {
        let refused = |error| Reload::Refused {
            old: old.clone(),
            new: Some(new.clone()),
            error,
        };
        let (engine, changes) = match self.build_from(bytes, path, &new) {
            Ok(b) => b,
            Err(error) => return refused(error),
        };
        let kernel = match self.run_reload_hook(engine.policy()).await {
            Ok(k) => k,
            Err(error) => return refused(error),
        };
        let detail = json!({"path": path, "trigger": trigger, "old": old, "new": new,
            "changes": changes, "sessions_open": self.sessions.list().len(), "kernel": kernel});
        match self.note("-", AD::Info, "policy_reload", detail).await {
            Ok(()) => {
                self.swap_engine(engine);
                Reload::Reloaded { old, new }
            }
            Err(e) => refused(format!(
                "the audit record could not be written: {}",
                e.message
            )),
        }
    }

    /// Sets the hook a reload runs before the new policy is put in force.
    pub fn set_reload_hook(&self, hook: Arc<dyn ReloadHook>) {
        *self
            .reload_hook
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hook);
    }

    /// Drops the reload hook (and what it holds: `gatewayd run`'s kernel task handle, which
    /// must go for the kernel task to end).
    pub fn clear_reload_hook(&self) {
        *self
            .reload_hook
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    async fn run_reload_hook(&self, new: &Policy) -> Result<serde_json::Value, String> {
        let hook = self
            .reload_hook
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match hook {
            Some(h) => h.policy_reloading(self.engine().policy(), new).await,
            None => Ok(serde_json::Value::Null),
        }
    }

    /// Parses, validates and compiles `bytes` into an engine (not yet in force), and lists
    /// what changes against the policy in force.
    fn build_from(
        &self,
        bytes: &[u8],
        path: &Path,
        digest: &str,
    ) -> Result<(Engine, Vec<String>), String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| format!("{} is not UTF-8: {e}", path.display()))?;
        let policy = Policy::parse(text, path).map_err(|e| e.to_string())?;
        let mut changes = diff::diff(self.engine().policy(), &policy).lines();
        if changes.len() > MAX_CHANGES {
            let more = changes.len() - MAX_CHANGES;
            changes.truncate(MAX_CHANGES);
            changes.push(format!("... and {more} more (`gatewayd policy diff`)"));
        }
        for c in &mut changes {
            if c.len() > MAX_CHANGE_LEN {
                let mut end = MAX_CHANGE_LEN;
                while !c.is_char_boundary(end) {
                    end -= 1;
                }
                c.truncate(end);
                c.push_str("...");
            }
        }
        let engine = self
            .build
            .engine(policy, Some(digest.to_owned()), self.clock())
            .map_err(|e| e.to_string())?;
        for w in engine.warnings() {
            eprintln!("gatewayd: note: {w}");
        }
        Ok((engine, changes))
    }

    /// One log line, and for a refusal its `policy_reload_failed` record.
    async fn report(&self, path: &Path, trigger: &str, outcome: &Reload) {
        match outcome {
            Reload::Unchanged { .. } => {}
            Reload::Reloaded { old, new } => eprintln!(
                "gatewayd: policy reloaded from {} ({trigger}): {} -> {}; every call from now on is decided under it",
                path.display(),
                short(old.as_deref()),
                short(Some(new))
            ),
            Reload::Refused { old, new, error } => {
                eprintln!(
                    "gatewayd: policy reload from {} ({trigger}) refused, still deciding under {}: {error}. Next: fix the file (`gatewayd policy validate {}`) and save it again",
                    path.display(),
                    short(old.as_deref()),
                    path.display()
                );
                let detail = json!({"path": path, "trigger": trigger, "old": old, "new": new,
                    "error": error});
                if let Err(e) = self
                    .note("-", AD::Info, "policy_reload_failed", detail)
                    .await
                {
                    eprintln!(
                        "gatewayd: the policy_reload_failed record could not be written: {}",
                        e.message
                    );
                }
            }
        }
    }
}
