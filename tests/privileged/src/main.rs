//! Privileged tests of the kernel layer, against a real kernel: the host's (cgroup egress,
//! cgroup lifecycle, fail-closed refusal without BPF LSM, Landlock in its place) and, inside
//! the QEMU guest booting Debian's kernel, the same file plus the BPF LSM denials.
//!
//! Tests branch on the tier `gatewayd doctor --json` reports (1: BPF LSM, 2: cgroup +
//! Landlock; any other tier fails them), and `GATEWAYD_EXPECT_TIER` says which tier the
//! environment must have: unset, that test fails rather than anything being skipped.
//! Tests of a kernel feature only some kernels have branch on doctor's `features` (see
//! `features.rs`); where a kernel lacks one, the test asserts what that kernel does instead
//! and prints a `KERNEL-NOTE` line saying so, which `cargo xtask test` repeats per kernel.
//! Needs root, cgroup v2 and BPF. Run by `cargo xtask test`.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod agent_process;
mod audit_chain;
mod audit_failure;
mod canary;
mod code_loading;
mod confinement;
mod egress;
mod egress_hosts;
mod egress_l7;
mod egress_proxy;
mod escape;
mod features;
mod file_tree;
mod fleet_kernel;
mod gateway;
mod harness;
mod inbound;
mod inet_protocols;
mod landlock_records;
mod learn;
mod lifetime;
mod limits;
mod mcp_servers;
mod own_listeners;
mod private_tmp;
mod protected_files;
mod protected_names;
mod read_only;
mod sandbox_roots;
mod sessions;
mod shared_objects;
mod starter_toolchains;
mod system_surfaces;
mod terminal;
mod tier2_usable;
mod tiers;
mod unix_sockets;

// What every topic module takes with `use super::*`: the harness and these.
use std::{
    io::Read as _,
    net::UdpSocket,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

pub(crate) use harness::*;
