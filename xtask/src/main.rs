//! Project tasks. `cargo xtask demo` and `cargo xtask test` are the README's two commands.
//!
//! - `setup`: installs every prerequisite, idempotently, into `~/.cache/gatewayd`
//! - `build`: builds `gatewayd` with its embedded eBPF object
//! - `test`:  fmt, clippy, unit/integration tests, the demo, privileged host tests, the QEMU
//!   guest suite on every Debian kernel line (`kernels::LINES`)
//! - `vm`:    only the QEMU guest suite, on every line or on the one `--kernel` names
//! - `deb`:   the Debian package (binary, systemd units, example policies, docs)
//! - `demo`:  a scripted agent without and with `gatewayd run`
//! - `bench`: the decision benchmark, the kernel layer's syscall overhead, `gatewayd hook`,
//!   the session egress proxy (`--proxy`: only that one), the cost of many sessions
//!   sharing one program set (`--sessions`: only that one), and the kernel layer's cost at
//!   tier 1 in the QEMU guests, one kernel line after the other (`--guests`: only that one)
#[cfg(test)]
mod architecture_doc;
mod bench;
mod bench_hook;
mod deb;
mod demo;
mod kernels;
mod proxy_bench;
mod sessions_bench;
mod setup;
mod test;
mod util;
mod vm;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install prerequisites (apt packages, rust-src, bpf-linker, cargo-deb, guest kernels +
    /// busybox).
    Setup,
    /// Build gatewayd (release) with its kernel programs.
    Build,
    /// Everything: fmt, clippy, tests, the Debian package and its tests, privileged host
    /// tests, QEMU guest suite.
    Test,
    /// Only the QEMU guest suite (BPF LSM), on every kernel line or the one named.
    Vm {
        /// A kernel line (6.1, 6.12) or the path of a kernel image; default: every line.
        #[arg(long)]
        kernel: Option<String>,
    },
    /// The Debian package, in target/debian/.
    Deb,
    /// The demo: an agent that steals a protected file, without and with gatewayd.
    Demo,
    /// Benchmarks: tool-call decisions and audit appends; kernel-layer syscall overhead;
    /// `gatewayd hook`; the session egress proxy; many sessions sharing one program set.
    Bench {
        /// Only the sessions bench (many sessions sharing one program set).
        #[arg(long)]
        sessions: bool,
        /// Only the session egress proxy bench (latency, rate, bulk transfer, memory).
        #[arg(long, conflicts_with = "sessions")]
        proxy: bool,
        /// Only the QEMU guests' bench (BPF LSM, tier 1): `open()`, `connect()` and `exec()`
        /// bare and under gatewayd, and many sessions, on every kernel line in turn.
        #[arg(long, conflicts_with_all = ["sessions", "proxy"])]
        guests: bool,
        /// Only the `gatewayd hook` bench, for this older gatewayd binary and this build in
        /// turn, twice (old against new in the same minutes).
        #[arg(long)]
        hook_against: Option<std::path::PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Setup => {
            let env = setup::setup()?;
            kernels::select(&env, None).map(|_| ())
        }
        Cmd::Build => util::build_release(&setup::toolchain()?).map(|_| ()),
        Cmd::Test => test::all(),
        Cmd::Vm { kernel } => {
            let env = setup::setup()?;
            let kernels = kernels::select(&env, kernel.as_deref())?;
            let bins = util::build_release(&env)?;
            vm::run_suite(&env, &bins, &kernels, vm::Suite::Tests).map(|_| ())
        }
        Cmd::Deb => {
            let env = setup::setup()?;
            deb::package(&env).map(|_| ())
        }
        Cmd::Demo => demo::run(),
        Cmd::Bench {
            hook_against: Some(old),
            ..
        } => bench::hook_against(&old),
        Cmd::Bench {
            sessions,
            proxy,
            guests,
            ..
        } => bench::run(match (sessions, proxy, guests) {
            (true, _, _) => bench::Only::Sessions,
            (_, true, _) => bench::Only::Proxy,
            (_, _, true) => bench::Only::Guests,
            _ => bench::Only::All,
        }),
    }
}
