//! `cargo xtask test`: the one test command (README, `.ci/run`). Fails on any failed,
//! ignored or skipped test, on formatting drift and on any clippy warning.
use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, bail};

use crate::{
    deb, kernels, setup,
    util::{self, Env, workspace_root},
    vm,
};

#[derive(Debug, Default)]
struct Counts {
    passed: u32,
    failed: u32,
    ignored: u32,
}

/// Runs `cargo test ARGS`, echoing its output and adding up its `test result:` lines.
fn cargo_test(
    env: &Env,
    label: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    total: &mut Counts,
) -> anyhow::Result<()> {
    println!(">>> {label}: cargo test {}", args.join(" "));
    let t0 = Instant::now();
    let mut child = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("test")
        .args(args)
        .current_dir(workspace_root())
        .env("PATH", env.path_var())
        .env_remove("GATEWAYD_EBPF_STUB")
        .envs(env.mcp_vars())
        .envs(
            env.agent_hosts
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .context("cargo test")?;
    let out = child.stdout.take().context("stdout")?;
    for line in BufReader::new(out).lines() {
        let line = line.unwrap_or_default();
        println!("{line}");
        if let Some((passed, failed, ignored)) = util::test_result_counts(&line) {
            total.passed += passed;
            total.failed += failed;
            total.ignored += ignored;
        }
    }
    let status = child.wait()?;
    util::time(label, t0);
    if !status.success() {
        bail!("{label}: {status}");
    }
    Ok(())
}

/// The tier the host run must reach (the privileged tests fail otherwise): 2 on the
/// project's machines, whose kernel refuses BPF LSM programs (docs/KERNEL.md). A host that
/// permits them runs `GATEWAYD_EXPECT_TIER=1 cargo xtask test`. Every guest expects 1.
fn host_tier() -> String {
    std::env::var("GATEWAYD_EXPECT_TIER").unwrap_or_else(|_| "2".into())
}

/// rustfmt, and clippy as a contributor runs it and with the privileged tests' features.
fn lint(env: &util::Env) -> anyhow::Result<()> {
    util::run(
        "cargo fmt --check",
        Command::new("cargo")
            .args(["fmt", "--all", "--", "--check"])
            .current_dir(workspace_root()),
    )?;
    util::cargo(
        env,
        &[
            "clippy",
            "--workspace",
            "--exclude",
            "gateway-ebpf",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    util::cargo(
        env,
        &[
            "clippy",
            "-p",
            "gatewayd",
            "-p",
            "gatewayd-privileged-tests",
            "--features",
            "gatewayd/privileged-tests,gatewayd-privileged-tests/privileged",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    Ok(())
}

pub(crate) fn all() -> anyhow::Result<()> {
    let t0 = Instant::now();
    let env = setup::setup()?;
    let guests = kernels::select(&env, None)?;
    util::time("setup (toolchain, guest kernels)", t0);
    lint(&env)?;
    let bins = util::build_release(&env)?;
    // The package is built before the tests that check it; they fail without it.
    let package = deb::package(&env)?;
    let mut total = Counts::default();
    cargo_test(
        &env,
        "unit and integration tests",
        &["--workspace", "--exclude", "gateway-ebpf"],
        &[],
        &mut total,
    )?;
    // The guests boot in the background from here, below the host's stages (their results
    // come last, whatever the host's stages give).
    let guests = vm::start_tests(&env, &bins, &guests)?;
    let host = host_stages(&env, &package, &mut total);
    let guest = guests.finish();
    host?;
    let guest = guest?;
    total.passed += guest.passed;
    total.failed += guest.failed;
    util::time("cargo xtask test (all)", t0);
    println!("\n=== time per stage ===");
    for (label, secs) in util::time_recap() {
        println!("{secs:7.1} s  {label}");
    }
    if total.ignored > 0 {
        bail!(
            "{} test(s) were ignored: a skipped test is a failure here",
            total.ignored
        );
    }
    if total.failed > 0 {
        bail!("{} test(s) failed", total.failed);
    }
    println!("{} passed, {} failed", total.passed, total.failed);
    Ok(())
}

/// The host's stages after the unit tests: the demo, the package's tests, the privileged
/// tests and the real agent hosts.
fn host_stages(env: &Env, package: &std::path::Path, total: &mut Counts) -> anyhow::Result<()> {
    // The README's first command, as a user runs it (it fails unless the bare agent stole
    // the key and the one under gatewayd did not).
    let t = Instant::now();
    crate::demo::run()?;
    util::time("cargo xtask demo", t);
    cargo_test(
        env,
        "packaging tests",
        &[&util::PACKAGING_TESTS[..], &["--", "--test-threads=1"]].concat(),
        &[("GATEWAYD_DEB", &package.to_string_lossy())],
        total,
    )?;
    cargo_test(
        env,
        "privileged host tests",
        &[&util::PRIVILEGED_TESTS[..], &["--", "--test-threads=1"]].concat(),
        &[
            ("GATEWAYD_EXPECT_TIER", &host_tier()),
            ("GATEWAYD_PY_REQUESTS", &*env.py_requests.to_string_lossy()),
        ],
        total,
    )?;
    cargo_test(
        env,
        "real agent hosts",
        &[&util::HOST_TESTS[..], &["--", "--test-threads=1"]].concat(),
        &[("GATEWAYD_EXPECT_TIER", &host_tier())],
        total,
    )
}
