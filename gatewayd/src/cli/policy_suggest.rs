//! `gatewayd policy suggest AUDIT [--policy P] [--session S] [--json] [--out FILE]`: a
//! session's refusals turned into proposed policy entries, grouped, each with its reasons
//! and count, and what is never proposed with why (`gatewayd_core::audit::suggest`). The
//! chain is verified first, as `explain` does; `--out` writes the policy with the proposals
//! applied, validated by the policy loader, to a file that does not exist yet.
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context as _, bail};
use gatewayd_core::{
    audit::{
        self,
        suggest::{self, Suggestions, apply},
    },
    policy::Policy,
};
use serde_json::json;

use super::out::outln;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gatewayd policy suggest gatewayd-audit.jsonl --policy policy.json
  gatewayd policy suggest gatewayd-audit.jsonl --policy policy.json --session s1 --json
  gatewayd policy suggest gatewayd-audit.jsonl --policy policy.json --out policy.next.json

Paths are proposed as the smallest directory that covers the refused files (~/.config/APP,
a node_modules folder, /etc/ssl), never / or the home itself. Never proposed: protected
paths and names, secrets, gatewayd's self-protection, the Rule of Two's lockdown
(docs/POLICY.md, \"Suggestions from the audit log\").")]
pub(super) struct Args {
    /// The audit log (JSON Lines) of `gatewayd run`, `serve`, `mcp`, `hook` or `test --audit`.
    audit: PathBuf,
    /// The policy the log was written under: what it already allows is not proposed, and
    /// `--out` adds the proposals to it [default: an empty policy].
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Only this session's refusals.
    #[arg(long)]
    session: Option<String>,
    /// Print the suggestions as JSON.
    #[arg(long)]
    json: bool,
    /// Write the policy with every proposal applied to this file (refused if it exists;
    /// needs --policy). Review it, then `gatewayd policy validate`.
    #[arg(long, requires = "policy")]
    out: Option<PathBuf>,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let broken = match audit::verify(&args.audit, None) {
        Ok(_) => None,
        Err(e) if e.is_broken() => Some(e.to_string()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", args.audit.display())),
    };
    let (text, policy) = match &args.policy {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let policy = Policy::parse(&text, p)?;
            (text, policy)
        }
        None => (
            String::new(),
            Policy::parse("{\"version\": 1}", Path::new("-"))?,
        ),
    };
    let records = super::explain::records(&args.audit)?;
    let s = suggest::suggest(&records, args.session.as_deref(), &policy);
    if args.json {
        let v = json!({"audit": args.audit, "policy": args.policy, "chain_broken": broken,
                       "suggestions": s});
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        if let Some(b) = &broken {
            outln!("warning: the chain is BROKEN at {b}: what follows may have been changed")?;
        }
        print(&args.audit, &s)?;
    }
    if let (Some(out), Some(p)) = (&args.out, &args.policy) {
        if let Some(b) = broken {
            bail!("the audit log's chain is broken ({b}): no policy is written from it");
        }
        write(out, p, &text, &s)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print(audit: &Path, s: &Suggestions) -> anyhow::Result<()> {
    if s.refusals == 0 {
        outln!("no refusals in {}", audit.display())?;
        return Ok(());
    }
    outln!(
        "{}: {} refusal(s) in session(s) {}",
        audit.display(),
        s.refusals,
        s.sessions.join(", ")
    )?;
    if s.proposals.is_empty() {
        outln!("nothing to propose")?;
    } else {
        outln!("proposed (review each; --out FILE writes the policy with them):")?;
    }
    let mut group = None;
    for p in &s.proposals {
        // A tool server's entries go into its profile, under its own headings.
        let server = p.server.as_ref().map(|n| format!("mcp_servers.{n}."));
        let prefix = server.as_deref().unwrap_or("");
        let heading = (p.server.clone(), p.group);
        if group.as_ref() != Some(&heading) {
            group = Some(heading);
            match &p.server {
                Some(n) => outln!("  {} (tool server `{n}`):", p.group.title())?,
                None => outln!("  {}:", p.group.title())?,
            }
        }
        let reasons: Vec<&str> = p.reasons.iter().map(String::as_str).collect();
        outln!("    + {prefix}{} {}", p.field, apply::one_line(&p.value))?;
        outln!(
            "        {} refusal(s), {}; e.g. {}",
            p.count,
            reasons.join(", "),
            p.examples.join(", ")
        )?;
    }
    if !s.not_proposed.is_empty() {
        outln!("not proposed:")?;
    }
    for n in &s.not_proposed {
        let rule = serde_json::to_value(n.rule)?;
        outln!(
            "    - `{}` ({}, {} refusal(s)): {}: {}",
            n.object,
            n.reason,
            n.count,
            rule.as_str().unwrap_or("-"),
            n.why
        )?;
    }
    if s.unattributed > 0 {
        outln!(
            "and {} refusal(s) counted in denials_aggregated records whose first record is not in the log",
            s.unattributed
        )?;
    }
    Ok(())
}

/// Writes `policy`'s text with the proposals applied to `out`, a new file, after the policy
/// loader has accepted it.
fn write(out: &Path, policy: &Path, text: &str, s: &Suggestions) -> anyhow::Result<()> {
    let next = apply::apply(text, &s.proposals)
        .with_context(|| format!("adding the proposals to {}", policy.display()))?;
    Policy::parse(&next, out).context("the policy with the proposals does not validate")?;
    super::policy::write_new(out, &next, "name another file")?;
    outln!(
        "{}: {} with {} proposal(s) applied; review it, then `gatewayd policy validate {}`",
        out.display(),
        policy.display(),
        s.proposals.len(),
        out.display()
    )?;
    Ok(())
}
