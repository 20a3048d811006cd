//! Egress at the kernel: connects outside the allowlist denied and recorded (IPv4, IPv6, UDP), the SIGUSR1 lockdown of all egress, a burst of denials counted whole, and a policy reload that tightens the allowlist followed by the kernel.

use super::*;

#[test]
fn egress_outside_allowlist_is_denied_and_audited() {
    let _ = tier();
    let dir = Scratch::new("egress");
    let (allowed, allowed_rx) = listener("127.0.0.1:0");
    let (denied, denied_rx) = listener("127.0.0.1:0");
    let policy = write_policy(
        &dir,
        best_effort(serde_json::json!([{"cidr": "127.0.0.1/32", "port": allowed}])),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "send",
            &format!("127.0.0.1:{denied}"),
            "stolen",
            "+",
            "send",
            &format!("127.0.0.1:{allowed}"),
            "hello",
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("FAIL send: Operation not permitted"),
        "{text}"
    );
    assert!(
        text.contains(&format!("OK send: sent to 127.0.0.1:{allowed}")),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "one failed action");
    assert_eq!(
        allowed_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        b"hello"
    );
    assert!(
        denied_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "denied listener got a connection"
    );

    let recs = records(&audit);
    let k: Vec<_> = recs.iter().filter(|r| r["source"] == "kernel").collect();
    assert_eq!(k.len(), 1, "{recs:#?}");
    assert_eq!(k[0]["hook"], "cgroup/connect4");
    assert_eq!(k[0]["reason"], "egress_not_allowed");
    assert_eq!(k[0]["decision"], "deny");
    assert_eq!(k[0]["detail"]["port"], denied);
    assert_eq!(k[0]["detail"]["addr"], "127.0.0.1");
    assert!(verify(&audit).status.success());
}

#[test]
fn ipv6_and_udp_egress_are_denied() {
    let _ = tier();
    let dir = Scratch::new("egress6");
    let (port6, rx6) = listener("[::1]:0");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let uport = udp.local_addr().unwrap().port();
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "send",
            &format!("[::1]:{port6}"),
            "x",
            "+",
            "udp",
            &format!("127.0.0.1:{uport}"),
            "y",
        ],
    );
    let text = stdout(&out);
    assert_eq!(text.matches("Operation not permitted").count(), 2, "{text}");
    assert!(rx6.recv_timeout(Duration::from_millis(300)).is_err());
    assert!(
        udp.recv(&mut [0u8; 16]).is_err(),
        "UDP datagram got through"
    );
    let hooks: Vec<String> = records(&audit)
        .iter()
        .filter(|r| r["source"] == "kernel")
        .map(|r| r["hook"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hooks, ["cgroup/connect6", "cgroup/sendmsg4"]);
}

/// An agent allowed to send to one local listener: it sends `before`, runs `middle`, waits
/// for the file `go`, then sends `after` to the same listener.
struct TwoSends {
    dir: Scratch,
    policy: PathBuf,
    audit: PathBuf,
    go: PathBuf,
    allowed: u16,
    allowed_rx: std::sync::mpsc::Receiver<Vec<u8>>,
    child: std::process::Child,
}

fn two_sends(name: &str, middle: &[&str]) -> TwoSends {
    let dir = Scratch::new(name);
    let (allowed, allowed_rx) = listener("127.0.0.1:0");
    let policy = write_policy(
        &dir,
        best_effort(serde_json::json!([{"cidr": "127.0.0.1/32", "port": allowed}])),
    );
    let audit = dir.path("audit.jsonl");
    let go = dir.path("go");
    let to = format!("127.0.0.1:{allowed}");
    let mut args: Vec<&str> = vec!["send", &to, "before", "+"];
    args.extend_from_slice(middle);
    args.extend(["waitfile", go.to_str().unwrap(), "+", "send", &to, "after"]);
    let child = under_gatewayd(&policy, &audit, agent())
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Allowed while nothing has changed.
    assert_eq!(
        allowed_rx.recv_timeout(MUST_HAPPEN_WITHIN).unwrap(),
        b"before"
    );
    TwoSends {
        dir,
        policy,
        audit,
        go,
        allowed,
        allowed_rx,
        child,
    }
}

#[test]
fn sigusr1_locks_all_egress_down() {
    let _ = tier();
    let TwoSends {
        dir: _dir,
        audit,
        go,
        allowed_rx,
        child,
        ..
    } = two_sends("lockdown", &["pid", "+"]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    // The switch is recorded once it is set; only then let the agent try again.
    wait_for_record(&audit, "egress_lockdown");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("FAIL send: Operation not permitted"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(allowed_rx.recv_timeout(Duration::from_millis(300)).is_err());
    let k: Vec<_> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0]["reason"], "egress_lockdown");
    assert_eq!(k[0]["hook"], "cgroup/connect4");
}

#[test]
fn a_burst_of_denials_loses_no_count() {
    let _ = tier();
    let dir = Scratch::new("burst");
    let (port, _rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    const N: u64 = 5000;
    let out = run_agent(
        &policy,
        &audit,
        &["tryconnect", &format!("127.0.0.1:{port}"), &N.to_string()],
    );
    assert!(
        stdout(&out).contains(&format!("{N} attempts, {N} failed")),
        "{}",
        stdout(&out)
    );
    // Every denial is its own record, or counted in a `denials_aggregated` record (a flood
    // of one kind) or in the `events_dropped` record (a full ring buffer).
    let recs = records(&audit);
    let k: Vec<serde_json::Value> = recs
        .iter()
        .filter(|r| r["source"] == "kernel")
        .cloned()
        .collect();
    let kernel = denials_in(&k);
    let dropped = recs
        .iter()
        .find(|r| r["reason"] == "events_dropped")
        .map_or(0, |r| r["detail"]["count"].as_u64().unwrap());
    assert_eq!(kernel + dropped, N, "{kernel} recorded + {dropped} dropped");
    let end = recs.last().unwrap();
    assert_eq!(end["detail"]["kernel_denials"].as_u64(), Some(kernel));
    assert!(verify(&audit).status.success());
}

/// A policy reload that tightens the egress allowlist while the agent runs: the agent's
/// next connect is refused by the kernel (the cgroup connect program reads the session's
/// rewritten `EGRESS` entry), and recorded.
#[test]
fn a_reload_that_tightens_egress_is_followed_by_the_kernel() {
    let _ = tier();
    let TwoSends {
        dir,
        policy,
        audit,
        go,
        allowed,
        allowed_rx,
        child,
    } = two_sends("reload-egress", &[]);
    // The tightened policy, as an editor saves it: a new file renamed over the old.
    let tmp = dir.path("policy.json.new");
    std::fs::write(&tmp, best_effort(serde_json::json!([])).to_string()).unwrap();
    std::fs::rename(&tmp, &policy).unwrap();
    let reload = wait_for_record(&audit, "policy_reload");
    assert_eq!(reload["detail"]["kernel"]["egress_rules"], 0, "{reload}");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("FAIL send: Operation not permitted"),
        "{text}"
    );
    assert!(allowed_rx.recv_timeout(Duration::from_millis(300)).is_err());
    let k: Vec<_> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    assert_eq!(k.len(), 1, "{k:#?}");
    assert_eq!(k[0]["reason"], "egress_not_allowed");
    assert_eq!(k[0]["detail"]["port"], allowed);
    assert!(verify(&audit).status.success());
}
