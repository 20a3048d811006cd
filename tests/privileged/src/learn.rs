//! `gatewayd run --learn`, the kernel half (docs/POLICY.md, "Learn mode"): `gw-testagent`
//! reads, lists and writes outside its roots, makes a directory there, runs a program outside
//! `sandbox.exec` and connects to an address outside the egress allowlist. Bare, all work; under the policy they are
//! refused; under `--learn` (tier 1 and tier 2 alike) they work and each is recorded
//! `would_deny`, while a protected file stays refused; then `gatewayd policy suggest` drafts
//! a policy under which the same agent runs with no refusal at all.
//!
//! The scratch directory is under `/root`, not `/tmp`: `suggest` answers a refusal under
//! `/tmp` with `sandbox.private_tmp`, and never proposes writing under `/var`.
use super::*;

/// The scratch directory and what lies in it.
struct Fixture {
    base: PathBuf,
    ws: PathBuf,
    data: PathBuf,
    new_file: PathBuf,
    new_dir: PathBuf,
    listed: PathBuf,
    secret: PathBuf,
    program: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let base = PathBuf::from(format!("/root/gwtest-learn-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (ws, outside) = (base.join("ws"), base.join("outside"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let data = outside.join("data.txt");
        std::fs::write(&data, "outside the roots\n").unwrap();
        let secret = outside.join("secret.txt");
        std::fs::write(&secret, "top secret\n").unwrap();
        let (made_in, listed) = (base.join("made"), base.join("listed"));
        std::fs::create_dir_all(&made_in).unwrap();
        std::fs::create_dir_all(listed.join("sub")).unwrap();
        Fixture {
            // A program outside `sandbox.exec` that every test machine has (the guests'
            // initramfs has no /bin/true).
            program: std::fs::canonicalize(crate::escape::escape_bin()).unwrap(),
            new_file: outside.join("new.txt"),
            new_dir: made_in.join("new.d"),
            listed,
            base,
            ws,
            data,
            secret,
        }
    }

    fn policy(&self) -> PathBuf {
        let p = self.base.join("policy.json");
        let body = serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {
            "root": self.ws, "readable": [self.ws], "writable": [self.ws],
            "exec": [std::fs::canonicalize(agent()).unwrap()],
            "protected": [self.secret]}});
        std::fs::write(&p, serde_json::to_string_pretty(&body).unwrap()).unwrap();
        p
    }

    /// The agent's actions: read, write and run outside the roots, connect to `port`.
    fn actions(&self, port: u16) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        let to = format!("127.0.0.1:{port}");
        [
            "read",
            &p(&self.data),
            "+",
            "write",
            &p(&self.new_file),
            "+",
            "run",
            &p(&self.program),
            "+",
            "mkdir",
            &p(&self.new_dir),
            "+",
            "list",
            &p(&self.listed),
            "+",
            "send",
            &to,
            "learned",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `gatewayd run [--learn] --policy P --audit A -- gw-testagent ACTIONS`.
    fn run(&self, policy: &Path, audit: &Path, learn: bool, actions: &[String]) -> Output {
        let _ = std::fs::remove_file(&self.new_file);
        let _ = std::fs::remove_dir(&self.new_dir);
        let mut c = gatewayd_run();
        if learn {
            c.arg("--learn");
        }
        let out = c
            .arg("--policy")
            .arg(policy)
            .arg("--audit")
            .arg(audit)
            .arg("--")
            .arg(agent())
            .args(actions)
            .output()
            .unwrap();
        eprintln!(
            "gatewayd run learn={learn}: {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// `OK`/`FAIL` of each action of the agent's output, in order (the program it runs prints
/// its own lines between them).
fn verdicts(out: &Output) -> Vec<String> {
    stdout(out)
        .lines()
        .filter(|l| l.starts_with("OK ") || l.starts_with("FAIL "))
        .filter_map(|l| l.split_once(' '))
        .map(|(v, rest)| format!("{v} {}", rest.split(':').next().unwrap_or("")))
        .collect()
}

/// (hook, reason, object) of each kernel record of `decision`.
fn kernel_of(audit: &Path, decision: &str) -> Vec<(String, String, String)> {
    records(audit)
        .iter()
        .filter(|r| r["source"] == "kernel" && r["decision"] == decision)
        .map(|r| {
            let d = &r["detail"];
            let object = d["directory"]
                .as_str()
                .or_else(|| d["path"].as_str())
                .map(str::to_owned)
                .or_else(|| d["addr"].as_str().map(|a| format!("{a}:{}", d["port"])))
                .unwrap_or_default();
            (
                r["hook"].as_str().unwrap_or("").to_owned(),
                r["reason"].as_str().unwrap_or("").to_owned(),
                object,
            )
        })
        .collect()
}

#[test]
fn learn_mode_records_the_kernels_refusals_and_suggest_drafts_a_policy_that_runs_clean() {
    let f = Fixture::new();
    let (port, received) = listener("127.0.0.1:0");
    let actions = f.actions(port);
    let all_ok = [
        "OK read", "OK write", "OK run", "OK mkdir", "OK list", "OK send",
    ];

    let bare = Command::new(agent()).args(&actions).output().unwrap();
    assert_eq!(verdicts(&bare), all_ok, "bare, all work: {}", stdout(&bare));
    assert_eq!(
        received.recv_timeout(MUST_HAPPEN_WITHIN).unwrap(),
        b"learned"
    );

    let policy = f.policy();
    let audit = f.base.join("enforced.jsonl");
    let out = f.run(&policy, &audit, false, &actions);
    assert_eq!(
        verdicts(&out),
        [
            "FAIL read",
            "FAIL write",
            "FAIL run",
            "FAIL mkdir",
            "FAIL list",
            "FAIL send"
        ],
        "without --learn the kernel refuses each"
    );
    assert!(kernel_of(&audit, "would_deny").is_empty());

    let mut learning = actions.clone();
    learning.extend(["+".into(), "read".into(), f.secret.display().to_string()]);
    let audit = f.base.join("learn.jsonl");
    let out = f.run(&policy, &audit, true, &learning);
    let start = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "session_start")
        .unwrap();
    assert_eq!(start["detail"]["learn"]["kernel"], true, "{start}");
    assert_eq!(
        verdicts(&out),
        [
            "OK read",
            "OK write",
            "OK run",
            "OK mkdir",
            "OK list",
            "OK send",
            "FAIL read"
        ],
        "learned: all work but the protected file"
    );
    assert_eq!(
        received.recv_timeout(MUST_HAPPEN_WITHIN).unwrap(),
        b"learned"
    );
    let learned = kernel_of(&audit, "would_deny");
    let p = |p: &Path| p.display().to_string();
    for want in [
        ("fanotify/learn", "outside_readable", p(&f.data)),
        ("fanotify/learn", "outside_writable", p(&f.new_file)),
        ("fanotify/learn", "exec_not_allowed", p(&f.program)),
        // A listing: the open of a directory.
        ("fanotify/learn", "outside_readable", p(&f.listed)),
        // A name made: its directory, which the kernel judges the call by.
        (
            "raw_tp/sys_exit",
            "outside_writable",
            p(f.new_dir.parent().unwrap()),
        ),
        (
            "cgroup/connect4",
            "egress_not_allowed",
            format!("127.0.0.1:{port}"),
        ),
    ] {
        let want = (want.0.to_owned(), want.1.to_owned(), want.2);
        assert!(learned.contains(&want), "{want:?} in {learned:?}");
    }
    assert!(
        learned.iter().all(|(_, _, o)| o != &p(&f.secret)),
        "the protected file is never learned: {learned:?}"
    );
    assert!(verify(&audit).status.success());

    let suggested = f.base.join("suggested.json");
    let s = suggest(&audit, &policy, &suggested);
    eprintln!(
        "suggest:\n{}\n{}",
        stdout(&s),
        String::from_utf8_lossy(&s.stderr)
    );
    assert!(s.status.success(), "{s:?}");
    let text = std::fs::read_to_string(&suggested).unwrap();
    let drafted: serde_json::Value = serde_json::from_str(&text).unwrap();
    for field in ["readable", "writable", "exec"] {
        assert!(
            !drafted["sandbox"][field].to_string().contains("secret.txt"),
            "never a protected path: {text}"
        );
    }

    let audit = f.base.join("suggested.jsonl");
    let out = f.run(&suggested, &audit, false, &actions);
    assert_eq!(verdicts(&out), all_ok, "under the suggested policy");
    assert_eq!(
        received.recv_timeout(MUST_HAPPEN_WITHIN).unwrap(),
        b"learned"
    );
    let refused: Vec<_> = records(&audit)
        .into_iter()
        .filter(|r| matches!(r["decision"].as_str(), Some("deny" | "would_deny")))
        .collect();
    assert!(refused.is_empty(), "no refusal: {refused:?}");
}
