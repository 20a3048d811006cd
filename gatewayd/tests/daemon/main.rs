//! `gatewayd serve` through its socket: sessions, the CLI against a daemon (and `approvals
//! watch` in tmux), faults, polling, PROTOCOL.md's exchanges replayed byte for byte, and the
//! secrets sessions start with, policy reloads, exported chain heads and the audit export to
//! real sinks (rsyslog, journald, an OTLP receiver), and eight daemons as a fleet exporting to
//! one receiver.
//! `support` starts a daemon in process or as the real binary.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod anchors;
mod approvals_watch;
mod cli;
mod export;
mod export_sinks;
mod export_tls;
mod faults;
mod fleet;
mod polling;
mod protocol;
mod reload;
mod sessions;
mod start_secrets;
mod support;
