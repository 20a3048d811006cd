//! `gatewayd explain`: the refusals of a real audit log (the cookbook's research agent's
//! scenarios, run by `gatewayd test --audit`) in plain words, each with the policy line that
//! decided it and what would allow it; one session's only; a log whose chain is broken says
//! so first.
use std::path::{Path, PathBuf};

use crate::teaching::{gatewayd, text};

pub(crate) fn recipe(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../policies/cookbook/{name}"))
}

/// The cookbook's research agent and the audit log of its scenarios, run by
/// `gatewayd test --audit` into `dir`.
pub(crate) fn research_agent_log(dir: &Path) -> (PathBuf, PathBuf) {
    let audit = dir.join("audit.jsonl");
    let policy = recipe("research-agent.json");
    let run = gatewayd(&[
        "test".as_ref(),
        policy.as_os_str(),
        recipe("research-agent.scenarios.json").as_os_str(),
        "--audit".as_ref(),
        audit.as_os_str(),
    ]);
    assert!(run.status.success(), "{}", text(&run));
    (policy, audit)
}

#[test]
fn explain_names_each_refusal_its_policy_line_and_the_change_that_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, audit) = research_agent_log(dir.path());
    let out = gatewayd(&[
        "explain".as_ref(),
        audit.as_os_str(),
        "--policy".as_ref(),
        policy.as_os_str(),
    ]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("refusal(s)"), "{said}");
    assert!(said.contains("the gateway refused a call to `"), "{said}");
    assert!(said.contains("      to allow: "), "{said}");
    let at = format!("{}:", policy.display());
    assert!(
        said.lines()
            .any(|l| l.trim_start().starts_with("policy: ") && l.contains(&at)),
        "no refusal names its line in the policy:\n{said}"
    );

    let none = gatewayd(&[
        "explain".as_ref(),
        audit.as_os_str(),
        "--session".as_ref(),
        "no-such-session".as_ref(),
    ]);
    assert!(text(&none).contains("no refusals in"), "{}", text(&none));

    let log = std::fs::read_to_string(&audit).unwrap();
    std::fs::write(&audit, log.replacen("\"deny\"", "\"allow\"", 1)).unwrap();
    let broken = text(&gatewayd(&["explain".as_ref(), audit.as_os_str()]));
    assert!(
        broken.starts_with("warning: the chain is BROKEN"),
        "{broken}"
    );
}
