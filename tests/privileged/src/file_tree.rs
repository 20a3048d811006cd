//! Protected paths closed against hard links, creation and mounts, and the exec allowlist's
//! files against writes (issue 9, item 2). Each attempt is made once bare, where it must
//! succeed (so a failure under gatewayd is gatewayd's), and once under `gatewayd run`; the
//! same action outside the protected paths succeeds under gatewayd.
use super::*;

/// `D/secret.txt` (protected file), `D/vault/key` (under a protected directory) and
/// `D/free/a` (unprotected, in a directory that leads to no protected path).
fn tree(name: &str) -> Scratch {
    let dir = Scratch::new(name);
    std::fs::write(dir.path("secret.txt"), "top secret").unwrap();
    std::fs::create_dir_all(dir.path("vault")).unwrap();
    std::fs::write(dir.path("vault/key"), "key").unwrap();
    std::fs::create_dir_all(dir.path("free")).unwrap();
    std::fs::write(dir.path("free/a"), "a").unwrap();
    dir
}

/// gw-testagent's arguments for `actions` (each a list of words, `{}` replaced by the tree's
/// root), chained with `+`.
fn chain(dir: &Scratch, actions: &[&[&str]]) -> Vec<String> {
    let root = dir.0.to_str().unwrap();
    let mut args = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            args.push("+".to_string());
        }
        args.extend(a.iter().map(|w| w.replace("{}", root)));
    }
    args
}

/// Runs gw-testagent without gatewayd; every action must succeed.
fn bare(dir: &Scratch, actions: &[&[&str]]) {
    let args = chain(dir, actions);
    let out = Command::new(agent()).args(&args).output().unwrap();
    let text = stdout(&out);
    assert!(
        out.status.success() && text.lines().all(|l| l.starts_with("OK")),
        "bare, without gatewayd, every action must work:\n{text}"
    );
}

/// (hook, reason) of the kernel records in `audit`.
pub(super) fn kernel_records(audit: &Path) -> Vec<(String, String)> {
    records(audit)
        .iter()
        .filter(|r| r["source"] == "kernel")
        .map(|r| {
            (
                r["hook"].as_str().unwrap().to_string(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

const DENIED: &[&[&str]] = &[
    &["link", "{}/secret.txt", "{}/free/l1"],
    &["link", "{}/vault/key", "{}/free/l2"],
    &["link", "{}/free/a", "{}/vault/l3"],
    &["mkfile", "{}/vault/new"],
    &["mkdir", "{}/vault/newdir"],
    &["symlink", "/etc/hostname", "{}/vault/sl"],
    &["mkfifo", "{}/vault/fifo"],
];

const BENIGN: &[&[&str]] = &[
    &["link", "{}/free/a", "{}/free/b"],
    &["mkfile", "{}/free/new"],
    &["mkdir", "{}/free/newdir"],
    &["symlink", "/etc/hostname", "{}/free/sl"],
    &["mkfifo", "{}/free/fifo"],
];

#[test]
fn protected_paths_cannot_be_linked_or_created_in() {
    let tier = tier();
    bare(&tree("tree-bare"), DENIED);
    let dir = tree("tree");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [dir.path("secret.txt"), dir.path("vault")]}}),
    );
    let audit = dir.path("audit.jsonl");
    let mut actions = DENIED.to_vec();
    actions.extend_from_slice(BENIGN);
    let args = chain(&dir, &actions);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_agent(&policy, &audit, &args);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), DENIED.len() + BENIGN.len(), "{text}");
    for (i, line) in lines[DENIED.len()..].iter().enumerate() {
        assert!(line.starts_with("OK"), "benign action {i}:\n{text}");
    }
    for p in [
        "vault/l3",
        "vault/new",
        "vault/newdir",
        "vault/sl",
        "vault/fifo",
    ] {
        assert!(
            std::fs::symlink_metadata(dir.path(p)).is_err(),
            "{p} was created:\n{text}"
        );
    }
    match tier {
        Tier::BpfLsm => {
            for (i, line) in lines[..DENIED.len()].iter().enumerate() {
                assert!(
                    line.starts_with("FAIL") && line.contains("Operation not permitted"),
                    "action {i} was not denied with EPERM:\n{text}"
                );
            }
            let pp = "protected_path".to_string();
            let want: Vec<(String, String)> = [
                "lsm/inode_link",
                "lsm/inode_link",
                "lsm/inode_link",
                "lsm/inode_create",
                "lsm/inode_mkdir",
                "lsm/inode_symlink",
                "lsm/inode_mknod",
            ]
            .iter()
            .map(|h| ((*h).to_string(), pp.clone()))
            .collect();
            assert_eq!(kernel_records(&audit), want);
            let k: Vec<_> = records(&audit)
                .into_iter()
                .filter(|r| r["source"] == "kernel")
                .collect();
            assert_eq!(
                k[0]["detail"]["protected_path"],
                dir.path("secret.txt").to_str().unwrap()
            );
            for r in &k[1..] {
                assert_eq!(
                    r["detail"]["protected_path"],
                    dir.path("vault").to_str().unwrap()
                );
            }
            assert!(verify(&audit).status.success());
        }
        Tier::Landlock => {
            // The protected file is hidden under a read-only bind mount of `/dev/null`: a
            // link from it to another directory crosses mounts (`EXDEV`). The protected
            // directory is hidden under an empty read-only tmpfs of mode 0000: nothing in it
            // can be looked up or made (`EACCES`).
            for (i, line) in lines[..DENIED.len()].iter().enumerate() {
                let how = if i < 1 {
                    "Invalid cross-device link"
                } else {
                    "Permission denied"
                };
                assert!(
                    line.starts_with("FAIL") && line.contains(how),
                    "action {i} was not denied by the hiding mounts with `{how}`:\n{text}"
                );
            }
        }
    }
}

/// [`tree`] with an executable `D/free/tool`.
fn tree_with_tool(name: &str) -> (Scratch, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tree(name);
    let tool = dir.path("free/tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, tool)
}

#[test]
fn exec_listed_files_cannot_be_written_or_replaced() {
    let tier = tier();
    let (dir, tool) = tree_with_tool("execlist");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [dir.path("secret.txt")], "exec": [agent(), tool]}}),
    );
    let audit = dir.path("audit.jsonl");
    let actions: &[&[&str]] = &[
        &["write", "{}/free/tool"],
        &["truncate", "{}/free/tool"],
        &["mv", "{}/free/a", "{}/free/tool"],
        &["rm", "{}/free/tool"],
        &["write", "{}/free/other"],
    ];
    bare(&tree_with_tool("execlist-bare").0, &actions[..4]);
    let args = chain(&dir, actions);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_agent(&policy, &audit, &args);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), actions.len(), "{text}");
    assert!(
        lines[4].starts_with("OK write"),
        "an unlisted file:\n{text}"
    );
    match tier {
        Tier::BpfLsm => {
            for (i, line) in lines[..4].iter().enumerate() {
                assert!(
                    line.starts_with("FAIL") && line.contains("Operation not permitted"),
                    "action {i} on an exec-listed file was not denied:\n{text}"
                );
            }
            assert_eq!(std::fs::read_to_string(&tool).unwrap(), "#!/bin/sh\n");
            let want: Vec<(String, String)> = [
                "lsm/file_open",
                "lsm/inode_setattr",
                "lsm/inode_rename",
                "lsm/inode_unlink",
            ]
            .iter()
            .map(|h| ((*h).to_string(), "exec_listed".to_string()))
            .collect();
            assert_eq!(kernel_records(&audit), want);
        }
        Tier::Landlock => {
            // Each listed file is a read-only bind mount onto itself in the agent's mount
            // namespace: writing and truncating it fail (`EROFS`), replacing and deleting a
            // mount point fail (`EBUSY`). No audit record (no program saw it).
            let want = [
                "Read-only file system",
                "Read-only file system",
                "Device or resource busy",
                "Device or resource busy",
            ];
            for (i, (line, how)) in lines[..4].iter().zip(want).enumerate() {
                assert!(
                    line.starts_with("FAIL") && line.contains(how),
                    "action {i} on an exec-listed file was not denied with `{how}`:\n{text}"
                );
            }
            assert_eq!(std::fs::read_to_string(&tool).unwrap(), "#!/bin/sh\n");
        }
    }
}

/// A tmpfs on `dir` (made by this test, outside any session).
fn mount_tmpfs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "none"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "mount a tmpfs on {}", dir.display());
}

/// Lazily unmounts whatever is mounted on `dir`, if anything (nothing, when the agent's
/// `move_mount` was denied).
fn umount(dir: &Path) {
    let _ = Command::new("umount")
        .arg("-l")
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status();
}

#[test]
fn agents_cannot_unmount_or_move_mounts() {
    let tier = tier();
    let dir = tree("mounts");
    let mnt = dir.path("mnt");
    let target = dir.path("free/target");
    std::fs::create_dir_all(&target).unwrap();
    let actions: &[&[&str]] = &[
        &["umount", "{}/mnt"],
        &["movemount", "{}/free", "{}/free/target"],
    ];
    mount_tmpfs(&mnt);
    bare(&dir, actions);
    mount_tmpfs(&mnt);
    let policy = write_policy(
        &dir,
        // Every capability kept: without CAP_SYS_ADMIN the kernel refuses the unmount and
        // the move before any LSM hook runs, and this test is about the hooks.
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "agent": {"capabilities": &gatewayd_core::policy::names::CAPABILITIES[..]},
            "sandbox": {"protected": [dir.path("secret.txt")]}}),
    );
    let audit = dir.path("audit.jsonl");
    let args = chain(&dir, actions);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_agent(&policy, &audit, &args);
    umount(&mnt);
    umount(&target);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // At tier 2 the agent's seccomp filter refuses every mount call with EPERM (and so does
    // Landlock where the session's ruleset restricts a file right).
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with("FAIL") && line.contains("Operation not permitted"),
            "action {i} was not denied:\n{text}"
        );
    }
    if tier == Tier::BpfLsm {
        let sp = "self_protection".to_string();
        assert_eq!(
            kernel_records(&audit),
            [
                ("lsm/sb_umount".to_string(), sp.clone()),
                ("lsm/move_mount".to_string(), sp)
            ]
        );
    }
}

/// The records of `audit` from the kernel, whole.
fn kernel_entries(audit: &Path) -> Vec<serde_json::Value> {
    records(audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect()
}

/// A policy that protects `D/vault`.
fn vault_policy(dir: &Scratch) -> PathBuf {
    write_policy(
        dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [dir.path("vault")]}}),
    )
}

/// Runs `actions` under `gatewayd run` with [`vault_policy`]; the audit log's path and the
/// agent's output.
fn protecting_vault(dir: &Scratch, actions: &[&[&str]]) -> (PathBuf, String) {
    let policy = vault_policy(dir);
    let audit = dir.path("audit.jsonl");
    let args = chain(dir, actions);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_agent(&policy, &audit, &args);
    (audit, stdout(&out))
}

#[test]
fn a_hard_link_made_before_the_session_to_a_file_under_a_protected_directory() {
    let tier = tier();
    let dir = tree("prelink");
    // Made before the session, from a directory that leads to no protected path.
    std::fs::hard_link(dir.path("vault/key"), dir.path("free/prelink")).unwrap();
    let actions: &[&[&str]] = &[&["read", "{}/free/prelink"], &["read", "{}/free/a"]];
    bare(&dir, actions);
    let (audit, text) = protecting_vault(&dir, actions);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].starts_with("OK read"),
        "an unprotected file:\n{text}"
    );
    match tier {
        Tier::BpfLsm => {
            // The session's index holds every inode under the protected directory, whatever
            // name reaches it.
            assert!(
                lines[0].starts_with("FAIL read: Operation not permitted"),
                "{text}"
            );
            let k = kernel_entries(&audit);
            assert_eq!(k.len(), 1, "{k:?}");
            assert_eq!(
                (k[0]["hook"].as_str(), k[0]["reason"].as_str()),
                (Some("lsm/file_open"), Some("protected_path"))
            );
            assert_eq!(
                k[0]["detail"]["protected_path"],
                dir.path("vault").to_str().unwrap()
            );
            let start = &records(&audit)[0];
            assert!(
                start["detail"]["program_set"]["file_index"]["indexed"].as_u64() >= Some(2),
                "{start}"
            );
        }
        Tier::Landlock => {
            // Landlock matches hierarchies: the other name lies in an allowed tree.
            note(
                "tier 2: a hard link made before the session to a file under a protected directory stays readable",
            );
            assert!(lines[0].starts_with("OK read"), "{text}");
        }
    }
}

/// A session whose protected directory holds more inodes than one session may index walks
/// up the dentry parents of every file it opens; the files under that directory are in no
/// index, so `file_open` must not take its fast exit (an inode `TREE` does not hold) while
/// such a session is live (`EVERY_OPEN`).
#[test]
fn a_protected_directory_too_big_to_index_still_protects_what_is_under_it() {
    let tier = tier();
    let dir = tree("bigtree");
    let many = dir.path("vault/many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..=gateway_common::MAX_INDEXED {
        std::fs::File::create(many.join(i.to_string())).unwrap();
    }
    let actions: &[&[&str]] = &[
        &["read", "{}/vault/key"],
        &["read", "{}/vault/many/7"],
        &["read", "{}/free/a"],
    ];
    bare(&dir, actions);
    let (audit, text) = protecting_vault(&dir, actions);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("FAIL read"), "{text}");
    assert!(lines[1].starts_with("FAIL read"), "{text}");
    assert!(
        lines[2].starts_with("OK read"),
        "an unprotected file:\n{text}"
    );
    if tier == Tier::BpfLsm {
        let start = &records(&audit)[0];
        assert!(
            start["detail"]["program_set"]["file_index"]["walk"].is_string(),
            "{start}"
        );
        let k = kernel_records(&audit);
        let denied = ("lsm/file_open".to_string(), "protected_path".to_string());
        assert_eq!(k, [denied.clone(), denied], "{text}");
    }
}

#[test]
fn what_another_process_puts_in_a_protected_directory_during_the_session_stays_protected() {
    let tier = tier();
    let dir = tree("late");
    std::fs::create_dir_all(dir.path("free/dir")).unwrap();
    std::fs::write(dir.path("free/dir/f"), "f").unwrap();
    let policy = vault_policy(&dir);
    let audit = dir.path("audit.jsonl");
    // The agent waits for `free/go`, which this process (outside the session) makes last.
    let actions: &[&[&str]] = &[
        &["waitfile", "{}/free/go"],
        &["read", "{}/vault/late"],
        &["read", "{}/vault/moved"],
        &["read", "{}/vault/newdir/f"],
        &["read", "{}/vault/dir/f"],
        &["read", "{}/free/other"],
    ];
    let args = chain(&dir, actions);
    let child = under_gatewayd(&policy, &audit, agent())
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_start(&audit);
    // Another process, outside every session: a new file, a file moved in, a new directory
    // with a file, a directory (with its file) moved in; and a file elsewhere.
    std::fs::write(dir.path("vault/late"), "late").unwrap();
    std::fs::rename(dir.path("free/a"), dir.path("vault/moved")).unwrap();
    std::fs::create_dir(dir.path("vault/newdir")).unwrap();
    std::fs::write(dir.path("vault/newdir/f"), "f").unwrap();
    std::fs::rename(dir.path("free/dir"), dir.path("vault/dir")).unwrap();
    std::fs::write(dir.path("free/other"), "other").unwrap();
    std::fs::write(dir.path("free/go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), actions.len(), "{text}");
    assert!(lines[0].starts_with("OK"), "{text}");
    assert!(lines[5].starts_with("OK read"), "a file outside:\n{text}");
    let how = match tier {
        Tier::BpfLsm => "Operation not permitted",
        // The protected directory has no Landlock rights: nothing in it is readable.
        Tier::Landlock => "Permission denied",
    };
    for (i, line) in lines[1..5].iter().enumerate() {
        assert!(
            line.starts_with("FAIL read") && line.contains(how),
            "read {i} in the protected directory was not denied with `{how}`:\n{text}"
        );
    }
    if tier == Tier::BpfLsm {
        let k = kernel_entries(&audit);
        assert_eq!(k.len(), 4, "{k:?}");
        for r in &k {
            assert_eq!(
                (r["hook"].as_str(), r["reason"].as_str()),
                (Some("lsm/file_open"), Some("protected_path"))
            );
            assert_eq!(
                r["detail"]["protected_path"],
                dir.path("vault").to_str().unwrap()
            );
        }
    }
}

/// A file another session protects by name, moved by a process outside every session into
/// this session's protected directory during the session, is protected here too: it came
/// into the directory, whatever else protects it. (No directory is moved in this test: that
/// would make every check walk, and the check of a moved-in file must not depend on it.)
#[test]
fn another_sessions_protected_file_moved_into_a_protected_directory_stays_protected() {
    let tier = tier();
    let dir = tree("guarded");
    std::fs::write(dir.path("free/guarded"), "g").unwrap();
    let other_policy = dir.path("other-policy.json");
    std::fs::write(
        &other_policy,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [dir.path("free/guarded")]}})
        .to_string(),
    )
    .unwrap();
    let go = dir.path("free/go");
    let ready = dir.path("free/ready");
    let other_audit = dir.path("other-audit.jsonl");
    // The other agent says it runs by writing `ready`: its session's start record comes
    // before its process is set up (the hiding mounts of its protected file), and moving the
    // file away before then fails that start, closed.
    let other = under_gatewayd(&other_policy, &other_audit, agent())
        .arg("write")
        .arg(&ready)
        .arg("+")
        .arg("waitfile")
        .arg(&go)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the other agent did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let policy = vault_policy(&dir);
    let audit = dir.path("audit.jsonl");
    let actions: &[&[&str]] = &[
        &["waitfile", "{}/free/go"],
        &["read", "{}/vault/guarded"],
        &["read", "{}/free/a"],
    ];
    let child = under_gatewayd(&policy, &audit, agent())
        .args(chain(&dir, actions))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_start(&audit);
    std::fs::rename(dir.path("free/guarded"), dir.path("vault/guarded")).unwrap();
    // Bare (this process, outside every session), the moved file is readable where it lands.
    assert_eq!(std::fs::read(dir.path("vault/guarded")).unwrap(), b"g");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let other = other.wait_with_output().unwrap();
    assert!(
        other.status.success(),
        "the other session: {}{}",
        stdout(&other),
        String::from_utf8_lossy(&other.stderr)
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), actions.len(), "{text}");
    assert!(lines[2].starts_with("OK read"), "a file outside:\n{text}");
    let how = match tier {
        Tier::BpfLsm => "Operation not permitted",
        Tier::Landlock => "Permission denied",
    };
    assert!(
        lines[1].starts_with("FAIL read") && lines[1].contains(how),
        "the moved-in file was not denied with `{how}`:\n{text}"
    );
    if tier == Tier::BpfLsm {
        let k = kernel_entries(&audit);
        assert_eq!(k.len(), 1, "{k:?}");
        assert_eq!(k[0]["reason"], "protected_path");
        assert_eq!(
            k[0]["detail"]["protected_path"],
            dir.path("vault").to_str().unwrap()
        );
    }
}
