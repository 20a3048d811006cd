//! A tool call as the agent asks for it, and its full path through [`Engine::call`]: the
//! checks, the approval, one durable audit record, what an allowed call counts and marks,
//! credential injection, the handler, and its output redacted and fenced.
use std::{borrow::Cow, collections::BTreeMap};

use serde::Serialize;
use serde_json::{Value, json};

use super::{
    Decision, Engine, Reason, Session, Verdict,
    checks::{
        self, approval_hold, credentials, limits, rule_of_two, secret_egress, suspicion,
        untrusted_echo,
    },
    fence, fingerprint, learn,
};
use crate::policy::Label;

/// A tool call as the agent asked for it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Name of the tool to call.
    pub tool: String,
    /// The arguments, a JSON object (`{}` when absent).
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// The id of an approval, when repeating a held call after a person approved it.
    #[serde(default)]
    pub approval: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

impl ToolCall {
    /// A call of `tool` with `arguments` and no approval.
    pub fn new(tool: &str, arguments: Value) -> ToolCall {
        ToolCall {
            tool: tool.to_owned(),
            arguments,
            approval: None,
        }
    }

    /// This call presenting approval `id` (repeating a held call).
    #[must_use]
    pub fn with_approval(mut self, id: &str) -> ToolCall {
        self.approval = Some(id.to_owned());
        self
    }
}

/// Credentials handed to a tool's handler; never shown to the model.
#[derive(Default)]
pub struct Credentials(pub(super) BTreeMap<String, String>);

impl Credentials {
    /// The credential called `name`, if the tool was given it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Whether the tool was given none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every credential by name, to hand to a tool runner in another process.
    pub fn into_map(self) -> BTreeMap<String, String> {
        self.0
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// What [`Engine::call`] returns.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The decision on the call.
    pub verdict: Verdict,
    /// The tool's output (credentials redacted; one fenced text block when untrusted); None
    /// unless the handler ran and succeeded.
    pub output: Option<Value>,
    /// The handler's error (redacted and fenced like output).
    pub error: Option<String>,
}

impl Outcome {
    fn refused(verdict: Verdict) -> Outcome {
        Outcome {
            verdict,
            output: None,
            error: None,
        }
    }
}

/// What [`Engine::admit`] decided, and on allow what running the call needs.
#[derive(Debug)]
pub struct Admission<'c> {
    /// The decision on the call (its record is written).
    pub verdict: Verdict,
    /// On allow: the call to run; its result goes to [`Engine::complete`].
    pub admitted: Option<Admitted<'c>>,
}

/// An allowed call, counted and with its legs set, waiting for its result.
#[derive(Debug)]
pub struct Admitted<'c> {
    /// The arguments to run the tool with (path arguments canonicalised; borrowed from the
    /// call when nothing changed).
    pub arguments: Cow<'c, Value>,
    /// The credentials the tool lists, with their values; never shown to the model.
    pub credentials: Credentials,
    /// The tool's name.
    tool: String,
    /// Its output is untrusted (fenced, remembered for the echo check).
    untrusted: bool,
}

impl Engine {
    /// The full path of a call in this process: [`Engine::admit`], the handler (only on
    /// allow), then [`Engine::complete`] on its result. The record is written before the
    /// handler runs; if it cannot be, the call is denied.
    pub fn call<F>(&self, s: &mut Session, call: &ToolCall, handler: F) -> Outcome
    where
        F: FnOnce(&Value, &Credentials) -> Result<Value, String>,
    {
        let Admission { verdict, admitted } = self.admit(s, call);
        let Some(admitted) = admitted else {
            return Outcome::refused(verdict);
        };
        let result = handler(&admitted.arguments, &admitted.credentials);
        let (output, error) = self.complete(s, admitted, result);
        Outcome {
            verdict,
            output,
            error,
        }
    }

    /// Admission of a call: every check, approvals, the message scrubbed, exactly one audit
    /// record (submitted to the sink; a write that fails denies), and on allow the session's
    /// counters and Rule-of-Two legs (for an `untrusted_output` tool the untrusted leg is set
    /// here: its output is about to be seen). A denial of a protected path or a secret counts
    /// toward the Rule of Two ([`suspicion`]).
    pub fn admit<'c>(&self, s: &mut Session, call: &'c ToolCall) -> Admission<'c> {
        let now = self.clock.now_ms();
        let (mut verdict, arguments) = checks::run(self, s, call, Some(now));
        let digest = fingerprint::sha256_hex(fingerprint::canonical_json(&arguments).as_bytes());
        let learned = self.settle(s, call, &mut verdict, &arguments, &digest, now);
        let refused = |verdict| Admission {
            verdict,
            admitted: None,
        };
        let (stated, decision) = match &learned {
            Some(r) => (r, Decision::WouldDeny),
            None => (&verdict, verdict.decision),
        };
        if let Err(e) = self.record(s, call, stated, decision, &digest) {
            return refused(Verdict::deny(
                Reason::AuditUnavailable,
                format!("the audit record could not be written ({e}); nothing was run"),
            ));
        }
        if let Some(r) = learned.as_ref().filter(|_| verdict.is_allow()) {
            suspicion::after_denial(self, s, call, r);
        }
        if !verdict.is_allow() {
            suspicion::after_denial(self, s, call, &verdict);
            return refused(verdict);
        }
        let tools = self
            .tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(tool) = tools.get(&call.tool) else {
            // Learn mode let a tool the policy does not list through: nothing is known of
            // it, so its output is untrusted and it gets no credentials.
            let Some(_) = learned else {
                return refused(Verdict::deny(Reason::CheckError, "tool vanished"));
            };
            let admitted = Admitted {
                arguments,
                credentials: Credentials::default(),
                tool: self.secrets.all.scrub(&call.tool).into_owned(),
                untrusted: true,
            };
            return Admission {
                verdict,
                admitted: Some(admitted),
            };
        };
        limits::count(&self.policy, s, tool, now);
        rule_of_two::mark_legs(s, tool);
        secret_egress::remember(s, tool, call);
        let admitted = Admitted {
            arguments,
            credentials: credentials::inject(self, tool),
            tool: tool.def.name.clone(),
            untrusted: tool.has(Label::UntrustedOutput),
        };
        Admission {
            verdict,
            admitted: Some(admitted),
        }
    }

    /// The checks' verdict made final: in learn mode a refusal it lets through becomes the
    /// allow and is returned (its message scrubbed and ending with a next step), for the
    /// call's `would_deny` record; otherwise approvals are settled. The message is scrubbed
    /// of secrets (it may quote the arguments).
    fn settle(
        &self,
        s: &Session,
        call: &ToolCall,
        verdict: &mut Verdict,
        arguments: &Value,
        digest: &str,
        now: u64,
    ) -> Option<Verdict> {
        if let Some(mut refused) = learn::let_through(self, call, verdict) {
            secret_egress::scrub_verdict(self, s, &mut refused);
            *verdict = Verdict::learned(&call.tool, &refused);
            verdict.message =
                secret_egress::scrub_text(self, s, &verdict.message, true).into_owned();
            return Some(refused);
        }
        approval_hold::settle(self, s, call, verdict, arguments, digest, now);
        // A message withheld for a secret it quoted lost its next step: the reason's own.
        secret_egress::scrub_verdict(self, s, verdict);
        verdict.add_next();
        None
    }

    /// Completion of an admitted call: its result as the model may see it (see
    /// [`Engine::finish`]). The credentials are dropped here.
    pub fn complete(
        &self,
        s: &mut Session,
        admitted: Admitted<'_>,
        result: Result<Value, String>,
    ) -> (Option<Value>, Option<String>) {
        drop(admitted.credentials);
        self.finish_output(s, &admitted.tool, admitted.untrusted, result)
    }

    /// Completion of a call its caller ran itself after [`Engine::admit`] allowed it, named
    /// by its tool (the daemon's `call/output`, which may come from another process than the
    /// decision): credentials redacted; for
    /// an `untrusted_output` tool (or one not in the registry) the untrusted leg is set, the
    /// text remembered for the echo check and returned in one fenced block.
    pub fn finish(
        &self,
        s: &mut Session,
        tool: &str,
        result: Result<Value, String>,
    ) -> (Option<Value>, Option<String>) {
        let (untrusted, name) = {
            let tools = self
                .tools
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match tools.get(tool) {
                Some(t) => (t.has(Label::UntrustedOutput), t.def.name.clone()),
                None => (true, self.secrets.all.scrub(tool).into_owned()),
            }
        };
        self.finish_output(s, &name, untrusted, result)
    }

    /// The policy's secrets and the session's own, replaced in `v` by `[REDACTED:NAME]`; when
    /// one was there, an `output_redacted` record names them (never a value).
    fn redact_secrets(&self, s: &Session, tool: &str, v: &mut Value) {
        let text = v.to_string();
        let found: Vec<String> = [&self.secrets.all, s.secrets()]
            .iter()
            .filter_map(|set| set.find(&text))
            .collect();
        if found.is_empty() {
            return;
        }
        self.secrets.all.scrub_value(v);
        s.secrets().scrub_value(v);
        self.record_info(
            s,
            tool,
            "output_redacted",
            json!({"secrets": found,
                   "message": "the tool's output held a secret of the session; it was replaced by [REDACTED:NAME] before the model saw it"}),
        );
    }

    /// The handler's result as the model gets it: credentials, the policy's secrets and the
    /// session's own (the protected files' values it started with) redacted, with an
    /// `output_redacted` record naming them; from an untrusted tool, remembered for the echo
    /// check and fenced in a nonce-tagged block.
    fn finish_output(
        &self,
        s: &mut Session,
        tool: &str,
        untrusted: bool,
        result: Result<Value, String>,
    ) -> (Option<Value>, Option<String>) {
        let nonce = if untrusted {
            fence::random_hex(12).ok()
        } else {
            None
        };
        let result = match result {
            Ok(mut v) => {
                self.secrets.creds.scrub_value(&mut v);
                self.redact_secrets(s, tool, &mut v);
                Ok(v)
            }
            Err(e) => {
                let mut v = Value::String(self.secrets.creds.scrub(&e).into_owned());
                self.redact_secrets(s, tool, &mut v);
                Err(v.as_str().unwrap_or_default().to_owned())
            }
        };
        if !untrusted {
            return match result {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e)),
            };
        }
        untrusted_echo::remember(s, &result, self.policy.echo_words());
        match (result, &nonce) {
            (Ok(v), Some(n)) => (Some(fence::fence_value(&v, tool, n)), None),
            (Ok(_), None) => (
                Some(Value::String(
                    "[untrusted output withheld: no nonce]".into(),
                )),
                None,
            ),
            (Err(e), Some(n)) => (None, Some(fence::fence_text(&e, tool, n))),
            (Err(_), None) => (None, Some("[untrusted error withheld: no nonce]".into())),
        }
    }
}
