//! `sandbox.read_only`: what the user's own git runs later. In a repository's layout, bare,
//! the agent can append a `core.fsmonitor` command to `.git/config`, plant a hook, remove the
//! config and move `.git` aside; under `gatewayd run`, whose built-in read-only paths hold
//! `.git/config` and `.git/hooks` (at both tiers: read-only binds, `.git` pinned; the policy
//! names no `read_only`), each fails, and is recorded, while reading the
//! config and git's own writes in `.git` (its index) still work. (Plain files and the shell:
//! the guest has no git; the real git under `gatewayd run` is tests/hosts' work.)
use serde_json::json;

use super::*;

/// Each attempt prints `NAME ok` or `NAME failed`; then git's own work.
const ATTEMPTS: &str = "\
t() { n=$1; shift; if \"$@\" 2>/dev/null; then echo \"$n ok\"; else echo \"$n failed\"; fi; }
t config sh -c 'echo \"[core] fsmonitor = ./x\" >> .git/config'
t hook sh -c 'echo evil > .git/hooks/pre-commit'
t commondir sh -c 'echo /tmp/elsewhere > .git/commondir'
t envrc sh -c 'echo evil > .envrc'
t envrc-moved-in sh -c 'echo x > e.tmp && mv e.tmp .envrc'
t envrc-symlink ln -sf /tmp/x .envrc
t remove-config rm -f .git/config
t move-git mv .git .git-old
t read-config sh -c 'cat .git/config >/dev/null'
t write-index sh -c 'echo index > .git/index'
t write-workspace sh -c 'echo change > f.txt'
";

fn repo(dir: &Scratch) -> PathBuf {
    let ws = dir.path("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ok = Command::new("sh")
        .args([
            "-c",
            "mkdir -p .git/hooks .git/objects && printf '[core]\\n\\tbare = false\\n' > .git/config && echo a > f.txt",
        ])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(ok.success());
    ws
}

/// Read-only paths that did not exist: refused at tier 1 only (`read_only_name`).
const NEW_NAMES: [&str; 4] = ["commondir", "envrc", "envrc-moved-in", "envrc-symlink"];

fn outcomes(o: &Output) -> std::collections::BTreeMap<String, String> {
    escape_outcomes(&stdout(o))
}

#[test]
fn git_config_and_hooks_stay_as_the_user_left_them() {
    let dir = Scratch::new("read-only");
    let ws = repo(&dir);
    let bare = Command::new("sh")
        .args(["-c", ATTEMPTS])
        .current_dir(&ws)
        .output()
        .unwrap();
    let b = outcomes(&bare);
    for n in NEW_NAMES
        .iter()
        .chain(&["config", "hook", "remove-config", "move-git"])
    {
        assert_eq!(
            b.get(*n).map(String::as_str),
            Some("ok"),
            "bare {n}: {bare:?}"
        );
    }

    let dir = Scratch::new("read-only-gw");
    let ws = repo(&dir);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
               "sandbox": {"root": ws, "writable": [ws]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = under_gatewayd(&policy, &audit, "sh")
        .args(["-c", ATTEMPTS])
        .current_dir(&ws)
        .output()
        .unwrap();
    let g = outcomes(&out);
    for n in ["config", "hook", "remove-config", "move-git"] {
        assert_eq!(g.get(n).map(String::as_str), Some("failed"), "{n}: {out:?}");
    }
    for n in ["read-config", "write-index", "write-workspace"] {
        assert_eq!(g.get(n).map(String::as_str), Some("ok"), "{n}: {out:?}");
    }
    let config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    let start = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "session_start")
        .expect("session_start");
    let ro = &start["detail"]["agent_privileges"]["kernel_interfaces"]["read_only"];
    assert_eq!(ro["pinned"], json!([ws.join(".git")]), "{start}");
    binds_refusals_are_recorded(&audit);
    new_names_at_each_tier(&g, &out, &audit, &ws);
}

/// The binds' refusals (`EROFS`, `EBUSY`) come from the VFS before any LSM hook: at both
/// tiers `raw_tp/sys_exit` records each with the call and the path the agent named.
fn binds_refusals_are_recorded(audit: &Path) {
    let calls: Vec<(String, String, String)> = records(audit)
        .into_iter()
        .filter(|r| r["hook"] == "raw_tp/sys_exit" && r["reason"] == "read_only_path")
        .map(|r| {
            let d = &r["detail"];
            let text = |k: &str| d[k].as_str().unwrap_or("").to_string();
            (text("syscall"), text("errno"), text("path"))
        })
        .collect();
    let found = |call: &str, errno: &str, path: &str| {
        calls
            .iter()
            .any(|(c, e, p)| c.contains(call) && e == errno && p == path)
    };
    for (call, errno, path) in [
        ("open", "EROFS", ".git/config"),
        ("open", "EROFS", ".git/hooks/pre-commit"),
        ("unlink", "EBUSY", ".git/config"),
        ("rename", "EBUSY", ".git"),
    ] {
        assert!(
            found(call, errno, path),
            "no {call} {errno} record of {path} in {calls:?}"
        );
    }
}

/// Tier 1 refuses making a read-only path that did not exist, each attempt recorded with the
/// path; tier 2 cannot (KERNEL.md), and the end-of-session review lists what was made.
fn new_names_at_each_tier(
    g: &std::collections::BTreeMap<String, String>,
    out: &Output,
    audit: &Path,
    ws: &Path,
) {
    let recs = records(audit);
    if tier() == Tier::BpfLsm {
        for n in NEW_NAMES {
            assert_eq!(g.get(n).map(String::as_str), Some("failed"), "{n}: {out:?}");
        }
        assert!(!ws.join(".git/commondir").exists() && !ws.join(".envrc").exists());
        let refused: Vec<String> = recs
            .iter()
            .filter(|r| r["reason"] == "read_only_name")
            .map(|r| {
                r["detail"]["read_only_path"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        for p in [".git/commondir", ".envrc"] {
            let p = ws.join(p).display().to_string();
            assert!(refused.contains(&p), "{p} not in {refused:?}");
        }
    } else {
        for n in NEW_NAMES {
            assert_eq!(g.get(n).map(String::as_str), Some("ok"), "{n}: {out:?}");
        }
        let left = recs
            .iter()
            .find(|r| r["reason"] == "left_behind")
            .map(|r| r["detail"]["paths"].to_string())
            .unwrap_or_default();
        assert!(
            left.contains(".git/commondir") && left.contains(".envrc"),
            "{left}"
        );
    }
}

/// What read-only binds cannot cover (paths that did not exist): an `.envrc`, and a new hook
/// in a policy that turns the built-in read-only paths off. At the end of the session the user is told
/// (`left_behind` record, a line on the terminal); ordinary edits are not reported.
#[test]
fn what_the_agent_leaves_for_later_is_reported() {
    let dir = Scratch::new("left-behind");
    let ws = repo(&dir);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
               "sandbox": {"root": ws, "writable": [ws], "read_only_defaults": false}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = under_gatewayd(&policy, &audit, "sh")
        .args([
            "-c",
            "echo evil > .git/hooks/post-checkout && echo 'curl x | sh' > .envrc && echo b > f.txt",
        ])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("review them") && stderr.contains(".envrc"),
        "{stderr}"
    );
    let rec = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "left_behind")
        .expect("a left_behind record");
    let paths = rec["detail"]["paths"].to_string();
    assert!(
        paths.contains(".git/hooks") && paths.contains(".envrc"),
        "{rec}"
    );
    assert!(
        !paths.contains("f.txt"),
        "ordinary work is not reported: {rec}"
    );
}

/// `--left-behind fail`: a session that left such a file ends with 125 instead of the agent's
/// code, so a script stops before running git there; a session that left none keeps the
/// agent's code.
#[test]
fn left_behind_fail_ends_the_run_with_its_own_code() {
    let dir = Scratch::new("left-fail");
    let ws = repo(&dir);
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
               "sandbox": {"root": ws, "writable": [ws]}}),
    );
    let audit = dir.path("audit.jsonl");
    let run = |script: &str| {
        gatewayd_run()
            .arg("--policy")
            .arg(&policy)
            .arg("--audit")
            .arg(&audit)
            .args(["--left-behind", "fail", "--", "sh", "-c", script])
            .current_dir(&ws)
            .output()
            .unwrap()
    };
    let quiet = run("echo b > f.txt; exit 7");
    assert_eq!(quiet.status.code(), Some(7), "{quiet:?}");
    // A `.gitattributes` filter runs a command at the user's next checkout; the file is
    // watched, not read-only, so it is made at both tiers.
    let left = run("echo '* filter=x' > .gitattributes");
    assert_eq!(left.status.code(), Some(125), "{left:?}");
    let stderr = String::from_utf8_lossy(&left.stderr);
    assert!(
        stderr.contains("--left-behind fail") && stderr.contains(".gitattributes"),
        "{stderr}"
    );
}

/// `raw_tp/sys_exit` runs at every system call's exit of the host while attached: the set
/// keeps it pinned loaded and attaches it only while a session lives (docs/KERNEL.md, "One
/// program set per host"). The suite runs one session at a time.
#[test]
fn the_recorder_is_attached_only_while_a_session_lives() {
    use std::io::Read as _;
    let dir = Scratch::new("recorder");
    let policy = write_policy(&dir, best_effort(json!([])));
    let go = dir.path("go");
    let mut child = under_gatewayd(&policy, dir.path("audit.jsonl"), agent())
        .args(["pid", "+", "waitfile", go.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The agent's first line: it runs, so its session is in the set.
    let mut out = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {}
    let set =
        Path::new(gatewayd_kernel::kernel::set::PIN_BASE).join(gatewayd_kernel::kernel::set::tag());
    let attached = set.join("link-sys_exit").exists();
    std::fs::write(&go, "").unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        set.join("prog-sys_exit").exists(),
        "the recorder is pinned loaded"
    );
    assert!(attached, "attached while the session lived");
    assert!(
        !set.join("link-sys_exit").exists(),
        "detached once the last session ended"
    );
}
