//! What one guest boot printed on its console, read line by line, and the per-kernel table
//! `cargo xtask test` (and `cargo xtask bench`) ends its guest stage with. The guest's `init` (vm.rs) marks its stages
//! (`STAGE <name>`), prints `gatewayd doctor --json` (`DOCTOR <json>`), the test harness's
//! output (with the tests' `KERNEL-NOTE` lines), `GUEST-EXIT <code>` and the benchmarks
//! (`BENCH <name> bare|under <agent output>`, and the sessions bench's own `BENCH` lines).
use std::time::Instant;

use super::Suite;
use crate::{kernels::GuestKernel, sessions_bench, util};

/// One benchmark's rounds: in each, a new bare process and a new agent under gatewayd ran
/// batches in turn (`gw-testagent turns`), and each printed its batches' ns per operation.
#[derive(Debug)]
pub(super) struct Bench {
    pub name: String,
    /// Per round, the bare process's batches, in order (none when its line failed).
    pub bare: Vec<Vec<f64>>,
    /// Per round, the agent's batches, in order (batch i ran between bare batches i and i+1).
    pub under: Vec<Vec<f64>>,
}

/// The middle value (the mean of the two middle ones of an even count).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let upper = *v.get(v.len() / 2)?;
    Some(if v.len().is_multiple_of(2) {
        f64::midpoint(v[v.len() / 2 - 1], upper)
    } else {
        upper
    })
}

impl Bench {
    /// Each round's ratio: the median of its agent batches, each against the mean of the
    /// bare batches just before and after it (the last one against the one before): seconds
    /// apart at most, so the emulated CPU's drift meets both alike. A round is one pair of
    /// processes: under TCG a process can run a few percent faster or slower than another
    /// for its whole life, so many short rounds say more than a few long ones.
    fn round_ratios(&self) -> Vec<f64> {
        let mut ratios = Vec::new();
        for (bare, under) in self.bare.iter().zip(&self.under) {
            let mut turns = Vec::new();
            for (i, u) in under.iter().enumerate() {
                let Some(before) = bare.get(i) else { break };
                let after = bare.get(i + 1).unwrap_or(before);
                turns.push(u / f64::midpoint(*before, *after));
            }
            ratios.extend(median(turns));
        }
        ratios
    }

    /// (median of the rounds' ratios, number of rounds, best agent batch / best bare batch).
    pub(super) fn ratios(&self) -> Option<(f64, usize, f64)> {
        let r = self.round_ratios();
        let n = r.len();
        let best = |v: &[Vec<f64>]| v.iter().flatten().copied().reduce(f64::min);
        Some((median(r)?, n, best(&self.under)? / best(&self.bare)?))
    }
}

/// One guest boot's results.
#[derive(Debug)]
pub(super) struct GuestRun {
    pub kernel: GuestKernel,
    /// What the guest ran after `doctor`.
    suite: Suite,
    /// `uname -r` in the guest.
    pub release: Option<String>,
    pub doctor: Option<serde_json::Value>,
    pub passed: u32,
    /// Failed and ignored tests (an ignored kernel test is a failure here).
    pub failed: u32,
    result_line: bool,
    pub failures: Vec<String>,
    pub notes: Vec<String>,
    pub bench: Vec<Bench>,
    /// The sessions bench's `BENCH` lines (prefix stripped), for `sessions_bench::Results`.
    pub sessions: Vec<String>,
    guest_exit: Option<i32>,
    stage: (String, Instant),
    started: Instant,
    /// Seconds from boot to the console closing.
    seconds: f64,
    /// Seconds a first boot lasted that never reached init (the suite then ran on a second).
    first_boot_failed: Option<f64>,
}

impl GuestRun {
    pub(super) fn new(kernel: GuestKernel, suite: Suite) -> GuestRun {
        GuestRun {
            kernel,
            suite,
            release: None,
            doctor: None,
            passed: 0,
            failed: 0,
            result_line: false,
            failures: Vec::new(),
            notes: Vec::new(),
            bench: Vec::new(),
            sessions: Vec::new(),
            guest_exit: None,
            stage: ("boot".into(), Instant::now()),
            started: Instant::now(),
            seconds: 0.0,
            first_boot_failed: None,
        }
    }

    /// Whether the guest's init ran (its first line came).
    pub(super) fn reached_init(&self) -> bool {
        self.release.is_some()
    }

    pub(super) fn seconds(&self) -> f64 {
        self.seconds
    }

    /// This run is a second boot; the first ended after `seconds` without reaching init.
    pub(super) fn set_first_boot_failed(&mut self, seconds: f64) {
        self.first_boot_failed = Some(seconds);
    }

    fn end_stage(&mut self, next: &str) {
        let (name, t0) = std::mem::replace(&mut self.stage, (next.into(), Instant::now()));
        util::time(&format!("guest {}: {name}", self.kernel.name), t0);
    }

    /// Takes one console line.
    pub(super) fn take_line(&mut self, line: &str) {
        if let Some(next) = line.strip_prefix("STAGE ") {
            self.end_stage(next.trim());
        } else if let Some(at) = line.find("GUEST kernel ") {
            // The first line after the firmware's, behind its terminal escapes.
            let rest = &line[at + "GUEST kernel ".len()..];
            self.release = rest.split(';').next().map(str::to_string);
        } else if let Some(json) = line.strip_prefix("DOCTOR ") {
            self.doctor = serde_json::from_str(json).ok();
        } else if let Some(at) = line.find("KERNEL-NOTE ") {
            // Written by the test itself, possibly after the harness's `test NAME ... `.
            self.notes
                .push(line[at + "KERNEL-NOTE ".len()..].to_string());
        } else if let Some(code) = line.strip_prefix("GUEST-EXIT ") {
            self.guest_exit = code.trim().parse().ok();
        } else if let Some(rest) = line.strip_prefix("BENCH ") {
            if sessions_bench::is_line(rest) {
                self.sessions.push(rest.to_string());
            } else {
                self.take_bench(rest);
            }
        } else if let Some((passed, failed, ignored)) = util::test_result_counts(line) {
            // The harness's summary, e.g. "test result: ok. 12 passed; 0 failed; 0 ignored; ..."
            self.result_line = true;
            self.passed += passed;
            self.failed += failed + ignored;
        } else if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            self.failures.push(name.to_string());
        }
    }

    fn take_bench(&mut self, rest: &str) {
        let mut parts = rest.splitn(3, ' ');
        let (Some(name), Some(mode)) = (parts.next(), parts.next()) else {
            return;
        };
        // Only turns that all succeeded (`OK ...: N N N`) give figures.
        let figures = parts
            .next()
            .filter(|out| out.starts_with("OK "))
            .and_then(|out| out.rsplit_once(": "))
            .map(|(_, list)| {
                list.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect::<Vec<f64>>()
            });
        let b = if let Some(b) = self.bench.iter_mut().find(|b| b.name == name) {
            b
        } else {
            self.bench.push(Bench {
                name: name.into(),
                bare: Vec::new(),
                under: Vec::new(),
            });
            self.bench.last_mut().expect("just pushed")
        };
        // A failed line is an empty round, so the rounds of both sides stay paired.
        let f = figures.unwrap_or_default();
        if mode == "bare" {
            b.bare.push(f);
        } else {
            b.under.push(f);
        }
    }

    /// The console closed: the last stage ends.
    pub(super) fn finish(&mut self) {
        self.end_stage("");
        self.seconds = self.started.elapsed().as_secs_f64();
    }

    /// The tier doctor reported in the guest.
    fn tier(&self) -> Option<u64> {
        self.doctor.as_ref()?["tier"].as_u64()
    }

    /// (attached, known) kernel programs in doctor's probe.
    fn programs(&self) -> Option<(usize, usize)> {
        let rows = self.doctor.as_ref()?.as_object()?;
        let progs: Vec<_> = rows
            .iter()
            .filter(|(k, _)| {
                ["lsm/", "cgroup/", "cgroup_skb/"]
                    .iter()
                    .any(|p| k.starts_with(p))
            })
            .collect();
        let ok = progs.iter().filter(|(_, v)| v["ok"] == true).count();
        Some((ok, progs.len()))
    }

    /// Whether this kernel passed: for the tests, every test, at least one, and the guest
    /// finished the suite; for the bench, every benchmark has its figures.
    pub(super) fn verdict(&self) -> Result<(), String> {
        match self.suite {
            Suite::Tests => self.tests_verdict(),
            Suite::Bench => self.bench_verdict(),
        }
    }

    fn tests_verdict(&self) -> Result<(), String> {
        match self.guest_exit {
            None => return Err("the guest did not finish the suite".into()),
            Some(code) if code != 0 || self.failed > 0 => {
                return Err(format!(
                    "{} test(s) failed (exit {code}): {}",
                    self.failed,
                    self.failures.join(", ")
                ));
            }
            _ => {}
        }
        if !self.result_line || self.passed == 0 {
            return Err("the guest ran no tests".into());
        }
        Ok(())
    }

    fn bench_verdict(&self) -> Result<(), String> {
        if self.bench.is_empty() {
            return Err("no benchmark figures".into());
        }
        if let Some(b) = self.bench.iter().find(|b| b.ratios().is_none()) {
            return Err(format!("benchmark {} gave no figure", b.name));
        }
        if let Some(m) = sessions_bench::Results::from_lines(&self.sessions).missing() {
            return Err(format!("the sessions bench did not measure {m}"));
        }
        Ok(())
    }
}

/// The per-kernel table: results, tier, programs, features, notes and benchmark figures.
pub(super) fn print(runs: &[GuestRun]) {
    println!("\n=== guest suite per kernel ===");
    println!(
        "{:<6} {:<28} {:<4} {:<8} {:<7} {:<7} {:>7}  verdict",
        "kernel", "release", "tier", "programs", "passed", "failed", "time"
    );
    let opt = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    for r in runs {
        println!(
            "{:<6} {:<28} {:<4} {:<8} {:<7} {:<7} {:>5.0} s  {}",
            r.kernel.name,
            opt(r.release.clone()),
            opt(r.tier().map(|t| t.to_string())),
            opt(r.programs().map(|(ok, all)| format!("{ok}/{all}"))),
            r.passed,
            r.failed,
            r.seconds,
            r.verdict()
                .map_or_else(|e| format!("FAILED: {e}"), |()| "ok".into()),
        );
    }
    for r in runs {
        if let Some(s) = r.first_boot_failed {
            println!(
                "  {:<6} booted twice: the first boot ended after {s:.1} s without reaching \
                 init (see target/vm/qemu-{}.log)",
                r.kernel.name, r.kernel.name
            );
        }
    }
    print_features_and_notes(runs);
    if runs.iter().any(|r| r.suite == Suite::Bench) {
        print_bench(runs);
        for r in runs {
            sessions_bench::Results::from_lines(&r.sessions)
                .print(&format!("guest {} (tier 1, TCG)", r.kernel.name));
        }
    }
}

/// Each kernel's features (`gatewayd doctor --json`) and its tests' KERNEL-NOTE lines.
fn print_features_and_notes(runs: &[GuestRun]) {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    println!("features (gatewayd doctor --json):");
    for r in runs {
        let f = r
            .doctor
            .as_ref()
            .and_then(|d| d["features"].as_object())
            .map(|f| {
                f.iter()
                    .filter(|(k, _)| *k != "kernel_release")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            });
        println!("  {:<6} {}", r.kernel.name, opt(f));
    }
    println!("what a test asserted where a kernel lacks a feature (KERNEL-NOTE):");
    for r in runs {
        if r.notes.is_empty() {
            println!(
                "  {:<6} (none: every feature-dependent test ran as such)",
                r.kernel.name
            );
        }
        for n in &r.notes {
            println!("  {:<6} {n}", r.kernel.name);
        }
    }
}

/// Each kernel's bench rounds: the median ratio and the best batches.
fn print_bench(runs: &[GuestRun]) {
    println!(
        "bench (in each round a new bare process and a new agent under gatewayd take turns, \
         batch by batch; a round's ratio is the median of its agent batches against the bare \
         batches around each, which TCG's drift meets alike; shown: the median round, and \
         best agent batch / best bare batch, ns per operation; `/filtered`: the bare side \
         runs under a seccomp filter that allows everything):"
    );
    for r in runs {
        for b in &r.bench {
            let best = |v: &[Vec<f64>]| {
                v.iter()
                    .flatten()
                    .copied()
                    .reduce(f64::min)
                    .map_or_else(|| "?".into(), |x| format!("{x:.0}"))
            };
            println!(
                "  {:<6} {:<16} ratio {}  (best bare {} ns, best under {} ns)",
                r.kernel.name,
                b.name,
                b.ratios().map_or_else(
                    || "?".into(),
                    |(median, n, best)| format!(
                        "x{median:.3} (median of {n} rounds; best/best x{best:.3})"
                    )
                ),
                best(&b.bare),
                best(&b.under),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(suite: Suite, console: &str) -> GuestRun {
        let mut r = GuestRun::new(
            GuestKernel {
                name: "6.1".into(),
                source: "linux-image-6.1.0-57-cloud-amd64".into(),
                vmlinuz: "/nonexistent".into(),
            },
            suite,
        );
        for line in console.lines() {
            r.take_line(line);
        }
        r.finish();
        r
    }

    const PASSING: &str = "\u{1b}c\u{1b}[?7lGUEST kernel 6.1.0-57-cloud-amd64; lsm=bpf
STAGE doctor
DOCTOR {\"tier\":1,\"lsm/file_open\":{\"ok\":true},\"cgroup/connect4\":{\"ok\":false},\"cgroup_skb/ingress\":{\"ok\":true},\"kernel\":{\"ok\":true}}
STAGE tests
test features::x ... KERNEL-NOTE cgroup/connect_unix absent
ok
test result: ok. 22 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1s
GUEST-EXIT 0
STAGE poweroff";

    const BENCHED: &str = "\u{1b}c\u{1b}[?7lGUEST kernel 6.1.0-57-cloud-amd64; lsm=bpf
STAGE doctor
DOCTOR {\"tier\":1}
STAGE bench
BENCH open() bare OK turns: 3 turns of 1000, ns each: 100 200 300
BENCH open() under OK turns: 3 turns of 1000, ns each: 165 300 330
BENCH open() bare OK turns: 3 turns of 1000, ns each: 100 100 100
BENCH open() under gatewayd: something went wrong
STAGE sessions bench
BENCH sessions 0 outside OK openbest: best of 20 batches of 1000, 100 ns each
BENCH sessions 1 outside OK openbest: best of 20 batches of 1000, 100 ns each
BENCH sessions 8 outside OK openbest: best of 20 batches of 1000, 101 ns each
BENCH sessions 32 outside OK openbest: best of 20 batches of 1000, 101 ns each
BENCH sessions 1 inside OK openbest: best of 20 batches of 1000, 150 ns each
BENCH sessions 32 inside OK openbest: best of 20 batches of 1000, 151 ns each
BENCH start {\"reason\":\"session_start\",\"detail\":{\"program_set\":{\"adopted\":true,\"open_ms\":1.5},\"startup_ms\":9.5}}
STAGE poweroff";

    #[test]
    fn reads_a_passing_guest() {
        let r = run_of(Suite::Tests, PASSING);
        assert_eq!(r.release.as_deref(), Some("6.1.0-57-cloud-amd64"));
        assert_eq!(r.tier(), Some(1));
        assert_eq!(r.programs(), Some((2, 3)));
        assert_eq!((r.passed, r.failed), (22, 0));
        assert_eq!(r.notes, ["cgroup/connect_unix absent"]);
        assert_eq!(r.verdict(), Ok(()));
        // The same console read as a bench: it measured nothing.
        assert!(run_of(Suite::Bench, PASSING).verdict().is_err());
    }

    #[test]
    fn reads_a_benched_guest() {
        let r = run_of(Suite::Bench, BENCHED);
        assert_eq!(r.bench.len(), 1, "the sessions bench's lines are its own");
        assert_eq!(r.sessions.len(), 7);
        assert_eq!(r.bench[0].name, "open()");
        assert_eq!(
            r.bench[0].bare,
            [[100.0, 200.0, 300.0], [100.0, 100.0, 100.0]]
        );
        assert_eq!(r.bench[0].under, [vec![165.0, 300.0, 330.0], vec![]]);
        // 165 / 150, 300 / 250, 330 / 300: the one round with both sides.
        let (median, n, best) = r.bench[0].ratios().unwrap();
        assert_eq!(n, 1);
        assert!((median - 1.1).abs() < 1e-9, "{median}");
        assert!((best - 1.65).abs() < 1e-9, "{best}");
        assert_eq!(r.verdict(), Ok(()));
        // Read as the tests: none ran.
        assert!(run_of(Suite::Tests, BENCHED).verdict().is_err());
    }

    #[test]
    fn a_failed_ignored_or_unfinished_guest_fails() {
        let failed = PASSING.replace(
            "ok. 22 passed; 0 failed; 0 ignored",
            "FAILED. 21 passed; 1 failed; 0 ignored",
        );
        assert!(run_of(Suite::Tests, &failed).verdict().is_err());
        let ignored = PASSING.replace("0 ignored", "1 ignored");
        assert!(run_of(Suite::Tests, &ignored).verdict().is_err());
        let cut = &PASSING[..PASSING.find("GUEST-EXIT").unwrap()];
        assert!(run_of(Suite::Tests, cut).verdict().is_err());
    }

    #[test]
    fn a_bench_without_a_figure_fails() {
        let no_under = BENCHED.replace("under OK", "under FAIL");
        assert!(run_of(Suite::Bench, &no_under).verdict().is_err());
        let no_inside_at_32 = BENCHED.replace("32 inside OK", "32 inside FAIL");
        assert!(run_of(Suite::Bench, &no_inside_at_32).verdict().is_err());
    }
}
