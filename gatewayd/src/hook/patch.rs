//! The files a Codex `apply_patch` touches: every `*** Add File:`, `*** Update File:`,
//! `*** Delete File:` and `*** Move to:` line of the patch envelope. Each one is a write the
//! gateway decides.

/// The paths the patch writes, in order, without repeats. A patch that names none is an
/// error (it cannot be decided, so it is denied).
pub(crate) fn files(patch: &str) -> Result<Vec<String>, String> {
    const MARKERS: [&str; 4] = [
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        for m in MARKERS {
            if let Some(p) = line.strip_prefix(m) {
                let p = p.trim();
                if p.is_empty() {
                    return Err(format!("`{m}` without a path"));
                }
                if !out.iter().any(|o| o == p) {
                    out.push(p.to_owned());
                }
            }
        }
    }
    if out.is_empty() {
        return Err("the patch names no file (`*** Add/Update/Delete File:`)".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_patch() {
        let p = "*** Begin Patch\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-x\n+y\n*** Delete File: c.rs\n*** Update File: a.rs\n*** End Patch\n";
        assert_eq!(files(p).unwrap(), ["a.rs", "b.rs", "c.rs"]);
        assert!(files("*** Begin Patch\n*** End Patch").is_err());
        assert!(files("*** Add File:   \n").is_err());
    }
}
