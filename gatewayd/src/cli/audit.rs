//! `gatewayd audit verify F [--anchor H] [--anchors FILE]`
//!
//! Exit codes: 0 intact (`ok: N records, head H`), 1 broken chain (`BROKEN at seq S: why`, or
//! `BROKEN at line L: why` for a line that is not a record) or a log that no longer matches an
//! exported head (`BROKEN at anchor N ...`), 2 usage errors (missing file, malformed anchor).
use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use gatewayd_core::audit;

use super::out::outln;

#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    /// Check the hash chain; names the first broken record.
    Verify {
        /// The audit log (JSON Lines).
        file: PathBuf,
        /// Head hash kept elsewhere: catches truncation and a full rewrite.
        #[arg(long)]
        anchor: Option<String>,
        /// The heads the daemon exported (`serve --export`: JSON lines, `"type": "anchor"`;
        /// other lines are skipped): names the first one the log no longer matches, which
        /// catches a log rewritten with a recomputed chain, and one cut short.
        #[arg(long)]
        anchors: Option<PathBuf>,
    },
}

pub(super) fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Verify {
            file,
            anchor,
            anchors,
        } => verify(file, anchor, anchors),
    }
}

fn verify(
    file: PathBuf,
    anchor: Option<String>,
    anchors: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    match audit::verify(&file, anchor.as_deref()) {
        Ok(rep) => {
            if let Some(path) = anchors {
                let checked = audit::anchors::check_anchors(&file, &path)
                    .with_context(|| format!("audit verify {}", file.display()))?;
                if let Some(m) = checked.first_mismatch {
                    outln!("BROKEN at {m}")?;
                    return Ok(ExitCode::from(1));
                }
                outln!(
                    "anchors: the log matches all {} exported head(s)",
                    checked.anchors
                )?;
            }
            let head = rep.head.as_deref().unwrap_or("none (empty log)");
            let mut line = format!("ok: {} records, head {head}", rep.records);
            if let Some(a) = rep.anchored {
                line.push_str(&format!(
                    "; anchor is seq {}, {} record(s) appended after it",
                    a.seq, a.following
                ));
            }
            outln!("{line}")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.is_broken() => {
            outln!("BROKEN at {e}")?;
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e).with_context(|| format!("audit verify {}", file.display())),
    }
}
