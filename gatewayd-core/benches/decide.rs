//! One decision for a 50-tool policy, and audit append with fsync, measured separately; the
//! secret matcher alone on the `send_email` arguments (the exact forms the engine used before
//! the egress matcher, and the egress matcher), so their ratio is measured in the same run.
//! A hand-rolled loop: `cargo bench -p gatewayd-core --bench decide` prints p50, p99 and mean.
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
use std::{
    hint::black_box,
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
    sync::{Arc, Mutex},
    time::Instant,
};

use gatewayd_core::{
    audit::{AuditLog, Decision as AD, Entry, Source},
    clock::SystemClock,
    engine::{
        Credentials, Engine, Session, ToolCall,
        secrets::{EgressWindow, SecretSet, base64, egress_texts},
    },
    policy::Policy,
};
use serde_json::{Value, json};

/// The policy's two secrets (as in `policy`).
const K1: &str = "dk_live_7Hq2Lm9XvR4tPz8W";
const K2: &str = "correct-horse-battery-staple-42";

/// A 1 KiB e-mail body of ordinary prose, with the long words, numbers, a commit hash and
/// a URL that such mail has.
const BODY: &str = "Hi team,\n\nNotes from today's standup. We ship the release on Friday \
    after the infrastructure review; the deploy key was rotated this morning and the old one \
    no longer works. Please update your responsibilities in the wiki before Thursday, and \
    check that the monitoring dashboards still load: https://grafana.corp.test/d/app-latency \
    showed gaps between 12:30 and 14:05 yesterday. Commit 3f2a9c1e8b7d6f5a4c3b2a1f0e9d8c7b \
    fixes the login regression that support reported (ticket 48213); it needs one more \
    review. The on-call rotation for next week: Alice (Mon-Tue), Bob (Wed-Thu), Carol (Fri). \
    Customer numbers for the quarter are 1,284 active accounts, up 7.5 percent, and churn is \
    down to 2.1 percent. Remember that the office is closed on Monday for maintenance of the \
    electrical installation, so plan to work from home. If anything blocks the release, \
    raise it in the channel as early as possible so that we can still move the date. Lunch \
    on Wednesday is on the company; reply by Tuesday.\n\n\
    Thanks, and have a good afternoon,\nDana";

fn policy(root: &Path) -> Policy {
    let mut tools = Vec::new();
    for i in 0..46 {
        tools.push(json!({
            "name": format!("tool_{i:02}"),
            "description": format!("Synthetic tool number {i} that does one thing well."),
            "input_schema": {"type": "object", "required": ["id"], "properties": {
                "id": {"type": "string"}, "count": {"type": "integer", "minimum": 0, "maximum": 1000}}},
            "scopes": ["basic"],
            "args": {"id": {"regex": "^[a-z0-9-]{1,32}$"}, "count": {"max": 1000}}
        }));
    }
    tools.push(json!({
        "name": "send_email", "description": "Send an email from the team mailbox.",
        "input_schema": {"type": "object", "required": ["to", "subject", "body"], "properties": {
            "to": {"type": "array", "items": {"type": "string"}}, "subject": {"type": "string"}, "body": {"type": "string"}}},
        "scopes": ["email"], "labels": ["sends_out"],
        "args": {"to": {"required": true, "regex": "^[^@\\s]+@[^@\\s]+$"}, "subject": {"max_len": 200}}
    }));
    tools.push(json!({
        "name": "read_file", "description": "Read a file in the workspace.",
        "input_schema": {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
        "scopes": ["basic"], "labels": ["reads_private"], "args": {"path": {"required": true, "path": "read"}}
    }));
    tools.push(json!({
        "name": "fetch_url", "description": "Fetch a page.",
        "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}},
        "scopes": ["basic"], "labels": ["untrusted_output", "sends_out"], "args": {"url": {"url": true}}
    }));
    tools.push(json!({"name": "noop", "description": "Does nothing.", "cost": 0}));
    tools.push(json!({
        "name": "shell", "description": "A command line the host runs with a shell.",
        "input_schema": {"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}},
        "scopes": ["basic"],
        "args": {"command": {"required": true, "shell": {"through_shell": true, "exec": ["cat", "head", "ls", "find", "xargs", "wc", "git", "python3", "rg"]}}}
    }));
    let mut rules = Vec::new();
    for i in 0..10 {
        rules.push(json!({"id": format!("r{i}"), "tool": format!("tool_{i}*"),
            "when": {"count": {"gt": 900}}, "decision": "hold"}));
    }
    rules.push(json!({"id": "internal", "tool": "send_email", "when": {"to": {"glob": "*@corp.test"}}, "decision": "allow"}));
    rules.push(json!({"id": "paste", "tool": "send_*", "when": {"to": {"glob": "*@pastebin.test"}}, "decision": "deny"}));
    let p = json!({
        "version": 1,
        "sandbox": {"root": root, "readable": [root], "writable": [root], "protected": [root.join(".env")]},
        "network": {"egress": [{"host": "api.search.test"}]},
        "tools": tools, "rules": rules,
        "limits": {"rate": [{"tool": "send_*", "max": 1000000, "window_s": 60}], "budget": 1000000000u64,
            "actions": {"destructive": 3}},
        "trifecta": "hold",
        "secrets": {"k1": {"value": K1}, "k2": {"value": K2}},
    });
    Policy::parse(&p.to_string(), Path::new("bench.json")).unwrap()
}

fn report(name: &str, mut ns: Vec<u64>) {
    ns.sort_unstable();
    let pct = |p: f64| ns[((ns.len() as f64 - 1.0) * p) as usize];
    let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64;
    println!(
        "{name:<44} n={:<7} p50={:>9} ns  p99={:>9} ns  mean={:>11.0} ns",
        ns.len(),
        pct(0.50),
        pct(0.99),
        mean
    );
}

/// The secret matcher alone on the arguments of `email`: the exact forms (what the secrets
/// check ran before the egress matcher: `find` on every text), and the egress matcher with an
/// empty and a full window and on base64 of the body (benign: full searches, no early match).
fn matcher_alone(email: &ToolCall) {
    let set = SecretSet::new(&[("k1".into(), K1.into()), ("k2".into(), K2.into())]);
    let texts = egress_texts(&email.arguments);
    let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    bench(
        "secrets: exact forms only (the old matcher)",
        200_000,
        || {
            black_box(texts.iter().find_map(|t| set.find(black_box(t))));
        },
    );
    let empty = EgressWindow::new();
    assert_eq!(set.find_in_call(&texts, &empty), None);
    bench("secrets: egress matcher, empty window", 200_000, || {
        black_box(set.find_in_call(black_box(&texts), &empty));
    });
    let mut full = EgressWindow::new();
    for _ in 0..8 {
        full.push(&texts);
    }
    assert_eq!(set.find_in_call(&texts, &full), None);
    bench(
        "secrets: egress matcher, window of 8 calls",
        200_000,
        || {
            black_box(set.find_in_call(black_box(&texts), &full));
        },
    );
    let encoded = base64(BODY.as_bytes());
    assert_eq!(set.find_in_call(&[encoded.as_str()], &empty), None);
    bench(
        "secrets: egress matcher, base64 of the body",
        50_000,
        || {
            black_box(set.find_in_call(black_box(&[encoded.as_str()]), &empty));
        },
    );
}

/// Times `f` and reports it as `name`, unless `GATEWAYD_BENCH_ONLY` is set and `name` does
/// not start with it (to profile one row).
fn bench(name: &str, n: usize, f: impl FnMut()) {
    if std::env::var("GATEWAYD_BENCH_ONLY").is_ok_and(|only| !name.starts_with(&only)) {
        return;
    }
    report(name, time(n, f));
}

fn time(n: usize, mut f: impl FnMut()) -> Vec<u64> {
    for _ in 0..n / 10 {
        f();
    }
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as u64
        })
        .collect()
}

fn main() {
    assert!(BODY.len() >= 1024, "{}", BODY.len());
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("notes.txt"), "x").unwrap();
    let engine = Engine::new(Arc::new(policy(&root)), Arc::new(SystemClock), None).unwrap();
    let session = Session::new("bench", "alice", &["basic", "email"]);
    println!("gatewayd decide benchmark: 50-tool policy, 12 rules, 2 secrets");

    let simple = ToolCall::new("tool_42", json!({"id": "abc-123", "count": 7}));
    bench("decide: tool_42 (schema, regex, max)", 200_000, || {
        black_box(engine.decide(&session, black_box(&simple)));
    });
    let email = ToolCall::new(
        "send_email",
        json!({"to": ["team@corp.test"], "subject": "Standup", "body": BODY}),
    );
    assert!(engine.decide(&session, &email).is_allow());
    bench(
        "decide: send_email (1 KiB body; rules, secrets)",
        200_000,
        || {
            black_box(engine.decide(&session, black_box(&email)));
        },
    );
    matcher_alone(&email);
    many_secrets_row(&engine, &email);
    let unknown = ToolCall::new("tool_99", json!({}));
    bench("decide: unknown tool (deny)", 200_000, || {
        black_box(engine.decide(&session, black_box(&unknown)));
    });
    let path = ToolCall::new("read_file", json!({"path": "notes.txt"}));
    bench("decide: read_file (realpath, sandbox)", 100_000, || {
        black_box(engine.decide(&session, black_box(&path)));
    });
    // The floor under read_file: the system calls its path check makes (the no-symlink walk,
    // an O_PATH open, the fstat of the file it reached, the close), with nothing around.
    let notes = root.join("notes.txt");
    bench("floor: read_file's system calls alone", 100_000, || {
        let walked = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(black_box(&notes));
        black_box(walked.and_then(|f| f.metadata()).is_ok());
    });
    shell_rows(&engine, &session);
    program_and_ripgrep_rows(&engine, &session, &root);
    tracked_rows(&engine, &session, &root);
    let url = ToolCall::new("fetch_url", json!({"url": "https://api.search.test/q?x=1"}));
    bench("decide: fetch_url (URL, egress)", 200_000, || {
        black_box(engine.decide(&session, black_box(&url)));
    });
    let mut s2 = Session::new("bench2", "alice", &["basic"]);
    let noop = ToolCall::new("noop", json!({}));
    bench("call: noop, no audit (counters, handler)", 200_000, || {
        black_box(engine.call(&mut s2, &noop, |_: &Value, _: &Credentials| Ok(Value::Null)));
    });

    audit_rows(&root, &noop);
    // A kernel denial through the aggregator: a repeat within its window is counted.
    let denial = Entry::kernel(
        "bench",
        "cgroup/connect4",
        "egress_not_allowed",
        json!({"addr": "10.0.0.1", "port": 443, "pid": 7, "comm": "agent",
               "cgroup_id": 1, "session_cgroup_id": 1, "message": "not in the allowlist"}),
    );
    let mut aggregator = gatewayd_core::audit::aggregate::Aggregator::new();
    let _ = aggregator.offer(denial.clone(), 0);
    bench(
        "aggregate: a repeated kernel denial (counted)",
        200_000,
        || {
            black_box(aggregator.offer(black_box(denial.clone()), 1));
        },
    );
}

/// The shell tool: one command, a line with `cd`, a pipe and redirections, one with a
/// `for` loop and braces, and `find | xargs`.
fn shell_rows(engine: &Engine, session: &Session) {
    let one = ToolCall::new("shell", json!({"command": "cat notes.txt"}));
    assert!(engine.decide(session, &one).is_allow());
    bench("decide: shell, one command (tokeniser)", 100_000, || {
        black_box(engine.decide(session, black_box(&one)));
    });
    let line = ToolCall::new(
        "shell",
        json!({"command": "cd . && cat notes.txt 2>/dev/null | head -3 > out.txt"}),
    );
    assert!(engine.decide(session, &line).is_allow());
    bench(
        "decide: shell line (cd, pipe, redirections)",
        100_000,
        || {
            black_box(engine.decide(session, black_box(&line)));
        },
    );
    let looped = ToolCall::new(
        "shell",
        json!({"command": "for f in notes.txt notes.txt; do head -1 \"$f\"; done; ls {.,.}"}),
    );
    assert!(engine.decide(session, &looped).is_allow());
    bench("decide: shell line (for loop, braces)", 100_000, || {
        black_box(engine.decide(session, black_box(&looped)));
    });
    // The found paths' look below the root reads the directory on every decision.
    let found = ToolCall::new(
        "shell",
        json!({"command": "find . -name '*.txt' | xargs wc -l"}),
    );
    assert!(engine.decide(session, &found).is_allow());
    bench("decide: shell line (find | xargs)", 100_000, || {
        black_box(engine.decide(session, black_box(&found)));
    });
}

/// A program given on the line, whose text is read (`python3 -c`, a here-document), and
/// ripgrep's walk of a root that holds a protected `.env` its `.ignore` file names (the
/// `ignore` crate walks down to it).
fn program_and_ripgrep_rows(engine: &Engine, session: &Session, root: &Path) {
    std::fs::write(root.join(".env"), "K=v").unwrap();
    std::fs::write(root.join(".ignore"), ".env\n").unwrap();
    for (name, line) in [
        (
            "decide: shell, python3 -c (its text read)",
            "python3 -c \"import json,sys; print(json.load(sys.stdin)['name'])\" < notes.txt",
        ),
        (
            "decide: shell, here-document to python3 -",
            "python3 - <<'EOF'\nfrom pathlib import Path\nfor p in sorted(Path('.').glob('*.txt')):\n    print(p, len(p.read_text()))\nEOF",
        ),
        (
            "decide: shell, rg --hidden (ripgrep's walk)",
            "rg --hidden -n TODO",
        ),
    ] {
        let call = ToolCall::new("shell", json!({"command": line}));
        assert!(engine.decide(session, &call).is_allow(), "{line}");
        bench(name, 20_000, || {
            black_box(engine.decide(session, black_box(&call)));
        });
    }
}

/// A repository of 1,000 tracked files: what `git ls-files` lists is checked file by file
/// from git's index, what `find` lists by a walk of the tree.
fn tracked_rows(engine: &Engine, session: &Session, root: &Path) {
    let Some(repo) = repository_of_1000_files(root) else {
        println!("decide: git ls-files rows skipped: git is not installed");
        return;
    };
    for (name, line) in [
        (
            "decide: git ls-files | xargs (1,000 tracked)",
            "git ls-files | xargs wc -l",
        ),
        (
            "decide: find | xargs (the same 1,000 files)",
            "find . -type f -not -path './.git/*' | xargs wc -l",
        ),
    ] {
        let call = ToolCall::new(
            "shell",
            json!({"command": format!("cd {} && {line}", repo.display())}),
        );
        assert!(engine.decide(session, &call).is_allow(), "{line}");
        bench(name, 2_000, || {
            black_box(engine.decide(session, black_box(&call)));
        });
    }
}

/// `repo/` below the policy's root, 1,000 files in 10 directories, all of them added to
/// git's index; `None` without git.
fn repository_of_1000_files(root: &Path) -> Option<std::path::PathBuf> {
    let dir = root.join("repo");
    for i in 0..1000 {
        let file = dir.join(format!("src/m{}/f{i}.rs", i % 10));
        std::fs::create_dir_all(file.parent()?).ok()?;
        std::fs::write(file, "fn f() {}\n").ok()?;
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&dir)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    (git(&["init", "-q"]) && git(&["add", "-A"])).then_some(dir)
}

/// The audit log's append with its fdatasync, alone and under a whole call.
fn audit_rows(root: &Path, noop: &ToolCall) {
    // Audit append with fsync (fdatasync per record), on the tempdir's filesystem.
    let clock = Arc::new(SystemClock);
    let mut log = AuditLog::open(&root.join("audit.jsonl"), clock.clone()).unwrap();
    let entry = Entry {
        source: Source::Gateway,
        session: "bench".into(),
        tool: Some("send_email".into()),
        hook: None,
        decision: AD::Allow,
        reason: "allowed".into(),
        detail: json!({"args_sha256": "0".repeat(64), "matched_rules": ["internal"]}),
    };
    bench("audit append (fdatasync each)", 2_000, || {
        black_box(log.append(entry.clone()).unwrap());
    });
    drop(log);
    let log = AuditLog::open(&root.join("audit2.jsonl"), clock).unwrap();
    let audited = Engine::new(
        Arc::new(policy(root)),
        Arc::new(SystemClock),
        Some(Arc::new(Mutex::new(log))),
    )
    .unwrap();
    let mut s3 = Session::new("bench3", "alice", &["basic"]);
    bench("call: noop with audit record (end to end)", 2_000, || {
        black_box(audited.call(&mut s3, noop, |_: &Value, _: &Credentials| Ok(Value::Null)));
    });
}

/// `send_email` in a session that started with 64 secrets of its own (protected files,
/// environment).
fn many_secrets_row(engine: &Engine, email: &ToolCall) {
    let mut many = Session::new("bench-many", "alice", &["basic", "email"]);
    for i in 0..64 {
        let v = format!("tok_{i:02}_{}", base64(format!("{i}-{K1}").as_bytes()));
        engine
            .add_session_secret(&mut many, &format!("s{i}"), &v)
            .unwrap();
    }
    assert!(engine.decide(&many, email).is_allow());
    bench(
        "decide: send_email, session with 64 secrets",
        100_000,
        || {
            black_box(engine.decide(&many, black_box(email)));
        },
    );
}
