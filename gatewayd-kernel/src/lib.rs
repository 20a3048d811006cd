//! gatewayd's kernel layer: the eBPF programs (built from `../gateway-ebpf` by `build.rs`),
//! their loader and the host's one pinned program set, sessions as map entries, Landlock,
//! the agent's cgroup, privileges, seccomp filter and pre-exec confinement.
//!
//! It reads the policy from `gatewayd-core` and knows nothing of the daemon or front ends.
//! The kernel layer's reference: `docs/KERNEL.md` (its internals: `docs/internals/KERNEL.md`);
//! where things live: `docs/internals/ARCHITECTURE.md`.
//!
//! Module map:
//! - [`kernel`]   — BTF offsets, loading/attaching programs, maps, sessions, events
//! - [`fs_roots`] — `sandbox.readable`/`writable` as the kernel enforces them (both tiers)
//! - [`fs_learn`] — tier 2 learn mode: the agent's file accesses the policy would refuse,
//!   seen with fanotify notification events and recorded `would_deny`
//! - [`landlock`] — Landlock: ABI probe and the tier-2 rulesets
//! - [`landlock_audit`] — Landlock's denials, read from the kernel's audit subsystem
//! - [`agent_privileges`] — whom the agent runs as, what it keeps, its seccomp filter
//! - [`cgroup`]   — the agent's cgroup v2: create, enter, kill, remove
//! - [`confinement`] — the one confinement builder: cgroup, own files, kernel session,
//!   Landlock, and a report of what each step reached (`gatewayd run`, `gatewayd mcp`)
//! - [`session_limits`] — the session cgroup's `pids.max` and `memory.max`, and what it met
//! - [`child`]    — a supervised child: dies with gatewayd, confined before exec
#![warn(missing_docs, unreachable_pub)]

pub mod agent_privileges;
pub mod cgroup;
pub mod child;
pub mod confinement;
pub mod fs_learn;
pub mod fs_roots;
pub mod kernel;
pub mod landlock;
pub mod landlock_audit;
pub mod name_guard;
pub mod server_learn;
pub mod session_limits;
