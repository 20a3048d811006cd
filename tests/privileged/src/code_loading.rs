//! The code-loading programs (BPF LSM, tier 1; `gateway-ebpf/src/exec.rs`): a file with no
//! link left (a memfd) cannot be executed, and with the exec allowlist a file that is
//! neither listed nor under a library tree cannot be mapped executable, directly or through
//! `mprotect`. Every attempt is first made bare, where it works. At tier 2 the test asserts
//! what that kernel does instead and says so (`KERNEL-NOTE`).
use std::{path::Path, process::Command};

use super::{
    Scratch, Tier, escape::escape_bin, file_tree::kernel_records, note, stdout, tier,
    under_gatewayd, write_policy,
};

/// Runs gw-escape with `args`, bare or under `gatewayd run` with `policy`; its stdout.
fn escape(args: &[String], under: Option<(&Path, &Path)>) -> String {
    let out = match under {
        None => Command::new(escape_bin()).args(args).output().unwrap(),
        Some((policy, audit)) => under_gatewayd(policy, audit, escape_bin())
            .args(args)
            .output()
            .unwrap(),
    };
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    eprintln!("gw-escape {args:?} (under: {}):\n{text}", under.is_some());
    text
}

/// The C library this test process has mapped (a file under a system library tree).
fn libc_path() -> String {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("libc.so"))
        .expect("the test links the C library dynamically")
        .to_string()
}

#[test]
fn code_in_no_file_cannot_be_executed_at_tier_1() {
    let tier = tier();
    let dir = Scratch::new("codeload-nofile");
    let args = [
        "memfd_exec_proc".to_string(),
        format!("deleted_exec={}", dir.0.display()),
    ];
    let bare = escape(&args, None);
    assert_eq!(
        bare.lines().collect::<Vec<_>>(),
        ["memfd_exec_proc ok", "deleted_exec ok"],
        "bare, both work"
    );
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    );
    let audit = dir.path("audit.jsonl");
    let under = escape(&args, Some((&policy, &audit)));
    let lines: Vec<&str> = under.lines().collect();
    // Where the kernel has vm.memfd_noexec, the agent's PID namespace sets it to 2: the
    // memfd is not executable and the exec fails its permission check (EACCES) before any
    // LSM hook; without it, tier 1's bprm_check_security refuses the unlinked file.
    let noexec = super::doctor()["features"]["memfd_noexec"] == true;
    match tier {
        Tier::BpfLsm => {
            assert_eq!(lines[1], "deleted_exec errno 1", "{under}");
            let mut want = vec![(
                "lsm/bprm_check_security".to_string(),
                "exec_unlinked".to_string(),
            )];
            if noexec {
                assert_eq!(lines[0], "memfd_exec_proc errno 13", "{under}");
            } else {
                assert_eq!(lines[0], "memfd_exec_proc errno 1", "{under}");
                want.push(want[0].clone());
            }
            assert_eq!(kernel_records(&audit), want);
        }
        Tier::Landlock => {
            // No bprm_check_security program: a deleted file runs (it is a file the agent
            // could have run before deleting it; with sandbox.exec Landlock refuses it).
            assert_eq!(lines[1], "deleted_exec ok", "{under}");
            note(&format!(
                "tier 2: no bprm_check_security program; a deleted file runs, and a memfd \
                 through /proc gave `{}` (vm.memfd_noexec decides it, see escape.rs)",
                lines[0]
            ));
        }
    }
}

#[test]
fn unlisted_files_cannot_be_mapped_executable_at_tier_1() {
    let tier = tier();
    let dir = Scratch::new("codeload-mmap");
    // An unlisted program outside every library tree, and a library inside one.
    let stray = dir.path("stray");
    std::fs::copy(escape_bin(), &stray).unwrap();
    let stray = stray.display().to_string();
    let lib = libc_path();
    let args = [
        format!("mmap_exec={stray}"),
        format!("mprotect_exec={stray}"),
        format!("mmap_exec={lib}"),
    ];
    let bare = escape(&args, None);
    assert_eq!(
        bare.matches(" ok").count(),
        3,
        "bare, every mapping works:\n{bare}"
    );

    let me = std::fs::canonicalize(escape_bin()).unwrap();
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"exec": [me]}}),
    );
    let audit = dir.path("audit.jsonl");
    let under = escape(&args, Some((&policy, &audit)));
    let lines: Vec<&str> = under.lines().collect();
    assert_eq!(lines.len(), 3, "{under}");
    assert_eq!(
        lines[2], "mmap_exec ok",
        "a library under /lib or /usr/lib maps: {under}"
    );
    match tier {
        Tier::BpfLsm => {
            assert_eq!(lines[0], "mmap_exec errno 1", "{under}");
            assert_eq!(lines[1], "mprotect_exec errno 1", "{under}");
            assert_eq!(
                kernel_records(&audit),
                [
                    ("lsm/mmap_file".into(), "exec_not_allowed".into()),
                    ("lsm/file_mprotect".into(), "exec_not_allowed".into()),
                ]
            );
        }
        Tier::Landlock => {
            // Landlock's EXECUTE right covers execve only, not executable mappings.
            assert_eq!(lines[0], "mmap_exec ok", "{under}");
            assert_eq!(lines[1], "mprotect_exec ok", "{under}");
            note(
                "tier 2: Landlock does not restrict mapping a file executable; an unlisted \
                  binary can be loaded through ld.so (docs/KERNEL.md, Known limits)",
            );
        }
    }
}
