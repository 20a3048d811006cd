//! gatewayd's front ends: the daemon's protocol and server, `gatewayd run`'s supervisor, the
//! MCP proxy and the agent hosts' hooks. The policy, engine and audit chain are in
//! `gatewayd-core`; the kernel layer is in `gatewayd-kernel`.
//!
//! How the pieces fit, the two data flows and where to add a check, a kernel hook or a
//! command: `docs/internals/ARCHITECTURE.md`.
//!
//! Module map:
//! - [`supervisor`] — `gatewayd run`: the agent's lifecycle under both layers
//! - [`protocol`] — the gateway's protocol, typed: one method enum, each method's parameters
//!   and result, the frame, a blocking client that checks the version
//! - [`daemon`]   — `gatewayd serve`: sessions of many agents over a Unix socket
//!   (JSON-RPC, docs/PROTOCOL.md), bound to the callers' cgroups
//! - [`backend`]  — a front end's way to the gateway: the daemon's socket or an engine in
//!   this process, both through the daemon's methods
//! - [`hook`]     — `gatewayd hook`: Claude Code, Codex and Gemini CLI hook events
//! - [`mcp`]      — `gatewayd mcp`: the MCP proxy (stdio, Streamable HTTP), a kernel profile per server
//! - [`shutdown`] — the `Shutdown` signal shared by long-running tasks
//!
//! The command line (`src/cli/`, one file per subcommand) belongs to the `gatewayd` binary.
#![warn(missing_docs, unreachable_pub)]

pub mod backend;
pub mod daemon;
pub mod hook;
pub mod mcp;
pub mod protocol;
pub mod shutdown;
pub mod supervisor;

// Dependencies of the `gatewayd` binary's command line (src/cli): Cargo has no binary-only
// dependencies, and the library itself never uses them.
use anyhow as _;
use clap as _;
use clap_mangen as _;

// Used by the integration tests only.
#[cfg(test)]
use gatewayd_testkit as _;
#[cfg(test)]
use jsonschema as _;
#[cfg(test)]
use regex as _;
