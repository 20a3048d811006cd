//! gatewayd's core: the policy, the tool-call decision engine, shell-line analysis, the
//! hash-chained audit log and policy scenarios. No kernel, no eBPF build, no syscalls beyond
//! files: `cargo test -p gatewayd-core` runs on stable Rust alone.
//!
//! How the pieces fit and where to add a check: `docs/internals/ARCHITECTURE.md`.
//!
//! Module map:
//! - [`policy`]   — the policy file: shapes, loading, validation (single source of truth)
//! - [`engine`]   — the tool-call decision engine (one module per check, run in the order of `engine/checks`)
//! - [`shell`]    — shell command lines parsed to argv without a shell, and what they touch
//! - [`audit`]    — the hash-chained JSON Lines audit log, its verifier, and the group-commit
//!   writer thread (`audit::writer`)
//! - [`scenario`] — `gatewayd test`: policy tests as data, run on the real engine
//! - [`canonical`] — canonical JSON and SHA-256 hex, shared by the audit chain and fingerprints
//! - [`clock`]    — injected time (every check reads time through a [`clock::Clock`])
//! - [`net`]      — CIDR parsing and matching for the egress allowlist
//! - `sys`        — the few system calls the core makes itself (`openat2`, `getpwnam_r`),
//!   each behind a safe function
#![warn(missing_docs, unreachable_pub)]

pub mod audit;
pub mod canonical;
pub mod clock;
pub mod engine;
pub mod net;
pub mod policy;
pub mod scenario;
pub mod shell;
mod sys;

// Used by the integration tests only (the fixture tree).
#[cfg(test)]
use gatewayd_testkit as _;
