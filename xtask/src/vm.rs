//! The QEMU guests: each Debian kernel line (`kernels`, BPF LSM active) booted under TCG with
//! one busybox initramfs carrying gatewayd and the test agent, and, for the tests
//! ([`Suite::Tests`], the kernels side by side), the privileged test binary, which runs as
//! PID 1's child with `GATEWAYD_EXPECT_TIER=1` (BPF LSM must work there); for the bench
//! ([`Suite::Bench`], one kernel after the other), the kernel-layer benchmarks (the last one,
//! many sessions sharing one program set, is `sessions_bench`). Results are read back from
//! the serial console (`report`) and printed per kernel.
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
    /// side: each guest runs its tests one at a time, so two take the host's two cores.
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

/// Builds the privileged test binary (release) and returns its path.
fn build_test_binary(env: &Env) -> anyhow::Result<PathBuf> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("test")
        .args(util::PRIVILEGED_TESTS)
        .args(["--no-run", "--message-format=json"])
        .current_dir(workspace_root())
        .env("PATH", env.path_var())
        .env_remove("GATEWAYD_EBPF_STUB")
        .stderr(Stdio::inherit())
        .output()
        .context("cargo test --no-run")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let messages = || {
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    };
    if !out.status.success() {
        // With JSON messages, the compiler's errors are on stdout: show them.
        for m in messages().filter(|v| v["reason"] == "compiler-message") {
            print!("{}", m["message"]["rendered"].as_str().unwrap_or(""));
        }
        bail!("building the privileged test binary failed");
    }
    messages()
        .filter(|v| v["target"]["name"] == "privileged")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo did not report the privileged test executable")
}

fn copy_with_libs(src: &Path, root: &Path, name: &str) -> anyhow::Result<()> {
    std::fs::copy(src, root.join(name)).with_context(|| format!("copy {}", src.display()))?;
    let ldd = Command::new("ldd").arg(src).output().context("ldd")?;
    for lib in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        let dest = root.join(lib.trim_start_matches('/'));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(lib, &dest).with_context(|| format!("copy {lib}"))?;
    }
    Ok(())
}

/// The inspected-egress test's server and clients (`egress_l7.rs`): Debian's Python with its
/// standard library (no tests, no GUI; each extension module with its libraries) for the
/// HTTPS server, `node`, and `git` with the helpers it runs from its exec path
/// (`git http-backend`, `git remote-https`).
fn copy_l7_tools(root: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(root.join("usr/bin"))?;
    copy_with_libs(Path::new("/usr/bin/python3"), root, "usr/bin/python3")?;
    let lib = "usr/lib/python3.11";
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tar -C / -cf - --exclude=__pycache__ --exclude='{lib}/test' --exclude='{lib}/idlelib' \
             --exclude='{lib}/tkinter' --exclude='{lib}/turtledemo' --exclude='{lib}/ensurepip' \
             --exclude='{lib}/lib2to3' --exclude='{lib}/config-*' {lib} | tar -C '{}' -xf -",
            root.display()
        ))
        .status()?;
    if !status.success() {
        bail!("copying Python's standard library failed");
    }
    let dynload = Path::new("/").join(lib).join("lib-dynload");
    for e in std::fs::read_dir(&dynload).context("lib-dynload")? {
        let path = e?.path();
        let rel = path.strip_prefix("/").context("absolute")?;
        copy_with_libs(&path, root, &rel.display().to_string())?;
    }
    // Node for the Node client, as the host has it (`setup` installs it).
    let node = util::which("node").context("node, for the inspected-egress test's Node client")?;
    copy_with_libs(&node, root, "bin/node")?;
    copy_with_libs(Path::new("/usr/bin/git"), root, "bin/git")?;
    std::fs::create_dir_all(root.join("usr/lib/git-core"))?;
    for helper in ["git-http-backend", "git-remote-http", "git-remote-https"] {
        let from = Path::new("/usr/lib/git-core").join(helper);
        copy_with_libs(&from, root, &format!("usr/lib/git-core/{helper}"))?;
    }
    // The commands git runs by name (a local clone's `git-upload-pack`), as Debian has them:
    // git itself, which takes its command from its name.
    for name in ["git-upload-pack", "git-receive-pack", "git-upload-archive"] {
        std::os::unix::fs::symlink("/bin/git", root.join("bin").join(name))?;
        std::os::unix::fs::symlink("/bin/git", root.join("usr/lib/git-core").join(name))?;
    }
    Ok(())
}

/// Python's `requests` and the packages it needs, and the OTLP definitions, from the venv
/// (`setup.rs`), into `/py-requests` (the inspected-egress test's Python client, the fleet
/// test's OTLP receiver; `GATEWAYD_PY_REQUESTS`).
fn copy_py_requests(site: &Path, root: &Path) -> anyhow::Result<()> {
    let to = root.join("py-requests");
    std::fs::create_dir_all(&to)?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tar -C '{}' -cf - --exclude=__pycache__ {} | tar -C '{}' -xf -",
            site.display(),
            crate::setup::PY_REQUESTS_PACKAGES.join(" "),
            to.display()
        ))
        .status()?;
    if !status.success() {
        bail!("copying Python's requests from {} failed", site.display());
    }
    Ok(())
}

/// The socket diagnostics modules for TCP (`inet_diag`, `tcp_diag`) of a Debian kernel
/// package, under `/modules/<release>/`, uncompressed (the init loads them): the egress
/// proxy needs them, and the guests have no module loader. A kernel given by path has none.
fn copy_diag_modules(kernel: &GuestKernel, root: &Path) -> anyhow::Result<()> {
    let Some(release) = kernel
        .vmlinuz
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
    else {
        return Ok(());
    };
    let Some(package) = kernel.vmlinuz.parent().and_then(Path::parent) else {
        return Ok(());
    };
    let from = package
        .join("lib/modules")
        .join(release)
        .join("kernel/net/ipv4");
    let to = root.join("modules").join(release);
    std::fs::create_dir_all(&to)?;
    for m in ["inet_diag.ko", "tcp_diag.ko"] {
        let xz = from.join(format!("{m}.xz"));
        if from.join(m).is_file() {
            std::fs::copy(from.join(m), to.join(m)).with_context(|| format!("copy {m}"))?;
        } else if xz.is_file() {
            // 6.12's are compressed, and busybox's insmod takes them plain.
            let out = Command::new("xz")
                .arg("-dc")
                .arg(&xz)
                .output()
                .context("xz")?;
            if !out.status.success() {
                bail!("xz -dc {}: {}", xz.display(), out.status);
            }
            std::fs::write(to.join(m), out.stdout)?;
        }
    }
    Ok(())
}

/// The guest's initramfs for `suite`; `test_bin` (the privileged test binary) for
/// [`Suite::Tests`].
fn initramfs(
    env: &Env,
    bins: &Bins,
    suite: Suite,
    test_bin: Option<&Path>,
    kernels: &[GuestKernel],
    out: &Path,
) -> anyhow::Result<()> {
    let root = out.with_extension("root");
    let _ = std::fs::remove_dir_all(&root);
    for d in ["bin", "proc", "sys", "dev", "tmp", "root"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    std::fs::copy(&env.busybox, root.join("bin/busybox"))?;
    std::fs::write(root.join("init"), suite.init_script())?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(root.join("init"), std::fs::Permissions::from_mode(0o755))?;
    copy_with_libs(&bins.gatewayd, &root, "gatewayd")?;
    copy_with_libs(&bins.testagent, &root, "gw-testagent")?;
    for k in kernels {
        copy_diag_modules(k, &root)?;
    }
    if let Some(test_bin) = test_bin {
        copy_test_tools(env, bins, test_bin, &root)?;
    }
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd '{}' && find . | cpio -o -H newc --quiet | gzip -1 > '{}'",
            root.display(),
            out.display()
        ))
        .status()?;
    if !status.success() {
        bail!("building the initramfs failed");
    }
    std::fs::remove_dir_all(&root)?;
    Ok(())
}

/// What the privileged suite needs beside gatewayd and the test agent: the test binary, the
/// escape tool, and the real programs some tests run.
fn copy_test_tools(env: &Env, bins: &Bins, test_bin: &Path, root: &Path) -> anyhow::Result<()> {
    copy_with_libs(&bins.escape, root, "gw-escape")?;
    copy_with_libs(test_bin, root, "privileged")?;
    // The job-control test (`terminal.rs`) runs the real bash, as a user would.
    copy_with_libs(Path::new("/bin/bash"), root, "bin/bash")?;
    // The egress-by-name test's HTTPS server and certificate (`openssl s_server`, `openssl
    // req`, which reads the configuration file) and its client (`curl`).
    copy_with_libs(Path::new("/usr/bin/openssl"), root, "bin/openssl")?;
    copy_with_libs(Path::new("/usr/bin/curl"), root, "bin/curl")?;
    copy_l7_tools(root)?;
    copy_py_requests(&env.py_requests, root)?;
    for conf in ["etc/ssl/openssl.cnf", "usr/lib/ssl/openssl.cnf"] {
        std::fs::create_dir_all(root.join(conf).parent().context("a parent")?)?;
        std::fs::copy("/etc/ssl/openssl.cnf", root.join(conf)).context("copy openssl.cnf")?;
    }
    Ok(())
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
    console: Console,
) -> anyhow::Result<GuestRun> {
    println!(
        ">>> QEMU guest suite, kernel {} ({}), console below",
        kernel.name, kernel.source
    );
    let name = kernel.name.replace(['/', ' '], "_");
    let qemu_log = work.join(format!("qemu-{name}.log"));
    let append = match console {
        Console::Quiet => "console=ttyS0 panic=-1 quiet",
        Console::Verbose => "console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1",
    };
    let t0 = Instant::now();
    // The whole guest: boot, the suite and the bench. Under TCG with the host busy (builds
    // beside it) the suite alone took 754 s of 900 and the bench was cut off.
    let mut child = Command::new("timeout")
        .args([
            "1800",
            "qemu-system-x86_64",
            "-accel",
            "tcg",
            "-cpu",
            "max",
            "-m",
            "1024",
            "-smp",
            "2",
        ])
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
        println!("guest {}| {line}", kernel.name);
        log.push_str(&line);
        log.push('\n');
        run.take_line(&line);
    }
    let status = child.wait()?;
    run.finish();
    std::fs::write(work.join(format!("console-{name}.log")), &log)?;
    util::time(
        &format!("QEMU guest {} (all stages, {status})", kernel.name),
        t0,
    );
    Ok(run)
}

/// The last lines of QEMU's log, if any.
fn print_tail(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    for l in &lines[lines.len().saturating_sub(40)..] {
        println!("qemu| {l}");
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
) -> anyhow::Result<GuestRun> {
    let run = boot(kernel, suite, initrd, work, Console::Quiet)?;
    if run.reached_init() {
        return Ok(run);
    }
    let first = run.seconds();
    println!(
        "NOTE guest {}: the kernel never reached init (QEMU ended after {first:.1} s); \
         QEMU's reset log follows, then a second boot with every kernel message",
        kernel.name
    );
    print_tail(&work.join(format!("qemu-{}.log", kernel.name.replace(['/', ' '], "_"))));
    let mut run = boot(kernel, suite, initrd, work, Console::Verbose)?;
    run.set_first_boot_failed(first);
    Ok(run)
}

/// Builds the guest image once, boots every kernel (side by side for the tests, in turn for
/// the bench), prints the results per kernel, and fails unless every kernel passed: for the
/// tests, every test (none skipped, none ignored, at least one ran); for the bench, every
/// benchmark figure.
pub(crate) fn run_suite(
    env: &Env,
    bins: &Bins,
    kernels: &[GuestKernel],
    suite: Suite,
) -> anyhow::Result<Summary> {
    let t0 = Instant::now();
    let test_bin = match suite {
        Suite::Tests => Some(build_test_binary(env)?),
        Suite::Bench => None,
    };
    let work = workspace_root().join("target/vm");
    std::fs::create_dir_all(&work)?;
    let initrd = work.join("initrd.cpio.gz");
    initramfs(env, bins, suite, test_bin.as_deref(), kernels, &initrd)?;
    util::time("guest image (initramfs)", t0);
    let runs = match suite {
        Suite::Tests => std::thread::scope(|scope| {
            let booting: Vec<_> = kernels
                .iter()
                .map(|k| scope.spawn(|| boot_until_init(k, suite, &initrd, &work)))
                .collect();
            booting
                .into_iter()
                .map(|b| {
                    b.join()
                        .unwrap_or_else(|_| bail!("a guest's thread panicked"))
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })?,
        Suite::Bench => kernels
            .iter()
            .map(|k| boot_until_init(k, suite, &initrd, &work))
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    report::print(&runs);
    let mut s = Summary::default();
    let mut failed = Vec::new();
    for r in &runs {
        s.passed += r.passed;
        s.failed += r.failed;
        if let Err(why) = r.verdict() {
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
