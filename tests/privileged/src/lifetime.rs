//! The agent's lifetime: nothing it started outlives its session. Its descendants live in
//! its PID namespace, whose init dies with gatewayd (even with a SIGKILL of gatewayd), and
//! the next start removes what a killed gatewayd left (its cgroup, its session's entries).
use std::io::{BufRead as _, BufReader};

use super::*;

/// `sh` starts a grandchild that its parent's death orphans: `(sleep 300 &)` in a subshell
/// that exits at once. The first line is the grandchild's pid.
const DOUBLE_FORK: &str = "(sleep 300 & echo $!); exec sleep 300";

fn first_line(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().to_string()
}

fn dies_within(pid: i32, ms: u64) -> bool {
    (0..ms / 10).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        !pid_alive(pid)
    })
}

#[test]
fn a_sigkilled_gatewayd_takes_the_agents_descendants_with_it() {
    let _ = tier();
    // Bare: the grandchild of a SIGKILLed process lives on.
    let mut bare = Command::new("setsid")
        .args(["sh", "-c", DOUBLE_FORK])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let orphan: i32 = first_line(&mut bare).parse().unwrap();
    bare.kill().unwrap();
    bare.wait().unwrap();
    let survived = !dies_within(orphan, 300);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(orphan),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(survived, "bare, the orphan {orphan} should survive");

    // Under gatewayd: the same, then SIGKILL of gatewayd.
    let dir = Scratch::new("lifetime");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let mut gw = under_gatewayd(&policy, &audit, "sh")
        .args(["-c", DOUBLE_FORK])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ns_pid: i32 = first_line(&mut gw).parse().unwrap();
    let orphan = host_pid(gw.id(), ns_pid);
    let start = records(&audit)[0]["detail"].clone();
    let id = start["cgroup_id"].as_u64().unwrap();
    let path = PathBuf::from(start["cgroup"].as_str().unwrap());
    let cg = std::fs::read_to_string(format!("/proc/{orphan}/cgroup")).unwrap();
    assert!(
        cg.contains("/gatewayd/run-"),
        "in the session's cgroup: {cg}"
    );
    gw.kill().unwrap();
    gw.wait().unwrap();
    assert!(
        dies_within(orphan, 2000),
        "the agent's orphan {orphan} survived gatewayd's SIGKILL"
    );
    // The next start leaves nothing of the killed session.
    let next = run_agent(&policy, &dir.path("next.jsonl"), &["exit", "0"]);
    assert!(next.status.success());
    assert!(!path.exists(), "{} left behind", path.display());
    let programs = gatewayd_kernel::kernel::SharedPrograms::open_or_load().unwrap();
    assert!(
        !programs.session_ids().unwrap().contains(&id),
        "stale session {id} left in the set"
    );
}

/// A `run-*` cgroup whose gatewayd is dead (a killed gatewayd of another build, whose
/// program set no longer knows it) is killed and removed at the next start, with what
/// still runs in it; one whose gatewayd lives is left alone.
#[test]
fn the_next_start_kills_and_removes_run_cgroups_of_dead_gatewayds() {
    let _ = tier();
    // A pid that is surely dead: a child of this test, reaped.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = gatewayd_kernel::cgroup::AgentCgroup::create(&format!("run-{dead}-1")).unwrap();
    let stale_path = stale.path().to_owned();
    std::mem::forget(stale);
    let live =
        gatewayd_kernel::cgroup::AgentCgroup::create(&format!("run-{}-1", std::process::id()))
            .unwrap();
    let mut left = Command::new("sleep").arg("300").spawn().unwrap();
    std::fs::write(stale_path.join("cgroup.procs"), left.id().to_string()).unwrap();
    let _programs = gatewayd_kernel::kernel::SharedPrograms::open_or_load().unwrap();
    let status = left.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "{status}"
    );
    assert!(!stale_path.exists(), "{} left behind", stale_path.display());
    assert!(live.path().exists(), "a live gatewayd's cgroup was removed");
    live.remove().unwrap();
}

/// Behind the PID namespace, the tier-1 programs still refuse the session's processes a
/// signal to or a trace of their gatewayd, and a move out of the session's cgroup: shown
/// with a process moved into the session's cgroup from outside (the only way a process of
/// the session can name gatewayd's pid, or reach a writable cgroup filesystem: the agent's
/// own `/sys` is read-only).
#[test]
fn a_process_of_the_session_outside_its_namespace_cannot_touch_gatewayd() {
    if tier() != Tier::BpfLsm {
        note("tier 2: nothing but the PID namespace keeps the session from gatewayd; not asserted");
        return;
    }
    let dir = Scratch::new("outsider");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let (go, done) = (dir.path("go"), dir.path("done"));
    let mut gw = under_gatewayd(&policy, &audit, agent())
        .args(["pid", "+", "waitfile", done.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(first_line(&mut gw).starts_with("OK pid"));
    let path = PathBuf::from(records(&audit)[0]["detail"]["cgroup"].as_str().unwrap());
    let parent_procs = gatewayd_kernel::cgroup::cgroup2_mount()
        .unwrap()
        .join("gatewayd/cgroup.procs");
    let outsider = Command::new(agent())
        .args(["waitfile", go.to_str().unwrap(), "+", "killparent", "15"])
        .args(["+", "ptraceparent", "+", "escape"])
        .arg(&parent_procs)
        .env("GW_TESTAGENT_TARGET", gw.id().to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(path.join("cgroup.procs"), outsider.id().to_string()).unwrap();
    std::fs::write(&go, "").unwrap();
    let text = stdout(&outsider.wait_with_output().unwrap());
    for action in ["killparent", "ptraceparent", "escape"] {
        assert!(
            text.contains(&format!("FAIL {action}: Operation not permitted")),
            "{action}:\n{text}"
        );
    }
    std::fs::write(&done, "").unwrap();
    assert!(gw.wait().unwrap().success(), "gatewayd survived the signal");
    let hooks: Vec<(String, String)> = records(&audit)
        .iter()
        .filter(|r| r["source"] == "kernel")
        .map(|r| {
            (
                r["hook"].as_str().unwrap().into(),
                r["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    for want in ["lsm/task_kill", "lsm/ptrace_access_check", "lsm/file_open"] {
        assert!(
            hooks
                .iter()
                .any(|(h, r)| h == want && r == "self_protection"),
            "{want}: {hooks:?}"
        );
    }
}
