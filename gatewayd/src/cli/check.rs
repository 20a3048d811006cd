//! `gatewayd check --policy P --call JSON`: one decision, dry run, explained.
//!
//! Exit code: 0 allow, 1 deny, 3 hold (2 stays "gatewayd itself failed").
use std::{collections::BTreeSet, path::PathBuf, process::ExitCode, sync::Arc};

use anyhow::Context;
use gatewayd_core::{
    clock::SystemClock,
    engine::{Decision, Engine, Session, ToolCall},
    policy::Policy,
};

use super::out::{errln, outln};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The policy file (JSON) to decide with.
    #[arg(long)]
    policy: PathBuf,
    /// The tool call as JSON: {"tool": "...", "arguments": {...}}
    #[arg(long)]
    call: String,
    /// A scope the session holds (repeatable). Default: every scope the policy names.
    #[arg(long = "scope")]
    scopes: Vec<String>,
    /// The session's user.
    #[arg(long, default_value = "check")]
    user: String,
    /// The session has already seen untrusted content (Rule of Two).
    #[arg(long)]
    untrusted_seen: bool,
    /// The session has already read private data (Rule of Two).
    #[arg(long)]
    private_read: bool,
    /// Print the verdict as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let policy = Policy::load(&args.policy)?;
    let call: ToolCall = serde_json::from_str(&args.call)
        .context("--call: expected {\"tool\": NAME, \"arguments\": {...}}")?;
    let scopes: BTreeSet<String> = if args.scopes.is_empty() {
        policy
            .tools
            .iter()
            .flat_map(|t| t.scopes.iter().cloned())
            .collect()
    } else {
        args.scopes.iter().cloned().collect()
    };
    let engine = Engine::new(Arc::new(policy), Arc::new(SystemClock), None)?;
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let mut session = Session::new("check", &args.user, &scope_refs);
    if args.untrusted_seen {
        engine.observe_untrusted(&mut session, "");
    }
    if args.private_read {
        session.mark_private();
    }
    let v = engine.decide(&session, &call);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        outln!("decision: {}", v.decision.as_str())?;
        outln!("reason:   {}", v.reason.code())?;
        outln!("message:  {}", v.message)?;
        let rules = if v.matched_rules.is_empty() {
            "(none)".to_string()
        } else {
            v.matched_rules.join(", ")
        };
        outln!("rules:    {rules}")?;
        if !v.hold_reasons.is_empty() {
            outln!("held for: {}", v.hold_reasons.join(", "))?;
        }
        for w in engine.warnings() {
            errln!("note: {w}");
        }
    }
    Ok(match v.decision {
        Decision::Allow => ExitCode::SUCCESS,
        // `Info` and `WouldDeny` mark audit records; a verdict never carries them, and if
        // one did it would not allow.
        Decision::Deny | Decision::Info | Decision::WouldDeny => ExitCode::from(1),
        Decision::Hold => ExitCode::from(3),
    })
}
