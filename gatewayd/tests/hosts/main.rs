//! The real agent CLIs under gatewayd: Claude Code, Codex and Gemini CLI as installed from
//! the npm registry (pinned by `cargo xtask setup`), driven non-interactively against a
//! scripted model server on loopback, each in a network namespace of its own with loopback
//! only. Per host, four ways: bare (what the attempts do without gatewayd), hooks only,
//! `gatewayd run` alone (the kernel), and `gatewayd run` with the hooks reaching the
//! session's gateway through `$GATEWAYD_SOCKET`. Each prints `HOSTS-RESULT` lines, the
//! per-host table of the closing notes. Needs root; run by `cargo xtask test`.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod codex_code_mode;
mod harness;
mod learn;
mod mcp_learn;
mod package_managers;
mod readme;
mod ripgrep;
mod sessions;

fn gatewayd() -> std::path::PathBuf {
    std::env::var_os("GATEWAYD_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_gatewayd").into(),
        std::path::PathBuf::from,
    )
}
