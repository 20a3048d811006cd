//! One `gatewayd hook` call end to end (process start, connect, decision, durable audit
//! record, answer), measured as a host runs it: a fresh process per event. Through the
//! daemon's socket (calls of one host session, and each call a new host session, which
//! opens a gateway session with the protected files' secrets), and without a daemon (the
//! policy loaded per call). The home holds a developer's usual credentials (keys, cloud
//! and cluster configs), which the starter protects.
use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

const CALLS: usize = 200;

/// A home with the credential files a developer's machine has (all protected by the starter).
fn developer_home(home: &Path) -> anyhow::Result<()> {
    let key = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n".repeat(6)
    );
    let files: Vec<(String, String)> = (0..4)
        .map(|i| (format!(".ssh/id_{i}"), key.clone()))
        .chain((0..4).map(|i| (format!(".ssh/id_{i}.pub"), "ssh-ed25519 AAAA me".into())))
        .chain([
            (".ssh/known_hosts".into(), "github.com ssh-ed25519 AAAA\n".repeat(50)),
            (".ssh/config".into(), "Host *\n  IdentityFile ~/.ssh/id_0\n".into()),
            (".aws/credentials".into(), "[default]\naws_access_key_id = AKIA0123456789ABCDEF\naws_secret_access_key = abcdEFGH0123456789abcdEFGH0123456789abcd\n".into()),
            (".aws/config".into(), "[default]\nregion = eu-west-1\n".into()),
            (".kube/config".into(), format!("users:\n- name: dev\n  user:\n    token: {}\n", "k8stoken0123456789".repeat(3))),
            (".docker/config.json".into(), r#"{"auths": {"ghcr.io": {"auth": "ZGV2OmdocF8wMTIzNDU2Nzg5YWJjZGVm"}}}"#.into()),
            (".netrc".into(), "machine api.example.com login dev password s3cr3tpassw0rd\n".into()),
            (".git-credentials".into(), "https://dev:ghp_0123456789abcdefghij@github.com\n".into()),
            (".npmrc".into(), "//registry.npmjs.org/:_authToken=npm_0123456789abcdefghij\n".into()),
            (".config/gh/hosts.yml".into(), "github.com:\n  oauth_token: gho_0123456789abcdefghij\n".into()),
        ])
        .chain((0..20).map(|i| (format!(".config/gcloud/logs/{i}.log"), "INFO: nothing secret\n".repeat(20))))
        .collect();
    for (rel, text) in files {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().context("a parent")?)?;
        std::fs::write(p, text)?;
    }
    Ok(())
}

fn one(gatewayd: &Path, args: &[String], event: &[u8]) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let mut child = Command::new(gatewayd)
        .arg("hook")
        .args(args)
        .env_remove("GATEWAYD_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(event)?;
    let out = child.wait_with_output()?;
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("\"allow\"") {
        bail!(
            "hook: {} {text} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(took)
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// A workspace with one file, a developer's home and the starter policy for them.
fn workspace_and_policy(gatewayd: &Path, dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let ws = dir.join("hook-ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("a.txt"), "x")?;
    let home = dir.join("hook-home");
    developer_home(&home)?;
    let policy = dir.join("hook-policy.json");
    let _ = std::fs::remove_file(&policy);
    let out = gatewayd_testkit::starter::policy_init(gatewayd, &policy, &ws, &home)?;
    if !out.status.success() {
        bail!("policy init: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((ws, policy))
}

/// `gatewayd serve` on `socket`, once it accepts a connection.
fn start_daemon(
    gatewayd: &Path,
    dir: &Path,
    policy: &Path,
    socket: &Path,
) -> anyhow::Result<std::process::Child> {
    // Each run starts with empty logs: a log another run left would be verified whole at
    // each open without a daemon, and the later run would pay for the earlier one's records.
    for log in ["hook-daemon.jsonl", "hook-local.jsonl"] {
        let _ = std::fs::remove_file(dir.join(log));
    }
    let mut daemon = Command::new(gatewayd)
        .args(["serve", "--policy"])
        .arg(policy)
        .arg("--socket")
        .arg(socket)
        .arg("--audit")
        .arg(dir.join("hook-daemon.jsonl"))
        .stderr(Stdio::null())
        .spawn()?;
    // Ready when a connection is accepted (the socket file is bound before the daemon
    // listens).
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = daemon.kill();
            bail!("the daemon did not start");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(daemon)
}

pub(crate) fn run(gatewayd: &Path, dir: &Path) -> anyhow::Result<()> {
    let (ws, policy) = workspace_and_policy(gatewayd, dir)?;
    let socket = dir.join("hook.sock");
    let mut daemon = start_daemon(gatewayd, dir, &policy, &socket)?;
    let event = |session: &str| {
        serde_json::json!({"session_id": session, "hook_event_name": "PreToolUse",
            "tool_name": "Read", "tool_input": {"file_path": ws.join("a.txt")},
            "cwd": ws, "permission_mode": "default", "transcript_path": "/tmp/t.jsonl"})
        .to_string()
    };
    // --authoritative: an allow is answered (by default it is silence), so each call's answer
    // is checked.
    let via_daemon = vec![
        "--host".to_owned(),
        "claude".into(),
        "--authoritative".into(),
        "--socket".into(),
        socket.display().to_string(),
    ];
    let local = vec![
        "--host".to_owned(),
        "claude".into(),
        "--authoritative".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--audit".into(),
        dir.join("hook-local.jsonl").display().to_string(),
    ];
    println!(
        "\none `gatewayd hook` call end to end (process, decision, durable record; {CALLS} calls):"
    );
    let result = (|| -> anyhow::Result<()> {
        for (label, args, new_session) in [
            ("through the daemon, one host session", &via_daemon, false),
            (
                "through the daemon, a new host session each",
                &via_daemon,
                true,
            ),
            ("without a daemon", &local, false),
        ] {
            let mut times = Vec::with_capacity(CALLS);
            for i in 0..CALLS {
                let session = if new_session {
                    format!("bench-{i}")
                } else {
                    "bench".into()
                };
                times.push(one(gatewayd, args, event(&session).as_bytes())?);
            }
            let (p50, p99) = percentiles(times);
            println!("  {label:<44} p50 {p50:6.2} ms   p99 {p99:6.2} ms");
        }
        Ok(())
    })();
    let _ = daemon.kill();
    let _ = daemon.wait();
    result
}
