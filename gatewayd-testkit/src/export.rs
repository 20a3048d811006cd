//! What the audit export tests compare a sink's copy with.
use std::{collections::BTreeMap, path::Path};

/// A host's audit log, line by line, by each record's `seq`.
///
/// # Panics
/// When the log cannot be read or a line is not a record with a `seq`: a test's failure.
pub fn log_by_seq(path: &Path) -> BTreeMap<u64, String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON record");
            (v["seq"].as_u64().expect("a seq"), l.to_owned())
        })
        .collect()
}
