//! The policy cookbook (policies/cookbook/, docs/COOKBOOK.md): each recipe validates as
//! written and passes its scenarios with `gatewayd test`, each scenario file has calls that
//! are allowed and calls that are refused, and the cookbook's page names every recipe.
use std::path::{Path, PathBuf};

use crate::teaching::{gatewayd, text};

fn cookbook() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/cookbook")
}

/// Every recipe's policy (the files that are not `*.scenarios.json`), sorted.
fn recipes() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cookbook())
        .expect("policies/cookbook")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".json") && !name.ends_with(".scenarios.json")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_recipe_validates_and_passes_its_scenarios() {
    let all = recipes();
    let names: Vec<String> = all
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        names,
        [
            "ci-runner",
            "mail-assistant",
            "mcp-server",
            "research-agent",
            "workstation"
        ],
        "the five recipes"
    );
    let page = std::fs::read_to_string(cookbook().join("../../docs/COOKBOOK.md"))
        .expect("docs/COOKBOOK.md");
    for (policy, name) in all.iter().zip(&names) {
        assert!(
            page.contains(&format!("policies/cookbook/{name}.json")),
            "COOKBOOK.md names {name}.json"
        );
        let valid = gatewayd(&["policy".as_ref(), "validate".as_ref(), policy.as_os_str()]);
        assert!(valid.status.success(), "{name}: {}", text(&valid));
        let scenarios = cookbook().join(format!("{name}.scenarios.json"));
        let doc: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&scenarios).expect("the recipe's scenarios"),
        )
        .expect("JSON");
        let decisions: Vec<&str> = doc["scenarios"]
            .as_array()
            .expect("scenarios")
            .iter()
            .flat_map(|s| s["steps"].as_array().into_iter().flatten())
            .filter_map(|step| step["expect"]["decision"].as_str())
            .collect();
        assert!(
            decisions.contains(&"allow") && decisions.contains(&"deny"),
            "{name}: its scenarios show both what works and what is refused"
        );
        let run = gatewayd(&["test".as_ref(), policy.as_os_str(), scenarios.as_os_str()]);
        let out = text(&run);
        assert!(run.status.success(), "{name}: {out}");
        assert!(out.contains(" 0 failed"), "{name}: {out}");
    }
}
