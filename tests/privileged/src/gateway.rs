//! `gatewayd run` serves the daemon's protocol to its agent, and a session that trips the
//! Rule of Two locks the agent's egress in the kernel before the tripping call is answered.
//! Part of the `privileged` test binary (host at tier 2, QEMU guest at tier 1); the agent is
//! `gw-testagent`, whose `rpc` action speaks the protocol with the standard library only.
use std::{path::Path, process::Command, time::Duration};

use serde_json::{Value, json};

use super::{
    MUST_HAPPEN_WITHIN, Scratch, listener, records, run_agent, stdout, tier, verify, write_policy,
};

/// Egress to one loopback port, and two tools: one whose output is untrusted, one that
/// reads private data. Calling both trips the Rule of Two.
fn taint_policy(dir: &Scratch, port: u16) -> std::path::PathBuf {
    write_policy(
        dir,
        json!({"version": 1, "kernel": "best_effort",
        "network": {"egress": [{"cidr": "127.0.0.1/32", "port": port}]},
        "tools": [
            {"name": "search_web", "description": "Search the web.",
             "labels": ["untrusted_output"]},
            {"name": "read_inbox", "description": "Read the user's inbox.",
             "labels": ["reads_private"]}
        ]}),
    )
}

fn decide(tool: &str) -> String {
    json!({"session": "$SESSION", "call": {"tool": tool, "arguments": {}}}).to_string()
}

/// The answer line an `OK rpc: ...` line carries.
fn answer(line: &str) -> Value {
    let text = line
        .strip_prefix("OK rpc: ")
        .unwrap_or_else(|| panic!("not a successful rpc: {line}"));
    serde_json::from_str(text).unwrap()
}

#[test]
fn tainting_the_session_locks_the_agents_egress_before_the_answer() {
    let _ = tier();
    let dir = Scratch::new("taint");
    let (port, rx) = listener("127.0.0.1:0");
    let policy = taint_policy(&dir, port);
    let audit = dir.path("audit.jsonl");
    let to = format!("127.0.0.1:{port}");
    let (search, inbox) = (decide("search_web"), decide("read_inbox"));
    let out = run_agent(
        &policy,
        &audit,
        &[
            "send",
            &to,
            "before",
            "+",
            "rpc",
            "hello",
            "{}",
            "+",
            "rpc",
            "call/decide",
            &search,
            "+",
            "send",
            &to,
            "one-leg",
            "+",
            "rpc",
            "call/decide",
            &inbox,
            "+",
            "send",
            &to,
            "after",
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[0].starts_with("OK send"), "before any call: {text}");
    assert_eq!(answer(lines[1])["result"]["protocol"], 1, "{text}");
    let first = answer(lines[2]);
    assert_eq!(first["result"]["decision"], "allow", "{text}");
    assert_eq!(
        first["result"]["legs"],
        json!({"egress": false, "private": false, "untrusted": true})
    );
    assert!(
        lines[3].starts_with("OK send"),
        "one leg is no trip: {text}"
    );
    let second = answer(lines[4]);
    assert_eq!(second["result"]["decision"], "allow", "{text}");
    assert_eq!(second["result"]["legs"]["private"], true);
    // The very next syscall after the answer: the lockdown was in place before it.
    assert!(
        lines[5].starts_with("FAIL send: Operation not permitted"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "one failed action");
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| rx.recv_timeout(Duration::from_millis(500)).ok())
        .take(3)
        .collect();
    assert_eq!(got, [b"before".to_vec(), b"one-leg".to_vec()]);

    let recs = records(&audit);
    let reasons: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["source"].as_str().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("gateway", "session_start"),
            ("gateway", "session_open"),
            ("gateway", "allowed"),
            ("gateway", "allowed"),
            ("gateway", "egress_lockdown"),
            ("gateway", "session_tripped"),
            ("kernel", "egress_lockdown"),
            ("gateway", "session_end"),
        ],
        "{recs:#?}"
    );
    let session = recs[0]["session"].as_str().unwrap();
    assert!(recs.iter().all(|r| r["session"] == session), "one session");
    let lock = &recs[4];
    assert_eq!(lock["tool"], "read_inbox", "names the call that caused it");
    assert_eq!(lock["decision"], "deny");
    assert_eq!(lock["detail"]["trigger"], "rule_of_two");
    assert_eq!(lock["detail"]["method"], "call/decide");
    eprintln!(
        "lockdown took {} µs (kernel task round trip)",
        lock["detail"]["lockdown_us"]
    );
    assert_eq!(recs[6]["hook"], "cgroup/connect4");
    assert_eq!(recs[6]["detail"]["port"], port);
    // The socket was private to the session and is gone.
    let socket = recs[0]["detail"]["socket"].as_str().unwrap();
    assert!(socket.starts_with("/run/gatewayd/run-"), "{socket}");
    assert!(!Path::new(socket).exists(), "{socket} left behind");
    assert!(!Path::new(socket).parent().unwrap().exists());
    assert!(verify(&audit).status.success());
}

#[test]
fn the_agent_gets_its_session_and_socket_and_nothing_more() {
    let _ = tier();
    let dir = Scratch::new("gwsock");
    let (port, _rx) = listener("127.0.0.1:0");
    let policy = taint_policy(&dir, port);
    let audit = dir.path("audit.jsonl");
    let policy_text = policy.to_str().unwrap().to_owned();
    let out = run_agent(
        &policy,
        &audit,
        &[
            // The session is open and bound to the agent's cgroup: the agent can use it,
            "rpc",
            "call/decide",
            &decide("search_web"),
            "+",
            // but not approve anything (an agent cgroup is never an operator),
            "rpc",
            "approvals/list",
            "{}",
            "+",
            // and the kernel layer keeps gatewayd's own files out of reach.
            "read",
            &policy_text,
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(answer(lines[0])["result"]["decision"], "allow", "{text}");
    assert!(
        lines[1].starts_with("FAIL rpc:") && lines[1].contains("-32003"),
        "{text}"
    );
    assert!(lines[2].starts_with("FAIL read"), "{text}");
    let recs = records(&audit);
    let open = recs.iter().find(|r| r["reason"] == "session_open").unwrap();
    let start = &recs[0];
    assert_eq!(open["session"], start["session"]);
    let cgroup = start["detail"]["cgroup"].as_str().unwrap();
    assert!(
        cgroup.ends_with(open["detail"]["cgroup"].as_str().unwrap()),
        "{cgroup} vs {}",
        open["detail"]["cgroup"]
    );
    assert!(recs.iter().any(|r| r["reason"] == "not_operator"));
}

/// A kernel denial of a protected file counts toward the Rule of Two of the session `run`
/// serves (the policy's `suspicion`, here its default `private`): after untrusted content and
/// a denied `open()` of a protected file, the agent's `sends_out` call is denied, and the
/// tripped session locks the agent's egress, at both tiers: tier 1's `lsm/file_open` records
/// the denial, tier 2's `raw_tp/sys_exit` the EACCES of the file's hiding mount.
#[test]
fn a_kernel_denial_of_a_protected_file_counts_toward_the_rule_of_two() {
    let tier = tier();
    let dir = Scratch::new("suspect");
    let (port, rx) = listener("127.0.0.1:0");
    let secret = dir.path("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let policy = write_policy(
        &dir,
        json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"protected": [secret]},
        "network": {"egress": [{"cidr": "127.0.0.1/32", "port": port}]},
        "tools": [
            {"name": "search_web", "description": "Search the web.",
             "labels": ["untrusted_output"]},
            {"name": "send_mail", "description": "Send an email.", "labels": ["sends_out"]}
        ]}),
    );
    let audit = dir.path("audit.jsonl");
    let to = format!("127.0.0.1:{port}");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "rpc",
            "call/decide",
            &decide("search_web"),
            "+",
            "read",
            secret.to_str().unwrap(),
            "+",
            // The denial's event reaches the gateway through the kernel task, not the agent's
            // own connection: give it time to arrive.
            "sleep",
            "0.5",
            "+",
            "rpc",
            "call/decide",
            &decide("send_mail"),
            "+",
            "send",
            &to,
            "after",
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(answer(lines[0])["result"]["decision"], "allow", "{text}");
    assert!(
        lines[1].starts_with("FAIL read"),
        "the kernel denies: {text}"
    );
    let recs = records(&audit);
    // Tier 1's file program refuses the open and records it; at tier 2 the file's hiding
    // mount refuses it and `raw_tp/sys_exit` records the EACCES under the protected path.
    let hook = match tier {
        super::Tier::BpfLsm => "lsm/file_open",
        super::Tier::Landlock => "raw_tp/sys_exit",
    };
    let mail = answer(lines[3]);
    assert_eq!(mail["result"]["decision"], "deny", "{text}");
    assert_eq!(mail["result"]["reason"], "trifecta", "{text}");
    assert_eq!(
        mail["result"]["legs"],
        json!({"egress": false, "private": true, "untrusted": true})
    );
    assert!(
        lines[4].starts_with("FAIL send: Operation not permitted"),
        "the trip locked the agent's egress: {text}"
    );
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    let denial = recs
        .iter()
        .find(|r| r["reason"] == "protected_path" && r["source"] == "kernel")
        .unwrap();
    assert_eq!(denial["hook"], hook, "{denial}");
    let suspicion = recs.iter().find(|r| r["reason"] == "suspicion").unwrap();
    assert_eq!(suspicion["detail"]["cause"], "kernel");
    assert_eq!(suspicion["detail"]["reason"], "protected_path");
    let lock = recs
        .iter()
        .find(|r| r["reason"] == "egress_lockdown" && r["source"] == "gateway")
        .unwrap();
    assert_eq!(lock["detail"]["method"], "kernel/denial");
    assert_eq!(lock["tool"], Value::Null);
    let seq = |reason: &str, source: &str| {
        recs.iter()
            .find(|r| r["reason"] == reason && r["source"] == source)
            .map(|r| r["seq"].as_u64().unwrap())
            .unwrap()
    };
    assert!(seq("protected_path", "kernel") < seq("suspicion", "gateway"));
    assert!(seq("suspicion", "gateway") < seq("trifecta", "gateway"));
    assert!(verify(&audit).status.success());
}

/// `gatewayd serve` locks the kernel session its agent runs in: an agent under `gatewayd run`
/// that uses the host's daemon instead of its own gateway trips the Rule of Two there, and
/// its next `connect()` fails; the daemon's record names the kernel session (the run's
/// cgroup id).
#[test]
fn the_daemon_locks_the_kernel_session_its_agent_runs_in() {
    daemon_locks_the_kernel_session("servelock", None);
}

/// The same with the daemon as a Kubernetes pod runs it (docs/FLEET.md, "On a cluster"): in a
/// cgroup of its own and a cgroup namespace rooted there, the node's pids in sight. Its
/// callers' `/proc/PID/cgroup` read relative to that root unless it joins pid 1's
/// namespace, which it does.
#[test]
fn the_daemon_in_a_cgroup_namespace_of_its_own_locks_the_kernel_session_too() {
    let cgroup = PodCgroup::new("gatewayd-test-pod");
    daemon_locks_the_kernel_session("servelock-ns", Some(&cgroup));
}

/// A cgroup for a daemon started as in a pod ([`PodCgroup::enter_before_exec`]), removed
/// when dropped.
struct PodCgroup(std::path::PathBuf);

impl PodCgroup {
    fn new(name: &str) -> PodCgroup {
        let dir = gatewayd_kernel::cgroup::cgroup2_mount().unwrap().join(name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap();
        PodCgroup(dir)
    }

    /// Makes `c`'s process move itself into the cgroup and unshare its cgroup namespace
    /// there before it execs, as a container runtime does.
    fn enter_before_exec(&self, c: &mut Command) {
        use std::os::unix::process::CommandExt as _;
        let procs = std::ffi::CString::new(
            self.0
                .join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: between fork and exec the closure only makes system calls (open, write,
        // close, unshare) on memory prepared before the fork; it allocates nothing.
        unsafe {
            c.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                // "0": the writing process itself.
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
                if libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `gatewayd serve` on `socket` (in `pod`'s cgroup and cgroup namespace, if given), once it
/// accepts a connection (the socket file is bound before it listens).
fn serving(
    policy: &Path,
    socket: &Path,
    audit: &Path,
    pod: Option<&PodCgroup>,
) -> std::process::Child {
    let mut serve = Command::new(super::gatewayd());
    serve
        .arg("serve")
        .arg("--policy")
        .arg(policy)
        .arg("--socket")
        .arg(socket)
        .arg("--audit")
        .arg(audit)
        // By number: the guest has no /etc/group.
        .args(["--group", "0"]);
    if let Some(pod) = pod {
        pod.enter_before_exec(&mut serve);
    }
    let serve = serve.spawn().unwrap();
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    while std::os::unix::net::UnixStream::connect(socket).is_err()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        std::os::unix::net::UnixStream::connect(socket).is_ok(),
        "gatewayd serve did not start"
    );
    serve
}

fn daemon_locks_the_kernel_session(name: &str, pod: Option<&PodCgroup>) {
    let _ = tier();
    let dir = Scratch::new(name);
    let (port, rx) = listener("127.0.0.1:0");
    let policy = taint_policy(&dir, port);
    let socket = dir.path("serve.sock");
    let serve_audit = dir.path("serve-audit.jsonl");
    let mut serve = serving(&policy, &socket, &serve_audit, pod);
    // The daemon's socket is outside the run's session: the run's policy lists it (tier 1
    // refuses an unlisted one, `unix_sockets.rs`).
    let mut run_policy: Value =
        serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    run_policy["network"]["unix"] = json!([socket]);
    let run_policy_path = dir.path("run-policy.json");
    std::fs::write(&run_policy_path, run_policy.to_string()).unwrap();
    let call = |tool: &str| {
        json!({"session": "via-daemon", "call": {"tool": tool, "arguments": {}}}).to_string()
    };
    let (search, inbox) = (call("search_web"), call("read_inbox"));
    let audit = dir.path("audit.jsonl");
    let to = format!("127.0.0.1:{port}");
    let out = super::under_gatewayd(&run_policy_path, &audit, super::agent())
        .args([
            "send",
            &to,
            "before",
            "+",
            "rpc",
            "session/open",
            r#"{"session": "via-daemon", "user": "tester"}"#,
            "+",
            "rpc",
            "call/decide",
            &search,
            "+",
            "rpc",
            "call/decide",
            &inbox,
            "+",
            "send",
            &to,
            "after",
        ])
        .env("GW_RPC_SOCKET", &socket)
        .output()
        .unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = serve.wait();
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with("OK send"), "{text}");
    assert_eq!(answer(lines[3])["result"]["decision"], "allow", "{text}");
    assert!(
        lines[4].starts_with("FAIL send: Operation not permitted"),
        "the daemon locked the run's kernel session: {text}"
    );
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| rx.recv_timeout(Duration::from_millis(500)).ok())
        .take(2)
        .collect();
    assert_eq!(got, [b"before".to_vec()]);
    let run_recs = records(&audit);
    let cgroup_id = run_recs[0]["detail"]["cgroup_id"].as_u64().unwrap();
    assert!(
        run_recs
            .iter()
            .any(|r| r["source"] == "kernel" && r["reason"] == "egress_lockdown"),
        "{run_recs:#?}"
    );
    let recs = records(&serve_audit);
    let lock = recs
        .iter()
        .find(|r| r["reason"] == "egress_lockdown")
        .unwrap_or_else(|| panic!("no egress_lockdown from the daemon: {recs:#?}"));
    assert_eq!(lock["session"], "via-daemon");
    assert_eq!(lock["tool"], "read_inbox");
    assert_eq!(lock["detail"]["kernel_session"], cgroup_id);
    assert!(verify(&serve_audit).status.success());
}
