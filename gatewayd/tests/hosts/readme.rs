//! The README's quickstart, run as written with the real Claude Code: its `sh
//! quickstart-claude` block line by line in a fresh home and project, as the user would. The
//! test runs as root, which has no caller for sudo to name, so its `sudo` runs the command
//! with `--user root` after the subcommand (uid 0 without capabilities, as the other host
//! tests run the agent); the agent's own `--version` is the other addition (the session is
//! offline). Claude Code starts under the starter policy and the hook is in its settings.
use crate::harness::Host;

#[test]
fn the_readme_quickstart_starts_claude_code_under_gatewayd() {
    let Some(claude) = Host::Claude.program() else {
        return;
    };
    let lines = gatewayd_testkit::readme::block("quickstart-claude");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[3].ends_with("-- claude"), "{}", lines[3]);
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("project");
    std::fs::create_dir_all(&home).expect("home");
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        claude.parent().expect("bin dir").display(),
        crate::gatewayd().parent().expect("target dir").display()
    );
    // `sudo gatewayd run ...` for a caller who is root: `--user root` names the agent's user.
    let prelude = "sudo() { cmd=$1; sub=$2; shift 2; \"$cmd\" \"$sub\" --user root \"$@\"; }\n";
    let shell = gatewayd_testkit::readme::UserShell {
        home: &home,
        path: &path,
        project: &project,
    };
    for (i, line) in lines.iter().enumerate() {
        let line = if i == 3 {
            format!("{line} --version")
        } else {
            line.clone()
        };
        let text = shell.run(prelude, &line);
        if i == 3 {
            assert!(text.contains("Claude Code"), "`{line}`: {text}");
            assert!(
                text.contains("gatewayd: agent exited with 0"),
                "under gatewayd: {text}"
            );
        }
    }
    let settings = std::fs::read_to_string(home.join(".claude/settings.json")).expect("settings");
    assert!(settings.contains("gatewayd"), "{settings}");
    assert!(home.join(".config/gatewayd/policy.json").is_file());
}

/// docs/HOOKS.md's install block, line by line as written, with the real Codex on `PATH`
/// (its trust needs it) in a fresh home and project: the hooks are installed for each host
/// (the first line), Codex's in the project (the second), a dry run prints the file, and
/// `--check` finds Codex's hook there, enabled, trusted and given time.
#[test]
fn the_hooks_doc_install_block_runs_as_written() {
    let Some(codex) = Host::Codex.program() else {
        return;
    };
    let lines = gatewayd_testkit::readme::doc_block("docs/HOOKS.md", "sh hooks-install");
    assert_eq!(lines.len(), 4, "{lines:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let (home, project) = (dir.path().join("home"), dir.path().join("project"));
    std::fs::create_dir_all(&project).expect("project");
    std::fs::create_dir_all(&home).expect("home");
    let starter = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../policies/cookbook/workstation.json");
    std::fs::copy(starter, home.join("gatewayd-policy.json")).expect("the policy");
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        codex.parent().expect("bin dir").display(),
        crate::gatewayd().parent().expect("target dir").display()
    );
    let shell = gatewayd_testkit::readme::UserShell {
        home: &home,
        path: &path,
        project: &project,
    };
    let outputs: Vec<String> = lines.iter().map(|l| shell.run("", l)).collect();
    for (file, host) in [
        (home.join(".claude/settings.json"), "claude"),
        (home.join(".codex/hooks.json"), "codex"),
        (home.join(".gemini/settings.json"), "gemini"),
        (project.join(".codex/hooks.json"), "codex"),
    ] {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            text.contains(&format!("hook --host {host}")),
            "{}: {text}",
            file.display()
        );
    }
    assert!(outputs[2].contains("would write"), "{}", outputs[2]);
}
