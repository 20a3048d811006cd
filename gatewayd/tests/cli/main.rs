//! The `gatewayd` binary's commands, run as a user would: `audit verify`, `check`,
//! `policy validate|pin|suggest`, `explain`, `test` (the project's scenario files) and `hook` for each agent host;
//! the Kubernetes manifests of deploy/kubernetes/ (validated offline, held to the systemd unit).
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod audit;
mod check;
mod cookbook;
mod docs;
mod explain;
mod hook;
mod hook_install;
mod kubernetes;
mod scenarios;
mod suggest;
mod teaching;
