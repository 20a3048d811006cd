//! docs/internals/ARCHITECTURE.md cannot drift from the tree: its crate table names every
//! workspace member, and each "Modules of `CRATE`" table names exactly the top-level modules
//! that crate's `src/lib.rs` declares.
use std::collections::BTreeSet;

use crate::util::workspace_root;

/// The backticked names in the first column of the table that follows `heading`.
fn first_column(doc: &str, heading: &str) -> BTreeSet<String> {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/internals/ARCHITECTURE.md has no heading {heading:?}"));
    doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .filter_map(|cell| cell.trim().strip_prefix('`')?.strip_suffix('`'))
        .map(str::to_owned)
        .collect()
}

/// The modules `CRATE/src/lib.rs` declares (`mod x;` or `pub mod x;`, not `#[cfg(test)]` ones).
fn declared_modules(krate: &str) -> BTreeSet<String> {
    let lib = workspace_root().join(krate).join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap_or_else(|e| panic!("{}: {e}", lib.display()));
    let mut out = BTreeSet::new();
    let mut test_only = false;
    for line in text.lines().map(str::trim) {
        let decl = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("pub(crate) mod "))
            .or_else(|| line.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';'))
            && !test_only
        {
            out.insert(name.to_owned());
        }
        test_only = line == "#[cfg(test)]";
    }
    out
}

/// The workspace members' package names, as `cargo metadata` reports them.
fn members() -> BTreeSet<String> {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", out.status);
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn architecture_lists_every_crate_and_module() {
    let doc = std::fs::read_to_string(workspace_root().join("docs/internals/ARCHITECTURE.md"))
        .expect("docs/internals/ARCHITECTURE.md");
    assert_eq!(
        first_column(&doc, "## Crates"),
        members(),
        "the crate table"
    );
    for krate in ["gatewayd-core", "gatewayd-kernel", "gatewayd"] {
        let heading = format!("## Modules of `{krate}`");
        assert_eq!(
            first_column(&doc, &heading),
            declared_modules(krate),
            "{heading}: the table and {krate}/src/lib.rs"
        );
    }
}
