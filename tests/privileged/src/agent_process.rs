//! The agent as a process: its own cgroup, removed after; its exit code passed through; SIGTERM and SIGINT forwarded; it dies with gatewayd.

use super::*;

#[test]
fn agent_runs_in_its_own_cgroup_which_is_removed_after() {
    let _ = tier();
    let dir = Scratch::new("cgroup");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let out = run_agent(&policy, &audit, &["cgroup"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let cg = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line in {text}"));
    assert!(cg.starts_with("/gatewayd/run-"), "{cg}");
    let mount = gatewayd_kernel::cgroup::cgroup2_mount().unwrap();
    let path = mount.join(cg.trim_start_matches('/'));
    assert!(!path.exists(), "{} still exists", path.display());
}

#[test]
fn exit_code_passes_through() {
    let _ = tier();
    let dir = Scratch::new("exit");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let out = run_agent(&policy, &audit, &["exit", "42"]);
    assert_eq!(out.status.code(), Some(42));
    let recs = records(&audit);
    let end = recs.last().unwrap();
    assert_eq!(end["reason"], "session_end");
    assert_eq!(end["detail"]["exit_code"], 42);
}

#[test]
fn sigterm_and_sigint_are_forwarded_to_the_agent() {
    let _ = tier();
    for sig in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let dir = Scratch::new(&format!("sig{}", sig as i32));
        let (mut child, agent_pid) = start_sleeper(&dir, best_effort(serde_json::json!([])));
        assert!(pid_alive(agent_pid));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(128 + sig as i32),
            "agent killed by {sig} -> 128 + {}",
            sig as i32
        );
        assert!(!pid_alive(agent_pid));
    }
}

#[test]
fn agent_dies_when_gatewayd_dies() {
    let _ = tier();
    let dir = Scratch::new("pdeath");
    let (mut child, agent_pid) = start_sleeper(&dir, best_effort(serde_json::json!([])));
    assert!(pid_alive(agent_pid));
    child.kill().unwrap(); // SIGKILL: no cleanup code runs in gatewayd
    child.wait().unwrap();
    for _ in 0..100 {
        if !pid_alive(agent_pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agent {agent_pid} survived gatewayd");
}
