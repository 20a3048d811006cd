//! `cargo xtask deb`: the Debian package. The release binary is built first (with its kernel
//! programs, which `cargo deb` alone would not build: it does not put bpf-linker on PATH),
//! then `cargo deb --no-build` packs it with the systemd units, the example policies and the
//! docs (`[package.metadata.deb]` in gatewayd/Cargo.toml), and the man pages the binary makes
//! from its own command line (`gatewayd man`, gzipped into `target/release/man/`).
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use crate::util::{self, Env, workspace_root};

/// Where the package goes; older packages there are removed first, so exactly one is left.
pub(crate) fn dir() -> PathBuf {
    workspace_root().join("target/debian")
}

/// `gatewayd man target/release/man`, each page gzipped as Debian wants them (`-9n`: no name, no
/// time, so the package is the same on every build).
fn man_pages(gatewayd: &std::path::Path) -> anyhow::Result<()> {
    let dir = workspace_root().join("target/release/man");
    let _ = std::fs::remove_dir_all(&dir);
    util::run(
        "gatewayd man target/release/man",
        Command::new(gatewayd).arg("man").arg(&dir),
    )?;
    let pages: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    util::run(
        "gzip -9n the man pages",
        Command::new("gzip").arg("-9nf").args(&pages),
    )
}

/// Builds the package and returns its path.
pub(crate) fn package(env: &Env) -> anyhow::Result<PathBuf> {
    let bins = util::build_release(env)?;
    man_pages(&bins.gatewayd)?;
    let out = dir();
    if let Ok(entries) = std::fs::read_dir(&out) {
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "deb") {
                std::fs::remove_file(e.path())?;
            }
        }
    }
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["deb", "-p", "gatewayd", "--no-build", "--output"])
        .arg(&out)
        .current_dir(workspace_root())
        .env("PATH", env.path_var())
        .env_remove("GATEWAYD_EBPF_STUB");
    util::run("cargo deb -p gatewayd --no-build", &mut cmd)?;
    let debs: Vec<PathBuf> = std::fs::read_dir(&out)
        .with_context(|| format!("read {}", out.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    match debs.as_slice() {
        [one] => {
            println!("deb: {}", one.display());
            Ok(one.clone())
        }
        other => bail!(
            "cargo deb left {} packages in {}",
            other.len(),
            out.display()
        ),
    }
}
