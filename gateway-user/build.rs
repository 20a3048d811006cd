//! Builds `../gateway-ebpf` for bpfel-unknown-none (aya-build runs
//! `rustup run nightly cargo build -Z build-std=core`) and leaves the object at
//! `$OUT_DIR/gateway`, which `src/kernel/` embeds.
//!
//! `GATEWAYD_EBPF_STUB=1` skips that build and writes an empty stub object instead, so that
//! `cargo check`, clippy and the pure-userspace tests run without the eBPF toolchain. A
//! binary built this way refuses to load kernel programs (the loader checks for the stub).
fn main() -> anyhow::Result<()> {
    println!("cargo::rerun-if-env-changed=GATEWAYD_EBPF_STUB");
    let out = std::path::PathBuf::from(
        std::env::var_os("OUT_DIR").ok_or_else(|| anyhow::anyhow!("OUT_DIR unset"))?,
    );
    if std::env::var_os("GATEWAYD_EBPF_STUB").is_some_and(|v| v == "1") {
        std::fs::write(out.join("gateway"), b"")?;
        return Ok(());
    }
    let root_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../gateway-ebpf");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "gateway-ebpf",
            root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
}
