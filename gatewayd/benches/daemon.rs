//! The daemon through its socket: round trip of one decision (p50/p99; audit off, and on
//! with a durable record per decision), and throughput of durable decisions with 1, 8 and 64
//! concurrent clients (each its own connection and session; group commit shares syncs);
//! then the same at 64 clients with every record exported to a JSON file and to syslog over
//! UDP (a socket of the bench's, drained by a thread): the ratio to export off, the lag
//! (queue to sink of the last batch delivered, sampled every 10 ms) and the drops.
//! Next to each figure, the CPU time it took per decision (`getrusage`): the whole process
//! (daemon and clients, which share it), and for the round trips the client thread's share.
//! `cargo bench -p gatewayd --bench daemon` (also run by `cargo xtask bench`).
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use gatewayd::{
    daemon::{self, ExportOptions, ExportSpec, Gateway, ServeOptions, ServerOptions},
    protocol::{SessionOpen, client::Client},
    shutdown,
};
use gatewayd_core::clock::SystemClock;
use serde_json::json;

/// A daemon on its own runtime thread (two workers, as many as this machine has cores).
struct Running {
    gw: Arc<Gateway>,
    trigger: shutdown::Trigger,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(dir: &Path, audit: Option<PathBuf>) -> Running {
        Self::start_exporting(dir, audit, None)
    }

    fn start_exporting(
        dir: &Path,
        audit: Option<PathBuf>,
        export: Option<ExportOptions>,
    ) -> Running {
        let policy = dir.join("policy.json");
        std::fs::write(
            &policy,
            json!({"version": 1, "tools": [{"name": "noop", "description": "Does nothing.", "cost": 0}]})
                .to_string(),
        )
        .unwrap();
        let opts = ServeOptions {
            listener: None,
            policy,
            socket: dir.join("bench.sock"),
            audit,
            gid: 0,
            agent_cgroups: Vec::new(),
            clock: Arc::new(SystemClock),
            server: ServerOptions::default(),
            reload: gatewayd::daemon::ReloadOptions::default(),
            export,
        };
        let (trigger, sd) = shutdown::channel();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(daemon::serve(opts, sd, |gw| tx.send(gw.clone()).unwrap()))
                .unwrap();
        });
        Running {
            gw: rx.recv().unwrap(),
            trigger,
            thread: Some(thread),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.trigger.fire();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn session(sock: &Path, id: &str) -> Client {
    let mut c = Client::connect(sock).unwrap();
    c.request(&SessionOpen {
        session: Some(id.to_owned()),
        user: "bench".into(),
        scopes: Vec::new(),
    })
    .unwrap();
    c
}

const DECIDE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"call/decide","params":{"session":"rt","call":{"tool":"noop","arguments":{}}}}"#;

/// CPU time (user + system, ns) used so far by `who` (`RUSAGE_SELF`: the process,
/// `RUSAGE_THREAD`: the calling thread).
fn cpu_ns(who: libc::c_int) -> u64 {
    // SAFETY: getrusage only writes the struct it is given, which is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to that struct; `who` is one of the two constants above.
    let rc = unsafe { libc::getrusage(who, &raw mut ru) };
    assert_eq!(rc, 0, "getrusage");
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// Round trip percentiles and CPU per call of one client deciding in a loop.
struct RoundTrip {
    p50: u64,
    p99: u64,
    /// CPU of the whole process per call (daemon and client), ns.
    cpu: u64,
    /// CPU of the client's thread per call, ns.
    client_cpu: u64,
}

fn round_trip(sock: &Path, n: usize) -> RoundTrip {
    let mut c = session(sock, "rt");
    for _ in 0..n / 10 {
        c.raw(DECIDE).unwrap();
    }
    let (all0, me0) = (cpu_ns(libc::RUSAGE_SELF), cpu_ns(libc::RUSAGE_THREAD));
    let mut ns: Vec<u64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let a = c.raw(DECIDE).unwrap();
            let e = t.elapsed().as_nanos() as u64;
            assert!(a.contains("\"allow\""), "{a}");
            e
        })
        .collect();
    let (all1, me1) = (cpu_ns(libc::RUSAGE_SELF), cpu_ns(libc::RUSAGE_THREAD));
    ns.sort_unstable();
    let pct = |p: f64| ns[((ns.len() as f64 - 1.0) * p) as usize];
    RoundTrip {
        p50: pct(0.50),
        p99: pct(0.99),
        cpu: (all1 - all0) / n as u64,
        client_cpu: (me1 - me0) / n as u64,
    }
}

fn print_round_trip(what: &str, rt: &RoundTrip, floor50: Option<u64>) {
    let ratio = floor50.map_or(String::new(), |f| {
        format!("  ({:.2}x the floor, p50)", rt.p50 as f64 / f.max(1) as f64)
    });
    println!(
        "  round trip, {what:<22} p50 {:>8.1} us  p99 {:>8.1} us{ratio}",
        rt.p50 as f64 / 1e3,
        rt.p99 as f64 / 1e3,
    );
    println!(
        "      CPU per call: {:.1} us (client thread {:.1} us, the rest {:.1} us)",
        rt.cpu as f64 / 1e3,
        rt.client_cpu as f64 / 1e3,
        rt.cpu.saturating_sub(rt.client_cpu) as f64 / 1e3,
    );
}

/// The platform's floor for the same exchange: a line written to a Unix stream socket and a
/// line read back from a thread that echoes it, with no daemon work at all (p50, p99 ns). On
/// an idle virtual machine this floor is set by how fast a halted vCPU wakes up, and it can
/// exceed the daemon's goal on its own; the daemon's figure is also given as a ratio to it.
fn socket_floor(n: usize) -> (u64, u64) {
    use std::io::{BufRead as _, BufReader, Write as _};
    let (mut near, far) = std::os::unix::net::UnixStream::pair().unwrap();
    let echo = std::thread::spawn(move || {
        let mut w = far.try_clone().unwrap();
        let mut r = BufReader::new(far);
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|k| k > 0) {
            w.write_all(line.as_bytes()).unwrap();
            line.clear();
        }
    });
    let mut back = BufReader::new(near.try_clone().unwrap());
    let mut line = String::new();
    let mut once = |line: &mut String| {
        near.write_all(b"x\n").unwrap();
        line.clear();
        back.read_line(line).unwrap();
    };
    for _ in 0..n / 10 {
        once(&mut line);
    }
    let mut ns: Vec<u64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            once(&mut line);
            t.elapsed().as_nanos() as u64
        })
        .collect();
    drop(back);
    near.shutdown(std::net::Shutdown::Both).unwrap();
    echo.join().unwrap();
    ns.sort_unstable();
    let pct = |p: f64| ns[((ns.len() as f64 - 1.0) * p) as usize];
    (pct(0.50), pct(0.99))
}

/// Durable decisions per second with `clients` connections deciding in a loop, and the
/// process's CPU per decision (ns).
fn throughput(sock: &Path, clients: usize, run: Duration) -> (f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (sock, stop, done, start) =
                (sock.to_owned(), stop.clone(), done.clone(), start.clone());
            std::thread::spawn(move || {
                let id = format!("tp{clients}-{i}");
                let mut c = session(&sock, &id);
                let req = DECIDE.replace("\"rt\"", &format!("\"{id}\""));
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    c.raw(&req).unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let (before, cpu0) = (done.load(Ordering::Relaxed), cpu_ns(libc::RUSAGE_SELF));
    std::thread::sleep(run);
    let (n, cpu1) = (
        done.load(Ordering::Relaxed) - before,
        cpu_ns(libc::RUSAGE_SELF),
    );
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    (n as f64 / secs, (cpu1 - cpu0) / n.max(1))
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    println!("gatewayd daemon benchmark: one decision per request over the Unix socket");

    let off = root.join("off");
    std::fs::create_dir(&off).unwrap();
    let d = Running::start(&off, None);
    let (floor50, floor99) = socket_floor(50_000);
    println!(
        "  socket floor (echo, no daemon):   p50 {:>8.1} us  p99 {:>8.1} us",
        floor50 as f64 / 1e3,
        floor99 as f64 / 1e3
    );
    let rt = round_trip(&off.join("bench.sock"), 50_000);
    print_round_trip("audit off:", &rt, Some(floor50));
    drop(d);

    let on = root.join("on");
    std::fs::create_dir(&on).unwrap();
    let d = Running::start(&on, Some(on.join("audit.jsonl")));
    let sock = on.join("bench.sock");
    let rt = round_trip(&sock, 500);
    print_round_trip("durable audit:", &rt, None);
    let mut rate64 = 0.0;
    for clients in [1, 8, 64] {
        let stats0 =
            d.gw.audit()
                .map(gatewayd_core::audit::writer::WriterHandle::stats)
                .unwrap_or_default();
        let (rate, cpu) = throughput(&sock, clients, Duration::from_secs(3));
        let stats1 =
            d.gw.audit()
                .map(gatewayd_core::audit::writer::WriterHandle::stats)
                .unwrap_or_default();
        let batches = (stats1.0 - stats0.0).max(1);
        rate64 = rate;
        println!(
            "  durable decisions, {clients:>2} client(s): {rate:>9.0} /s  ({:.1} records per fdatasync; CPU {:.1} us each)",
            (stats1.1 - stats0.1) as f64 / batches as f64,
            cpu as f64 / 1e3
        );
    }
    drop(d);
    let rep = gatewayd_core::audit::verify(&on.join("audit.jsonl"), None).unwrap();
    println!("  audit log verifies: {} records", rep.records);
    export_on(&root.join("json"), rate64, false);
    export_on(&root.join("json-udp"), rate64, true);
}

/// 64 clients with every record exported to a JSON file, and to syslog over UDP when
/// `udp_too` (read by a thread of the bench: its CPU counts too).
fn export_on(dir: &Path, rate_off: f64, udp_too: bool) {
    std::fs::create_dir(dir).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let port = udp.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_drain = stop.clone();
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut n = 0u64;
        while !stop_drain.load(Ordering::Relaxed) {
            if udp.recv(&mut buf).is_ok() {
                n += 1;
            }
        }
        n
    });
    let mut sinks = vec![ExportSpec::File(dir.join("export.jsonl"))];
    if udp_too {
        sinks.push(ExportSpec::parse(&format!("syslog:udp:127.0.0.1:{port}")).unwrap());
    }
    let export = ExportOptions {
        sinks,
        anchor_every: Duration::from_mins(1),
        host_id: None,
        ..Default::default()
    };
    let d = Running::start_exporting(dir, Some(dir.join("audit.jsonl")), Some(export));
    let sock = dir.join("bench.sock");
    let gw = d.gw.clone();
    let sampling = Arc::new(AtomicBool::new(true));
    let s2 = sampling.clone();
    let sampler = std::thread::spawn(move || {
        let mut lags = Vec::new();
        while s2.load(Ordering::Relaxed) {
            lags.extend(gw.export_stats().iter().map(|s| s.lag_ms));
            std::thread::sleep(Duration::from_millis(10));
        }
        lags
    });
    let (rate, cpu) = throughput(&sock, 64, Duration::from_secs(3));
    sampling.store(false, Ordering::Relaxed);
    let mut lags = sampler.join().unwrap();
    lags.sort_unstable();
    let pct = |p: f64| {
        lags.get(((lags.len().max(1) - 1) as f64 * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    let what = if udp_too {
        "JSON file + syslog UDP"
    } else {
        "JSON file"
    };
    println!(
        "  durable decisions, 64 client(s), export on ({what}): {rate:>9.0} /s  ({:.1}% of export off; CPU {:.1} us each)",
        rate / rate_off.max(1.0) * 100.0,
        cpu as f64 / 1e3
    );
    println!(
        "      export lag (queue to sink, last batch): p50 {} ms  p99 {} ms",
        pct(0.50),
        pct(0.99)
    );
    let gw = d.gw.clone();
    drop(d);
    for s in gw.export_stats() {
        println!(
            "      {}: exported {}, dropped {}",
            s.sink, s.exported, s.dropped
        );
    }
    stop.store(true, Ordering::Relaxed);
    let got = drain.join().unwrap();
    if udp_too {
        println!("      UDP datagrams the bench's socket read: {got}");
    }
}
