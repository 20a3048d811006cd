//! `cargo xtask setup`: every prerequisite, idempotently. Downloads and built tools live in
//! `~/.cache/gatewayd` (or `$GATEWAYD_CACHE`) so clones and reruns share them; a second run
//! only checks that each piece is there. The guest kernels are fetched by `kernels`, each
//! when a guest first needs it (`cargo xtask setup` fetches every line).
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::util::{Env, Toolchain, cache_dir, run};

/// `iproute2`: `ip`, with which the inbound-connection test adds an address to `lo`;
/// `man-db`: `man -l`, with which the packaging test renders the packaged man pages;
/// `tmux`: the real terminal the `gatewayd approvals watch` test types into;
/// `curl`, `openssl`: the egress-by-name test's client and HTTPS server (host and guests),
/// and the MCP HTTP tests'; `git`: the inspected-egress test's client and, with
/// `git http-backend`, its smart-HTTP server (`tests/privileged/src/egress_l7.rs`);
/// `xz-utils`: the guests' compressed kernel modules;
/// `rsyslog`: the syslog server the audit export is tested against; `systemd`: a journald
/// in a namespace of its own, for the journal export (gatewayd/tests/daemon/export.rs).
const APT_PACKAGES: [&str; 14] = [
    "qemu-system-x86",
    "cpio",
    "nodejs",
    "npm",
    "python3-venv",
    "iproute2",
    "man-db",
    "tmux",
    "curl",
    "openssl",
    "git",
    "xz-utils",
    "rsyslog",
    "systemd",
];
/// Packages whose command may come from another package: the `nodejs` package of `NodeSource` ships `npm`
/// and conflicts with Debian's `npm` package, so a working `npm` on PATH is enough.
const SATISFIED_BY_COMMAND: [(&str, &str); 1] = [("npm", "npm")];
const BPF_LINKER: &str = "0.13.0";
/// Builds the Debian package (`cargo xtask deb`); about 100 s of CPU to install, once.
const CARGO_DEB: &str = "3.8.0";
/// The MCP tests' real components (gatewayd/tests/mcp/servers.rs), pinned.
const FS_SERVER_PKG: &str = "@modelcontextprotocol/server-filesystem";
const FS_SERVER_VERSION: &str = "2026.8.31";
/// The reference server with resources, prompts, tasks, elicitation and sampling
/// (gatewayd/tests/mcp/messages.rs), same release as the filesystem server.
const EVERYTHING_PKG: &str = "@modelcontextprotocol/server-everything";
const MCP_SDK: &str = "mcp==2.3.0";
/// The OTLP receiver of the export tests (`gatewayd/tests/daemon/otlp_receiver.py`): the
/// official OpenTelemetry protobuf definitions, in the same venv.
const OTLP_PROTO: &str = "opentelemetry-proto==1.45.2";
/// Its gRPC transport (the receiver's `grpc` modes): gRPC's own Python package.
const GRPCIO: &str = "grpcio==1.85.1";
/// The Kubernetes manifests' validator (`gatewayd/tests/cli/kubernetes.rs`): the API's
/// `OpenAPI` schemas bundled in the package, so it checks offline; same venv.
const KUBE_VALIDATE: &str = "kubernetes-validate==1.37.0";
/// The Python HTTP client of the inspected-egress test (`tests/privileged/src/egress_l7.rs`),
/// host and guests; same venv.
const PY_REQUESTS: &str = "requests==2.34.2";
/// The venv's packages the privileged tests' Python uses (`GATEWAYD_PY_REQUESTS`), copied
/// into the guests (`vm.rs`): `requests` and what it needs, and the OTLP receiver's
/// definitions (`opentelemetry-proto` and protobuf, `tests/privileged/src/fleet_kernel.rs`).
pub(crate) const PY_REQUESTS_PACKAGES: [&str; 7] = [
    "requests",
    "urllib3",
    "idna",
    "charset_normalizer",
    "certifi",
    "opentelemetry",
    "google",
];
/// The real agent CLIs the host tests drive (gatewayd/tests/hosts), pinned: (name, package,
/// version).
const AGENT_HOSTS: [(&str, &str, &str); 3] = [
    ("claude", "@anthropic-ai/claude-code", "2.1.332"),
    ("codex", "@openai/codex", "0.171.0"),
    ("gemini", "@google/gemini-cli", "0.61.0"),
];

pub(crate) fn setup() -> anyhow::Result<Env> {
    let cache = cache_dir()?;
    std::fs::create_dir_all(&cache).with_context(|| format!("mkdir {}", cache.display()))?;
    apt_packages()?;
    let toolchain = toolchain()?;
    cargo_deb(&toolchain.tools_bin)?;
    let guest_dir = cache.join("guest");
    let busybox = busybox(&guest_dir)?;
    let mcp_fs_server = fs_server(&cache.join("node"))?;
    let mcp_everything_server = npm_package(
        &cache.join("node"),
        EVERYTHING_PKG,
        FS_SERVER_VERSION,
        "mcp-server-everything",
    )?;
    let mcp_python = mcp_venv(&cache.join("venv"))?;
    let py_requests = site_packages(&mcp_python)?;
    let agent_hosts = agent_hosts(&cache.join("agents"));
    println!("setup: ok (cache {})", cache.display());
    Ok(Env {
        toolchain,
        busybox,
        guest_dir,
        mcp_fs_server,
        mcp_everything_server,
        mcp_python,
        py_requests,
        agent_hosts,
    })
}

/// What building gatewayd with its kernel programs needs, and nothing else (the demo's
/// setup): nightly's `rust-src` and `bpf-linker`.
pub(crate) fn toolchain() -> anyhow::Result<Toolchain> {
    let cache = cache_dir()?;
    std::fs::create_dir_all(&cache).with_context(|| format!("mkdir {}", cache.display()))?;
    rust_src()?;
    Ok(Toolchain {
        tools_bin: bpf_linker(&cache)?,
    })
}

pub(crate) fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn installed(pkg: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", pkg]))
        .is_ok_and(|s| s.contains("install ok installed"))
}

/// Whether `pkg` is one of [`SATISFIED_BY_COMMAND`] and its command runs.
fn has_command_for(pkg: &str) -> bool {
    SATISFIED_BY_COMMAND
        .iter()
        .find(|(p, _)| *p == pkg)
        .is_some_and(|(_, cmd)| output(Command::new(cmd).arg("--version")).is_ok())
}

fn apt_packages() -> anyhow::Result<()> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !installed(p) && !has_command_for(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    run(
        "apt-get update",
        Command::new("apt-get").args(["update", "-qq"]),
    )?;
    run(
        &format!("apt-get install {}", missing.join(" ")),
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn nightly_sysroot() -> anyhow::Result<PathBuf> {
    Ok(PathBuf::from(
        output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))
            .context("the nightly toolchain is needed to build the eBPF programs")?
            .trim(),
    ))
}

fn rust_src() -> anyhow::Result<()> {
    if nightly_sysroot()?
        .join("lib/rustlib/src/rust/library/core")
        .is_dir()
    {
        return Ok(());
    }
    run(
        "rustup component add rust-src --toolchain nightly",
        Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]),
    )
}

/// bpf-linker linked against the nightly rustc's own libLLVM (no system LLVM needed).
fn bpf_linker(cache: &Path) -> anyhow::Result<PathBuf> {
    let root = cache.join("tools");
    let bin = root.join("bin");
    let linker = bin.join("bpf-linker");
    if output(Command::new(&linker).arg("--version")).is_ok_and(|v| v.contains(BPF_LINKER)) {
        return Ok(bin);
    }
    let sysroot = nightly_sysroot()?;
    let so = std::fs::read_dir(sysroot.join("lib"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("libLLVM.so."))
        .context("the nightly sysroot has no libLLVM.so.*")?;
    let prefix = cache.join("llvm-nightly");
    let lib = prefix.join("lib");
    std::fs::create_dir_all(&lib)?;
    for name in ["libLLVM.so", so.as_str()] {
        let link = lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(sysroot.join("lib").join(&so), &link)?;
    }
    run(
        &format!("cargo install bpf-linker {BPF_LINKER} (against the nightly's libLLVM)"),
        Command::new("cargo")
            .args(["install", "--locked", "--force", "--root"])
            .arg(&root)
            .args([
                &format!("bpf-linker@{BPF_LINKER}"),
                "--no-default-features",
                "--features",
                "llvm-22",
            ])
            .env("LLVM_PREFIX", &prefix),
    )?;
    Ok(bin)
}

/// cargo-deb, in the same tools folder as bpf-linker (`--locked`: its own lockfile's versions).
fn cargo_deb(bin: &Path) -> anyhow::Result<()> {
    if output(Command::new(bin.join("cargo-deb")).arg("--version"))
        .is_ok_and(|v| v.contains(CARGO_DEB))
    {
        return Ok(());
    }
    let root = bin.parent().context("the tools folder has no parent")?;
    run(
        &format!("cargo install cargo-deb {CARGO_DEB}"),
        Command::new("cargo")
            .args(["install", "--locked", "--force", "--root"])
            .arg(root)
            .arg(format!("cargo-deb@{CARGO_DEB}")),
    )
}

/// The official MCP filesystem server from the npm registry, pinned, under `dir`.
fn fs_server(dir: &Path) -> anyhow::Result<PathBuf> {
    npm_package(
        dir,
        FS_SERVER_PKG,
        FS_SERVER_VERSION,
        "mcp-server-filesystem",
    )
}

/// Each agent host CLI, pinned, under `dir/NAME`, as the variable the host tests read
/// (`GATEWAYD_HOST_NAME`): its program, or `unavailable: WHY` when npm could not install it
/// (the tests then say so loudly).
fn agent_hosts(dir: &Path) -> Vec<(String, String)> {
    AGENT_HOSTS
        .iter()
        .map(|(name, pkg, version)| {
            let var = format!("GATEWAYD_HOST_{}", name.to_uppercase());
            let value = npm_package(&dir.join(name), pkg, version, name).map_or_else(
                |e| {
                    println!("setup: WARNING: {pkg}@{version} is not installed: {e:#}");
                    format!("unavailable: {e:#}")
                },
                |p| p.display().to_string(),
            );
            (var, value)
        })
        .collect()
}

/// `npm install PKG@VERSION` into `dir` unless that version is there; returns its `bin`.
fn npm_package(dir: &Path, pkg: &str, version: &str, bin: &str) -> anyhow::Result<PathBuf> {
    let bin = dir.join("node_modules/.bin").join(bin);
    let manifest = dir.join(format!("node_modules/{pkg}/package.json"));
    let have = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v["version"] == version);
    if have && bin.exists() {
        return Ok(bin);
    }
    std::fs::create_dir_all(dir)?;
    run(
        &format!("npm install {pkg}@{version}"),
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir)
            .arg(format!("{pkg}@{version}")),
    )?;
    if !bin.exists() {
        bail!("npm left no {}", bin.display());
    }
    Ok(bin)
}

/// A virtual environment with the Python MCP SDK, made from Debian's `/usr/bin/python3`
/// (runnable by other users, unlike a python inside root's home).
fn mcp_venv(dir: &Path) -> anyhow::Result<PathBuf> {
    let python = dir.join("bin/python");
    let pinned = [MCP_SDK, OTLP_PROTO, GRPCIO, KUBE_VALIDATE, PY_REQUESTS];
    let (names, want): (Vec<&str>, Vec<&str>) =
        pinned.iter().filter_map(|p| p.split_once("==")).unzip();
    let version = output(Command::new(&python).args([
        "-c",
        &format!("import importlib.metadata as m; print(*map(m.version, {names:?}))"),
    ]));
    if version.is_ok_and(|v| v.trim() == want.join(" ")) {
        return Ok(python);
    }
    run(
        "python3 -m venv (MCP SDK)",
        Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--clear"])
            .arg(dir),
    )?;
    run(
        &format!("pip install {}", pinned.join(" ")),
        Command::new(dir.join("bin/pip"))
            .args(["install", "-q"])
            .args(pinned),
    )?;
    Ok(python)
}

/// The folder of the venv's packages (`requests` among them).
fn site_packages(python: &Path) -> anyhow::Result<PathBuf> {
    let dir = output(Command::new(python).args([
        "-c",
        "import os, requests; print(os.path.dirname(os.path.dirname(requests.__file__)))",
    ]))?;
    Ok(PathBuf::from(dir.trim()))
}

/// A static busybox for the guest, unpacked under `dir`. The download is kept.
fn busybox(dir: &Path) -> anyhow::Result<PathBuf> {
    let busybox = dir.join("busybox/bin/busybox");
    if !busybox.is_file() {
        let dl = dir.join("downloads");
        std::fs::create_dir_all(&dl)?;
        download_and_unpack(&dl, "busybox-static", &dir.join("busybox"))?;
    }
    if !busybox.is_file() {
        bail!("busybox-static did not provide {}", busybox.display());
    }
    Ok(busybox)
}

/// `apt-get download PKG` into `dl` (unless a `.deb` of it is there) and `dpkg -x` into `into`.
pub(crate) fn download_and_unpack(dl: &Path, pkg: &str, into: &Path) -> anyhow::Result<()> {
    let have = |prefix: &str| -> Option<PathBuf> {
        std::fs::read_dir(dl)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name().is_some_and(|n| {
                    n.to_string_lossy().starts_with(&format!("{prefix}_"))
                        && n.to_string_lossy().ends_with(".deb")
                })
            })
    };
    if have(pkg).is_none() {
        let get = |c: &mut Command| {
            run(
                &format!("apt-get download {pkg}"),
                c.args(["-o", "APT::Sandbox::User=root", "download", "-qq", pkg])
                    .current_dir(dl),
            )
        };
        if get(&mut Command::new("apt-get")).is_err() {
            run(
                "apt-get update",
                Command::new("apt-get").args(["update", "-qq"]),
            )?;
            get(&mut Command::new("apt-get"))?;
        }
    }
    let deb = have(pkg).with_context(|| format!("apt-get download {pkg} left no .deb"))?;
    std::fs::create_dir_all(into)?;
    run(
        &format!("dpkg -x {}", deb.display()),
        Command::new("dpkg").arg("-x").arg(&deb).arg(into),
    )
}
