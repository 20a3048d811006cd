//! The confinement holds against the agent itself: it cannot weaken it, runs only allowed programs, and stays confined in sub-cgroups, including one moved in from outside.

use super::*;

#[test]
fn agent_cannot_weaken_its_own_confinement() {
    let tier = tier();
    let dir = Scratch::new("selfprot");
    // A root agent that keeps every capability: what stops it here is the kernel programs
    // (tier 1) or Landlock and the seccomp filter (tier 2), not the missing capabilities
    // (escape.rs tests those).
    let mut body = best_effort(serde_json::json!([]));
    body["agent"] =
        serde_json::json!({"capabilities": &gatewayd_core::policy::names::CAPABILITIES[..]});
    let policy = write_policy(&dir, body);
    let audit = dir.path("audit.jsonl");
    let parent_procs = gatewayd_kernel::cgroup::cgroup2_mount()
        .unwrap()
        .join("gatewayd/cgroup.procs");
    let mnt = dir.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // killparent and ptraceparent aim at gatewayd's pid (GW_TESTAGENT_TARGET): the shell
    // execs gatewayd, which keeps its pid. In the agent's PID namespace it names nothing.
    let out = Command::new("sh")
        .args(["-c", "export GW_TESTAGENT_TARGET=$$; exec \"$@\"", "sh"])
        .arg(gatewayd())
        .args(["run", "--user", "root", "--policy"])
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .arg("--")
        .arg(agent())
        .args([
            "bpf",
            "+",
            "escape",
            parent_procs.to_str().unwrap(),
            "+",
            "cgroup",
            "+",
            "mount",
            mnt.to_str().unwrap(),
            "+",
            "killparent",
            "15",
            "+",
            "ptraceparent",
        ])
        .output()
        .unwrap();
    let text = stdout(&out);
    let denied = |action: &str, how: &str| {
        assert!(
            text.contains(&format!("FAIL {action}: {how}")),
            "{action} was not denied with `{how}`:\n{text}"
        );
    };
    assert!(
        text.contains(" 0::/gatewayd/run-"),
        "the agent left its cgroup:\n{text}"
    );
    denied("mount", "Operation not permitted");
    // At both tiers the cgroup filesystem is read-only in the agent's namespace (all of
    // `/sys` is); tier 1's `lsm/file_open` stands behind (lifetime.rs shows it with a
    // process of the session outside that namespace).
    denied("escape", "Read-only file system");
    // gatewayd is out of the agent's sight (its PID namespace), capabilities or not;
    // `a_process_of_the_session_outside_its_namespace_cannot_touch_gatewayd` (lifetime.rs)
    // shows the programs that stand behind.
    denied("killparent", "No such process");
    denied("ptraceparent", "No such process");
    let start = &records(&audit)[0];
    // The VFS refuses the write at the read-only mount before any LSM hook: at both tiers
    // `raw_tp/sys_exit` records it with the path the agent named.
    let escape_recorded = records(&audit).iter().any(|r| {
        r["hook"] == "raw_tp/sys_exit"
            && r["reason"] == "read_only_path"
            && r["detail"]["errno"] == "EROFS"
            && r["detail"]["path"] == parent_procs.to_str().unwrap()
    });
    assert!(escape_recorded, "the refused escape has no record:\n{text}");
    match tier {
        Tier::BpfLsm => {
            denied("bpf", "Operation not permitted");
            assert_eq!(
                out.status.code(),
                Some(5),
                "gatewayd survived the signal and passed the code through"
            );
            let hooks: Vec<(String, String)> = records(&audit)
                .iter()
                .filter(|r| r["source"] == "kernel" && r["hook"] != "raw_tp/sys_exit")
                .map(|r| {
                    (
                        r["hook"].as_str().unwrap().into(),
                        r["reason"].as_str().unwrap().into(),
                    )
                })
                .collect();
            let want = ["lsm/bpf", "lsm/sb_mount"];
            assert_eq!(hooks.len(), want.len(), "{hooks:?}");
            for (h, w) in hooks.iter().zip(want) {
                assert_eq!((h.0.as_str(), h.1.as_str()), (w, "self_protection"));
            }
        }
        Tier::Landlock => {
            // Tier 2: no BPF LSM. The cgroup filesystem is a read-only mount in the agent's
            // namespace (EROFS); Landlock forbids mount and ptrace outside its domain and
            // (ABI >= 6) signals to gatewayd; the seccomp filter denies bpf() (no audit
            // record: seccomp reports nothing).
            denied("bpf", "Operation not permitted");
            for p in [
                "lsm/bpf",
                "lsm/sb_mount",
                "lsm/ptrace_access_check",
                "lsm/task_kill",
            ] {
                let state = start["detail"]["kernel"][p].as_str().unwrap();
                assert!(state.starts_with("not loaded"), "{p}: {state}");
            }
        }
    }
}

#[test]
fn exec_allowlist() {
    let tier = tier();
    let dir = Scratch::new("exec");
    let me = std::fs::canonicalize(agent()).unwrap();
    let audit = dir.path("audit.jsonl");

    // The agent's own program is not on the list: refused before anything runs.
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"exec": ["/bin/true"]}}),
    );
    let out = run_agent(&policy, &audit, &["exit", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in the policy's exec allowlist"));
    assert_eq!(
        records(&audit).last().unwrap()["reason"],
        "exec_not_allowed"
    );

    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"exec": [me]}}),
    );
    let audit = dir.path("audit2.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "run",
            "/bin/true",
            "+",
            "run",
            me.to_str().unwrap(),
            "exit",
            "0",
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].starts_with("OK run"),
        "a listed binary runs: {text}"
    );
    let k: Vec<_> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    match tier {
        Tier::BpfLsm => {
            assert!(
                lines[0].starts_with("FAIL run: Operation not permitted"),
                "{text}"
            );
            assert_eq!(k.len(), 1, "{k:?}");
            assert_eq!(k[0]["hook"], "lsm/bprm_check_security");
            assert_eq!(k[0]["reason"], "exec_not_allowed");
        }
        Tier::Landlock => {
            // Tier 2: Landlock's EXECUTE right stands in for the exec allowlist; its refusal
            // is recorded from the exec's EACCES (`raw_tp/sys_exit`), unless Landlock's own
            // audit records carry it.
            assert!(
                lines[0].starts_with("FAIL run: Permission denied"),
                "{text}"
            );
            let start = &records(&audit)[0];
            let state = start["detail"]["kernel"]["lsm/bprm_check_security"]
                .as_str()
                .unwrap();
            assert!(state.starts_with("not loaded"), "{state}");
            if !sandbox_roots::landlock_records_on(&audit) {
                assert_eq!(k.len(), 1, "{k:?}");
                assert_eq!(k[0]["hook"], "raw_tp/sys_exit");
                assert_eq!(k[0]["reason"], "exec_not_allowed");
                assert_eq!(k[0]["detail"]["syscall"], "execve", "{k:?}");
                assert_eq!(k[0]["detail"]["path"], "/bin/true", "{k:?}");
            }
        }
    }
}

#[test]
fn children_in_sub_cgroups_are_still_confined() {
    let _ = tier();
    let dir = Scratch::new("subcg");
    let (secret, _, other, _) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "subread",
            secret.to_str().unwrap(),
            "+",
            "subread",
            other.to_str().unwrap(),
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // At both tiers `/sys`, the cgroup filesystem with it, is read-only in the agent's
    // namespace: no sub-cgroup at all (and clone3, with it CLONE_INTO_CGROUP, gets ENOSYS
    // from the seccomp filter: escape.rs). Moved into one from outside, it is still
    // confined: `sub_cgroup_moved_from_outside` below.
    for l in &lines {
        assert!(
            l.starts_with("FAIL subread: mkdir") && l.contains("Read-only file system"),
            "{text}"
        );
    }
}

/// An agent process moved (by root, from outside) into a cgroup below the session's is
/// still confined: the LSM programs look for the session among the cgroup's ancestors
/// (tier 1), Landlock stays with the process (tier 2).
#[test]
fn sub_cgroup_moved_from_outside() {
    let tier = tier();
    let dir = Scratch::new("subcg-out");
    let (secret, _, other, _) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    let go = dir.path("go");
    let mut child = under_gatewayd(&policy, dir.path("audit.jsonl"), agent())
        .args(["pid", "+", "waitfile", go.to_str().unwrap(), "+", "read"])
        .arg(&secret)
        .args(["+", "read"])
        .arg(&other)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let pid = line.rsplit(' ').next().unwrap().parse().unwrap();
    let pid = host_pid(child.id(), pid).to_string();
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
    let sub = gatewayd_kernel::cgroup::cgroup2_mount()
        .unwrap()
        .join(rel.trim_start_matches('/'))
        .join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("cgroup.procs"), &pid).unwrap();
    std::fs::write(&go, "").unwrap();
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1), "one failed read");
    assert!(
        !sub.exists(),
        "gatewayd removes the sub-cgroup with the session's"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let how = match tier {
        Tier::BpfLsm => "Operation not permitted",
        Tier::Landlock => "Permission denied",
    };
    assert!(
        lines[1].starts_with("FAIL read") && lines[1].contains(how),
        "{text}"
    );
    assert!(lines[2].starts_with("OK read"), "{text}");
}
