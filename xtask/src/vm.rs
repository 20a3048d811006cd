//! The QEMU guest suite: Debian's kernel (BPF LSM active) under TCG, a busybox initramfs
//! carrying gatewayd, the test agent and the privileged test binary, which runs as PID 1's
//! child with `GATEWAYD_EXPECT_TIER=1` (BPF LSM must work there). Results are read back from
//! the serial console.
use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, bail};

use crate::util::{self, Bins, Env, workspace_root};

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp; mount -t securityfs securityfs /sys/kernel/security
mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t bpf bpf /sys/fs/bpf
ip link set lo up
echo "GUEST kernel $(uname -r); lsm=$(cat /sys/kernel/security/lsm)"
export GATEWAYD_EXPECT_TIER=1 GATEWAYD_BIN=/gatewayd GW_TESTAGENT=/gw-testagent HOME=/root PATH=/bin TMPDIR=/tmp
mkdir -p /root
/gatewayd doctor
/privileged --test-threads=1 2>&1
echo "GUEST-EXIT $?"
# Kernel-layer cost on open() at tier 1 (BPF LSM file_open walk), bare vs under gatewayd.
# Under TCG absolute figures mean little; the ratio is the figure.
mkdir -p /tmp/bench/a/b/c/d && echo x > /tmp/bench/a/b/c/d/f && echo s > /tmp/bench/secret
echo '{"version":1,"kernel":"require","sandbox":{"protected":["/tmp/bench/secret"]}}' > /tmp/bench/p.json
for i in 1 2 3; do
  echo "BENCH bare $(/gw-testagent openloop /tmp/bench/a/b/c/d/f 20000)"
  echo "BENCH under $(/gatewayd run --policy /tmp/bench/p.json --audit /tmp/bench/a.jsonl -- /gw-testagent openloop /tmp/bench/a/b/c/d/f 20000 2>/dev/null)"
done
poweroff -f
"#;

/// Guest results.
#[derive(Debug, Default)]
pub struct Summary {
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
    if !out.status.success() {
        bail!("building the privileged test binary failed");
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
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

fn initramfs(env: &Env, bins: &Bins, test_bin: &Path, out: &Path) -> anyhow::Result<()> {
    let root = out.with_extension("root");
    let _ = std::fs::remove_dir_all(&root);
    for d in ["bin", "proc", "sys", "dev", "tmp", "root"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    std::fs::copy(&env.busybox, root.join("bin/busybox"))?;
    std::fs::write(root.join("init"), INIT)?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(root.join("init"), std::fs::Permissions::from_mode(0o755))?;
    copy_with_libs(&bins.gatewayd, &root, "gatewayd")?;
    copy_with_libs(&bins.testagent, &root, "gw-testagent")?;
    copy_with_libs(test_bin, &root, "privileged")?;
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

/// Prints the best bare and under-gatewayd `open()` figures from the guest and their ratio.
fn report_bench(lines: &[String]) {
    let best = |which: &str| {
        lines
            .iter()
            .filter(|l| l.starts_with(which))
            .filter_map(|l| util::ns_each(l))
            .fold(f64::MAX, f64::min)
    };
    let (bare, under) = (best("bare "), best("under "));
    if bare < f64::MAX && under < f64::MAX {
        println!(
            "guest bench: open() of a 6-deep path, bare {bare:.0} ns, under gatewayd (tier 1) {under:.0} ns, ratio {:.2} (TCG: the ratio is the figure)",
            under / bare
        );
    }
}

/// Boots the guest, runs the privileged suite inside it, and fails unless every test passed
/// (none skipped, none ignored, at least one ran).
pub fn run_suite(env: &Env, bins: &Bins) -> anyhow::Result<Summary> {
    let test_bin = build_test_binary(env)?;
    let work = workspace_root().join("target/vm");
    std::fs::create_dir_all(&work)?;
    let initrd = work.join("initrd.cpio.gz");
    initramfs(env, bins, &test_bin, &initrd)?;
    println!(
        ">>> QEMU guest suite ({}), console below",
        env.vmlinuz.display()
    );
    let t0 = Instant::now();
    let mut child = Command::new("timeout")
        .args([
            "900",
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
        .args(["-nographic", "-no-reboot", "-kernel"])
        .arg(&env.vmlinuz)
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", "console=ttyS0 panic=-1 quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("qemu-system-x86_64")?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let mut s = Summary::default();
    let mut guest_exit = None;
    let mut result_line = false;
    let mut log = String::new();
    let mut bench = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap_or_default().replace('\r', "");
        println!("guest| {line}");
        if let Some(rest) = line.strip_prefix("BENCH ") {
            bench.push(rest.to_string());
        }
        log.push_str(&line);
        log.push('\n');
        // The harness's own summary, e.g. "test result: ok. 12 passed; 0 failed; 0 ignored; ..."
        if let Some((passed, failed, ignored)) = util::test_result_counts(&line) {
            result_line = true;
            s.passed += passed;
            s.failed += failed + ignored; // an ignored kernel test is a failure here
        }
        if let Some(code) = line.strip_prefix("GUEST-EXIT ") {
            guest_exit = code.trim().parse::<i32>().ok();
        }
    }
    let status = child.wait()?;
    std::fs::write(work.join("console.log"), &log)?;
    println!(
        "TIME {:7.1} s  QEMU guest suite ({status})",
        t0.elapsed().as_secs_f64()
    );
    report_bench(&bench);
    println!("guest: {} passed, {} failed", s.passed, s.failed);
    match guest_exit {
        None => bail!("the guest did not finish the suite (see target/vm/console.log)"),
        Some(code) if code != 0 || s.failed > 0 => bail!("guest suite failed (exit {code})"),
        _ if !result_line || s.passed == 0 => bail!("the guest ran no tests"),
        _ => Ok(s),
    }
}
