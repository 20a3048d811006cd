//! `sandbox.private_tmp`: the agent's `/tmp` is the session's own. A file the host keeps in
//! `/tmp` is readable bare and absent under `gatewayd run`; what the agent writes to `/tmp`
//! works (its write roots name the session's directory, at both tiers), never reaches the
//! host's `/tmp`, and is removed with the session's directory when the session ends. The
//! paths the policy names under the host's `/tmp` are bound into the session's: read-only
//! where the policy lets the agent only read, read-write where it lets it write. One that is
//! not there is refused before anything starts.
use super::*;
use serde_json::json;

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

    // A workspace outside /tmp (the session's /tmp would hide one inside).
    let ws = PathBuf::from(format!("/var/tmp/gwtest-ptmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(&ws).unwrap();
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
    let start = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "session_start")
        .expect("a session_start record");
    let tmp = &start["detail"]["agent_privileges"]["kernel_interfaces"]["tmp"];
    assert!(
        tmp["private"]
            .as_str()
            .is_some_and(|p| p.starts_with("/tmp/gatewayd-run-")),
        "{start}"
    );

    let _ = std::fs::remove_file(&host_file);
    let _ = std::fs::remove_dir_all(&ws);
}

/// Reads `$1/ref.txt`, writes `$1/new.txt` (refused under gatewayd) and `$2/out.txt`.
const BOUND: &str = "cat \"$1/ref.txt\"; echo x > \"$1/new.txt\" && echo wrote-ro; \
                     echo y > \"$2/out.txt\" && echo wrote-rw; echo z > /tmp/own.txt && echo wrote-own";

#[test]
fn the_hosts_tmp_paths_the_policy_names_are_bound_read_only_or_read_write() {
    let id = std::process::id();
    let (ro, rw) = (
        PathBuf::from(format!("/tmp/gwtest-bind-ro-{id}")),
        PathBuf::from(format!("/tmp/gwtest-bind-rw-{id}")),
    );
    for d in [&ro, &rw] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ro.join("ref.txt"), "the host's ref\n").unwrap();
    let run = |c: &mut Command| {
        c.args(["-c", BOUND, "sh"])
            .arg(&ro)
            .arg(&rw)
            .output()
            .unwrap()
    };
    let bare = run(&mut Command::new("sh"));
    assert!(stdout(&bare).contains("wrote-ro"), "bare: {bare:?}");
    std::fs::remove_file(ro.join("new.txt")).unwrap();
    std::fs::remove_file(rw.join("out.txt")).unwrap();
    let _ = std::fs::remove_file("/tmp/own.txt");

    let ws = PathBuf::from(format!("/var/tmp/gwtest-bind-{id}"));
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(&ws).unwrap();
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
    let start = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "session_start")
        .expect("a session_start record");
    let bound = &start["detail"]["agent_privileges"]["kernel_interfaces"]["tmp"]["bound"];
    assert_eq!(
        *bound,
        json!([{"path": ro, "from": ro, "read_only": true},
               {"path": rw, "from": rw, "read_only": false}]),
        "{start}"
    );

    // A path under /tmp that is not there cannot be bound: refused before anything starts.
    let gone = PathBuf::from(format!("/tmp/gwtest-bind-gone-{id}"));
    let missing = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": ws, "readable": [gone], "writable": [ws], "private_tmp": true}});
    std::fs::write(&policy, missing.to_string()).unwrap();
    let refused = under_gatewayd(&policy, &audit, "true").output().unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains(&*gone.to_string_lossy()) && err.contains("make it before"),
        "{refused:?}"
    );
    for d in [&ro, &rw, &ws] {
        let _ = std::fs::remove_dir_all(d);
    }
}
