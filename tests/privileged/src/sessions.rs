//! The shared program set: sessions side by side with different policies, a session nested
//! in another, a set adopted by the next session, a session whose gatewayd was killed,
//! another build's set and a damaged set, and a full map.
use std::{
    io::{BufRead as _, BufReader},
    process::{Child, ChildStdout, Stdio},
};

use super::*;

/// Starts `gatewayd run` in the background with its stdout piped.
fn spawn_session(policy: &Path, audit: &Path, args: &[&str]) -> (Child, BufReader<ChildStdout>) {
    let mut child = under_gatewayd(policy, audit, agent())
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn gatewayd");
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

fn next_line(out: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

fn policy_file(dir: &Scratch, name: &str, body: serde_json::Value) -> PathBuf {
    let p = dir.path(name);
    std::fs::write(&p, body.to_string()).unwrap();
    p
}

/// (hook, reason) of the kernel records, and every one of them carries `session`'s id.
fn kernel_records(audit: &Path) -> Vec<serde_json::Value> {
    let recs = records(audit);
    let session = recs[0]["detail"]["cgroup_id"].as_u64().unwrap();
    let k: Vec<serde_json::Value> = recs
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    for r in &k {
        assert_eq!(
            r["detail"]["session_cgroup_id"].as_u64(),
            Some(session),
            "a record of another session: {r}"
        );
    }
    k
}

#[test]
fn two_concurrent_sessions_enforce_and_audit_their_own_policies() {
    let tier = tier();
    let dir = Scratch::new("two");
    let go = dir.path("go");
    let (a_secret, b_secret) = (dir.path("a-secret"), dir.path("b-secret"));
    std::fs::write(&a_secret, "a").unwrap();
    std::fs::write(&b_secret, "b").unwrap();
    let (a_port, a_rx) = listener("127.0.0.1:0");
    let (b_port, b_rx) = listener("127.0.0.1:0");
    let (a_to, b_to) = (format!("127.0.0.1:{a_port}"), format!("127.0.0.1:{b_port}"));
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let actions = [
        "pid".to_string(),
        "+".into(),
        "waitfile".into(),
        s(&go),
        "+".into(),
        "read".into(),
        s(&a_secret),
        "+".into(),
        "read".into(),
        s(&b_secret),
        "+".into(),
        "send".into(),
        a_to.clone(),
        "x".into(),
        "+".into(),
        "send".into(),
        b_to.clone(),
        "x".into(),
    ];
    let actions: Vec<&str> = actions.iter().map(String::as_str).collect();
    let mut sessions = Vec::new();
    for (name, secret, port) in [("a", &a_secret, a_port), ("b", &b_secret, b_port)] {
        let policy = policy_file(
            &dir,
            &format!("{name}.json"),
            serde_json::json!({"version": 1, "kernel": "best_effort",
                "sandbox": {"protected": [secret]},
                "network": {"egress": [{"cidr": "127.0.0.1/32", "port": port}]}}),
        );
        let audit = dir.path(&format!("{name}.jsonl"));
        let (child, mut out) = spawn_session(&policy, &audit, &actions);
        assert!(next_line(&mut out).starts_with("OK pid"));
        sessions.push((name, child, out, audit));
    }
    // Both agents are running, each in its own session: now both act.
    std::fs::write(&go, "").unwrap();
    let (file_denied, secret_read) = match tier {
        Tier::BpfLsm => (
            "FAIL read: Operation not permitted",
            "OK read: read 1 bytes",
        ),
        Tier::Landlock => ("FAIL read: Permission denied", "OK read: read 1 bytes"),
    };
    let mut pins = Vec::new();
    let mut ids = Vec::new();
    for (name, mut child, mut out, audit) in sessions {
        let lines: Vec<String> = (0..5).map(|_| next_line(&mut out)).collect();
        assert!(child.wait().unwrap().code() == Some(2), "{name}: {lines:?}");
        let own_first = name == "a";
        let (read_a, read_b) = if own_first {
            (file_denied, secret_read)
        } else {
            (secret_read, file_denied)
        };
        assert!(lines[0].starts_with("OK waitfile"), "{name}: {lines:?}");
        assert!(lines[1].starts_with(read_a), "{name}: {lines:?}");
        assert!(lines[2].starts_with(read_b), "{name}: {lines:?}");
        let (send_a, send_b) = if own_first {
            ("OK send", "FAIL send: Operation not permitted")
        } else {
            ("FAIL send: Operation not permitted", "OK send")
        };
        assert!(lines[3].starts_with(send_a), "{name}: {lines:?}");
        assert!(lines[4].starts_with(send_b), "{name}: {lines:?}");

        let start = &records(&audit)[0];
        pins.push(start["detail"]["program_set"]["pins"].clone());
        ids.push(start["detail"]["cgroup_id"].as_u64().unwrap());
        let k = kernel_records(&audit);
        let hooks: Vec<(&str, &str)> = k
            .iter()
            .map(|r| (r["hook"].as_str().unwrap(), r["reason"].as_str().unwrap()))
            .collect();
        let (own_secret, other_port) = if own_first {
            (&a_secret, b_port)
        } else {
            (&b_secret, a_port)
        };
        // Tier 2: the hiding mount refuses the open, `raw_tp/sys_exit` records it.
        let file_hook = match tier {
            Tier::BpfLsm => "lsm/file_open",
            Tier::Landlock => "raw_tp/sys_exit",
        };
        assert_eq!(
            hooks,
            [
                (file_hook, "protected_path"),
                ("cgroup/connect4", "egress_not_allowed")
            ],
            "{name}: {k:#?}"
        );
        assert_eq!(k[0]["detail"]["protected_path"], s(own_secret));
        assert_eq!(k[1]["detail"]["port"], other_port);
        assert!(verify(&audit).status.success());
    }
    assert_eq!(pins[0], pins[1], "both sessions share one program set");
    assert!(pins[0].is_string());
    assert_ne!(ids[0], ids[1]);
    // Each listener got exactly the one connection its own session allowed.
    for rx in [a_rx, b_rx] {
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), b"x");
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    }
}

#[test]
fn the_next_session_adopts_the_pinned_programs() {
    let _ = tier();
    let dir = Scratch::new("adopt");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let mut starts = Vec::new();
    for i in 0..2 {
        let audit = dir.path(&format!("audit{i}.jsonl"));
        let out = run_agent(&policy, &audit, &["exit", "0"]);
        assert!(out.status.success());
        starts.push(records(&audit)[0]["detail"].clone());
    }
    // The first session may have made the set or found it; the second finds it pinned.
    assert_eq!(
        starts[1]["program_set"]["adopted"], true,
        "{:#?}",
        starts[1]
    );
    assert_eq!(
        starts[0]["program_set"]["pins"],
        starts[1]["program_set"]["pins"]
    );
    assert!(starts[1]["startup_ms"].is_number());
}

#[test]
fn a_killed_gatewayds_session_stays_enforced_until_the_next_start_kills_it() {
    let _ = tier();
    let dir = Scratch::new("crash");
    let (port, rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let go = dir.path("go");
    let to = format!("127.0.0.1:{port}");
    let (mut child, mut out) = spawn_session(&policy, &audit, &["cgroup", "+", "sleep", "300"]);
    let cgroup = next_line(&mut out);
    assert!(cgroup.contains("0::/gatewayd/run-"), "{cgroup}");
    let start = records(&audit)[0]["detail"].clone();
    let id = start["cgroup_id"].as_u64().unwrap();
    let path = PathBuf::from(start["cgroup"].as_str().unwrap());
    // A process left in the session's cgroup, outside the agent's PID namespace (moved in by
    // this root test): what the session's entries must go on confining.
    let mut left = Command::new(agent())
        .args(["waitfile", go.to_str().unwrap(), "+", "send", &to, "x", "+"])
        .args(["cgroup", "+", "sleep", "300"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(path.join("cgroup.procs"), left.id().to_string()).unwrap();
    let mut left_out = BufReader::new(left.stdout.take().unwrap());
    // gatewayd dies without cleaning up; its agent's PID namespace dies with it.
    child.kill().unwrap();
    child.wait().unwrap();
    let procs = |p: &Path| std::fs::read_to_string(p.join("cgroup.procs")).unwrap_or_default();
    for _ in 0..100 {
        if procs(&path).trim() == left.id().to_string() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        procs(&path).trim(),
        left.id().to_string(),
        "the agent is gone"
    );
    std::fs::write(&go, "").unwrap();
    assert!(next_line(&mut left_out).starts_with("OK waitfile"));
    let sent = next_line(&mut left_out);
    assert!(
        sent.starts_with("FAIL send: Operation not permitted"),
        "the pinned programs and the session's entries outlive its gatewayd: {sent}"
    );
    assert_eq!(
        next_line(&mut left_out),
        cgroup,
        "still in the session's cgroup"
    );
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    // The owner is dead: the next start kills what is left, removes the cgroup and the
    // session's entries.
    let programs = gatewayd_kernel::kernel::SharedPrograms::open_or_load().unwrap();
    let status = left.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "{status}"
    );
    assert!(
        !programs.session_ids().unwrap().contains(&id),
        "stale session {id} left in the set"
    );
    assert!(!path.exists(), "{} still exists", path.display());
}

/// A session for egress to `127.0.0.1:port` only, in `cgroup`, owned by this process.
fn egress_spec(cgroup: &Path, port: u16) -> gatewayd_kernel::kernel::KernelSpec {
    let cidr = gatewayd_core::net::Cidr::parse("127.0.0.1/32").unwrap();
    gatewayd_kernel::kernel::KernelSpec {
        cgroup_dir: cgroup.to_owned(),
        protected: Vec::new(),
        exec: Vec::new(),
        exec_enforced: false,
        exec_map: vec![],
        egress: vec![gatewayd_kernel::kernel::spec::egress_rule(
            &cidr,
            Some(port),
        )],
        unix_paths: Vec::new(),
        unix_names: Vec::new(),
        read_only_names: Vec::new(),
        roots_enforced: 0,
        roots: Vec::new(),
        protected_names: gatewayd_core::policy::protected_names::ProtectedNames::default(),
        require: false,
        learn: false,
        landlock_refusals: false,
        learn_names: None,
    }
}

/// Runs `gw-testagent ARGS` as a child of this process inside `cgroup`.
fn run_in(cgroup: &gatewayd_kernel::cgroup::AgentCgroup, args: &[&str]) -> String {
    let enter = cgroup.enter_fn();
    let mut cmd = Command::new(agent());
    cmd.args(args);
    // SAFETY: the closure only opens, writes and closes a file (async-signal-safe).
    unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, enter) };
    stdout(&cmd.output().unwrap())
}

#[test]
fn a_nested_session_and_its_sub_cgroups_resolve_to_the_nested_session() {
    use gatewayd_kernel::cgroup::AgentCgroup;
    let _ = tier();
    let programs = gatewayd_kernel::kernel::SharedPrograms::open_or_load().unwrap();
    let outer_cg = AgentCgroup::create(&format!("nest-{}", std::process::id())).unwrap();
    let inner_cg = AgentCgroup::create_in(outer_cg.path(), "inner").unwrap();
    let sub_cg = AgentCgroup::create_in(inner_cg.path(), "sub").unwrap();
    let (outer_port, _outer_rx) = listener("127.0.0.1:0");
    let (inner_port, _inner_rx) = listener("127.0.0.1:0");
    let me = std::process::id();
    let mut outer = programs
        .add_session(&egress_spec(outer_cg.path(), outer_port), me)
        .unwrap();
    let mut inner = programs
        .add_session(&egress_spec(inner_cg.path(), inner_port), me)
        .unwrap();
    let (to_outer, to_inner) = (
        format!("127.0.0.1:{outer_port}"),
        format!("127.0.0.1:{inner_port}"),
    );
    let both = ["send", &to_outer, "x", "+", "send", &to_inner, "x"];
    let denied = "FAIL send: Operation not permitted";
    let text = run_in(&outer_cg, &both);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("OK send") && lines[1].starts_with(denied),
        "outer: {text}"
    );
    for cg in [&inner_cg, &sub_cg] {
        let text = run_in(cg, &both);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with(denied) && lines[1].starts_with("OK send"),
            "{}: {text}",
            cg.path().display()
        );
    }
    // Each denial went to its own session's ring buffer, with that session's id.
    let events = |s: &mut gatewayd_kernel::kernel::Session| {
        let mut ring = s.take_events().unwrap();
        let mut out = Vec::new();
        while let Some(item) = ring.next() {
            out.push(gatewayd_kernel::kernel::events::parse(&item).unwrap());
        }
        out
    };
    let (outer_ev, inner_ev) = (events(&mut outer), events(&mut inner));
    assert_eq!(outer_ev.len(), 1);
    assert_eq!(
        (outer_ev[0].session_id, outer_ev[0].dst_port),
        (outer.id(), u32::from(inner_port))
    );
    assert_eq!(
        inner_ev.len(),
        2,
        "the inner session's and its sub-cgroup's"
    );
    for ev in &inner_ev {
        assert_eq!(
            (ev.session_id, ev.dst_port),
            (inner.id(), u32::from(outer_port))
        );
    }
    assert_eq!(inner_ev[1].cgroup_id, sub_cg.id());
    let ids = programs.session_ids().unwrap();
    assert!(ids.contains(&outer.id()) && ids.contains(&inner.id()));
    let (outer_id, inner_id) = (outer.id(), inner.id());
    inner.remove().unwrap();
    outer.remove().unwrap();
    let ids = programs.session_ids().unwrap();
    assert!(!ids.contains(&outer_id) && !ids.contains(&inner_id));
    drop(sub_cg);
    drop(inner_cg);
    outer_cg.remove().unwrap();
}

#[test]
fn one_sessions_burst_does_not_cost_another_its_records() {
    let _ = tier();
    let dir = Scratch::new("bursts");
    let (port, _rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let (burst_audit, quiet_audit) = (dir.path("burst.jsonl"), dir.path("quiet.jsonl"));
    let go = dir.path("go");
    let to = format!("127.0.0.1:{port}");
    const N: u64 = 5000;
    let (mut burst, mut burst_out) = spawn_session(
        &policy,
        &burst_audit,
        &["pid", "+", "tryconnect", &to, &N.to_string()],
    );
    let (mut quiet, _quiet_out) = spawn_session(
        &policy,
        &quiet_audit,
        &[
            "waitfile",
            go.to_str().unwrap(),
            "+",
            "send",
            &to,
            "1",
            "+",
            "send",
            &to,
            "2",
            "+",
            "send",
            &to,
            "3",
        ],
    );
    assert!(next_line(&mut burst_out).starts_with("OK pid"));
    std::fs::write(&go, "").unwrap();
    assert_eq!(quiet.wait().unwrap().code(), Some(3));
    assert_eq!(burst.wait().unwrap().code(), Some(0));
    // The quiet session has every one of its denials (a record, or counted in its
    // `denials_aggregated` record), whatever the burst did.
    let quiet_k = kernel_records(&quiet_audit);
    assert_eq!(crate::denials_in(&quiet_k), 3, "{quiet_k:#?}");
    assert!(
        !records(&quiet_audit)
            .iter()
            .any(|r| r["reason"] == "events_dropped")
    );
    // The burst's own denials are each a record or counted as dropped for that session.
    let recs = records(&burst_audit);
    let kernel = crate::denials_in(&kernel_records(&burst_audit));
    let dropped = recs
        .iter()
        .find(|r| r["reason"] == "events_dropped")
        .map_or(0, |r| r["detail"]["count"].as_u64().unwrap());
    assert_eq!(kernel + dropped, N, "{kernel} recorded + {dropped} dropped");
}

/// Populated cgroups under the parent that are not in `ours` (sessions of this set).
fn foreign_populated(ours: &[u64]) -> Vec<PathBuf> {
    let parent = gatewayd_kernel::cgroup::parent_dir().unwrap();
    gatewayd_kernel::cgroup::children(&parent)
        .into_iter()
        .filter(|(id, path)| !ours.contains(id) && gatewayd_kernel::cgroup::populated(path))
        .map(|(_, path)| path)
        .collect()
}

#[test]
fn another_builds_set_stays_while_a_cgroup_outside_this_set_is_populated() {
    use gatewayd_kernel::{cgroup::AgentCgroup, kernel::SharedPrograms};
    let _ = tier();
    drop(SharedPrograms::open_or_load().unwrap());
    // A set of another gatewayd build, as far as this one can tell: another tag.
    let old = Path::new(gatewayd_kernel::kernel::set::PIN_BASE).join("v0_0_0-0000000000000000");
    std::fs::create_dir_all(&old).unwrap();
    aya::maps::Array::<aya::maps::MapData, u32>::create(1, 0)
        .unwrap()
        .pin(old.join("map-SESSIONS"))
        .unwrap();
    // A process in a cgroup under the parent that is no session of this set: it may be a
    // session of the other set, which must keep enforcing.
    let cg = AgentCgroup::create(&format!("foreign-{}", std::process::id())).unwrap();
    let enter = cg.enter_fn();
    let mut cmd = Command::new(agent());
    cmd.args(["sleep", "30"]);
    // SAFETY: the closure only opens, writes and closes a file (async-signal-safe).
    unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, enter) };
    let mut sleeper = cmd.spawn().unwrap();
    while !gatewayd_kernel::cgroup::populated(cg.path()) {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(SharedPrograms::open_or_load().unwrap());
    assert!(
        old.exists(),
        "another build's set was removed under a live cgroup"
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    cg.remove().unwrap();
    let programs = SharedPrograms::open_or_load().unwrap();
    let others = foreign_populated(&programs.session_ids().unwrap());
    if others.is_empty() {
        assert!(
            !old.exists(),
            "another build's set outlived every cgroup it could serve"
        );
    } else {
        // Someone else's cgroups on this machine: the rule keeps the set for them.
        eprintln!("populated cgroups outside this set: {others:?}; the other set stays");
        assert!(old.exists());
        std::fs::remove_file(old.join("map-SESSIONS")).unwrap();
        std::fs::remove_dir(&old).unwrap();
    }
}

#[test]
fn a_damaged_set_is_replaced() {
    use gatewayd_kernel::kernel::SharedPrograms;
    let _ = tier();
    let dir = SharedPrograms::open_or_load().unwrap().pin_dir().to_owned();
    let link = dir.join("link-connect4");
    assert!(link.exists(), "{}", link.display());
    // Unpinning a link detaches its program: the set no longer enforces egress.
    std::fs::remove_file(&link).unwrap();
    let programs = SharedPrograms::open_or_load().unwrap();
    assert!(
        !programs.adopted(),
        "a set without all its links was adopted"
    );
    assert_eq!(programs.pin_dir(), dir);
    assert!(link.exists(), "the new set pins connect4 again");
    let again = SharedPrograms::open_or_load().unwrap();
    assert!(again.adopted());
}

/// A session for `protected` (inodes that need not exist: the map only holds keys), in
/// a new cgroup `name`.
fn protected_session(
    programs: &gatewayd_kernel::kernel::SharedPrograms,
    name: &str,
    protected: &[gatewayd_kernel::kernel::spec::ProtectedInode],
) -> (
    gatewayd_kernel::cgroup::AgentCgroup,
    Result<gatewayd_kernel::kernel::Session, gatewayd_kernel::kernel::KernelError>,
) {
    let cg = gatewayd_kernel::cgroup::AgentCgroup::create(name).unwrap();
    let spec = gatewayd_kernel::kernel::KernelSpec {
        cgroup_dir: cg.path().to_owned(),
        protected: protected.to_vec(),
        exec: Vec::new(),
        exec_enforced: false,
        exec_map: vec![],
        egress: Vec::new(),
        unix_paths: Vec::new(),
        unix_names: Vec::new(),
        read_only_names: Vec::new(),
        roots_enforced: 0,
        roots: Vec::new(),
        protected_names: gatewayd_core::policy::protected_names::ProtectedNames::default(),
        require: false,
        learn: false,
        landlock_refusals: false,
        learn_names: None,
    };
    let added = programs.add_session(&spec, std::process::id());
    (cg, added)
}

#[test]
fn a_full_map_refuses_the_session_with_its_limit_and_leaves_nothing_behind() {
    use gateway_common::{InodeKey, MAX_PROTECTED, MAX_PROTECTED_TOTAL};
    use gatewayd_kernel::kernel::{KernelError, spec::ProtectedInode};
    let _ = tier();
    let programs = gatewayd_kernel::kernel::SharedPrograms::open_or_load().unwrap();
    let protected: Vec<ProtectedInode> = (0..MAX_PROTECTED)
        .map(|i| ProtectedInode {
            path: format!("/full/{i}").into(),
            key: InodeKey {
                dev: u64::MAX,
                ino: u64::from(i),
            },
        })
        .collect();
    let name = |i: usize| format!("full-{}-{i}", std::process::id());
    // Sessions of the most protected paths one session may have, until PROTECTED is full
    // (other sessions on this host may hold entries too).
    let mut held = Vec::new();
    let (refused_cg, refused) = loop {
        let (cg, added) = protected_session(&programs, &name(held.len()), &protected);
        match added {
            Ok(s) => held.push((cg, s)),
            Err(e) => break (cg, e),
        }
        assert!(
            held.len() <= (MAX_PROTECTED_TOTAL / MAX_PROTECTED) as usize,
            "PROTECTED took more than its stated {MAX_PROTECTED_TOTAL} entries"
        );
    };
    let message = refused.to_string();
    assert!(
        matches!(
            refused,
            KernelError::MapFull {
                map: "PROTECTED",
                capacity: MAX_PROTECTED_TOTAL
            }
        ),
        "{message}"
    );
    assert!(message.contains("docs/KERNEL.md"), "{message}");
    let refused_id =
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(refused_cg.path()).unwrap());
    assert!(!programs.session_ids().unwrap().contains(&refused_id));
    refused_cg.remove().unwrap();
    // The refused session left none of its entries: once one session ends, another of the
    // same size fits again.
    let (cg, s) = held.pop().expect("at least one session fits");
    s.remove().unwrap();
    cg.remove().unwrap();
    let (cg, again) = protected_session(&programs, &name(999), &protected);
    let again = again.expect("the room of the session that ended");
    again.remove().unwrap();
    cg.remove().unwrap();
    for (cg, s) in held {
        s.remove().unwrap();
        cg.remove().unwrap();
    }
}
