//! Export off and on in turn, window by window: two fleets of eight hosts, one exporting and
//! one not, both started once, whose clients take turns deciding. On a busy machine one run
//! of 5 s against the next moved the ratio by fifteen points either way; here each window of
//! one fleet sits between two of the other's, so what slows the machine for a few seconds
//! slows both alike.
//!
//! The first [`SETTLE`] of each window is left out: the other fleet's exporters are still
//! sending the records of the end of its window (they linger up to 200 ms), and an
//! exporting fleet's own exporters start from an empty queue. What is measured is what each
//! fleet decides, and what its daemons spend in CPU, in the rest of its windows.
use super::{
    CLIENTS_PER_HOST, HOSTS, Host, client, cpu_s, drained, lags_ms, pct, roles_since, spread,
    sum_roles,
};

use std::{
    path::Path,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

/// A window, the part of it left out at its start, and the rest.
const WINDOW: Duration = Duration::from_millis(1500);
const SETTLE: Duration = Duration::from_millis(300);
/// The measured part of a window.
const MEASURED: Duration = Duration::from_millis(1200);
const OFF: usize = 0;
const ON: usize = 1;
const STOP: usize = 2;

/// Whose turn it is to decide: [`OFF`], [`ON`] or [`STOP`].
struct Turn {
    now: AtomicUsize,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Turn {
    fn set(&self, fleet: usize) {
        let _g = self.lock.lock().unwrap();
        self.now.store(fleet, Ordering::SeqCst);
        self.changed.notify_all();
    }

    /// Waits for `fleet`'s turn; false once stopped.
    fn wait_for(&self, fleet: usize) -> bool {
        let mut g = self.lock.lock().unwrap();
        loop {
            match self.now.load(Ordering::SeqCst) {
                STOP => return false,
                n if n == fleet => return true,
                _ => g = self.changed.wait(g).unwrap(),
            }
        }
    }

    fn is(&self, fleet: usize) -> bool {
        self.now.load(Ordering::Relaxed) == fleet
    }
}

/// What the two fleets did in their windows.
pub(super) struct Paired {
    windows: usize,
    /// Per fleet ([`OFF`], [`ON`]): decisions and CPU seconds of its daemons in each
    /// window's measured part.
    decided: [Vec<u64>; 2],
    cpu: [Vec<f64>; 2],
    /// Per fleet: CPU seconds of its audit writers, exporters and the rest, over the
    /// measured parts of its windows (`sum_roles`).
    roles: [[f64; 3]; 2],
    lags: Vec<u64>,
    /// Dropped from the exporting fleet's copies, both sinks.
    dropped: u64,
}

/// Both fleets, `windows` windows each, in turn; the exporting one sends to `sinks`, its
/// OTLP receiver writing to `otlp_out`.
pub(super) fn run(dir: &Path, sinks: &[String], otlp_out: &Path, windows: usize) -> Paired {
    let fleets = [
        (0..HOSTS)
            .map(|i| Host::start(&dir.join("off"), i, &[]))
            .collect::<Vec<_>>(),
        (0..HOSTS)
            .map(|i| Host::start(&dir.join("on"), i, sinks))
            .collect(),
    ];
    let turn = Arc::new(Turn {
        now: AtomicUsize::new(OFF),
        lock: Mutex::new(()),
        changed: Condvar::new(),
    });
    let done = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let mut clients = Vec::new();
    for (fleet, hosts) in fleets.iter().enumerate() {
        for i in 0..HOSTS * CLIENTS_PER_HOST {
            let sock = hosts[i % HOSTS].socket.clone();
            let (turn, done) = (turn.clone(), done.clone());
            clients.push(std::thread::spawn(move || {
                client(&sock, &format!("f{fleet}c{i}"), |decide| {
                    while turn.wait_for(fleet) {
                        while turn.is(fleet) {
                            decide();
                            done[fleet].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }));
        }
    }
    let mut p = Paired {
        windows,
        decided: [Vec::new(), Vec::new()],
        cpu: [Vec::new(), Vec::new()],
        roles: [[0.0; 3]; 2],
        lags: Vec::new(),
        dropped: 0,
    };
    let cpu_of = |fleet: usize| {
        fleets[fleet]
            .iter()
            .map(|h| cpu_s(h.proc.0.id()))
            .sum::<f64>()
    };
    for w in 0..2 * windows {
        let fleet = w % 2;
        turn.set(fleet);
        std::thread::sleep(SETTLE);
        let (n0, c0, r0, t0) = (
            done[fleet].load(Ordering::Relaxed),
            cpu_of(fleet),
            sum_roles(&fleets[fleet]),
            Instant::now(),
        );
        std::thread::sleep(MEASURED);
        let n = done[fleet].load(Ordering::Relaxed) - n0;
        // Decisions per second of the measured part, as a count over its nominal length.
        let scale = MEASURED.as_secs_f64() / t0.elapsed().as_secs_f64();
        p.decided[fleet].push((n as f64 * scale) as u64);
        p.cpu[fleet].push(cpu_of(fleet) - c0);
        for (sum, spent) in p.roles[fleet]
            .iter_mut()
            .zip(roles_since(&fleets[fleet], r0))
        {
            *sum += spent;
        }
    }
    turn.set(STOP);
    for c in clients {
        c.join().unwrap();
    }
    p.dropped = drained(&fleets[ON]).1;
    p.lags = lags_ms(&super::export_sinks::received(otlp_out));
    for hosts in fleets {
        for h in hosts {
            h.stop();
        }
    }
    p
}

impl Paired {
    pub(super) fn print(&mut self) {
        let secs = MEASURED.as_secs_f64();
        let rate =
            |f: usize| self.decided[f].iter().sum::<u64>() as f64 / (secs * self.windows as f64);
        // `cpu` seconds of fleet `f`'s measured parts, a decision of them, in µs.
        let per_decision =
            |f: usize, cpu: f64| 1e6 * cpu / self.decided[f].iter().sum::<u64>().max(1) as f64;
        let cpu_us = |f: usize| per_decision(f, self.cpu[f].iter().sum());
        let (off, on) = (rate(OFF), rate(ON));
        // Each window of the exporting fleet against the mean of the windows either side of it.
        let mut ratios: Vec<f64> = (0..self.windows)
            .map(|i| {
                let before = self.decided[OFF][i] as f64;
                let after = self.decided[OFF].get(i + 1).map_or(before, |n| *n as f64);
                100.0 * self.decided[ON][i] as f64 / f64::midpoint(before, after).max(1.0)
            })
            .collect();
        let (median, least, most) = spread(&mut ratios);
        println!(
            "  paired, export off and on (OTLP/HTTP + syslog TCP) in turn, {} windows of {} ms each (the first {} ms of each left out):",
            self.windows,
            WINDOW.as_millis(),
            SETTLE.as_millis()
        );
        println!(
            "      export off {off:.0} decisions/s, on {on:.0} ({:.1}% of off); window by window, median {median:.1}% ({least:.1}-{most:.1}%)",
            100.0 * on / off.max(1.0)
        );
        println!(
            "      daemons' CPU a decision: off {:.1} us, on {:.1} us ({:+.1} us); export lag p50 {} ms p99 {} ms ({} records); dropped {}",
            cpu_us(OFF),
            cpu_us(ON),
            cpu_us(ON) - cpu_us(OFF),
            pct(&mut self.lags, 0.5),
            pct(&mut self.lags, 0.99),
            self.lags.len(),
            self.dropped
        );
        let role_us = |f: usize, role: usize| per_decision(f, self.roles[f][role]);
        println!(
            "      of which, a decision, off → on: audit writer {:.2} → {:.2} us, exporters {:.2} us, the rest {:.2} → {:.2} us",
            role_us(OFF, 0),
            role_us(ON, 0),
            role_us(ON, 1),
            role_us(OFF, 2),
            role_us(ON, 2)
        );
    }
}
