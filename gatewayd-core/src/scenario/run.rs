//! The runner: every scenario on a fresh [`Engine`] built from the policy (patched as the
//! scenario says), a [`ManualClock`], its sessions opened as the daemon opens them (with
//! the secrets they start with), and its steps in order. One [`Row`] per step.
use std::{
    cell::Cell,
    collections::{BTreeMap, BTreeSet, HashMap},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use serde_json::{Value, json};

use super::{Expect, Scenario, ScenarioError, ScenarioFile, Step, patch};
use crate::{
    audit::AuditLog,
    clock::ManualClock,
    engine::{AuditRecord, AuditSink, Engine, Legs, Registration, Session, Verdict},
    policy::Policy,
};

/// The actions a step can take (exactly one per step).
pub const ACTIONS: [&str; 11] = [
    "call",
    "register",
    "secret",
    "output",
    "untrusted",
    "approve",
    "reject",
    "advance_s",
    "advance_ms",
    "audit_fails",
    "kernel_denial",
];

/// The clock of a scenario that names none (2023-11-14T22:13:20Z).
pub const DEFAULT_START_MS: u64 = 1_700_000_000_000;

/// One step's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The scenario's name.
    pub scenario: String,
    /// The step's number, 1-based.
    pub step: usize,
    /// The step's name, or its action.
    pub label: String,
    /// What it expected: `decision reason` for a call, the result for another action.
    pub expected: String,
    /// What it got, then each expectation it missed.
    pub got: String,
    /// It got everything it expected.
    pub pass: bool,
    /// For a call: the verdict's message (shown under a failing row).
    pub message: Option<String>,
}

/// Where a scenario's engine records: the shared log, unless a step made appends fail.
struct Sink {
    log: Option<Arc<Mutex<AuditLog>>>,
    fail: Arc<AtomicBool>,
}

impl AuditSink for Sink {
    fn append(&mut self, r: AuditRecord) -> Result<(), String> {
        if self.fail.load(Ordering::SeqCst) {
            return Err("the scenario made the audit log fail".into());
        }
        match &self.log {
            Some(log) => {
                let mut log = log.lock().map_err(|_| "audit lock poisoned".to_string())?;
                AuditSink::append(&mut *log, r)
            }
            None => Ok(()),
        }
    }
}

/// Runs scenario files against one policy.
pub struct Runner {
    policy_path: PathBuf,
    /// The policy as JSON (for patches) and parsed.
    base: Value,
    policy: Policy,
    audit: Option<Arc<Mutex<AuditLog>>>,
}

impl Runner {
    /// `text`: the policy, after `@NAME@` substitution; `audit`: where every scenario's
    /// records go (None: nowhere).
    pub fn new(
        policy_path: &Path,
        text: &str,
        audit: Option<Arc<Mutex<AuditLog>>>,
    ) -> Result<Runner, ScenarioError> {
        let policy = Policy::parse(text, policy_path)?;
        let base = serde_json::from_str(text).map_err(|e| ScenarioError::Invalid {
            path: policy_path.to_owned(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        Ok(Runner {
            policy_path: policy_path.to_owned(),
            base,
            policy,
            audit,
        })
    }

    /// Every scenario of a file, in order.
    pub fn run_file(&self, path: &Path, file: &ScenarioFile) -> Result<Vec<Row>, ScenarioError> {
        let mut rows = Vec::new();
        for sc in &file.scenarios {
            rows.extend(self.run_scenario(path, sc)?);
        }
        Ok(rows)
    }

    fn policy_for(&self, path: &Path, sc: &Scenario) -> Result<Policy, ScenarioError> {
        if sc.policy_patch.is_empty() {
            return Ok(self.policy.clone());
        }
        let fail = |message: String| ScenarioError::Scenario {
            path: path.to_owned(),
            scenario: sc.name.clone(),
            message,
        };
        let mut v = self.base.clone();
        patch::apply(&mut v, &sc.policy_patch).map_err(|m| fail(format!("policy_patch: {m}")))?;
        Policy::parse(&v.to_string(), &self.policy_path)
            .map_err(|e| fail(format!("the patched policy is invalid: {e}")))
    }

    fn run_scenario(&self, path: &Path, sc: &Scenario) -> Result<Vec<Row>, ScenarioError> {
        let policy = self.policy_for(path, sc)?;
        let all_scopes: BTreeSet<String> = policy
            .tools
            .iter()
            .flat_map(|t| t.scopes.iter().cloned())
            .collect();
        let clock = Arc::new(ManualClock::new(sc.start_ms.unwrap_or(DEFAULT_START_MS)));
        let fail = Arc::new(AtomicBool::new(false));
        let sink = Sink {
            log: self.audit.clone(),
            fail: fail.clone(),
        };
        let engine = Engine::new(
            Arc::new(policy),
            clock.clone(),
            Some(Arc::new(Mutex::new(sink))),
        )?;
        let mut sessions = Vec::new();
        let specs = if sc.sessions.is_empty() {
            vec![super::SessionSpec {
                id: "s1".into(),
                user: super::default_user(),
                scopes: None,
                env: BTreeMap::new(),
            }]
        } else {
            sc.sessions.clone()
        };
        for spec in &specs {
            let scopes: Vec<&str> = match &spec.scopes {
                Some(v) => v.iter().map(String::as_str).collect(),
                None => all_scopes.iter().map(String::as_str).collect(),
            };
            let mut s = Session::new(&spec.id, &spec.user, &scopes);
            let env: Vec<(String, String)> = spec.env.clone().into_iter().collect();
            engine.start_session(&mut s, Some(&env));
            sessions.push(s);
        }
        let mut st = State {
            engine: &engine,
            clock: &clock,
            audit_fail: &fail,
            sessions,
            saved: HashMap::new(),
        };
        let mut rows = Vec::new();
        for (i, step) in sc.steps.iter().enumerate() {
            let mut r = st.step(step);
            r.scenario.clone_from(&sc.name);
            r.step = i + 1;
            rows.push(r);
        }
        Ok(rows)
    }
}

/// What one scenario's steps share.
struct State<'a> {
    engine: &'a Engine,
    clock: &'a ManualClock,
    audit_fail: &'a AtomicBool,
    sessions: Vec<Session>,
    /// Approval ids by name (`last`, and those a step saved).
    saved: HashMap<String, String>,
}

/// A step's label in the table: its name, or its action.
fn label(step: &Step) -> String {
    if let Some(n) = &step.name {
        return n.clone();
    }
    let what = if let Some(c) = &step.call {
        format!("call {}", c.tool)
    } else if let Some(d) = &step.register {
        format!("register {}", d.name)
    } else if let Some(s) = &step.secret {
        format!("secret {}", s.name)
    } else if let Some(o) = &step.output {
        format!("output of {}", o.tool)
    } else if step.untrusted.is_some() {
        "untrusted text".into()
    } else if let Some(id) = &step.approve {
        format!("approve {id}")
    } else if let Some(id) = &step.reject {
        format!("reject {id}")
    } else if let Some(s) = step.advance_s {
        format!("advance {s} s")
    } else if let Some(ms) = step.advance_ms {
        format!("advance {ms} ms")
    } else if let Some(f) = step.audit_fails {
        if f { "audit fails" } else { "audit works" }.into()
    } else if let Some(r) = &step.kernel_denial {
        format!("kernel denial {r}")
    } else {
        "(no action)".into()
    };
    match &step.session {
        Some(s) => format!("[{s}] {what}"),
        None => what,
    }
}

/// What a step got, and the mismatches found so far.
struct Got {
    expected: String,
    /// The decision and reason of a call, the result of another action.
    result: String,
    misses: Vec<String>,
    message: Option<String>,
}

impl Got {
    fn new(expected: impl Into<String>, got: impl Into<String>) -> Got {
        let (expected, result) = (expected.into(), got.into());
        let misses = if expected == result {
            Vec::new()
        } else {
            vec![String::new()]
        };
        Got {
            expected,
            result,
            misses,
            message: None,
        }
    }

    fn check(&mut self, ok: bool, miss: impl FnOnce() -> String) {
        if !ok {
            self.misses.push(miss());
        }
    }
}

impl State<'_> {
    fn step(&mut self, step: &Step) -> Row {
        let expect = step.expect.clone().unwrap_or_default();
        let idx = match &step.session {
            None => Some(0),
            Some(id) => self.sessions.iter().position(|s| s.id == *id),
        };
        let mut g = match idx {
            None => Got::new("a session", "no such session"),
            Some(i) => self.act(step, &expect, i),
        };
        if let Some(i) = idx {
            self.after(&expect, i, &mut g);
        }
        let notes: Vec<String> = g.misses.iter().filter(|m| !m.is_empty()).cloned().collect();
        let got = if notes.is_empty() {
            g.result.clone()
        } else {
            format!("{}; {}", g.result, notes.join("; "))
        };
        Row {
            scenario: String::new(),
            step: 0,
            label: label(step),
            expected: g.expected,
            got,
            pass: g.misses.is_empty(),
            message: g.message,
        }
    }

    /// An approval id reference: `$NAME` (`$last`: the latest held call's) or the id.
    fn resolve(&self, r: &str) -> Result<String, String> {
        match r.strip_prefix('$') {
            Some(name) => self
                .saved
                .get(name)
                .cloned()
                .ok_or_else(|| format!("no approval id saved as ${name}")),
            None => Ok(r.to_owned()),
        }
    }

    fn act(&mut self, step: &Step, e: &Expect, i: usize) -> Got {
        let ok_word = |ok: bool, yes: &str| if ok { yes.to_owned() } else { "refused".into() };
        if let Some(call) = &step.call {
            return self.call(step, call, e, i);
        }
        if let Some(d) = &step.register {
            let got = match self.engine.register(d) {
                Registration::Accepted => "accepted",
                Registration::NotInPolicy => "not_in_policy",
                Registration::RugPull { .. } => "rug_pull",
                Registration::Flagged(_) => "flagged",
            };
            return Got::new(e.status.as_deref().unwrap_or("accepted"), got);
        }
        if let Some(sec) = &step.secret {
            let r = self
                .engine
                .add_session_secret(&mut self.sessions[i], &sec.name, &sec.value);
            return Got::new(
                ok_word(e.ok.unwrap_or(true), "added"),
                ok_word(r.is_ok(), "added"),
            );
        }
        if let Some(o) = &step.output {
            let result = match (&o.output, &o.error) {
                (_, Some(err)) => Err(err.clone()),
                (Some(v), None) => Ok(v.clone()),
                (None, None) => Ok(Value::Null),
            };
            let (out, err) = self.engine.finish(&mut self.sessions[i], &o.tool, result);
            let mut g = Got::new("reported", "reported");
            check_output(&mut g, e, out.as_ref(), err.as_deref());
            return g;
        }
        if let Some(text) = &step.untrusted {
            self.engine.observe_untrusted(&mut self.sessions[i], text);
            return Got::new("observed", "observed");
        }
        if let Some(r) = step.approve.as_ref().or(step.reject.as_ref()) {
            let approve = step.approve.is_some();
            let yes = if approve { "approved" } else { "rejected" };
            let res = self.resolve(r).and_then(|id| {
                let r = if approve {
                    self.engine.approve(&id)
                } else {
                    self.engine.reject(&id)
                };
                r.map_err(|e| e.to_string())
            });
            let mut g = Got::new(
                ok_word(e.ok.unwrap_or(true), yes),
                ok_word(res.is_ok(), yes),
            );
            g.message = res.err();
            return g;
        }
        if let Some(ms) = step
            .advance_ms
            .or(step.advance_s.map(|s| s.saturating_mul(1000)))
        {
            self.clock.advance_ms(ms);
            return Got::new("advanced", "advanced");
        }
        if let Some(f) = step.audit_fails {
            self.audit_fail.store(f, Ordering::SeqCst);
            return Got::new("set", "set");
        }
        if let Some(reason) = &step.kernel_denial {
            if reason == "protected_path" {
                self.engine.note_suspicion(&mut self.sessions[i]);
            }
            return Got::new("noted", "noted");
        }
        Got::new("an action", "none")
    }

    fn call(&mut self, step: &Step, call: &crate::engine::ToolCall, e: &Expect, i: usize) -> Got {
        let expected = format!(
            "{} {}",
            e.decision.as_deref().unwrap_or("?"),
            e.reason.as_deref().unwrap_or("?")
        );
        let mut call = call.clone();
        if let Some(r) = &call.approval {
            match self.resolve(r) {
                Ok(id) => call.approval = Some(id),
                Err(m) => return Got::new(expected, format!("error: {m}")),
            }
        }
        let ran = Cell::new(false);
        let returns = step.returns.clone().unwrap_or_else(|| json!({"ok": true}));
        let out = self.engine.call(&mut self.sessions[i], &call, |_, _| {
            ran.set(true);
            match &step.fails {
                Some(err) => Err(err.clone()),
                None => Ok(returns),
            }
        });
        let v: &Verdict = &out.verdict;
        let mut g = Got::new(
            expected,
            format!("{} {}", v.decision.as_str(), v.reason.code()),
        );
        g.message = Some(v.message.clone());
        g.check(ran.get() == v.is_allow(), || {
            format!("the handler ran: {}", ran.get())
        });
        if let Some(m) = &e.message {
            g.check(v.message.contains(m.as_str()), || {
                format!("message lacks {m:?}")
            });
        }
        for m in &e.message_lacks {
            g.check(!v.message.contains(m.as_str()), || {
                format!("message holds {m:?}")
            });
        }
        if let Some(h) = &e.hold_reasons {
            g.check(*h == v.hold_reasons, || {
                format!("hold_reasons {:?}", v.hold_reasons)
            });
        }
        if let Some(m) = &e.matched_rules {
            g.check(*m == v.matched_rules, || {
                format!("matched_rules {:?}", v.matched_rules)
            });
        }
        if let Some(r) = &e.approval_id {
            let want = self.resolve(r);
            g.check(want.as_ref().ok() == v.approval_id.as_ref(), || {
                format!("approval id {:?}, not {r}", v.approval_id)
            });
        }
        check_output(&mut g, e, out.output.as_ref(), out.error.as_deref());
        if let Some(id) = &v.approval_id {
            self.saved.insert("last".into(), id.clone());
            if let Some(name) = &step.save {
                self.saved.insert(name.clone(), id.clone());
            }
        }
        g
    }

    /// What every step may expect afterwards: legs, pending approvals, budget spent.
    fn after(&self, e: &Expect, i: usize, g: &mut Got) {
        let s = &self.sessions[i];
        if let Some(want) = &e.legs {
            let legs: Legs = s.legs();
            let ok = want.untrusted.is_none_or(|x| x == legs.untrusted)
                && want.private.is_none_or(|x| x == legs.private)
                && want.egress.is_none_or(|x| x == legs.egress);
            g.check(ok, || {
                format!(
                    "legs untrusted={} private={} egress={}",
                    legs.untrusted, legs.private, legs.egress
                )
            });
        }
        if let Some(n) = e.pending {
            let got = self.engine.pending().len();
            g.check(got == n, || format!("{got} pending"));
        }
        if let Some(n) = e.spent {
            g.check(s.spent() == n, || format!("spent {}", s.spent()));
        }
    }
}

fn check_output(g: &mut Got, e: &Expect, out: Option<&Value>, err: Option<&str>) {
    let text = match (out, err) {
        (Some(Value::String(s)), _) => s.clone(),
        (Some(v), _) => v.to_string(),
        (None, Some(e)) => e.to_owned(),
        (None, None) => String::new(),
    };
    if let Some(want) = &e.output {
        g.check(text.contains(want.as_str()), || {
            format!("output lacks {want:?}")
        });
    }
    for m in &e.output_lacks {
        g.check(!text.contains(m.as_str()), || format!("output holds {m:?}"));
    }
}
