//! `sandbox.private_tmp`: the agent's `/tmp` is the session's own. A file the host keeps in
//! `/tmp` is readable bare and absent under `gatewayd run`; what the agent writes to `/tmp`
//! works (its write roots name the session's directory, at both tiers), never reaches the
//! host's `/tmp`, and is removed with the session's directory when the session ends. The
//! paths the policy names under the host's `/tmp` are bound into the session's: read-only
//! where the policy lets the agent only read, read-write where it lets it write. One that is
//! not there is not bound: what the agent makes there stays in its own `/tmp`.
use super::*;
use serde_json::json;

/// The `session_start` record of `audit`, and what it says of the agent's `/tmp`.
fn session_tmp(audit: &Path) -> (serde_json::Value, serde_json::Value) {
    let start = records(audit)
        .into_iter()
        .find(|r| r["reason"] == "session_start")
        .expect("a session_start record");
    let tmp = start["detail"]["agent_privileges"]["kernel_interfaces"]["tmp"].clone();
    (start, tmp)
}

const LOOK: &str = "cat \"$1\"; echo made > /tmp/made.txt && cat /tmp/made.txt; stat -c %a /tmp";

#[test]
fn the_agent_gets_a_tmp_of_its_own() {
    let host_file = std::env::temp_dir().join(format!("gwtest-host-{}.txt", std::process::id()));
    std::fs::write(&host_file, "the host's\n").unwrap();
    let bare = Command::new("sh")
        .args(["-c", LOOK, "sh"])
        .arg(&host_file)
        .output()
        .unwrap();
    assert!(stdout(&bare).contains("the host's"), "bare: {bare:?}");
    let _ = std::fs::remove_file("/tmp/made.txt");

    // A workspace outside /tmp (its binds are the next test's).
    let ws_dir = Scratch::at(Path::new("/var/tmp"), "ptmp");
    let ws = &ws_dir.0;
    let policy = ws.join("policy.json");
    let audit = ws.join("audit.jsonl");
    let body = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": ws, "readable": [ws, "/usr", "/etc/passwd"], "writable": [ws],
                    "private_tmp": true}});
    std::fs::write(&policy, body.to_string()).unwrap();
    let child = under_gatewayd(&policy, &audit, "sh")
        .args(["-c", LOOK, "sh"])
        .arg(&host_file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(
        !text.contains("the host's"),
        "the host's /tmp is out of sight: {out:?}"
    );
    assert!(
        text.contains("made\n"),
        "writing its own /tmp works: {out:?}"
    );
    assert!(text.contains("1777"), "a /tmp's mode: {out:?}");
    assert!(
        !Path::new("/tmp/made.txt").exists(),
        "nothing reaches the host's /tmp"
    );
    let leftover: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("gatewayd-run-{pid}-"))
        })
        .collect();
    assert!(
        leftover.is_empty(),
        "the session's /tmp is removed: {leftover:?}"
    );
    let (start, tmp) = session_tmp(&audit);
    assert!(
        tmp["private"]
            .as_str()
            .is_some_and(|p| p.starts_with("/tmp/gatewayd-run-")),
        "{start}"
    );

    let _ = std::fs::remove_file(&host_file);
}

/// Reads `$1/ref.txt`, writes `$1/new.txt` (refused under gatewayd) and `$2/out.txt`.
const BOUND: &str = "cat \"$1/ref.txt\"; echo x > \"$1/new.txt\" && echo wrote-ro; \
                     echo y > \"$2/out.txt\" && echo wrote-rw; echo z > /tmp/own.txt && echo wrote-own";

#[test]
fn the_hosts_tmp_paths_the_policy_names_are_bound_read_only_or_read_write() {
    let host_tmp = Path::new("/tmp");
    let (ro_dir, rw_dir) = (
        Scratch::at(host_tmp, "bind-ro"),
        Scratch::at(host_tmp, "bind-rw"),
    );
    let (ro, rw) = (&ro_dir.0, &rw_dir.0);
    std::fs::write(ro.join("ref.txt"), "the host's ref\n").unwrap();
    let run = |c: &mut Command| {
        c.args(["-c", BOUND, "sh"])
            .arg(ro)
            .arg(rw)
            .output()
            .unwrap()
    };
    let bare = run(&mut Command::new("sh"));
    assert!(stdout(&bare).contains("wrote-ro"), "bare: {bare:?}");
    std::fs::remove_file(ro.join("new.txt")).unwrap();
    std::fs::remove_file(rw.join("out.txt")).unwrap();
    let _ = std::fs::remove_file("/tmp/own.txt");

    let ws_dir = Scratch::at(Path::new("/var/tmp"), "bind");
    let ws = &ws_dir.0;
    let (policy, audit) = (ws.join("policy.json"), ws.join("audit.jsonl"));
    let body = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": ws, "readable": [ws, "/usr", "/etc/passwd", ro],
                    "writable": [ws, rw], "private_tmp": true}});
    std::fs::write(&policy, body.to_string()).unwrap();
    let out = run(&mut under_gatewayd(&policy, &audit, "sh"));
    let text = stdout(&out);
    assert!(
        text.contains("the host's ref"),
        "read-only bind read: {out:?}"
    );
    assert!(
        !text.contains("wrote-ro"),
        "read-only bind written: {out:?}"
    );
    assert!(!ro.join("new.txt").exists());
    assert!(
        text.contains("wrote-rw") && text.contains("wrote-own"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(rw.join("out.txt")).unwrap(), "y\n");
    assert!(
        !Path::new("/tmp/own.txt").exists(),
        "the agent's own /tmp stays its own"
    );
    let (start, tmp) = session_tmp(&audit);
    assert_eq!(
        tmp["bound"],
        json!([{"path": ro, "from": ro, "read_only": true},
               {"path": rw, "from": rw, "read_only": false}]),
        "{start}"
    );

    // A path under /tmp that is not there is not bound: the session starts, says so, and
    // what the agent makes there stays in its own /tmp.
    let gone = host_tmp.join(format!("gwtest-bind-gone-{}", std::process::id()));
    let missing = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": ws, "readable": [ws, "/usr", "/etc/passwd"],
                    "writable": [ws, gone], "private_tmp": true}});
    std::fs::write(&policy, missing.to_string()).unwrap();
    let _ = std::fs::remove_file(&audit);
    let made = under_gatewayd(&policy, &audit, "sh")
        .args([
            "-c",
            "mkdir -p \"$1\" && echo made > \"$1/f\" && cat \"$1/f\"",
            "sh",
        ])
        .arg(&gone)
        .output()
        .unwrap();
    assert!(stdout(&made).contains("made"), "{made:?}");
    assert!(!gone.exists(), "made in the agent's own /tmp only");
    let err = String::from_utf8_lossy(&made.stderr);
    assert!(
        err.contains("not bound into the session's /tmp"),
        "{made:?}"
    );
    let (start, tmp) = session_tmp(&audit);
    assert_eq!(tmp["not_bound"], json!([gone]), "{start}");
}

/// An agent host installed under `/tmp` and started by name, through a link on `PATH` (as
/// npm's `node_modules/.bin`): the link is made again in the session's `/tmp` and its target
/// bound, so the program starts and finds its files from where the link leads. The policy
/// and the audit log lie under the host's `/tmp` too, out of the agent's sight.
#[test]
fn a_program_under_tmp_started_through_a_link_on_path_runs() {
    let install = Scratch::at(Path::new("/tmp"), "bind-prog");
    let (pkg, bin) = (install.path("pkg"), install.path("bin"));
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(pkg.join("data.txt"), "found its files\n").unwrap();
    let tool = pkg.join("tool.sh");
    std::fs::write(
        &tool,
        "#!/bin/sh\ncat \"$(dirname \"$(readlink -f \"$0\")\")/data.txt\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("../pkg/tool.sh", bin.join("gwtool")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let bare = Command::new("gwtool").env("PATH", &path).output().unwrap();
    assert!(stdout(&bare).contains("found its files"), "bare: {bare:?}");

    let ws_dir = Scratch::at(Path::new("/var/tmp"), "bind-prog");
    let ws = &ws_dir.0;
    // gatewayd's own files under the host's /tmp, which the session's /tmp does not bind:
    // nothing to hide from the agent there (tier 2's hiding mounts skip them).
    let (policy, audit) = (install.path("policy.json"), install.path("audit.jsonl"));
    let body = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": ws, "readable": [ws, "/usr", "/etc", pkg],
                    "writable": [ws], "private_tmp": true}});
    std::fs::write(&policy, body.to_string()).unwrap();
    let out = under_gatewayd(&policy, &audit, "gwtool")
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(stdout(&out).contains("found its files"), "{out:?}");
    let (start, tmp) = session_tmp(&audit);
    assert_eq!(
        tmp["links"],
        json!([{"path": bin.join("gwtool"), "to": "../pkg/tool.sh"}]),
        "{start}"
    );
}
