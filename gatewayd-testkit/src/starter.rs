//! `gatewayd policy init`, as the tests call it: the starter policy for a workspace and a home.
use std::{
    path::Path,
    process::{Command, Output},
};

/// Runs `GATEWAYD policy init --out POLICY --workspace WS --home HOME` and returns its output.
pub fn policy_init(
    gatewayd: &Path,
    policy: &Path,
    ws: &Path,
    home: &Path,
) -> std::io::Result<Output> {
    Command::new(gatewayd)
        .args(["policy", "init", "--out"])
        .arg(policy)
        .arg("--workspace")
        .arg(ws)
        .arg("--home")
        .arg(home)
        .output()
}
