//! `gatewayd policy diff OLD NEW [--json]`: what replacing OLD by NEW changes, for a reviewer
//! before a reload (docs/POLICY.md, "Reloading the policy"). Both files are validated first;
//! exit 0 when they decide alike, 1 when they differ, 2 when one is not a valid policy.
use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;
use gatewayd::daemon::policy_digest;
use gatewayd_core::policy::{Policy, diff};
use serde_json::json;

use super::out::outln;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The policy in force (JSON).
    old: PathBuf,
    /// The policy that would replace it (JSON).
    new: PathBuf,
    /// One JSON object: both files with their digests, and the changes.
    #[arg(long)]
    json: bool,
}

pub(super) fn exec(a: Args) -> anyhow::Result<ExitCode> {
    let (old, old_digest) = load(&a.old)?;
    let (new, new_digest) = load(&a.new)?;
    let d = diff::diff(&old, &new);
    if a.json {
        let out = json!({
            "old": {"path": a.old, "digest": old_digest},
            "new": {"path": a.new, "digest": new_digest},
            "changes": d.changes,
        });
        outln!("{out}")?;
    } else {
        outln!(
            "{} ({}) -> {} ({}): {} change(s)",
            a.old.display(),
            &old_digest[..12],
            a.new.display(),
            &new_digest[..12],
            d.changes.len()
        )?;
        for line in d.lines() {
            outln!("{line}")?;
        }
    }
    Ok(if d.changes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The policy in `path`, validated, and the digest of its bytes.
fn load(path: &std::path::Path) -> anyhow::Result<(Policy, String)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text =
        std::str::from_utf8(&bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    Ok((Policy::parse(text, path)?, policy_digest(&bytes)))
}
