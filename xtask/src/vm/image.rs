//! The guest's image: the privileged test binary, and one busybox initramfs carrying
//! gatewayd, the test agent, the init script of a [`Suite`] and, for the tests, the test
//! binary and the real programs its tests run.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::Suite;
use crate::{
    kernels::GuestKernel,
    util::{self, Bins, Env, workspace_root},
};

/// Builds the privileged test binary (release) and returns its path.
pub(super) fn build_test_binary(env: &Env) -> anyhow::Result<PathBuf> {
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
pub(super) fn initramfs(
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
