//! The QEMU guests: each Debian kernel line (`kernels`, BPF LSM active) booted under TCG with
//! one busybox initramfs carrying gatewayd and the test agent, and, for the tests
//! ([`Suite::Tests`], the kernels side by side), the privileged test binary, which runs as
//! PID 1's child with `GATEWAYD_EXPECT_TIER=1` (BPF LSM must work there); for the bench
//! ([`Suite::Bench`], one kernel after the other), the kernel-layer benchmarks (the last one,
//! many sessions sharing one program set, is `sessions_bench`). Results are read back from
//! the serial console (`report`) and printed per kernel.
mod image;
mod report;

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, bail};

use crate::{
    kernels::GuestKernel,
    util::{self, Bins, Env, workspace_root},
};
use report::GuestRun;

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp; mount -t securityfs securityfs /sys/kernel/security
mkdir -p /dev/pts; mount -t devpts devpts /dev/pts
mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t bpf bpf /sys/fs/bpf
ip link set lo up
# The socket diagnostics for TCP (the egress proxy's), modules in Debian's kernels.
for m in inet_diag tcp_diag; do insmod /modules/$(uname -r)/$m.ko || echo "GUEST insmod $m failed"; done
# After a verbose boot, the console carries what `quiet` lets through (errors and worse).
dmesg -n 4
echo "GUEST kernel $(uname -r); lsm=$(cat /sys/kernel/security/lsm)"
export GATEWAYD_EXPECT_TIER=1 GATEWAYD_BIN=/gatewayd GW_TESTAGENT=/gw-testagent GW_ESCAPE=/gw-escape HOME=/root PATH=/bin TMPDIR=/tmp GATEWAYD_PY_REQUESTS=/py-requests
mkdir -p /root
# The sys_exit tracepoint held with two probes for the whole run. Under TCG with two vCPUs,
# the kernel's live text patching (text_poke_bp) races with the other vCPU ("Oops: int3" in
# syscall_exit_to_user_mode_prepare, a QEMU cross-modifying-code race, not seen on real
# CPUs): the tracepoint's static key flips when its first probe comes and its last goes, and
# its static call is repointed when it goes from one probe to two and back, as
# `raw_tp/sys_exit` does with a host's first session and after its last. The trace event
# `raw_syscalls/sys_exit`, enabled (with tracing off: nothing is written) in the top
# instance and in one more, is two probes: sessions then take the tracepoint from two probes
# to three and back, which patches nothing. Every syscall of the guest takes the traced
# exit path, the bare processes of the benches as much as the agents.
# The kernel patches its text for both holds; it does so with every vCPU but the first
# offline, so that no other vCPU runs the text being patched, then brings them back.
for c in /sys/devices/system/cpu/cpu[1-9]*/online; do echo 0 > $c || echo "GUEST $c stays online"; done
echo "GUEST cpus online while the holds are set: $(cat /sys/devices/system/cpu/online)"
mount -t tracefs tracefs /sys/kernel/tracing
T=/sys/kernel/tracing
mkdir -p $T/instances/hold
for t in $T $T/instances/hold; do
  { echo 0 > $t/tracing_on && echo 1 > $t/events/raw_syscalls/sys_exit/enable; } || echo "GUEST the sys_exit tracepoint is not held ($t)"
done
# The same for perf_sched_events, whose jump labels sit in __schedule ("Oops: int3" in
# __schedule on the idle task, during the escape suite, and once while this hold itself
# was set): a per-task perf event held for the guest's whole life keeps the key on, so the
# probes' and the suite's perf_event_open only move its count. Both holds come before
# `doctor`.
# (A child of this shell that never ends: every `wait` below names the jobs it waits for.)
/gw-testagent holdperf &
held=$!; sleep 1
ls -l /proc/$held/fd 2>/dev/null | grep -q perf_event || echo "GUEST perf_sched_events is not held"
# And inet_ehashfn's: the first lookup of an established TCP socket draws its secret once
# (`net_get_random_once`) and a work item then patches that static key ("Oops: int3" in
# inet_ehashfn under `gatewayd doctor`'s sock_diag query, 6.12, 2026-12-07). `doctor` makes
# that first lookup here, with the other vCPUs offline, and the work has a second to run.
/gatewayd doctor --json > /dev/null 2>&1; sleep 1
for c in /sys/devices/system/cpu/cpu[1-9]*/online; do echo 1 > $c || echo "GUEST $c stays offline"; done
echo "GUEST cpus online: $(cat /sys/devices/system/cpu/online)"
echo "STAGE doctor"
echo "DOCTOR $(/gatewayd doctor --json)"
"#;

/// The privileged suite, after `doctor` ([`Suite::Tests`]).
const TESTS: &str = r#"echo "STAGE tests"
/privileged --test-threads=1 GUEST_TESTS 2>&1
echo "GUEST-EXIT $?"
"#;

/// The kernel-layer benchmarks, after `doctor` ([`Suite::Bench`]); the sessions bench
/// ([`crate::sessions_bench::GUEST_SCRIPT`]) follows.
const BENCH: &str = r#"echo "STAGE bench"
# Kernel-layer cost at tier 1: a bare process and the agent under gatewayd (a policy that
# protects one file, allows loopback egress) take turns, batch by batch, through two FIFOs
# (`gw-testagent turns`); `report` reads `BENCH <name> bare|under <agent output line>` and sets each
# agent batch against the bare batches around it: under TCG the emulated CPU's speed drifts
# by tens of percent within seconds, and only figures taken that close together compare.
# Each round is a new pair of processes (a process can run a few percent off another for its
# whole life under TCG): `turns NAME LEAD ROUNDS OP TARGET N K`.
mkdir -p /tmp/bench/a/b/c/d && echo x > /tmp/bench/a/b/c/d/f && echo s > /tmp/bench/secret
echo '{"version":1,"kernel":"require","sandbox":{"protected":["/tmp/bench/secret"]},"network":{"egress":[{"cidr":"127.0.0.1/32"}]}}' > /tmp/bench/p.json
# No egress at all: a connect to loopback is let through only as the session's own listener.
echo '{"version":1,"kernel":"require","sandbox":{"protected":["/tmp/bench/secret"]}}' > /tmp/bench/p-own.json
policy=/tmp/bench/p.json
mkfifo /tmp/bench/turn-a /tmp/bench/turn-b
turns() {
  name=$1; lead=$2; rounds=$3; shift 3
  round=0
  while [ $round -lt $rounds ]; do
    round=$((round+1))
    timeout 600 /gatewayd run --user root --policy $policy --audit /tmp/bench/a.jsonl -- /gw-testagent turns "$@" follow /tmp/bench/turn-a /tmp/bench/turn-b 2>/dev/null | sed "s|^|BENCH $name under |" &
    under=$!
    timeout 600 /gw-testagent turns "$@" $lead /tmp/bench/turn-a /tmp/bench/turn-b | sed "s|^|BENCH $name bare |"
    wait $under
  done
}
# open() of a 6-deep path: the BPF LSM file check.
turns "open()" lead 30 open /tmp/bench/a/b/c/d/f 1000 6
# The same, the bare side under a seccomp filter that allows everything: the agent's own
# filter puts each syscall on the kernel's slower entry path, and this leaves that out.
turns "open()/filtered" lead-filtered 30 open /tmp/bench/a/b/c/d/f 1000 6
# connect() to a loopback port where nothing listens (refused both ways): the cgroup
# connect4 program, the egress allowlist allowing it.
turns "connect()" lead 20 connect 127.0.0.1:9 200 6
# connect() to a listener of the process's own on loopback, accepted and closed: under
# gatewayd, with no egress rule, connect4 finds the listener and reads its session's mark
# (docs/KERNEL.md, "The session's own servers").
policy=/tmp/bench/p-own.json
turns "connect()/own-listener" lead 10 connect-own 127.0.0.1 100 6
policy=/tmp/bench/p.json
# fork, exec and wait of busybox `true`: bprm_check_security, mmap_file and file_open on
# the binary, in a session without an exec allowlist.
turns "exec()" lead 10 exec /bin/true 20 6
"#;

const POWEROFF: &str = "echo \"STAGE poweroff\"\npoweroff -f\n";

/// What a guest boot runs after `doctor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suite {
    /// The privileged suite (`cargo xtask test`, `cargo xtask vm`). The kernels boot side by
    /// side: each guest runs its tests one at a time (in `cargo xtask test`, in the
    /// background of the host's stages: [`Background`]).
    Tests,
    /// The kernel-layer benchmarks (`cargo xtask bench`): one kernel after the other, with
    /// nothing beside it.
    Bench,
}

impl Suite {
    /// The guest's whole init script.
    fn init_script(self) -> String {
        let after_doctor = match self {
            // `GATEWAYD_GUEST_TESTS=NAME`: only the tests whose names hold NAME (a
            // developer's shortcut; `cargo xtask test` runs them all).
            Suite::Tests => TESTS.replace(
                "GUEST_TESTS",
                &std::env::var("GATEWAYD_GUEST_TESTS").unwrap_or_default(),
            ),
            Suite::Bench => format!("{BENCH}{}", crate::sessions_bench::GUEST_SCRIPT),
        };
        format!("{INIT}{after_doctor}{POWEROFF}")
    }
}

/// Guest results, over every kernel booted.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub passed: u32,
    pub failed: u32,
}

/// Whether a boot's console is printed as it runs, or only kept in its file (a boot in the
/// background, under `nice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shown {
    Live,
    Kept,
}

/// `kernel`'s log of one kind in `work`: `console` (what its console printed) or `qemu`
/// (QEMU's resets and guest errors).
fn log_file(work: &Path, kind: &str, kernel: &GuestKernel) -> PathBuf {
    work.join(format!(
        "{kind}-{}.log",
        kernel.name.replace(['/', ' '], "_")
    ))
}

/// How much the guest kernel says on its console.
#[derive(Clone, Copy, PartialEq)]
enum Console {
    /// `quiet`: only the suite's own lines (and any panic).
    Quiet,
    /// Every kernel message from the earliest point (`earlyprintk`), for a boot that must be
    /// understood.
    Verbose,
}

/// Boots `kernel` with `initrd` and reads the suite's results off its console (also kept in
/// `target/vm/console-<kernel>.log`). QEMU logs CPU resets and guest errors (a triple fault
/// among them) to `target/vm/qemu-<kernel>.log`.
fn boot(
    kernel: &GuestKernel,
    suite: Suite,
    initrd: &Path,
    work: &Path,
    (console, shown): (Console, Shown),
) -> anyhow::Result<GuestRun> {
    if shown == Shown::Live {
        println!(
            ">>> QEMU guest suite, kernel {} ({}), console below",
            kernel.name, kernel.source
        );
    }
    let qemu_log = log_file(work, "qemu", kernel);
    let append = match console {
        Console::Quiet => "console=ttyS0 panic=-1 quiet",
        Console::Verbose => "console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1",
    };
    let t0 = Instant::now();
    // The whole guest: boot, the suite and the bench. Under TCG with the host busy (builds
    // beside it) the suite alone took 754 s of 900 and the bench was cut off.
    // In the background, below the host's own stages.
    let mut run_qemu: Vec<&str> = match shown {
        Shown::Live => Vec::new(),
        Shown::Kept => vec!["nice", "-n", "10"],
    };
    run_qemu.extend(["timeout", "1800", "qemu-system-x86_64"]);
    let mut child = Command::new(run_qemu[0])
        .args(&run_qemu[1..])
        .args(["-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "2"])
        .args([
            "-nographic",
            "-no-reboot",
            "-d",
            "cpu_reset,guest_errors",
            "-D",
        ])
        .arg(&qemu_log)
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", append])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("qemu-system-x86_64")?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let mut run = GuestRun::new(kernel.clone(), suite);
    let mut log = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap_or_default().replace('\r', "");
        if shown == Shown::Live {
            println!("guest {}| {line}", kernel.name);
        }
        log.push_str(&line);
        log.push('\n');
        run.take_line(&line);
    }
    let status = child.wait()?;
    run.finish();
    std::fs::write(log_file(work, "console", kernel), &log)?;
    util::time(
        &format!("QEMU guest {} (all stages, {status})", kernel.name),
        t0,
    );
    Ok(run)
}

/// The last `n` lines of a log, if any, each after `prefix| `.
fn print_tail(path: &Path, n: usize, prefix: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    for l in &lines[lines.len().saturating_sub(n)..] {
        println!("{prefix}| {l}");
    }
}

/// Boots `kernel`, and once more with every kernel message if the first boot never reached
/// init. Nothing of the suite ran then (seen once in CI on 6.12: QEMU ended cleanly after
/// 5 s, no line from the kernel): not a result.
fn boot_until_init(
    kernel: &GuestKernel,
    suite: Suite,
    initrd: &Path,
    work: &Path,
    shown: Shown,
) -> anyhow::Result<GuestRun> {
    let run = boot(kernel, suite, initrd, work, (Console::Quiet, shown))?;
    if run.reached_init() {
        return Ok(run);
    }
    let first = run.seconds();
    println!(
        "NOTE guest {}: the kernel never reached init (QEMU ended after {first:.1} s); \
         QEMU's reset log follows, then a second boot with every kernel message",
        kernel.name
    );
    print_tail(&log_file(work, "qemu", kernel), 40, "qemu");
    let mut run = boot(kernel, suite, initrd, work, (Console::Verbose, shown))?;
    run.set_first_boot_failed(first);
    Ok(run)
}

/// The guest image for `suite` (`target/vm/initrd.cpio.gz`), and the directory its boots
/// keep their logs in.
fn image(
    env: &Env,
    bins: &Bins,
    kernels: &[GuestKernel],
    suite: Suite,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let t0 = Instant::now();
    let test_bin = match suite {
        Suite::Tests => Some(image::build_test_binary(env)?),
        Suite::Bench => None,
    };
    let work = workspace_root().join("target/vm");
    std::fs::create_dir_all(&work)?;
    let initrd = work.join("initrd.cpio.gz");
    image::initramfs(env, bins, suite, test_bin.as_deref(), kernels, &initrd)?;
    util::time("guest image (initramfs)", t0);
    Ok((initrd, work))
}

/// Boots every kernel: side by side for the tests (each guest runs its tests one at a
/// time), one after the other for the bench.
fn boot_all(
    kernels: &[GuestKernel],
    suite: Suite,
    initrd: &Path,
    work: &Path,
    shown: Shown,
) -> anyhow::Result<Vec<GuestRun>> {
    match suite {
        Suite::Tests => std::thread::scope(|scope| {
            let booting: Vec<_> = kernels
                .iter()
                .map(|k| scope.spawn(move || boot_until_init(k, suite, initrd, work, shown)))
                .collect();
            booting
                .into_iter()
                .map(|b| {
                    b.join()
                        .unwrap_or_else(|_| bail!("a guest's thread panicked"))
                })
                .collect()
        }),
        Suite::Bench => kernels
            .iter()
            .map(|k| boot_until_init(k, suite, initrd, work, shown))
            .collect(),
    }
}

/// Prints the results per kernel (with the end of the console of a kernel that failed when
/// it was not shown as it ran), and fails unless every kernel passed: for the tests, every
/// test (none skipped, none ignored, at least one ran); for the bench, every benchmark
/// figure.
fn conclude(runs: &[GuestRun], suite: Suite, work: &Path, shown: Shown) -> anyhow::Result<Summary> {
    report::print(runs);
    let mut s = Summary::default();
    let mut failed = Vec::new();
    for r in runs {
        s.passed += r.passed;
        s.failed += r.failed;
        if let Err(why) = r.verdict() {
            if shown == Shown::Kept {
                println!("=== the end of guest {}'s console ===", r.kernel.name);
                let console = log_file(work, "console", &r.kernel);
                print_tail(&console, 120, &format!("guest {}", r.kernel.name));
            }
            failed.push(format!("{}: {why}", r.kernel.name));
        }
    }
    if !failed.is_empty() {
        bail!(
            "guest {} failed on {} of {} kernel(s) (see target/vm/console-*.log):\n  {}",
            match suite {
                Suite::Tests => "suite",
                Suite::Bench => "bench",
            },
            failed.len(),
            runs.len(),
            failed.join("\n  ")
        );
    }
    Ok(s)
}

/// Builds the guest image once, boots every kernel with its console shown as it runs, and
/// concludes ([`conclude`]).
pub(crate) fn run_suite(
    env: &Env,
    bins: &Bins,
    kernels: &[GuestKernel],
    suite: Suite,
) -> anyhow::Result<Summary> {
    let (initrd, work) = image(env, bins, kernels, suite)?;
    let runs = boot_all(kernels, suite, &initrd, &work, Shown::Live)?;
    conclude(&runs, suite, &work, Shown::Live)
}

/// The test suite's guests, booting in the background while `cargo xtask test` runs the
/// host's stages: QEMU at a lower priority (`nice`), so the host's tests keep the CPU they
/// need and the guests take what is left; the consoles are kept in `target/vm/`, not shown.
pub(crate) struct Background {
    t0: Instant,
    work: PathBuf,
    booting: std::thread::JoinHandle<anyhow::Result<Vec<GuestRun>>>,
}

/// Builds the test image and starts the guests in the background ([`Background`]).
pub(crate) fn start_tests(
    env: &Env,
    bins: &Bins,
    kernels: &[GuestKernel],
) -> anyhow::Result<Background> {
    let (initrd, work) = image(env, bins, kernels, Suite::Tests)?;
    println!(
        ">>> QEMU guest suite in the background (kernels {}): its results come last",
        kernels
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let kernels = kernels.to_vec();
    let at = work.clone();
    let booting =
        std::thread::spawn(move || boot_all(&kernels, Suite::Tests, &initrd, &at, Shown::Kept));
    Ok(Background {
        t0: Instant::now(),
        work,
        booting,
    })
}

impl Background {
    /// Waits for every guest to end, and concludes ([`conclude`]).
    pub(crate) fn finish(self) -> anyhow::Result<Summary> {
        let runs = self
            .booting
            .join()
            .unwrap_or_else(|_| bail!("the guests' thread panicked"))?;
        util::time("QEMU guests (in the background, wall)", self.t0);
        conclude(&runs, Suite::Tests, &self.work, Shown::Kept)
    }
}
