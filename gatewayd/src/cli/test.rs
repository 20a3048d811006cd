//! `gatewayd test POLICY SCENARIOS...`: policy tests as data (docs/POLICY.md, "Testing a
//! policy"). Runs every scenario of every file on the real engine and prints one table row
//! per step and a summary line.
//!
//! Exit code: 0 every step got what it expected, 1 some did not, 2 a file, the policy or an
//! option could not be used.
use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::ExitCode,
    sync::{Arc, Mutex},
};

use anyhow::Context;
use gatewayd_core::{
    audit::AuditLog,
    clock::SystemClock,
    scenario::{self, run::Row},
};

use super::out::outln;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The policy file.
    policy: PathBuf,
    /// Scenario files (JSON; schema: policies/scenario.schema.json).
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// Replace `@NAME@` in the policy and the scenario files with VALUE (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// Also write every decision's audit record to this hash-chained log.
    #[arg(long)]
    audit: Option<PathBuf>,
    /// Print only failing steps and the summary.
    #[arg(long, short)]
    quiet: bool,
}

/// Longest cell printed (longer ones end in `…`).
const CELL: usize = 60;

fn cell(s: &str) -> String {
    if s.chars().count() <= CELL {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(CELL - 1).collect();
        t.push('…');
        t
    }
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let vars: BTreeMap<String, String> = args
        .vars
        .iter()
        .map(|v| scenario::parse_var(v))
        .collect::<Result<_, _>>()?;
    let text = std::fs::read_to_string(&args.policy)
        .with_context(|| format!("cannot read {}", args.policy.display()))?;
    let audit = match &args.audit {
        Some(p) => Some(Arc::new(Mutex::new(AuditLog::open(
            p,
            Arc::new(SystemClock),
        )?))),
        None => None,
    };
    let runner =
        scenario::run::Runner::new(&args.policy, &scenario::substitute(&text, &vars), audit)?;
    // Every file is read and checked before anything runs.
    let files = args
        .scenarios
        .iter()
        .map(|p| scenario::load(p, &vars).map(|f| (p, f)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows: Vec<(String, Row)> = Vec::new();
    for (path, file) in &files {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        for r in runner.run_file(path, file)? {
            rows.push((format!("{name}: {}", r.scenario), r));
        }
    }
    print_table(&rows, args.quiet)?;
    let failed = rows.iter().filter(|(_, r)| !r.pass).count();
    let scenarios: usize = files.iter().map(|(_, f)| f.scenarios.len()).sum();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    outln!(
        "{} passed, {failed} failed ({} in {})",
        rows.len() - failed,
        plural(scenarios, "scenario"),
        plural(files.len(), "file")
    )?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_table(rows: &[(String, Row)], quiet: bool) -> std::io::Result<()> {
    let shown: Vec<&(String, Row)> = rows.iter().filter(|(_, r)| !quiet || !r.pass).collect();
    if shown.is_empty() {
        return Ok(());
    }
    let step = |r: &Row| format!("{} {}", r.step, r.label);
    let width = |f: &dyn Fn(&(String, Row)) -> String, title: &str| {
        shown
            .iter()
            .map(|x| cell(&f(x)).chars().count())
            .chain([title.len()])
            .max()
            .unwrap_or(0)
    };
    let w = [
        width(&|(s, _)| s.clone(), "SCENARIO"),
        width(&|(_, r)| step(r), "STEP"),
        width(&|(_, r)| r.expected.clone(), "EXPECTED"),
        width(&|(_, r)| r.got.clone(), "GOT"),
    ];
    outln!(
        "{:<a$}  {:<b$}  {:<c$}  {:<d$}  RESULT",
        "SCENARIO",
        "STEP",
        "EXPECTED",
        "GOT",
        a = w[0],
        b = w[1],
        c = w[2],
        d = w[3]
    )?;
    for (s, r) in shown {
        outln!(
            "{:<a$}  {:<b$}  {:<c$}  {:<d$}  {}",
            cell(s),
            cell(&step(r)),
            cell(&r.expected),
            cell(&r.got),
            if r.pass { "PASS" } else { "FAIL" },
            a = w[0],
            b = w[1],
            c = w[2],
            d = w[3]
        )?;
        if !r.pass {
            outln!("    got: {}", r.got)?;
            if let Some(m) = &r.message {
                outln!("    message: {m}")?;
            }
        }
    }
    Ok(())
}
