//! `gatewayd explain AUDIT [--session S] [--policy P]`: every refusal of an audit log in
//! plain words, session by session: what was refused, the record's own message, the part of
//! the policy that decided it (its line in P with `--policy`) and the smallest change that
//! would allow it (`gatewayd_core::audit::explain`). The chain is verified first; a broken
//! one is said, not hidden.
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;
use gatewayd_core::{
    audit::{self, explain},
    policy::spans,
};
use serde_json::Value;

use super::out::outln;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The audit log (JSON Lines) of `gatewayd run`, `serve`, `mcp` or `hook`.
    audit: PathBuf,
    /// Only this session's refusals.
    #[arg(long)]
    session: Option<String>,
    /// The policy the log was written under: each refusal names the line that decided it.
    #[arg(long)]
    policy: Option<PathBuf>,
}

/// Where `field` is in the policy `text` (`FILE:LINE:COLUMN`), or that it is not there.
fn located(policy: &Path, text: &str, field: &[&str]) -> String {
    let root = spans::parse(text).ok();
    let node = root
        .as_ref()
        .and_then(|r| field.iter().try_fold(r, |n, k| n.member(k)));
    match node {
        Some(n) => {
            let (line, col) = spans::line_column(text, n.start);
            format!("{}:{line}:{col}", policy.display())
        }
        None => format!("not set in {}: its default decided", policy.display()),
    }
}

/// The log's records as JSON values (also `policy suggest`'s input).
pub(super) fn records(file: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not an audit record", file.display(), i + 1))
        })
        .collect()
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    match audit::verify(&args.audit, None) {
        Ok(_) => {}
        Err(e) if e.is_broken() => {
            outln!("warning: the chain is BROKEN at {e}: what follows may have been changed")?;
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", args.audit.display())),
    }
    let policy = match &args.policy {
        Some(p) => Some((
            p.as_path(),
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )),
        None => None,
    };
    let all = records(&args.audit)?;
    let mut sessions: Vec<&str> = Vec::new();
    for r in &all {
        let s = r["session"].as_str().unwrap_or("-");
        if explain::is_refusal(r) && !sessions.contains(&s) {
            sessions.push(s);
        }
    }
    sessions.retain(|s| args.session.as_deref().is_none_or(|want| want == *s));
    if sessions.is_empty() {
        outln!("no refusals in {}", args.audit.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    for s in sessions {
        let mine = all
            .iter()
            .filter(|r| r["session"].as_str().unwrap_or("-") == s);
        let refusals: Vec<&Value> = mine.clone().filter(|r| explain::is_refusal(r)).collect();
        let counted: u64 = mine
            .filter(|r| r["reason"] == "denials_aggregated")
            .filter_map(|r| r["detail"]["count"].as_u64())
            .sum();
        outln!(
            "session {s}: {} refusal(s)",
            refusals.len() as u64 + counted
        )?;
        for r in refusals {
            let e = explain::explain(r);
            outln!("  {} {}", r["ts"].as_str().unwrap_or(""), e.what)?;
            if !e.why.is_empty() {
                outln!("      why: {}", e.why)?;
            }
            if !e.field.is_empty() {
                let at = policy.as_ref().map_or(String::new(), |(p, t)| {
                    format!(" ({})", located(p, t, &e.field))
                });
                outln!("      policy: {}{at}", e.field.join("."))?;
            }
            outln!("      to allow: {}", e.change)?;
        }
        if counted > 0 {
            outln!("  and {counted} more like those above, counted in denials_aggregated records")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
