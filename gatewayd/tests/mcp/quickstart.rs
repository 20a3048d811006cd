//! The README's MCP quickstart, run as written: its `sh quickstart-mcp` block line by line in
//! a fresh home and project, with the real filesystem server from npm. The last line stores
//! the proxy's command line in Claude Code's configuration (`claude mcp add`, the real Claude
//! Code when `cargo xtask setup` installed it; otherwise a stand-in `claude` that only keeps
//! the words the shell gives it); the test then starts that command as Claude Code would and
//! drives it with the Python MCP SDK client: the project's file is read through the proxy,
//! its `.env` is refused by the gateway before the server sees the call.
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{GATEWAYD, drive, fs_server, records, verify};

/// The real Claude Code, when installed (`GATEWAYD_HOST_CLAUDE` or the setup's cache).
fn claude() -> Option<PathBuf> {
    match std::env::var("GATEWAYD_HOST_CLAUDE") {
        Ok(p) if p.starts_with("unavailable:") => None,
        Ok(p) => Some(PathBuf::from(p)),
        Err(_) => {
            let home = std::env::var_os("HOME")?;
            let p = Path::new(&home).join(".cache/gatewayd/agents/claude/node_modules/.bin/claude");
            p.exists().then_some(p)
        }
    }
}

/// The server command Claude Code stored for `project` (`~/.claude.json`, local scope).
fn stored_by_claude(home: &Path, project: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(home.join(".claude.json")).expect(".claude.json");
    let config: Value = serde_json::from_str(&text).expect("its JSON");
    let fs = &config["projects"][project.display().to_string()]["mcpServers"]["fs"];
    let mut argv = vec![fs["command"].as_str().expect("command").to_owned()];
    argv.extend(
        fs["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("a word").to_owned()),
    );
    argv
}

#[test]
fn the_readme_mcp_quickstart_puts_the_filesystem_server_behind_the_proxy() {
    let lines = gatewayd_testkit::readme::block("quickstart-mcp");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[3].starts_with("claude mcp add fs -- gatewayd mcp "),
        "{}",
        lines[3]
    );
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let project = std::fs::canonicalize(&project).unwrap();
    std::fs::write(project.join("a.txt"), "hello from the quickstart\n").unwrap();
    std::fs::write(project.join(".env"), "TOKEN=quickstart-secret\n").unwrap();
    let claude = claude();
    let mut bins: Vec<PathBuf> = vec![
        fs_server().parent().unwrap().to_owned(),
        Path::new(GATEWAYD).parent().unwrap().to_owned(),
    ];
    bins.extend(claude.iter().map(|c| c.parent().unwrap().to_owned()));
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        std::env::join_paths(&bins).unwrap().to_string_lossy()
    );
    // Without the real Claude Code: a `claude` that keeps the words after `mcp add fs --`.
    let stand_in = "claude() { shift 4; printf '%s\\n' \"$@\" > \"$HOME/stored\"; }\n";
    let shell = gatewayd_testkit::readme::UserShell {
        home: &home,
        path: &path,
        project: &project,
    };
    for line in &lines {
        shell.run(if claude.is_none() { stand_in } else { "" }, line);
    }
    let mut command = if claude.is_some() {
        stored_by_claude(&home, &project)
    } else {
        eprintln!("the real Claude Code is not installed: a stand-in kept the command");
        let kept = std::fs::read_to_string(home.join("stored")).unwrap();
        kept.lines().map(str::to_owned).collect()
    };
    assert_eq!(command[0], "gatewayd", "{command:?}");
    command[0] = GATEWAYD.to_owned();
    let read = |p: &Path| json!({"call": "read_text_file", "args": {"path": p}});
    // As Claude Code starts it: the user's PATH and home, in the project.
    let steps = [
        json!({"list": true}),
        read(&project.join("a.txt")),
        read(&project.join(".env")),
    ];
    let out = drive(
        &json!({"command": command, "mode": "legacy", "cwd": project,
        "env": {"PATH": path, "HOME": home}, "steps": steps}),
    );
    let listed = out[0]["tools"].as_array().unwrap();
    for t in ["read_text_file", "edit_file", "list_directory"] {
        assert!(listed.contains(&json!(t)), "{t} not offered: {out:?}");
    }
    assert_eq!(out[1]["isError"], false, "{out:?}");
    assert!(
        out[1]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the quickstart")
    );
    assert_eq!(out[2]["isError"], true, "{out:?}");
    let refusal = out[2]["text"].as_str().unwrap();
    assert!(refusal.contains("gatewayd refused this call"), "{refusal}");
    assert!(!refusal.contains("quickstart-secret"), "{refusal}");
    let audit = home.join(".config/gatewayd/mcp-fs.jsonl");
    assert!(
        records(&audit)
            .iter()
            .any(|r| r["decision"] == "deny" && r["tool"] == "read_text_file"),
        "the refusal is recorded"
    );
    verify(&audit);
}
