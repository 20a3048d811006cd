//! Shared helpers: running commands with timing, the cache folder, cargo with the toolchain.
use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    time::Instant,
};

use anyhow::{Context as _, bail};

/// Where downloads and built tools are cached across runs and clones.
pub(crate) fn cache_dir() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("GATEWAYD_CACHE") {
        return Ok(PathBuf::from(d));
    }
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache/gatewayd"))
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// What setup produced and every later step needs.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// What builds the kernel programs (all the demo needs).
    pub toolchain: Toolchain,
    /// Static busybox for the guest.
    pub busybox: PathBuf,
    /// Where guest kernels are downloaded and unpacked (`kernels`).
    pub guest_dir: PathBuf,
    /// `mcp-server-filesystem` from npm (gatewayd/tests/mcp/servers.rs).
    pub mcp_fs_server: PathBuf,
    /// `mcp-server-everything` from npm (gatewayd/tests/mcp/messages.rs).
    pub mcp_everything_server: PathBuf,
    /// The venv's python with the MCP SDK (gatewayd/tests/mcp/servers.rs).
    pub mcp_python: PathBuf,
    /// The venv's packages folder, with Python's `requests` (`GATEWAYD_PY_REQUESTS`).
    pub py_requests: PathBuf,
    /// `GATEWAYD_HOST_<NAME>` for each agent CLI (gatewayd/tests/hosts): its program, or
    /// `unavailable: WHY`.
    pub agent_hosts: Vec<(String, String)>,
}

/// The toolchain that builds gatewayd with its kernel programs (`setup::toolchain`).
#[derive(Debug, Clone)]
pub(crate) struct Toolchain {
    /// Folder holding `bpf-linker`, put first on PATH for cargo.
    pub tools_bin: PathBuf,
}

impl Toolchain {
    pub(crate) fn path_var(&self) -> std::ffi::OsString {
        let mut p = self.tools_bin.clone().into_os_string();
        if let Some(old) = std::env::var_os("PATH") {
            p.push(":");
            p.push(old);
        }
        p
    }
}

impl std::ops::Deref for Env {
    type Target = Toolchain;
    fn deref(&self) -> &Toolchain {
        &self.toolchain
    }
}

impl Env {
    /// The variables the MCP tests find their real components by.
    pub(crate) fn mcp_vars(&self) -> [(&'static str, String); 3] {
        [
            (
                "GATEWAYD_MCP_FS_SERVER",
                self.mcp_fs_server.display().to_string(),
            ),
            (
                "GATEWAYD_MCP_EVERYTHING_SERVER",
                self.mcp_everything_server.display().to_string(),
            ),
            ("GATEWAYD_MCP_PYTHON", self.mcp_python.display().to_string()),
        ]
    }
}

/// Every stage timed so far, in order, for the recap at the end of `cargo xtask test`.
static TIMES: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

/// Prints `TIME <seconds> s  <label>` for a stage that started at `t0`, and keeps it for
/// [`time_recap`].
pub(crate) fn time(label: &str, t0: Instant) {
    let secs = t0.elapsed().as_secs_f64();
    println!("TIME {secs:7.1} s  {label}");
    if let Ok(mut t) = TIMES.lock() {
        t.push((label.to_string(), secs));
    }
}

/// Every stage's time, in the order they ran.
pub(crate) fn time_recap() -> Vec<(String, f64)> {
    TIMES.lock().map(|t| t.clone()).unwrap_or_default()
}

/// Runs a command, printing it and its wall time; fails on a non-zero exit.
pub(crate) fn run(label: &str, cmd: &mut Command) -> anyhow::Result<()> {
    let t0 = Instant::now();
    println!(">>> {label}");
    let status = cmd
        .status()
        .with_context(|| format!("{label}: cannot start {cmd:?}"))?;
    time(label, t0);
    if !status.success() {
        bail!("{label}: {status}");
    }
    Ok(())
}

/// Runs `cargo ARGS` in the workspace with bpf-linker on PATH.
pub(crate) fn cargo(env: &Toolchain, args: &[&str]) -> anyhow::Result<()> {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.args(args)
        .current_dir(workspace_root())
        .env("PATH", env.path_var());
    c.env_remove("GATEWAYD_EBPF_STUB");
    run(&format!("cargo {}", args.join(" ")), &mut c)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (relative to the workspace),
/// otherwise `target/` (a demo run with its own target directory used the binaries in
/// `target/`, built by another command with other settings).
pub(crate) fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

/// The binaries the tests, the guest and the demo use.
#[derive(Debug, Clone)]
pub(crate) struct Bins {
    pub gatewayd: PathBuf,
    pub testagent: PathBuf,
    /// The bypass suite's attacker (`gw-escape`).
    pub escape: PathBuf,
}

pub(crate) fn build_release(env: &Toolchain) -> anyhow::Result<Bins> {
    build(env, "release")
}

/// The same binaries in the dev profile: what the demo runs. It needs no optimised build,
/// and the tests' own dev builds reuse what it built.
pub(crate) fn build_dev(env: &Toolchain) -> anyhow::Result<Bins> {
    build(env, "dev")
}

fn build(env: &Toolchain, profile: &str) -> anyhow::Result<Bins> {
    cargo(
        env,
        &[
            "build",
            "--profile",
            profile,
            "-p",
            "gatewayd",
            "-p",
            "gatewayd-testkit",
            "--bins",
        ],
    )?;
    let dir = target_dir().join(if profile == "dev" { "debug" } else { profile });
    Ok(Bins {
        gatewayd: dir.join("gatewayd"),
        testagent: dir.join("gw-testagent"),
        escape: dir.join("gw-escape"),
    })
}

/// `cargo test` arguments that select one test binary of `gatewayd` built in release with
/// the `privileged-tests` feature (one build for all of them).
const fn release_test(name: &'static str) -> [&'static str; 7] {
    [
        "--release",
        "-p",
        "gatewayd",
        "--features",
        "privileged-tests",
        "--test",
        name,
    ]
}

/// The privileged test binary: the crate `gatewayd-privileged-tests` (tests/privileged), in
/// release with its `privileged` feature.
pub(crate) const PRIVILEGED_TESTS: [&str; 7] = [
    "--release",
    "-p",
    "gatewayd-privileged-tests",
    "--features",
    "privileged",
    "--test",
    "privileged",
];

/// The real agent CLIs' tests.
pub(crate) const HOST_TESTS: [&str; 7] = release_test("hosts");

/// The packaging tests.
pub(crate) const PACKAGING_TESTS: [&str; 7] = release_test("packaging");

/// Counts from a libtest summary line, `test result: ok. 12 passed; 0 failed; 1 ignored; ...`:
/// (passed, failed, ignored); `None` for any other line.
pub(crate) fn test_result_counts(line: &str) -> Option<(u32, u32, u32)> {
    let rest = line.strip_prefix("test result: ")?;
    let num = |word: &str| -> u32 {
        rest.split(';')
            .find_map(|part| {
                part.trim()
                    .trim_start_matches("ok. ")
                    .trim_start_matches("FAILED. ")
                    .strip_suffix(word)
            })
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    Some((num(" passed"), num(" failed"), num(" ignored")))
}

/// The figure of a `gw-testagent openloop/connectloop` line (`OK ...: N in a row, X ns each`).
pub(crate) fn ns_each(line: &str) -> Option<f64> {
    line.split_whitespace().rev().nth(2)?.parse().ok()
}

/// The first `name` on PATH that is a file.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
