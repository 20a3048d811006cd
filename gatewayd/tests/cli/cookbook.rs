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

/// The cookbook's own two lines, run as written in a folder holding a recipe as
/// `my-policy.json` and its scenarios as `my.scenarios.json`: each recipe in turn.
#[test]
fn the_cookbook_check_lines_run_as_written() {
    let lines = gatewayd_testkit::readme::doc_block("docs/COOKBOOK.md", "sh cookbook-check");
    assert_eq!(lines.len(), 2, "{lines:?}");
    let bin = Path::new(env!("CARGO_BIN_EXE_gatewayd"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary's folder").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for recipe in recipes() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::copy(&recipe, dir.path().join("my-policy.json")).expect("the recipe");
        let scenarios = recipe.with_extension("scenarios.json");
        std::fs::copy(&scenarios, dir.path().join("my.scenarios.json")).expect("its scenarios");
        for line in &lines {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(line)
                .env("PATH", &path)
                .current_dir(dir.path())
                .output()
                .expect("sh");
            assert!(
                out.status.success(),
                "{}: `{line}`: {}",
                recipe.display(),
                text(&out)
            );
        }
    }
}
