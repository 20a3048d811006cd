//! A fleet on one machine: eight `gatewayd serve` processes as eight hosts (each its own
//! directory, socket, durable audit chain and `--host-id`), 64 clients in all (eight per
//! host, each its own connection and session) deciding in a loop; once with export off, once
//! with every record exported over OTLP/HTTP to one receiver
//! (`tests/daemon/otlp_receiver.py`, on `opentelemetry-proto` from `PyPI`) and over TCP to
//! one rsyslog; then the same with the receiver in its `lag` mode, which keeps only what the
//! lag needs (the least a receiver can do), to tell the receivers' share of the two cores
//! from the daemons'; then OTLP over gRPC (the same receiver on grpcio) instead of HTTP;
//! twice each, alternating.
//! Prints decisions/s across the eight hosts and the ratio on/off, the export lag (from a
//! record's time to its OTLP request's arrival at the receiver, every record), the drops,
//! and each host's resident memory (`VmRSS`) at the end of a run. On a machine of two CPUs or
//! more, the receiver and rsyslog run on the last CPU and the daemons and clients on the
//! others, in every mode: a fleet's collector is another machine, and the ratio is then what
//! export costs the hosts, not what receiving costs on the hosts' cores. (With one CPU all
//! share it, and the ratio includes the receivers; `GATEWAYD_BENCH_SHARED=1` does the same on
//! any machine.) The daemons' CPU per decision is split
//! by thread: audit writer, exporters, the rest.
//! `cargo bench -p gatewayd --bench fleet` (also run by `cargo xtask bench`).
//! `GATEWAYD_BENCH_BIN=PATH` runs another build of the daemon (an older one, to compare in
//! the same minutes); `GATEWAYD_BENCH_ONLY=off,lag` runs only those modes (of `off`, `ok`,
//! `lag`, `grpc`, `paired`), to profile one; `GATEWAYD_BENCH_ROUNDS=N` runs N rounds instead
//! of two. The ratio of one round moves by several points on a busy machine, so the bench
//! prints each mode's median over the rounds (each round's on against that round's off), and
//! ends with export off and on in turn, window by window (`paired.rs`;
//! `GATEWAYD_BENCH_WINDOWS=N` windows of each, ten by default).
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use gatewayd::protocol::client::Client;
use nix::{
    sched::{CpuSet, sched_getaffinity, sched_setaffinity},
    unistd::Pid,
};
use serde_json::{Value, json};

// The real sinks of the export tests, shared rather than copied.
#[allow(dead_code)]
#[path = "../tests/daemon/export_sinks.rs"]
mod export_sinks;
use export_sinks::{Proc, Rsyslog, received, receiver, wait_for};

#[path = "fleet/paired.rs"]
mod paired;

const HOSTS: usize = 8;
const CLIENTS_PER_HOST: usize = 8;
const RUN: Duration = Duration::from_secs(5);

struct Host {
    socket: PathBuf,
    proc: Proc,
}

impl Host {
    fn start(dir: &Path, i: usize, sinks: &[String]) -> Host {
        let root = dir.join(format!("host-{i}"));
        std::fs::create_dir_all(&root).unwrap();
        let policy = root.join("policy.json");
        std::fs::write(
            &policy,
            json!({"version": 1, "tools": [{"name": "noop", "description": "Does nothing.", "cost": 0}]})
                .to_string(),
        )
        .unwrap();
        let socket = root.join("gatewayd.sock");
        let bin = std::env::var_os("GATEWAYD_BENCH_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_gatewayd").into());
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--policy")
            .arg(&policy)
            .arg("--socket")
            .arg(&socket)
            .arg("--audit")
            .arg(root.join("audit.jsonl"))
            .args(["--host-id", &format!("bench-host-{i}")]);
        for s in sinks {
            cmd.args(["--export", s]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let h = Host {
            socket,
            proc: Proc(child),
        };
        wait_for("a host to serve", 30, || Client::connect(&h.socket).is_ok());
        h
    }

    fn exporters(&self) -> Vec<Value> {
        let mut c = Client::connect(&self.socket).unwrap();
        let s = c.call("export/stats", json!({})).unwrap();
        s["exporters"].as_array().cloned().unwrap_or_default()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.proc.0.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.proc.0.id()).unwrap());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.proc.0.wait();
    }
}

/// The CPUs the daemons and clients run on, and the one the receivers run on; None when
/// this machine has one CPU (or its set cannot be read).
fn split_cpus() -> Option<(CpuSet, CpuSet)> {
    let all = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| all.is_set(c).unwrap_or(false))
        .collect();
    let (&last, rest) = cpus.split_last()?;
    if rest.is_empty() {
        return None;
    }
    let (mut daemons, mut sinks) = (CpuSet::new(), CpuSet::new());
    for &c in rest {
        daemons.set(c).ok()?;
    }
    sinks.set(last).ok()?;
    Some((daemons, sinks))
}

/// Every thread of process `pid` on `cpus` (the threads it makes later inherit it).
fn pin(pid: u32, cpus: &CpuSet) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in tasks.flatten() {
        if let Some(tid) = t.file_name().to_str().and_then(|t| t.parse().ok()) {
            let _ = sched_setaffinity(Pid::from_raw(tid), cpus);
        }
    }
}

/// CPU time (user + system) in `stat`, a `/proc/.../stat` line, in seconds; and the name
/// in it (a thread's name).
fn stat_cpu(stat: &str) -> (String, f64) {
    let name = stat
        .split_once('(')
        .and_then(|(_, r)| r.rsplit_once(')'))
        .map_or("", |(n, _)| n);
    // After the command name's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (name.to_owned(), f.iter().sum::<u64>() as f64 / hz)
}

/// CPU time of process `pid` so far, in seconds.
fn cpu_s(pid: u32) -> f64 {
    stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()).1
}

/// CPU time of process `pid`'s live threads so far, in seconds, summed by what they do: the
/// audit writer (`gatewayd-audit`), the exporters (`gatewayd-export`, `gatewayd-otlp-grpc`)
/// and the rest (the runtime serving clients, deciding).
fn cpu_by_role(pid: u32) -> [f64; 3] {
    let mut by = [0.0; 3];
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by;
    };
    for t in tasks.flatten() {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let (name, ticks) = stat_cpu(&stat);
        // `schedstat`'s first field is the thread's run time in ns; `stat`'s are in ticks
        // (10 ms), too coarse for threads that run a few ms at a time.
        let cpu = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(ticks, |ns| ns as f64 / 1e9);
        let role = match name.as_str() {
            "gatewayd-audit" => 0,
            n if n.starts_with("gatewayd-export") || n.starts_with("gatewayd-otlp") => 1,
            _ => 2,
        };
        by[role] += cpu;
    }
    by
}

fn sum_roles(hosts: &[Host]) -> [f64; 3] {
    hosts.iter().fold([0.0; 3], |mut acc, h| {
        let by = cpu_by_role(h.proc.0.id());
        for (a, b) in acc.iter_mut().zip(by) {
            *a += b;
        }
        acc
    })
}

/// The CPU seconds by role of `hosts` ([`sum_roles`]) since they were `before`.
fn roles_since(hosts: &[Host], before: [f64; 3]) -> [f64; 3] {
    let mut since = sum_roles(hosts);
    for (now, then) in since.iter_mut().zip(before) {
        *now -= then;
    }
    since
}

struct Run {
    rate: f64,
    /// CPU seconds of the eight daemons over the run.
    cpu_daemons: f64,
    /// Of which: the audit writers, the exporters, the rest ([`cpu_by_role`]).
    cpu_roles: [f64; 3],
    lags: Vec<u64>,
    rss_kib: Vec<u64>,
    exported: u64,
    dropped: u64,
}

/// 64 clients over the eight hosts for [`RUN`]; lag sampled meanwhile.
fn run(dir: &Path, sinks: &[String]) -> Run {
    let hosts: Vec<Host> = (0..HOSTS).map(|i| Host::start(dir, i, sinks)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(HOSTS * CLIENTS_PER_HOST + 1));
    let threads: Vec<_> = (0..HOSTS * CLIENTS_PER_HOST)
        .map(|i| {
            let sock = hosts[i % HOSTS].socket.clone();
            let (stop, done, start) = (stop.clone(), done.clone(), start.clone());
            std::thread::spawn(move || {
                client(&sock, &format!("c{i}"), |decide| {
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        decide();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let cpu0: f64 = hosts.iter().map(|h| cpu_s(h.proc.0.id())).sum();
    let roles0 = sum_roles(&hosts);
    std::thread::sleep(RUN);
    let n = done.load(Ordering::Relaxed);
    let cpu_daemons = hosts.iter().map(|h| cpu_s(h.proc.0.id())).sum::<f64>() - cpu0;
    let cpu_roles = roles_since(&hosts, roles0);
    let rate = n as f64 / t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let rss_kib = hosts.iter().map(Host::rss_kib).collect();
    let (exported, dropped) = drained(&hosts);
    for h in hosts {
        h.stop();
    }
    Run {
        rate,
        cpu_daemons,
        cpu_roles,
        lags: Vec::new(),
        rss_kib,
        exported,
        dropped,
    }
}

/// One client of a host: opens session `id` on `sock`, hands `work` a function that makes
/// one decision in it, and closes the session once `work` returns (the bench's cgroup is an
/// operator's again once no session of it is open).
fn client(sock: &Path, id: &str, work: impl FnOnce(&mut dyn FnMut())) {
    let mut c = Client::connect(sock).unwrap();
    c.call("session/open", json!({"session": id, "user": "alice"}))
        .unwrap();
    let call = json!({"session": id, "call": {"tool": "noop", "arguments": {}}});
    work(&mut || {
        c.call("call/decide", call.clone()).unwrap();
    });
    c.call("session/close", json!({"session": id})).unwrap();
}

/// Waits until every exporter of `hosts` has sent all it holds; then what they exported and
/// dropped, summed over them (both 0 for hosts that do not export).
fn drained(hosts: &[Host]) -> (u64, u64) {
    wait_for("every host's export to drain", 120, || {
        hosts
            .iter()
            .all(|h| h.exporters().iter().all(|x| x["lag"] == 0))
    });
    hosts
        .iter()
        .flat_map(Host::exporters)
        .fold((0, 0), |(e, d), x| {
            (
                e + x["exported"].as_u64().unwrap_or(0),
                d + x["dropped"].as_u64().unwrap_or(0),
            )
        })
}

/// A count from environment variable `name`: a number above zero, else `default`.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// Decision to receiver, per record received over OTLP: the time its request arrived less
/// the record's own time (when the daemon wrote it), in ms.
fn lags_ms(got: &[Value]) -> Vec<u64> {
    got.iter()
        .filter(|r| r["attributes"]["gatewayd.type"] == "record")
        .filter_map(|r| {
            let at = r["received_unix_nano"].as_u64()?;
            let ts = r["time_unix_nano"].as_u64()?;
            Some(at.saturating_sub(ts) / 1_000_000)
        })
        .collect()
}

fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The daemons' CPU per decision in `r`, in µs.
fn cpu_per_decision(r: &Run) -> f64 {
    per_decision(r, r.cpu_daemons)
}

/// `cpu` seconds spent over run `r`, per decision of it, in µs.
fn per_decision(r: &Run, cpu: f64) -> f64 {
    1e6 * cpu / (r.rate * RUN.as_secs_f64()).max(1.0)
}

fn print(what: &str, r: &mut Run, off: Option<&Run>) {
    let ratio = off.map_or(String::new(), |o| {
        format!("  ({:.1}% of export off)", 100.0 * r.rate / o.rate)
    });
    println!(
        "  {what}: {:>8.0} decisions/s across {HOSTS} hosts{ratio}",
        r.rate
    );
    let mean = r.rss_kib.iter().sum::<u64>() / r.rss_kib.len().max(1) as u64;
    let max = r.rss_kib.iter().max().copied().unwrap_or(0);
    println!(
        "      RSS per host: mean {:.1} MiB, max {:.1} MiB; CPU of the 8 daemons {:.1} s in {} s ({:.0} us a decision)",
        mean as f64 / 1024.0,
        max as f64 / 1024.0,
        r.cpu_daemons,
        RUN.as_secs(),
        cpu_per_decision(r)
    );
    let per = |cpu: f64| per_decision(r, cpu);
    println!(
        "      of which, a decision: audit writer {:.1} us, exporters {:.1} us, the rest (serving, deciding) {:.1} us",
        per(r.cpu_roles[0]),
        per(r.cpu_roles[1]),
        per(r.cpu_roles[2])
    );
    if let Some(o) = off {
        let more = cpu_per_decision(r) - cpu_per_decision(o);
        println!(
            "      export's cost to the daemons: {more:+.1} us of CPU a decision ({:+.1}% of export off), what would remain with the receivers on another machine",
            100.0 * more / cpu_per_decision(o).max(1e-9)
        );
        println!(
            "      export lag (record written to OTLP receiver): p50 {} ms  p99 {} ms ({} records); exported {} (both sinks), dropped {}",
            pct(&mut r.lags, 0.5),
            pct(&mut r.lags, 0.99),
            r.lags.len(),
            r.exported,
            r.dropped
        );
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    gatewayd::daemon::raise_fd_limit();
    let cpus = split_cpus().filter(|_| std::env::var_os("GATEWAYD_BENCH_SHARED").is_none());
    println!(
        "gatewayd fleet benchmark: {HOSTS} serve processes, {} clients, durable audit, {} s a run; {}",
        HOSTS * CLIENTS_PER_HOST,
        RUN.as_secs(),
        if cpus.is_some() {
            "receivers on a CPU of their own"
        } else {
            "receivers, daemons and clients share every CPU"
        }
    );
    // The clients' threads and the daemons (children) inherit this process's set.
    if let Some((daemons, _)) = &cpus {
        pin(std::process::id(), daemons);
    }
    let pin_sink = |pid: u32| {
        if let Some((_, sinks)) = &cpus {
            pin(pid, sinks);
        }
    };
    // What the receivers write goes to memory when it can (tmpfs), not to the disk whose
    // `fdatasync`s the hosts' audit logs wait for: a collector's disk is elsewhere too.
    let sinks_tmp = tempfile::Builder::new()
        .prefix("gatewayd-fleet-sinks")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir_in(&root))
        .unwrap();
    let sinks_dir = std::fs::canonicalize(sinks_tmp.path()).unwrap();
    println!(
        "  the receivers write to {}",
        if sinks_dir.starts_with("/dev/shm") {
            "memory (/dev/shm)"
        } else {
            "the hosts' disk (no /dev/shm)"
        }
    );
    let rs = Rsyslog::start(&sinks_dir);
    let rsyslog_pid: u32 = std::fs::read_to_string(sinks_dir.join("rsyslog.pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(0);
    pin_sink(rsyslog_pid);
    let only = std::env::var("GATEWAYD_BENCH_ONLY").ok();
    let wanted = |mode: &str| {
        only.as_ref()
            .is_none_or(|o| o.split(',').any(|m| m == mode))
    };
    let rounds = env_count("GATEWAYD_BENCH_ROUNDS", 2);
    // With only `paired` wanted, no round.
    let rounds = if ["off", "ok", "lag", "grpc"].iter().any(|m| wanted(m)) {
        rounds
    } else {
        0
    };
    let mut summary = Summary::default();
    for round in 1..=rounds {
        let mut off = run(&root.join(format!("off-{round}")), &[]);
        print(&format!("round {round}, export off"), &mut off, None);
        for (mode, kind, what) in [
            ("ok", "otlp", "export on (OTLP/HTTP + syslog TCP)"),
            ("lag", "otlp", "export on, receiver in lag mode"),
            ("grpc", "otlp-grpc", "export on (OTLP/gRPC + syslog TCP)"),
        ]
        .into_iter()
        .filter(|(mode, ..)| wanted(mode))
        {
            let otlp_out = sinks_dir.join(format!("otlp-{mode}-{round}.jsonl"));
            let (rx, port) = receiver(mode, 0, &otlp_out);
            pin_sink(rx.0.id());
            let sinks = [
                format!("{kind}:http://127.0.0.1:{port}"),
                format!("syslog:tcp:127.0.0.1:{}", rs.tcp),
            ];
            let sinks_cpu0 = cpu_s(rx.0.id()) + cpu_s(rsyslog_pid);
            let mut on = run(&root.join(format!("on-{mode}-{round}")), &sinks);
            let sinks_cpu = cpu_s(rx.0.id()) + cpu_s(rsyslog_pid) - sinks_cpu0;
            on.lags = lags_ms(&received(&otlp_out));
            let _ = std::fs::remove_file(&otlp_out);
            print(&format!("round {round}, {what}"), &mut on, Some(&off));
            println!("      CPU of the OTLP receiver and rsyslog: {sinks_cpu:.1} s");
            summary.add(what, &on, &off);
        }
    }
    if rounds > 0 {
        summary.print(rounds);
    }
    if wanted("paired") {
        let otlp_out = sinks_dir.join("otlp-paired.jsonl");
        let (rx, port) = receiver("ok", 0, &otlp_out);
        pin_sink(rx.0.id());
        let sinks = [
            format!("otlp:http://127.0.0.1:{port}"),
            format!("syslog:tcp:127.0.0.1:{}", rs.tcp),
        ];
        let windows = env_count("GATEWAYD_BENCH_WINDOWS", 10);
        paired::run(&root.join("paired"), &sinks, &otlp_out, windows).print();
    }
}

/// Each mode's ratios to export off and export's CPU a decision, round by round.
#[derive(Default)]
struct Summary {
    modes: Vec<(&'static str, Vec<f64>, Vec<f64>)>,
}

impl Summary {
    fn add(&mut self, what: &'static str, on: &Run, off: &Run) {
        let at = self
            .modes
            .iter()
            .position(|(w, ..)| *w == what)
            .unwrap_or_else(|| {
                self.modes.push((what, Vec::new(), Vec::new()));
                self.modes.len() - 1
            });
        let (_, ratios, cpu) = &mut self.modes[at];
        ratios.push(100.0 * on.rate / off.rate.max(1e-9));
        cpu.push(cpu_per_decision(on) - cpu_per_decision(off));
    }

    fn print(&mut self, rounds: usize) {
        println!("  over {rounds} rounds, median (least-most):");
        for (what, ratios, cpu) in &mut self.modes {
            let (r, c) = (spread(ratios), spread(cpu));
            println!(
                "    {what}: {:.1}% of export off ({:.1}-{:.1}%); export's CPU a decision {:+.1} us ({:+.1} to {:+.1})",
                r.0, r.1, r.2, c.0, c.1, c.2
            );
        }
    }
}

/// The median, least and most of `v`.
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    };
    (median, v[0], v[n - 1])
}
