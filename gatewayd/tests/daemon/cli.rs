//! The operator's commands against a daemon: `gatewayd approvals list|approve|deny` and
//! `gatewayd sessions list`, from outside the agent's cgroup (allowed) and from inside it
//! (refused).
use crate::support;

use std::{
    os::unix::process::CommandExt,
    process::{Command, Output},
};

use serde_json::{Value, json};
use support::{AgentRelay, Daemon, require_cgroups};

fn gatewayd(args: &[&str], socket: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gatewayd"));
    c.args(args).arg("--socket").arg(socket);
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// An agent session with one held call; returns the relay and the approval id.
pub(crate) fn held(d: &Daemon, name: &str, body: &str) -> (AgentRelay, String) {
    let mut agent = AgentRelay::spawn(&d.socket, name);
    agent.call("session/open", json!({"session": name, "user": "bob"}));
    agent.call(
        "call/decide",
        json!({"session": name, "call": {"tool": "read_file", "arguments": {"path": "notes.txt"}}}),
    );
    agent.call(
        "call/decide",
        json!({"session": name, "call": {"tool": "fetch_url"}}),
    );
    let r = agent.call(
        "call/decide",
        json!({"session": name, "call": {"tool": "send_email", "arguments": {"body": body}}}),
    );
    assert_eq!(r["result"]["decision"], "hold", "{r}");
    let id = r["result"]["approval_id"].as_str().unwrap().to_owned();
    (agent, id)
}

pub(crate) fn repeat(agent: &mut AgentRelay, name: &str, body: &str, id: &str) -> Value {
    agent.call(
        "call/decide",
        json!({"session": name, "call": {"tool": "send_email", "arguments": {"body": body}, "approval": id}}),
    )["result"]
        .clone()
}

#[test]
fn an_operator_lists_and_approves_and_an_agent_cannot() {
    require_cgroups();
    let d = Daemon::start();
    let (mut agent, id) = held(&d, "cli-approve", "hello");
    let out = gatewayd(&["approvals", "list"], &d.socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let listed = text(&out);
    assert!(listed.contains(&id), "{listed}");
    assert!(listed.contains("tool send_email"), "{listed}");
    assert!(listed.contains("reasons trifecta"), "{listed}");
    assert!(listed.contains("legs untrusted+private"), "{listed}");

    // From inside the agent's cgroup the same command is refused.
    let mut inside = gatewayd(&["approvals", "approve", &id], &d.socket);
    // SAFETY: the closure only opens, writes and closes a file (async-signal-safe).
    unsafe { inside.pre_exec(agent.cgroup.enter_fn()) };
    let out = inside.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("operators only"), "{}", text(&out));
    assert_eq!(
        repeat(&mut agent, "cli-approve", "hello", &id)["reason"],
        "approval_required"
    );

    let out = gatewayd(&["approvals", "approve", &id], &d.socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(text(&out).trim(), format!("{id} approved"));
    assert_eq!(
        repeat(&mut agent, "cli-approve", "hello", &id)["reason"],
        "approved"
    );

    let out = gatewayd(&["sessions", "list"], &d.socket).output().unwrap();
    let listed = text(&out);
    assert!(out.status.success(), "{listed}");
    assert!(listed.contains("cli-approve  user bob"), "{listed}");
    assert!(listed.contains(&agent.cgroup_path()), "{listed}");
    assert!(listed.contains("TRIPPED"), "{listed}");
    let out = gatewayd(&["sessions", "list", "--json"], &d.socket)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sessions"][0]["session"], "cli-approve");
}

#[test]
fn an_operator_denies_and_the_call_stays_refused() {
    require_cgroups();
    let d = Daemon::start();
    let (mut agent, id) = held(&d, "cli-deny", "bye");
    let out = gatewayd(&["approvals", "deny", &id], &d.socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(text(&out).trim(), format!("{id} rejected"));
    let r = repeat(&mut agent, "cli-deny", "bye", &id);
    assert_eq!(r["reason"], "approval_denied");
    // Deciding twice, or an unknown id: an error, exit 2.
    let out = gatewayd(&["approvals", "approve", &id], &d.socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("already decided"), "{}", text(&out));
    let out = gatewayd(&["approvals", "list"], &d.socket)
        .output()
        .unwrap();
    assert!(text(&out).contains("no pending approvals"));
}

#[test]
fn no_daemon_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = gatewayd(&["sessions", "list"], &dir.path().join("none.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("cannot connect to"), "{}", text(&out));
}

/// docs/OPERATIONS.md's operators' block, line by line as written, against a daemon found
/// through `$GATEWAYD_SOCKET` (the doc's second place to look): `ID` is the id of a held call
/// (one approved, another denied). `sudo` runs its command; `adduser` stands in, checking
/// that the group named is the one the package's `postinst` makes and the unit serves.
#[test]
fn the_operations_doc_operator_commands_run_as_written() {
    require_cgroups();
    let commands =
        gatewayd_testkit::readme::doc_commands("docs/OPERATIONS.md", "sh operations-operators");
    assert_eq!(
        commands,
        [
            "sudo adduser alice gatewayd",
            "gatewayd approvals watch",
            "gatewayd approvals list",
            "gatewayd approvals approve ID",
            "gatewayd approvals deny ID",
            "gatewayd sessions list",
        ],
        "the tests below follow these lines (the prompt, `approvals watch`, runs in a terminal in approvals_watch.rs)"
    );
    let d = Daemon::start();
    let (mut one, approve) = held(&d, "doc-approve", "hello");
    let (mut two, deny) = held(&d, "doc-deny", "bye");
    let packaging = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging");
    let prelude = format!(
        "sudo() {{ \"$@\"; }}\nadduser() {{ grep -q \"addgroup --system $2$\" {postinst} && grep -q -- \"--group $2$\" {service}; }}\n",
        postinst = packaging.join("debian/postinst").display(),
        service = packaging.join("gatewayd.service").display(),
    );
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_gatewayd"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sh = |line: &str| -> String {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{prelude}{line}"))
            .env("GATEWAYD_SOCKET", &d.socket)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(out.status.success(), "`{line}`: {}", text(&out));
        text(&out)
    };
    sh(&commands[0]);
    let listed = sh(&commands[2]);
    let first = listed.find(&approve).expect("the first held call listed");
    let second = listed.find(&deny).expect("the second held call listed");
    assert!(first < second, "oldest first: {listed}");
    assert_eq!(
        sh(&commands[3].replace("ID", &approve)).trim(),
        format!("{approve} approved")
    );
    assert_eq!(
        repeat(&mut one, "doc-approve", "hello", &approve)["reason"],
        "approved"
    );
    assert_eq!(
        sh(&commands[4].replace("ID", &deny)).trim(),
        format!("{deny} rejected")
    );
    assert_eq!(
        repeat(&mut two, "doc-deny", "bye", &deny)["reason"],
        "approval_denied"
    );
    let sessions = sh(&commands[5]);
    for want in ["doc-approve  user bob", "doc-deny  user bob", "TRIPPED"] {
        assert!(sessions.contains(want), "{want}: {sessions}");
    }
    assert!(sessions.contains(&one.cgroup_path()), "{sessions}");
}
