//! Builds `../gateway-ebpf` for bpfel-unknown-none (aya-build runs
//! `rustup run nightly cargo build -Z build-std=core`) and leaves the object at
//! `$OUT_DIR/gateway`, which `src/kernel/` embeds.
//!
//! aya-build builds in `$OUT_DIR/aya-build/target`, and every configuration of this package
//! (dev and release, clippy's, with the `privileged-tests` feature) has an `OUT_DIR` of its
//! own: `cargo xtask test` built `core` and the programs for bpfel five times over (a minute
//! and more each on 2 cores). So `$OUT_DIR/aya-build` is a symbolic link to one folder,
//! `<target dir>/ebpf`, where they are built once (the inner cargo locks it); the object is
//! still copied to each `OUT_DIR`.
//!
//! `GATEWAYD_EBPF_STUB=1` skips that build and writes an empty stub object instead, so that
//! `cargo check`, clippy and the pure-userspace tests run without the eBPF toolchain. A
//! binary built this way refuses to load kernel programs (the loader checks for the stub).
//!
//! The object's SHA-256 is passed to the crate as `GATEWAYD_OBJECT_SHA256` (hex): the
//! program set's tag names it, and hashing the object at each session start cost more than
//! the rest of the start together in the QEMU guest (about 100 ms of its 250 under TCG).
use sha2::{Digest as _, Sha256};

/// Tells the crate the SHA-256 of the object written at `out/gateway`.
fn pass_object_hash(out: &std::path::Path) -> anyhow::Result<()> {
    let hash = Sha256::digest(std::fs::read(out.join("gateway"))?);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo::rustc-env=GATEWAYD_OBJECT_SHA256={hex}");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    println!("cargo::rerun-if-env-changed=GATEWAYD_EBPF_STUB");
    let out = std::path::PathBuf::from(
        std::env::var_os("OUT_DIR").ok_or_else(|| anyhow::anyhow!("OUT_DIR unset"))?,
    );
    if std::env::var_os("GATEWAYD_EBPF_STUB").is_some_and(|v| v == "1") {
        std::fs::write(out.join("gateway"), b"")?;
        return pass_object_hash(&out);
    }
    let root_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway-ebpf");
    // OUT_DIR is <target dir>/<profile>/build/gatewayd-kernel-<hash>/out.
    if let Some(shared) = out.ancestors().nth(4).map(|target| target.join("ebpf")) {
        std::fs::create_dir_all(&shared)?;
        let link = out.join("aya-build");
        if std::fs::read_link(&link).ok().as_deref() != Some(shared.as_path()) {
            // A folder an older build left, or a link elsewhere (does not follow links).
            let _ = std::fs::remove_dir_all(&link);
            std::os::unix::fs::symlink(&shared, &link)?;
        }
    }
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "gateway-ebpf",
            root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )?;
    pass_object_hash(&out)
}
