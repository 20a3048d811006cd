//! `gatewayd mcp` with real servers and clients (`servers`), the README's quickstart
//! (`quickstart`), and with hostile or broken peers (`faults`). `support` finds the components `cargo xtask setup` installed.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod faults;
mod learn;
mod quickstart;
mod servers;
mod support;
