//! The tool-call decision engine: every tool call an agent asks for passes through
//! [`Engine::call`] (or, as a dry run, [`Engine::decide`]).
//!
//! The checks run in the order of `checks::PIPELINE`, one module each under `checks/`
//! (docs/POLICY.md, "The order of checks", mirrors that list); the first that decides ends
//! it. Whatever cannot be evaluated denies (`check_error`). Then [`Engine::call`] writes one
//! audit record, durable before anything runs (`audit_unavailable`), and for an allowed call
//! updates what the checks count and mark (next to each check), injects credentials, runs
//! the handler and returns its output redacted and fenced. Field reference: docs/POLICY.md.
//!
//! Layout: `verdict` (what a decision says), `call` (the call and its path), `registry`
//! (tools, pins, run-time definitions), `checks/` (the pipeline), [`session`] (per-session
//! state), `secret_store` (secrets and credentials loaded), `audit_sink` (records), `error`;
//! helpers: [`args`], [`sandbox`], [`shellcheck`], [`secrets`], [`scan`], [`fingerprint`],
//! [`fence`], [`approval`].
use std::sync::{Arc, Mutex, RwLock};

use crate::{clock::Clock, policy::Policy};

pub(crate) mod approval;
mod archive;
pub(crate) mod args;
mod audit_sink;
mod call;
mod checks;
mod egress;
mod error;
pub mod fence;
pub mod fingerprint;
mod found_paths;
mod git_apply;
mod inline_program;
mod learn;
mod registry;
mod ripgrep_walk;
pub mod sandbox;
pub mod scan;
mod secret_store;
pub mod secrets;
pub(crate) mod session;
pub mod session_secrets;
pub(crate) mod shellcheck;
mod tracked;
mod verdict;

pub use approval::{Approval, ApprovalState};
pub use audit_sink::{AuditRecord, AuditSink};
pub use call::{Admission, Admitted, Credentials, Outcome, ToolCall};
pub use error::{ApprovalError, EngineError, SecretError};
pub use learn::Learn;
pub use registry::{Registration, ToolDefinition};
pub use session::{Legs, Session};
pub use verdict::{Decision, NEXT, Reason, Verdict, WouldDeny, with_next};

/// The decision engine for one policy.
pub struct Engine {
    policy: Arc<Policy>,
    clock: Arc<dyn Clock>,
    audit: Option<Arc<Mutex<dyn AuditSink>>>,
    tools: RwLock<std::collections::HashMap<String, registry::Tool>>,
    rules: Vec<checks::rules::CRule>,
    sandbox: sandbox::SandboxView,
    egress: sandbox::EgressView,
    secrets: secret_store::SecretStore,
    /// Held calls; shared with the engine a policy reload builds ([`Engine::adopt`]).
    approvals: Arc<Mutex<approval::Approvals>>,
    /// SHA-256 (hex) of the policy file's bytes, named in each record ([`Engine::set_policy_digest`]).
    policy_digest: Option<String>,
    warnings: Vec<String>,
    /// The registered tools' names, for the `not_allowlisted` message.
    tool_list: String,
    /// The protected files' values as last read, reused while the files are unchanged.
    file_secrets: Mutex<Option<session_secrets::FileSecrets>>,
    /// The last sessions' secret matcher, reused by a session with the same secrets.
    secret_memo: secrets::SecretMemo,
    /// Learn mode ([`Engine::set_learn`]).
    learn: Learn,
}

impl Engine {
    /// Builds an engine. `audit`: where records go; None only for dry runs and tests.
    pub fn new(
        policy: Arc<Policy>,
        clock: Arc<dyn Clock>,
        audit: Option<Arc<Mutex<dyn AuditSink>>>,
    ) -> Result<Engine, EngineError> {
        let tools = registry::compile(&policy)?;
        let rules = checks::rules::compile(&policy)?;
        let mut warnings = Vec::new();
        let secrets = secret_store::SecretStore::load(&policy, &mut warnings);
        Ok(Engine {
            tool_list: registry::tool_list(&policy),
            sandbox: sandbox::SandboxView::new(&policy.sandbox),
            egress: sandbox::EgressView::new(&policy.network),
            secrets,
            tools: RwLock::new(tools),
            rules,
            approvals: Arc::default(),
            policy_digest: None,
            file_secrets: Mutex::new(None),
            secret_memo: secrets::SecretMemo::default(),
            learn: Learn::Off,
            policy,
            clock,
            audit,
            warnings,
        })
    }

    /// Also protects `path` (the policy file, the audit log) from every path argument.
    pub fn protect(&mut self, path: &std::path::Path) {
        self.sandbox.protect(path);
    }

    /// Sets learn mode (docs/POLICY.md, "Learn mode"): calls the checks refuse or hold are
    /// allowed and recorded `would_deny`, except what stays enforced.
    pub fn set_learn(&mut self, learn: Learn) {
        self.learn = learn;
    }

    /// Leaves loopback destinations to the kernel layer ([`sandbox::EgressView::leave_loopback_to_kernel`]):
    /// for `gatewayd run`, whose connect programs let the agent reach only its own servers
    /// there.
    pub fn leave_loopback_to_kernel(&mut self) {
        self.egress.leave_loopback_to_kernel();
    }

    /// The engine's learn mode.
    pub fn learn(&self) -> Learn {
        self.learn
    }

    /// Names the policy's digest (SHA-256 of the file's bytes, hex) in every record the
    /// engine writes (`detail.policy`): which policy version decided.
    pub fn set_policy_digest(&mut self, digest: String) {
        self.policy_digest = Some(digest);
    }

    /// The digest given to [`Engine::set_policy_digest`].
    pub fn policy_digest(&self) -> Option<&str> {
        self.policy_digest.as_deref()
    }

    /// Takes over what `old` learned at run time, for a policy reload (docs/POLICY.md,
    /// "Reloading the policy"): the held and approved calls (one store, shared, so that a
    /// call `old` is still deciding holds into it too), and, per tool whose pin is
    /// unchanged, the definition last registered and the scan's findings (a tool blocked
    /// by a rug pull stays blocked until re-pinned). The caller keeps `old` from
    /// registering definitions while this runs.
    pub fn adopt(&mut self, old: &Engine) {
        self.approvals = old.approvals.clone();
        let old_tools = old
            .tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tools = self
            .tools
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (name, t) in tools.iter_mut() {
            if let Some(o) = old_tools.get(name).filter(|o| o.pin == t.pin) {
                t.current.clone_from(&o.current);
                if !o.findings.is_empty() {
                    t.findings.clone_from(&o.findings);
                }
            }
        }
    }

    /// Adds a secret at run time (e.g. a token the application just minted).
    pub fn add_secret(&mut self, name: &str, value: &str) -> Result<(), SecretError> {
        self.secrets.add(name, value)
    }

    /// Adds a secret for one session only (a token minted for it): its calls that send data
    /// out are checked against it, and it is scrubbed from that session's messages and
    /// records.
    pub fn add_session_secret(
        &self,
        s: &mut Session,
        name: &str,
        value: &str,
    ) -> Result<(), SecretError> {
        secret_store::check_len(name, value)?;
        s.add_secret(name, value);
        Ok(())
    }

    /// Registers what session `s` starts with (docs/POLICY.md, "Secrets a session starts
    /// with"): the values in the policy's protected files and the agent's credential-like
    /// environment variables (`env`; None: it could not be read), as the policy's
    /// `secrets_from_protected` and `secrets_from_env` say. Returns the names registered and
    /// notes on what could not be used (never values).
    pub fn start_session(
        &self,
        s: &mut Session,
        env: Option<&[(String, String)]>,
    ) -> (Vec<String>, Vec<String>) {
        let files = self
            .policy
            .secrets_from_protected()
            .then(|| self.protected_file_secrets());
        let got = session_secrets::start_secrets(&self.policy, files, env);
        s.add_start_secrets(&got.secrets, &self.secret_memo);
        let names = got.secrets.into_iter().map(|(n, _)| n).collect();
        (names, got.notes)
    }

    /// The protected files' values: read once, then reused while every path the read looked
    /// at is unchanged (one `stat` each), read again when one changed.
    fn protected_file_secrets(&self) -> session_secrets::StartSecrets {
        let mut cached = self
            .file_secrets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match cached.as_ref() {
            Some(c) if c.is_current() => c.found.clone(),
            _ => {
                let fresh = session_secrets::FileSecrets::read(
                    &self.policy.sandbox.protected,
                    &session_secrets::LIMITS,
                );
                let found = fresh.found.clone();
                *cached = Some(fresh);
                found
            }
        }
    }

    /// A denied attempt on a protected path seen elsewhere (the kernel layer): applies the
    /// policy's `suspicion` mode to the session, as a gateway denial of one would. Returns
    /// whether the session's legs changed.
    pub fn note_suspicion(&self, s: &mut Session) -> bool {
        checks::suspicion::apply(self.policy.suspicion, s)
    }

    /// Problems found at start-up that do not stop the engine (unresolved secrets).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The policy the engine was built from.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Marks text the application got from an untrusted place (a pasted email) as seen.
    pub fn observe_untrusted(&self, s: &mut Session, text: &str) {
        s.observe_untrusted(text, self.policy.echo_words());
    }

    /// One decision, no side effects: nothing is counted, recorded or held (dry run).
    pub fn decide(&self, s: &Session, call: &ToolCall) -> Verdict {
        let (mut v, _) = checks::run(self, s, call, None);
        if v.reason != Reason::Allowed {
            checks::secret_egress::scrub_verdict(self, s, &mut v);
            v.add_next();
        }
        v
    }

    /// Approves a held call by id.
    pub fn approve(&self, id: &str) -> Result<(), ApprovalError> {
        let now = self.clock.now_ms();
        self.lock_approvals().set(id, ApprovalState::Approved, now)
    }

    /// Rejects a held call by id; using the id afterwards is denied.
    pub fn reject(&self, id: &str) -> Result<(), ApprovalError> {
        let now = self.clock.now_ms();
        self.lock_approvals().set(id, ApprovalState::Rejected, now)
    }

    /// Held calls waiting for a person.
    pub fn pending(&self) -> Vec<Approval> {
        self.lock_approvals().pending(self.clock.now_ms())
    }

    fn lock_approvals(&self) -> std::sync::MutexGuard<'_, approval::Approvals> {
        self.approvals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::{path::Path, sync::Arc};

    use serde_json::json;

    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn engine_is_shared_across_threads() {
        fn check<T: Send + Sync>() {}
        check::<super::Engine>();
    }

    /// A window of `u64::MAX` seconds (the policy allows any `window_s` > 0): the retry time
    /// saturates instead of overflowing, and the call is denied.
    #[test]
    fn rate_limit_with_a_huge_window_denies_without_overflow() {
        let text = r#"{"version": 1, "tools": [{"name": "t"}],
            "limits": {"rate": [{"tool": "t", "max": 1, "window_s": 18446744073709551615}]}}"#;
        let policy = Policy::parse(text, Path::new("p.json")).unwrap();
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let e = Engine::new(Arc::new(policy), clock, None).unwrap();
        let mut s = Session::new("s", "u", &[]);
        let call = ToolCall::new("t", json!({}));
        assert!(
            e.call(&mut s, &call, |_, _| Ok(json!(1)))
                .verdict
                .is_allow()
        );
        let v = e.decide(&s, &call);
        assert_eq!((v.decision, v.reason), (Decision::Deny, Reason::RateLimit));
    }
}
