//! `cargo xtask bench`: the decision benchmark (gateway layer), the daemon benchmark (socket
//! round trip, durable decisions per second at 1/8/64 clients), the fleet benchmark (eight
//! `serve` processes, export over OTLP and syslog on and off), the MCP HTTP proxy benchmark
//! (added latency per call, calls/s with 16 sessions), then the cost the kernel
//! layer adds to the agent's own syscalls on this machine: `open()` and `connect()` in a loop,
//! run bare and under `gatewayd run`, reported as ratios measured in one run; one
//! `gatewayd hook` call end to end, through the daemon's socket and without one (`bench_hook`);
//! the session egress proxy's latency, rate, bulk transfer and memory ([`crate::proxy_bench`]);
//! the cost of many sessions sharing one program set ([`sessions_bench`]); and, in the QEMU
//! guests (tier 1, one kernel line after the other), the kernel layer's cost on `open()`,
//! `connect()` and `exec()` and the sessions bench ([`crate::vm`], [`vm::Suite::Bench`]).
use std::{net::TcpListener, process::Command};

use anyhow::{Context as _, bail};

use crate::{kernels, sessions_bench, setup, util, vm};

fn per_op(out: &std::process::Output) -> anyhow::Result<f64> {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("OK "))
        .with_context(|| format!("agent output: {text}"))?;
    util::ns_each(line).with_context(|| format!("no figure in `{line}`"))
}

/// A loopback listener for the connect loop; returns its port. It has a deep backlog and
/// accepts as fast as it can (a full backlog drops SYNs, which costs a 1 s retransmit and
/// swamps the figures), and keeps
/// the last 64 connections open, so the client closes first and `TIME_WAIT` stays on the
/// client side, where the kernel's port choice avoids it.
fn listener() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let port = l.local_addr()?.port();
    // std listens with a backlog of 128; a burst of connects can overflow it.
    // SAFETY: listen() again on our own bound socket only raises its backlog.
    unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&l), 4096) };
    std::thread::spawn(move || {
        let mut open = std::collections::VecDeque::new();
        for c in l.incoming().flatten() {
            open.push_back(c);
            if open.len() > 64 {
                open.pop_front();
            }
        }
    });
    Ok(port)
}

/// The hook bench for `old` (a gatewayd binary built earlier) and this build, in turn, twice.
pub(crate) fn hook_against(old: &std::path::Path) -> anyhow::Result<()> {
    let env = setup::toolchain()?;
    let bins = util::build_release(&env)?;
    let dir = std::env::temp_dir().join(format!("gatewayd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for round in 1..=2 {
        for (label, bin) in [("old", old), ("new", bins.gatewayd.as_path())] {
            println!("\nround {round}, {label}: {}", bin.display());
            crate::bench_hook::run(bin, &dir)?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Which benchmarks `cargo xtask bench` runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Only {
    All,
    Sessions,
    Proxy,
    Guests,
}

/// Every benchmark, or only the one `only` names.
pub(crate) fn run(only: Only) -> anyhow::Result<()> {
    let env = setup::setup()?;
    if only == Only::All {
        util::cargo(&env, &["bench", "-p", "gatewayd-core", "--bench", "decide"])?;
        util::cargo(&env, &["bench", "-p", "gatewayd", "--bench", "daemon"])?;
        util::cargo(&env, &["bench", "-p", "gatewayd", "--bench", "fleet"])?;
        util::cargo(&env, &["bench", "-p", "gatewayd", "--bench", "mcp_http"])?;
    }
    let bins = util::build_release(&env)?;
    if only == Only::Guests {
        let guests = kernels::select(&env, None)?;
        return vm::run_suite(&env, &bins, &guests, vm::Suite::Bench).map(|_| ());
    }
    let dir = std::env::temp_dir().join(format!("gatewayd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // The agent's file in a directory of its own: `gatewayd run` watches the policy's
    // directory (inotify, for reloads), which slows every open beside the policy (~100 ns
    // here) and is not the agent's workspace.
    let work = dir.join("work");
    std::fs::create_dir_all(&work)?;
    let file = work.join("data.txt");
    let secret = dir.join("secret.txt");
    std::fs::write(&file, "x")?;
    std::fs::write(&secret, "s")?;
    let policy = dir.join("policy.json");
    std::fs::write(
        &policy,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret]},
            "network": {"egress": [{"cidr": "127.0.0.1/32"}]}})
        .to_string(),
    )?;
    match only {
        Only::Sessions => sessions_bench::run_host(&bins, &policy, &dir)?,
        Only::Proxy => crate::proxy_bench::run_host(&bins, &dir)?,
        Only::Guests => {}
        Only::All => {
            kernel_overhead(&bins, &policy, &dir, &file)?;
            crate::bench_hook::run(&bins.gatewayd, &dir)?;
            crate::proxy_bench::run_host(&bins, &dir)?;
            sessions_bench::run_host(&bins, &policy, &dir)?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if only == Only::All {
        let guests = kernels::select(&env, None)?;
        vm::run_suite(&env, &bins, &guests, vm::Suite::Bench)?;
    }
    Ok(())
}

/// The kernel layer's cost on the agent's own `open()` and `connect()`: best of 3, bare
/// against under `gatewayd run`, and the tier the session ran at.
fn kernel_overhead(
    bins: &util::Bins,
    policy: &std::path::Path,
    dir: &std::path::Path,
    file: &std::path::Path,
) -> anyhow::Result<()> {
    let audit = dir.join("audit.jsonl");
    let file = file.to_str().unwrap_or("").to_string();
    // Each run gets a fresh listener: TIME_WAIT left by a previous run towards the same
    // address and port would stall some SYNs for a second and swamp the figures.
    let args = |what: &str| -> anyhow::Result<[String; 3]> {
        Ok(match what {
            "open()" => ["openloop".into(), file.clone(), "200000".into()],
            _ => [
                "connectloop".into(),
                format!("127.0.0.1:{}", listener()?),
                "1000".into(),
            ],
        })
    };
    println!("\nkernel layer overhead on the agent's own syscalls (this kernel; best of 3 each):");
    let mut tier = String::new();
    for what in ["open()", "connect()"] {
        let (mut bare, mut under) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            bare = bare.min(per_op(
                &Command::new(&bins.testagent).args(args(what)?).output()?,
            )?);
            // Root without capabilities, as in the privileged tests: the figures measure the
            // kernel programs, whoever the agent is.
            let out = Command::new(&bins.gatewayd)
                .args(["run", "--user", "root", "--policy"])
                .arg(policy)
                .arg("--audit")
                .arg(&audit)
                .arg("--")
                .arg(&bins.testagent)
                .args(args(what)?)
                .output()?;
            if !out.status.success() {
                bail!("under gatewayd: {}", String::from_utf8_lossy(&out.stderr));
            }
            under = under.min(per_op(&out)?);
        }
        println!(
            "  {what:<10} bare {bare:>8.0} ns   under gatewayd {under:>8.0} ns   ratio {:.2}",
            under / bare
        );
    }
    if let Some(first) = std::fs::read_to_string(&audit)?.lines().next() {
        let v: serde_json::Value = serde_json::from_str(first)?;
        tier = v["detail"]["tier"].as_str().unwrap_or("?").to_string();
    }
    println!("  (tier under gatewayd: {tier})");
    Ok(())
}
