//! Shared fixture of the engine suites: a real directory tree in a tempdir (files, symlinks,
//! a hard link), the policy `tests/fixtures/engine_policy.json` pointed at it, a manual clock
//! and an in-memory audit sink. Every call goes through `Engine::call` with a handler that
//! records whether it ran.
#![allow(dead_code)]

use std::{
    cell::Cell,
    fs,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use gatewayd::{
    clock::ManualClock,
    engine::{
        AuditRecord, AuditSink, Credentials, Decision, Engine, Outcome, Reason, Session, ToolCall,
    },
    policy::Policy,
};
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
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub engine: Engine,
    pub clock: Arc<ManualClock>,
    pub audit: Arc<Mutex<MemAudit>>,
}

fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
}

/// A private key (not a real one): its body lines are secrets of every session that starts
/// with the protected files' values (docs/POLICY.md, "Secrets a session starts with").
pub(crate) const ID_RSA: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\n\
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n\
QyNTUxOQAAACBkZXBsb3kta2V5LWZvci10ZXN0cy1vbmx5LW5vdC1yZWFsAAAAJAAAAAAA\n\
-----END OPENSSH PRIVATE KEY-----\n";

/// A public key: public by design, never a secret.
pub(crate) const ID_RSA_PUB: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlcGxveS1rZXktZm9yLXRlc3Rz alice@work\n";

/// AWS credentials (the documented example keys).
pub(crate) const AWS_CREDENTIALS: &str = "[default]\n\
aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n\
region = eu-north-1\n";

/// The directory tree every test sees.
pub(crate) fn make_tree(root: &Path) {
    write(
        &root.join("work/notes.txt"),
        "meeting notes: ship on friday\nTODO: call the bank\n",
    );
    write(&root.join("work/src/main.rs"), "fn main() { /* TODO */ }\n");
    write(
        &root.join("work/.env"),
        "DEPLOY_KEY=dk_live_7Hq2Lm9XvR4tPz8W\n",
    );
    for f in ["old.txt", "a.txt", "b.txt", "c.txt", "d.txt"] {
        write(&root.join("work/out").join(f), "x\n");
    }
    write(&root.join("work/out/keep/ledger.txt"), "do not touch\n");
    write(&root.join("home/.ssh/id_rsa"), ID_RSA);
    write(&root.join("home/.ssh/id_rsa.pub"), ID_RSA_PUB);
    write(&root.join("home/.aws/credentials"), AWS_CREDENTIALS);
    write(&root.join("docs/guide.md"), "# Guide\n");
    write(&root.join("outside/data.txt"), "not in the sandbox\n");
    std::os::unix::fs::symlink(root.join("docs"), root.join("work/docs-link")).unwrap();
    std::os::unix::fs::symlink(root.join("home/.ssh/id_rsa"), root.join("work/key-link")).unwrap();
    std::os::unix::fs::symlink(
        root.join("home/.ssh/id_rsa"),
        root.join("work/out/evil-link"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        root.join("home/.ssh/new_key"),
        root.join("work/out/dangling"),
    )
    .unwrap();
    fs::hard_link(root.join("work/.env"), root.join("work/env-copy")).unwrap();
    fs::hard_link(root.join("home/.ssh/id_rsa"), root.join("work/key-copy")).unwrap();
}

/// The fixture policy text pointed at `root`.
pub(crate) fn policy_value(root: &Path) -> Value {
    let text =
        include_str!("fixtures/engine_policy.json").replace("@ROOT@", root.to_str().unwrap());
    serde_json::from_str(&text).unwrap()
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
        dir,
        root,
        engine,
        clock,
        audit,
    }
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
    assert!(!o.verdict.message.is_empty());
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
