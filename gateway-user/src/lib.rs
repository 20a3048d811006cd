//! gatewayd: a gateway between an AI agent and its tools, enforced twice — by this daemon on
//! every tool call, and by eBPF programs on every syscall of the agent's cgroup.
//!
//! How the pieces fit, the two data flows and where to add a check, a kernel hook or a
//! command: `docs/ARCHITECTURE.md`.
//!
//! Module map:
//! - [`policy`]   — the policy file: shapes, loading, validation (single source of truth)
//! - [`engine`]   — the tool-call decision engine (one module per check, run in the order of `engine/checks`)
//! - [`shell`]    — shell command lines parsed to argv without a shell, and what they touch
//! - [`audit`]    — the hash-chained JSON Lines audit log, its verifier, and the daemon's
//!   group-commit writer thread (`audit::writer`)
//! - [`canonical`] — canonical JSON and SHA-256 hex, shared by the audit chain and fingerprints
//! - [`clock`]    — injected time (every check reads time through a [`clock::Clock`])
//! - [`net`]      — CIDR parsing and matching for the egress allowlist
//! - [`cgroup`]   — the agent's cgroup v2: create, enter, kill, remove
//! - [`kernel`]   — kernel layer: BTF offsets, loading/attaching programs, maps, events
//! - [`fs_roots`] — `sandbox.readable`/`writable` as the kernel enforces them (both tiers)
//! - [`landlock`] — Landlock: ABI probe and the tier-2 exec ruleset
//! - [`landlock_audit`] — Landlock's denials, read from the kernel's audit subsystem
//! - [`supervisor`] — `gatewayd run`: the agent's lifecycle under both layers
//! - [`agent_privileges`] — whom the agent runs as, what it keeps, its seccomp filter
//! - `child`      — a supervised child: dies with gatewayd, confined before exec
//! - [`daemon`]   — `gatewayd serve`: sessions of many agents over a Unix socket
//!   (JSON-RPC, docs/PROTOCOL.md), bound to the callers' cgroups
//! - [`scenario`] — `gatewayd test`: policy tests as data, run on the real engine
//! - [`backend`]  — a front end's way to the gateway: the daemon's socket or an engine in
//!   this process, both through the daemon's methods
//! - [`hook`]     — `gatewayd hook`: Claude Code, Codex and Gemini CLI hook events
//! - [`mcp`]      — `gatewayd mcp`: the stdio MCP proxy, with a kernel profile per server
//! - [`shutdown`] — the `Shutdown` signal shared by long-running tasks
//!
//! The command line (`src/cli/`, one file per subcommand) belongs to the `gatewayd` binary.
#![warn(missing_docs)]

pub mod agent_privileges;
pub mod audit;
pub mod backend;
pub mod canonical;
pub mod cgroup;
mod child;
pub mod clock;
pub mod daemon;
pub mod engine;
pub mod fs_roots;
pub mod hook;
pub mod kernel;
pub mod landlock;
pub mod landlock_audit;
pub mod mcp;
pub mod net;
pub mod policy;
pub mod scenario;
pub mod shell;
pub mod shutdown;
pub mod supervisor;

// Dependencies of the `gatewayd` binary's command line (src/cli): Cargo has no binary-only
// dependencies, and the library itself never uses them.
use anyhow as _;
use clap as _;
