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
