//! The kernel layer: one set of gatewayd's eBPF programs per host, pinned in bpffs and shared
//! by every session; each session's policy lives in the set's maps under its cgroup id, and
//! its kernel denials come back through its own ring buffer as audit entries.
//!
//! - [`programs`] — the one table of kernel programs (attach, events, messages, docs)
//! - [`set`]      — the pinned program set: [`SharedPrograms`] (open, load, adopt, replace)
//! - [`session`]  — one session's entries in the set: [`Session`] (add, lockdown, remove)
//! - [`index`]    — a session's index of its protected trees (every inode under them)
//! - [`enclosing`] — lockdown of the session enclosing a cgroup, by a process that did not add it
//! - [`loader`]   — loading the object and attaching every program (what the set does once)
//! - [`maps`]     — the set's maps as userspace holds them
//! - [`status`]   — the set's record of what each program did when it was made
//! - [`btf`]      — struct member offsets and hook signatures from the running kernel's BTF
//! - [`spec`]     — what to enforce, derived from the policy (protected inodes, egress rules)
//! - [`events`]   — ring-buffer events to audit entries
//! - `unix_sockets` — a session's entries for the Unix sockets its policy lists
//! - [`task`]     — the one task that owns a session's ring buffer; others send it [`task::Command`]s
//! - [`tier`]     — the enforcement tier reached, decided in one place
//! - [`tier1_advice`] — why a kernel is not at tier 1 and how to get there (`doctor`)
//! - [`error`]    — [`KernelError`], with aya's errors as sources
pub mod btf;
pub(crate) mod call_events;
pub(crate) mod call_paths;
pub mod egress_proxy;
pub mod enclosing;
pub(crate) mod error;
pub mod events;
pub(crate) mod index;
pub(crate) mod loader;
pub(crate) mod maps;
pub(crate) mod programs;
mod read_only_names;
pub(crate) mod recorders;
pub(crate) mod session;
pub mod set;
pub mod spec;
pub(crate) mod status;
pub mod task;
pub(crate) mod tier;
pub mod tier1_advice;
mod unix_sockets;

use std::{fs::File, os::unix::fs::MetadataExt as _, path::Path};

use aya::include_bytes_aligned;

pub use error::{KernelError, chain};
pub use programs::{PROGRAMS, Program};
pub use session::Session;
pub use set::SharedPrograms;
pub use spec::KernelSpec;
pub use tier::Tier;

/// The eBPF object built by `build.rs` (empty when built with `GATEWAYD_EBPF_STUB=1`).
static OBJECT: &[u8] = include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gateway"));

/// One program of [`PROGRAMS`] and whether this kernel took it.
#[derive(Debug)]
pub struct PieceStatus {
    /// The program tried.
    pub program: &'static Program,
    /// `Ok` when loaded and attached; otherwise why not, with the kernel's answer.
    pub result: Result<(), KernelError>,
}

impl PieceStatus {
    /// `attached`, or `not <stage>: <why>` (the `session_start` record, `doctor`).
    pub fn state(&self) -> String {
        match &self.result {
            Ok(()) => "attached".into(),
            Err(e) => format!("not {}: {}", e.stage(), e.answer()),
        }
    }
}

/// A throwaway, unpinned copy of the programs, for `doctor`: everything detaches when it is
/// dropped.
pub struct Probe(loader::Loaded);

impl Probe {
    /// What each program did on this kernel, in [`PROGRAMS`] order.
    pub fn status(&self) -> &[PieceStatus] {
        &self.0.status
    }
}

/// For `doctor`: load the object and report which programs this kernel accepts (each loaded
/// and attached, the cgroup programs to the throwaway cgroup `cgroup_dir`, or the reason not).
pub fn probe(cgroup_dir: &Path) -> Result<Probe, KernelError> {
    let cgroup = File::open(cgroup_dir).map_err(|source| KernelError::Cgroup {
        path: cgroup_dir.to_owned(),
        source,
    })?;
    let id = cgroup
        .metadata()
        .map_err(|source| KernelError::Cgroup {
            path: cgroup_dir.to_owned(),
            source,
        })?
        .ino();
    loader::load(&cgroup, id, loader::Links::Owned).map(Probe)
}
