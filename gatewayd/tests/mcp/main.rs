//! `gatewayd mcp` with real servers and clients (`servers`), the README's quickstart
//! (`quickstart`), with hostile or broken peers (`faults`), and every other message type a
//! server sends, decided or checked (`messages`, through the raw client `peer`), remote servers
//! over Streamable HTTP (`remote`), a loopback HTTP endpoint for the client (`listen`), OAuth
//! through it (`oauth`). `support` finds the components `cargo xtask setup` installed.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod faults;
mod learn;
mod listen;
mod messages;
mod oauth;
mod peer;
mod quickstart;
mod remote;
mod resume;
mod servers;
mod support;
