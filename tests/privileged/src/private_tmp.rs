//! `sandbox.private_tmp`: the agent's `/tmp` is the session's own. A file the host keeps in
//! `/tmp` is readable bare and absent under `gatewayd run`; what the agent writes to `/tmp`
//! works (its write roots name the session's directory, at both tiers), never reaches the
//! host's `/tmp`, and is removed with the session's directory when the session ends. A
//! sandbox path under `/tmp` is refused before anything starts.
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

    // A sandbox path under /tmp would be hidden: refused before anything starts.
    let under = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": std::env::temp_dir(), "writable": [ws], "private_tmp": true}});
    std::fs::write(&policy, under.to_string()).unwrap();
    let refused = under_gatewayd(&policy, &audit, "true").output().unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("lies under /tmp"),
        "{refused:?}"
    );
    let _ = std::fs::remove_file(&host_file);
    let _ = std::fs::remove_dir_all(&ws);
}
