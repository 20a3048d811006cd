//! One `gatewayd hook` call end to end (process start, connect, decision, durable audit
//! record, answer), measured as a host runs it: a fresh process per event. Through the
//! daemon's socket, and without a daemon (the policy loaded per call).
use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

const CALLS: usize = 200;

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

pub(crate) fn run(gatewayd: &Path, dir: &Path) -> anyhow::Result<()> {
    let ws = dir.join("hook-ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("a.txt"), "x")?;
    let policy = dir.join("hook-policy.json");
    let out = Command::new(gatewayd)
        .args(["policy", "init", "--out"])
        .arg(&policy)
        .arg("--workspace")
        .arg(&ws)
        .output()?;
    if !out.status.success() {
        bail!("policy init: {}", String::from_utf8_lossy(&out.stderr));
    }
    let socket = dir.join("hook.sock");
    let mut daemon = Command::new(gatewayd)
        .args(["serve", "--policy"])
        .arg(&policy)
        .arg("--socket")
        .arg(&socket)
        .arg("--audit")
        .arg(dir.join("hook-daemon.jsonl"))
        .stderr(Stdio::null())
        .spawn()?;
    let t0 = Instant::now();
    while !socket.exists() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = daemon.kill();
            bail!("the daemon did not start");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let event = serde_json::json!({"session_id": "bench", "hook_event_name": "PreToolUse",
        "tool_name": "Read", "tool_input": {"file_path": ws.join("a.txt")},
        "cwd": ws, "permission_mode": "default", "transcript_path": "/tmp/t.jsonl"})
    .to_string();
    let via_daemon = vec![
        "--host".to_owned(),
        "claude".into(),
        "--socket".into(),
        socket.display().to_string(),
    ];
    let local = vec![
        "--host".to_owned(),
        "claude".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--audit".into(),
        dir.join("hook-local.jsonl").display().to_string(),
    ];
    println!(
        "\none `gatewayd hook` call end to end (process, decision, durable record; {CALLS} calls):"
    );
    let result = (|| -> anyhow::Result<()> {
        for (label, args) in [
            ("through the daemon socket", &via_daemon),
            ("without a daemon", &local),
        ] {
            let mut times = Vec::with_capacity(CALLS);
            for _ in 0..CALLS {
                times.push(one(gatewayd, args, event.as_bytes())?);
            }
            let (p50, p99) = percentiles(times);
            println!("  {label:<26} p50 {p50:6.2} ms   p99 {p99:6.2} ms");
        }
        Ok(())
    })();
    let _ = daemon.kill();
    let _ = daemon.wait();
    result
}
