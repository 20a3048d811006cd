//! Agent hosts whose own sandbox cannot start inside gatewayd's. Codex runs each shell command
//! in bubblewrap, which needs a new user namespace; gatewayd refuses user namespaces to the
//! agent (docs/KERNEL.md, "The agent's privileges"), so under `gatewayd run` every command
//! Codex runs fails with `bwrap: No permissions to create a new namespace`, unless Codex is
//! told to run without its sandbox (`--sandbox danger-full-access`: gatewayd is the sandbox).
//! Codex's older Landlock sandbox refuses workspace-write without bubblewrap. `gatewayd run`
//! says so before the agent starts. (Claude Code's sandbox is off unless its settings turn it
//! on; Gemini CLI's uses a container runtime: neither is looked for.)
use std::path::Path;

/// What `gatewayd run` prints when `agent` (its command line) starts Codex with its own
/// sandbox; `None` for any other command line.
pub fn advice(agent: &[String]) -> Option<&'static str> {
    let args = host_args(agent, "codex")?;
    if codex_sandbox_off(args) || !codex_runs_commands(args) {
        return None;
    }
    Some(
        "Codex's own sandbox (bubblewrap) needs a user namespace, which gatewayd refuses to the agent: each shell command it runs would fail. Under gatewayd run, start it with `--sandbox danger-full-access` (gatewayd is its sandbox; its approval settings still apply), or set `sandbox_mode = \"danger-full-access\"` in a Codex profile you use here",
    )
}

/// The arguments after `host`'s program in `agent`, which may start with `env` and its
/// assignments (a launcher line: `env VAR=x codex ...`).
fn host_args<'a>(agent: &'a [String], host: &str) -> Option<&'a [String]> {
    let named = |a: &String, name: &str| Path::new(a).file_name().is_some_and(|f| f == name);
    let mut at = 0;
    if agent.first().is_some_and(|a| named(a, "env")) {
        at = 1;
        while let Some(a) = agent.get(at) {
            match a.as_str() {
                "-i" | "--ignore-environment" | "-" => at += 1,
                "-u" | "--unset" => at += 2,
                _ if a.contains('=') && !a.starts_with('-') => at += 1,
                _ => break,
            }
        }
    }
    let program = agent.get(at)?;
    named(program, host).then(|| &agent[at + 1..])
}

/// Whether Codex's arguments turn its sandbox off.
fn codex_sandbox_off(args: &[String]) -> bool {
    let off = |v: &str| v.trim_matches(['"', '\'']) == "danger-full-access";
    args.iter().enumerate().any(|(i, a)| {
        let next = args.get(i + 1).map_or("", String::as_str);
        match a.as_str() {
            "--dangerously-bypass-approvals-and-sandbox" | "--yolo" => true,
            "-s" | "--sandbox" => off(next),
            "-c" | "--config" => next
                .split_once('=')
                .is_some_and(|(k, v)| k.trim() == "sandbox_mode" && off(v.trim())),
            _ => a.strip_prefix("--sandbox=").is_some_and(off),
        }
    })
}

/// Whether this Codex command line is a session that runs commands: the interactive one,
/// `exec`, `resume`, `fork` (not `login`, `mcp-server`, `--version`, ...).
fn codex_runs_commands(args: &[String]) -> bool {
    const OTHER: [&str; 12] = [
        "login",
        "logout",
        "mcp",
        "mcp-server",
        "app-server",
        "completion",
        "apply",
        "help",
        "debug",
        "sandbox",
        "features",
        "cloud",
    ];
    let first = args.iter().find(|a| !a.starts_with('-'));
    let asks_about = args
        .iter()
        .any(|a| matches!(a.as_str(), "-V" | "--version" | "-h" | "--help"));
    !asks_about && !first.is_some_and(|a| OTHER.contains(&a.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn codex_with_its_own_sandbox_is_told_once() {
        for l in [
            "codex",
            "/opt/node/bin/codex exec do-it",
            "env GATEWAYD_X=1 codex exec -s workspace-write task",
            "codex --sandbox read-only",
            "codex resume",
        ] {
            assert!(advice(&line(l)).is_some(), "{l}");
        }
    }

    #[test]
    fn codex_without_its_sandbox_and_other_programs_are_not() {
        for l in [
            "codex -s danger-full-access",
            "codex exec --sandbox=danger-full-access task",
            "env A=b codex --dangerously-bypass-approvals-and-sandbox",
            "codex -c sandbox_mode=\"danger-full-access\" exec t",
            "codex --version",
            "codex login",
            "codex mcp-server",
            "claude -p hi",
            "env -u CODEX gemini",
            "",
        ] {
            assert_eq!(advice(&line(l)), None, "{l}");
        }
    }
}
