//! Shared fixture of the engine suites: the testkit's directory tree in a tempdir (files,
//! symlinks, hard links), the testkit's engine policy pointed at it, a manual clock
//! and an in-memory audit sink. Every call goes through `Engine::call` with a handler that
//! records whether it ran.

use std::{
    cell::Cell,
    fs,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use gatewayd_core::{
    clock::ManualClock,
    engine::{
        AuditRecord, AuditSink, Credentials, Decision, Engine, Outcome, Reason, Session, ToolCall,
    },
    policy::Policy,
};
pub(crate) use gatewayd_testkit::tree::{make_tree, policy_value};
use serde_json::{Value, json};

pub(crate) const ALL_SCOPES: &[&str] = &[
    "files:read",
    "files:write",
    "files:delete",
    "shell",
    "web",
    "email:read",
    "email:send",
    "payments",
];

/// The fixture's deploy key (a secret) and SMTP password (a credential), as the attack suites
/// look for them in arguments, outputs and audit records.
pub(crate) const DEPLOY_KEY: &str = "dk_live_7Hq2Lm9XvR4tPz8W";
pub(crate) const SMTP: &str = "smtp-pw-Zx81Qp07Lk";

/// Records in memory; `fail` makes every append fail.
#[derive(Default)]
pub(crate) struct MemAudit {
    pub records: Vec<AuditRecord>,
    pub fail: bool,
}

impl AuditSink for MemAudit {
    fn append(&mut self, r: AuditRecord) -> Result<(), String> {
        if self.fail {
            return Err("disk full".into());
        }
        self.records.push(r);
        Ok(())
    }
}

pub(crate) struct Fx {
    /// Holds the fixture tree; removed when the fixture is dropped.
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub engine: Engine,
    pub clock: Arc<ManualClock>,
    pub audit: Arc<Mutex<MemAudit>>,
}

pub(crate) fn fx() -> Fx {
    fx_with(|_| {})
}

/// A fixture whose policy `edit` changed first.
pub(crate) fn fx_with(edit: impl FnOnce(&mut Value)) -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    make_tree(&root);
    let mut v = policy_value(&root);
    edit(&mut v);
    let policy = Policy::parse(&v.to_string(), Path::new("engine_policy.json")).unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let audit = Arc::new(Mutex::new(MemAudit::default()));
    let engine = Engine::new(Arc::new(policy), clock.clone(), Some(audit.clone())).unwrap();
    Fx {
        _dir: dir,
        root,
        engine,
        clock,
        audit,
    }
}

/// The fixture with `programs` also on the exec allowlist.
pub(crate) fn fx_exec(programs: &[&str]) -> Fx {
    fx_with(|v| {
        let exec = v["sandbox"]["exec"].as_array_mut().expect("exec list");
        exec.extend(programs.iter().map(|p| json!(p)));
    })
}

/// Asserts the engine allows `line` through the shell tool `run_sh`, and its handler ran.
#[track_caller]
pub(crate) fn assert_allowed(f: &Fx, s: &mut Session, line: &str) {
    let (o, ran) = f.call(s, "run_sh", json!({"command": line}));
    assert_eq!(
        o.verdict.decision,
        Decision::Allow,
        "{line}: {}",
        o.verdict.message
    );
    assert!(ran, "{line}");
}

pub(crate) fn session() -> Session {
    Session::new("s1", "alice", ALL_SCOPES)
}

impl Fx {
    pub(crate) fn p(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// Calls a tool whose handler returns `{"ok": true}`; also returns whether it ran.
    pub(crate) fn call(&self, s: &mut Session, tool: &str, args: Value) -> (Outcome, bool) {
        self.call_full(s, ToolCall::new(tool, args), json!({"ok": true}))
    }

    /// Calls a tool whose handler returns `output`.
    pub(crate) fn call_out(
        &self,
        s: &mut Session,
        tool: &str,
        args: Value,
        output: Value,
    ) -> (Outcome, bool) {
        self.call_full(s, ToolCall::new(tool, args), output)
    }

    pub(crate) fn call_full(
        &self,
        s: &mut Session,
        call: ToolCall,
        output: Value,
    ) -> (Outcome, bool) {
        let ran = Cell::new(false);
        let out = self
            .engine
            .call(s, &call, |_args: &Value, _c: &Credentials| {
                ran.set(true);
                Ok(output)
            });
        (out, ran.get())
    }

    pub(crate) fn records(&self) -> usize {
        self.audit.lock().unwrap().records.len()
    }
}

/// Asserts a refusal: decision, reason code, and that the handler never ran.
#[track_caller]
pub(crate) fn refused(r: (Outcome, bool), decision: Decision, reason: Reason) -> Outcome {
    let (o, ran) = r;
    assert_eq!(
        (o.verdict.decision, o.verdict.reason),
        (decision, reason),
        "message: {}",
        o.verdict.message
    );
    assert!(!ran, "the handler ran");
    count_call("refused");
    crate::next_steps::assert_next_step(&o.verdict);
    o
}

#[track_caller]
pub(crate) fn denied(r: (Outcome, bool), reason: Reason) -> Outcome {
    refused(r, Decision::Deny, reason)
}

/// Asserts the handler ran.
#[track_caller]
pub(crate) fn allowed(r: (Outcome, bool)) -> Outcome {
    let (o, ran) = r;
    assert_eq!(
        o.verdict.decision,
        Decision::Allow,
        "{:?}: {}",
        o.verdict.reason,
        o.verdict.message
    );
    assert!(ran, "allowed but the handler did not run");
    count_call("allowed");
    o
}

/// With `GATEWAYD_COUNT_DIR` set, each asserted call is tallied in a file there (for the
/// suite counts in reports).
pub(crate) fn count_call(kind: &str) {
    if let Some(dir) = std::env::var_os("GATEWAYD_COUNT_DIR") {
        use std::io::Write;
        let p = Path::new(&dir).join(kind);
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(p) {
            let _ = f.write_all(b"1\n");
        }
    }
}

/// What `line` prints when the real bash runs it in the fixture's workspace.
pub(crate) fn run_in_bash(f: &Fx, line: &str) -> String {
    let out = std::process::Command::new("bash")
        .args(["-c", line])
        .current_dir(f.p("work"))
        .output()
        .expect("bash runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An attack through the shell tool `run_sh`: the real bash prints `secret` through
/// `line` (the attempt works without gatewayd), and the engine refuses it without running
/// the handler. Returns the refusal.
#[track_caller]
pub(crate) fn bash_reads_it_the_engine_refuses(
    f: &Fx,
    s: &mut Session,
    line: &str,
    secret: &str,
) -> Outcome {
    let bare = run_in_bash(f, line);
    assert!(
        bare.contains(secret),
        "{line}: without gatewayd bash reads the secret: {bare}"
    );
    let (o, ran) = f.call(s, "run_sh", json!({"command": line}));
    assert_eq!(
        o.verdict.decision,
        Decision::Deny,
        "{line}: {}",
        o.verdict.message
    );
    assert!(!ran, "{line}: the handler ran");
    o
}
