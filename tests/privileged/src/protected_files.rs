//! Protected files: refused to the agent at `require` (open, delete, rename, truncate, deep trees), readable outside its cgroup.

use super::*;

#[test]
fn require_mode_and_file_open() {
    let tier = tier();
    let dir = Scratch::new("require");
    let (secret, inner, other, link) = protected_fixture(&dir);
    let marker = dir.path("agent-ran");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "require",
            "sandbox": {"protected": [secret, dir.path("vault")]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "write",
            marker.to_str().unwrap(),
            "+",
            "read",
            secret.to_str().unwrap(),
            "+",
            "read",
            inner.to_str().unwrap(),
            "+",
            "read",
            link.to_str().unwrap(),
            "+",
            "read",
            other.to_str().unwrap(),
        ],
    );
    let recs = records(&audit);
    match tier {
        Tier::Landlock => {
            // This kernel refuses BPF LSM programs: the agent must not start.
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("lsm/file_open"), "{err}");
            assert!(err.contains("Operation not permitted"), "{err}");
            assert!(
                !marker.exists(),
                "the agent ran although the policy requires BPF LSM"
            );
            assert_eq!(recs.len(), 1);
            assert_eq!(recs[0]["reason"], "kernel_unavailable");
            assert_eq!(recs[0]["decision"], "deny");
        }
        Tier::BpfLsm => {
            assert!(marker.exists());
            let text = stdout(&out);
            let lines: Vec<&str> = text.lines().filter(|l| l.contains("read")).collect();
            assert_eq!(lines.len(), 4, "{text}");
            assert!(
                lines[0].starts_with("FAIL") && lines[0].contains("Operation not permitted"),
                "{text}"
            );
            assert!(
                lines[1].starts_with("FAIL"),
                "file under a protected directory: {text}"
            );
            assert!(
                lines[2].starts_with("FAIL"),
                "hard link to a protected file: {text}"
            );
            assert!(lines[3].starts_with("OK"), "unprotected file: {text}");
            assert_eq!(out.status.code(), Some(3));
            // The hard link's open is of the same kind as the file's (path and inode): in the
            // window of the first, it is counted, not recorded again.
            assert_eq!(
                kernel_kinds(&recs),
                ["lsm/file_open protected_path"; 3],
                "{recs:#?}"
            );
            let k: Vec<_> = recs
                .iter()
                .filter(|r| r["source"] == "kernel" && r["reason"] != "denials_aggregated")
                .collect();
            assert_eq!(k[0]["detail"]["protected_path"], secret.to_str().unwrap());
            assert_eq!(
                k[1]["detail"]["protected_path"],
                dir.path("vault").to_str().unwrap()
            );
            assert!(verify(&audit).status.success());
        }
    }
}

#[test]
fn protected_files_stay_readable_outside_the_agent_cgroup() {
    let _ = tier();
    let dir = Scratch::new("outside");
    let (secret, ..) = protected_fixture(&dir);
    let (mut child, _pid) = start_sleeper(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    // While an agent runs under gatewayd (programs attached), this process is outside its cgroup.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn protected_paths_cannot_be_deleted_renamed_or_truncated() {
    let tier = tier();
    let dir = Scratch::new("modify");
    let (secret, inner, other, _link) = protected_fixture(&dir);
    let vault = dir.path("vault");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret, vault]}}),
    );
    let audit = dir.path("audit.jsonl");
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let moved = dir.path("moved");
    let into_vault = vault.join("planted");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "rm",
            &s(&secret),
            "+",
            "rm",
            &s(&inner),
            "+",
            "mv",
            &s(&secret),
            &s(&moved),
            "+",
            "mv",
            &s(&other),
            &s(&into_vault),
            "+",
            "mv",
            &s(&other),
            &s(&secret),
            "+",
            "truncate",
            &s(&secret),
            "+",
            "truncate",
            &s(&other),
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    // Tier 2: the protected file is a mount point (a read-only bind of `/dev/null`), which
    // cannot be deleted, renamed or replaced (`EBUSY`), nor truncated (not a regular file:
    // `EINVAL`); the protected directory is an empty tmpfs of mode 0000 (`EACCES`).
    let how: [&str; 6] = match tier {
        Tier::BpfLsm => ["Operation not permitted"; 6],
        Tier::Landlock => [
            "Device or resource busy",
            "Permission denied",
            "Device or resource busy",
            "Permission denied",
            "Device or resource busy",
            "Invalid argument",
        ],
    };
    for (i, (line, how)) in lines[..6].iter().zip(how).enumerate() {
        assert!(
            line.starts_with("FAIL") && line.contains(how),
            "action {i} was not denied with `{how}`:\n{text}"
        );
    }
    assert!(
        lines[6].starts_with("OK truncate"),
        "an unprotected file: {text}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    assert_eq!(std::fs::read_to_string(&inner).unwrap(), "key");
    if tier == Tier::BpfLsm {
        // A repeat of one kind (the same path and inode) within a second is counted in a
        // `denials_aggregated` record: compared as denials, in any order.
        let mut want = [
            "lsm/inode_unlink protected_path",
            "lsm/inode_unlink protected_path",
            "lsm/inode_rename protected_path",
            "lsm/inode_rename protected_path",
            "lsm/inode_rename protected_path",
            "lsm/inode_setattr protected_path",
        ];
        want.sort_unstable();
        assert_eq!(kernel_kinds(&records(&audit)), want);
    }
}

#[test]
fn files_deeper_than_the_walk_limit_are_denied_at_tier_1() {
    let tier = tier();
    let dir = Scratch::new("deep");
    let (secret, ..) = protected_fixture(&dir);
    let mut deep = dir.path("d");
    for i in 0..gateway_common::MAX_PATH_DEPTH {
        deep.push(format!("{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let file = deep.join("f");
    std::fs::write(&file, "deep").unwrap();
    let vault = dir.path("vault");
    std::fs::create_dir_all(dir.path("elsewhere/sub")).unwrap();
    std::fs::create_dir_all(&vault).unwrap();
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret, vault]}}),
    );
    // Indexed: the file is in neither the session's index nor `TREE`, so no walk is needed
    // to know it is not protected, however deep it lies.
    let audit = dir.path("audit-indexed.jsonl");
    let out = run_agent(&policy, &audit, &["read", file.to_str().unwrap()]);
    assert!(stdout(&out).starts_with("OK read"), "{}", stdout(&out));
    // A directory moved into a protected directory during the session (by this process,
    // outside it) makes every session walk: then the walk's depth limit holds.
    let audit = dir.path("audit.jsonl");
    let go = dir.path("go");
    let child = under_gatewayd(&policy, &audit, agent())
        .args([
            "waitfile",
            go.to_str().unwrap(),
            "+",
            "read",
            file.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&audit).is_ok_and(|t| t.contains("session_start")) {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the session did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::rename(dir.path("elsewhere/sub"), dir.path("vault/sub")).unwrap();
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let read = text.lines().nth(1).unwrap_or_default();
    match tier {
        Tier::BpfLsm => {
            // The ancestor walk cannot reach the filesystem root within its limit: fail closed.
            assert!(
                read.starts_with("FAIL read: Operation not permitted"),
                "{text}"
            );
            let k: Vec<_> = records(&audit)
                .into_iter()
                .filter(|r| r["source"] == "kernel")
                .collect();
            assert_eq!(k.len(), 1, "{k:?}");
            assert_eq!(k[0]["hook"], "lsm/file_open");
            assert_eq!(k[0]["reason"], "unresolvable");
        }
        // Landlock matches hierarchies and has no depth limit.
        Tier::Landlock => assert!(read.starts_with("OK read"), "{text}"),
    }
}
