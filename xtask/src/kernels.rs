//! The kernels the guest suite boots: every Debian cloud kernel line reachable through apt
//! (docs/internals/KERNEL.md, "Kernels tested"), each resolved at run time to the newest
//! image of its line, downloaded once and kept under `~/.cache/gatewayd/guest/<package>/`.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{
    setup::{download_and_unpack, output},
    util::{Env, run},
};

/// One Debian kernel line: the name `cargo xtask vm --kernel` takes, and the metapackage
/// whose dependency names the newest image of the line.
#[derive(Debug)]
pub(crate) struct KernelLine {
    pub name: &'static str,
    meta: &'static str,
    /// What the resolved package's name starts with (a metapackage that moved to another
    /// line is an error, not a silent change of what is tested).
    prefix: &'static str,
}

/// Every line `cargo xtask test` boots, in order.
pub(crate) const LINES: [KernelLine; 2] = [
    KernelLine {
        name: "6.1",
        meta: "linux-image-cloud-amd64",
        prefix: "linux-image-6.1.",
    },
    KernelLine {
        name: "6.12",
        meta: "linux-image-6.12-cloud-amd64",
        prefix: "linux-image-6.12.",
    },
];

/// A kernel image to boot in the guest.
#[derive(Debug, Clone)]
pub(crate) struct GuestKernel {
    /// The line's name (`6.1`), or the image's file name for `--kernel PATH`.
    pub name: String,
    /// The Debian package it came from, or the path it was given as.
    pub source: String,
    pub vmlinuz: PathBuf,
}

/// The kernels `--kernel` selects: a line's name, a path to a kernel image, or (none) every
/// line. Lines are downloaded here when not cached yet.
pub(crate) fn select(env: &Env, arg: Option<&str>) -> anyhow::Result<Vec<GuestKernel>> {
    match arg {
        None => LINES.iter().map(|l| fetch(env, l)).collect(),
        Some(a) => {
            if let Some(line) = LINES.iter().find(|l| l.name == a) {
                return Ok(vec![fetch(env, line)?]);
            }
            let path = Path::new(a);
            if !path.is_file() {
                let names: Vec<&str> = LINES.iter().map(|l| l.name).collect();
                bail!(
                    "--kernel {a}: neither a kernel line ({}) nor a kernel image file",
                    names.join(", ")
                );
            }
            Ok(vec![GuestKernel {
                name: path
                    .file_name()
                    .map_or_else(|| a.to_string(), |n| n.to_string_lossy().into_owned()),
                source: path.display().to_string(),
                vmlinuz: path.to_path_buf(),
            }])
        }
    }
}

/// The newest image of `line`, from the cache or downloaded (`linux-image-…-unsigned`, the
/// same image as the signed package, without the signature wrapper).
pub(crate) fn fetch(env: &Env, line: &KernelLine) -> anyhow::Result<GuestKernel> {
    let dir = &env.guest_dir;
    let package = if let Ok(p) = resolve(line) {
        p
    } else {
        run(
            "apt-get update",
            Command::new("apt-get").args(["update", "-qq"]),
        )?;
        resolve(line)?
    };
    let kdir = dir.join(&package);
    if find_vmlinuz(&kdir).is_none() {
        let dl = dir.join("downloads");
        std::fs::create_dir_all(&dl)?;
        // Unpacked aside and renamed, so an interrupted unpack is never taken for a kernel.
        let partial = dir.join(format!("{package}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        download_and_unpack(&dl, &format!("{package}-unsigned"), &partial)
            .or_else(|_| download_and_unpack(&dl, &package, &partial))?;
        let _ = std::fs::remove_dir_all(&kdir);
        std::fs::rename(&partial, &kdir)
            .with_context(|| format!("rename {} to {}", partial.display(), kdir.display()))?;
    }
    let vmlinuz =
        find_vmlinuz(&kdir).with_context(|| format!("no vmlinuz in {}", kdir.display()))?;
    Ok(GuestKernel {
        name: line.name.to_string(),
        source: package,
        vmlinuz,
    })
}

/// `linux-image-6.1.0-NN-cloud-amd64`: the line's metapackage's dependency.
fn resolve(line: &KernelLine) -> anyhow::Result<String> {
    let deps = output(Command::new("apt-cache").args(["depends", line.meta]))?;
    let package = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-"))
        .map(|p| p.trim().to_string())
        .with_context(|| format!("{} has no linux-image dependency", line.meta))?;
    if !package.starts_with(line.prefix) {
        bail!(
            "{} now depends on {package}, not a {} kernel: update kernels::LINES",
            line.meta,
            line.name
        );
    }
    Ok(package)
}

fn find_vmlinuz(kdir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(kdir.join("boot"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
}
