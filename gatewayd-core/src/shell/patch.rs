//! `apply_patch` (and `applypatch`), Codex's file-editing command: its patch, given as its one
//! argument or on its input, names every file it adds, updates, deletes or moves to, and
//! each of those is a write. Codex applies such a patch itself when a shell line is that
//! command alone (with a here-document, after an optional `cd DIR &&`), and otherwise runs
//! it as a program that does the same.
use std::path::Path;

use super::findings::Findings;

/// The patch envelope's lines that name a file: each is a write.
const FILE_MARKERS: [&str; 4] = [
    "*** Add File:",
    "*** Update File:",
    "*** Delete File:",
    "*** Move to:",
];

/// The paths `patch` writes, in order, without repeats. A marker is found on any line, with
/// any blanks around it, wherever Codex's parser would take it (it trims a hunk's header
/// line) and beyond: a line of a file's contents that looks like one is counted too. A
/// patch that names no file is an error (it cannot be decided, so it is refused).
pub fn patch_files(patch: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim();
        for marker in FILE_MARKERS {
            if let Some(path) = line.strip_prefix(marker) {
                let path = path.trim();
                if path.is_empty() {
                    return Err(format!("`{marker}` without a path"));
                }
                if !out.iter().any(|o| o == path) {
                    out.push(path.to_owned());
                }
            }
        }
    }
    if out.is_empty() {
        return Err("the patch names no file (`*** Add/Update/Delete File:`)".into());
    }
    Ok(out)
}

/// What follows `~` in a patch's path that Codex takes from the home directory (`~`, `~/…`:
/// it expands them as its file tools do, from `$HOME`); `None` for any other path.
pub fn below_home(path: &str) -> Option<&str> {
    match path.strip_prefix('~')? {
        "" => Some(""),
        rest => rest.strip_prefix('/').map(|r| r.trim_start_matches('/')),
    }
}

/// `apply_patch PATCH` writes the files PATCH names; with no argument, it reads the patch
/// from its input ([`Findings::patch_from_input`]), which the line must give. A path from
/// the home (`~/…`) is refused in the argument: the here-document form takes it.
pub(super) fn apply_patch(args: &[String], findings: &mut Findings) {
    let name = findings.command().to_owned();
    match args {
        [] => findings.patch_from_input = true,
        [patch] => match patch_files(patch) {
            Ok(files) if files.iter().any(|f| below_home(f).is_some()) => findings.forbid(
                &name,
                "names a path from `~` in its argument: give the patch as a here-document",
            ),
            Ok(files) => {
                for file in files {
                    findings.write(Path::new(&file));
                }
            }
            Err(why) => findings.forbid(&name, &why),
        },
        _ => findings.forbid(&name, "takes one patch, as its argument or on its input"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::test_support::{analyze_line, clean, paths};

    #[test]
    fn every_file_of_the_patch_is_found() {
        let p = "*** Begin Patch\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-x\n+y\n*** Delete File: c.rs\n*** Update File: a.rs\n*** End Patch\n";
        assert_eq!(
            patch_files(p),
            Ok(vec!["a.rs".into(), "b.rs".into(), "c.rs".into()])
        );
        assert!(patch_files("*** Begin Patch\n*** End Patch").is_err());
        assert!(patch_files("*** Add File:   \n").is_err());
    }

    #[test]
    fn a_marker_with_blanks_around_it_names_a_file_as_codex_reads_it() {
        // Codex trims each hunk's header line before it reads the marker.
        let p = "*** Begin Patch\n*** Add File: notes.md\n+x\n   *** Update File: .git/config \t\n@@\n-a\n+b\n*** End Patch\n";
        assert_eq!(
            patch_files(p),
            Ok(vec!["notes.md".into(), ".git/config".into()])
        );
    }

    #[test]
    fn the_patch_is_its_argument_or_its_input() {
        let a = clean("apply_patch '*** Begin Patch\n*** Add File: n.md\n+x\n*** End Patch'");
        assert_eq!(a.writes, paths(&["n.md"]));
        assert!(!a.patch_from_input);
        let a = clean("applypatch");
        assert!(a.patch_from_input && a.writes.is_empty());
        assert!(!analyze_line("apply_patch a b").forbidden.is_empty());
        let home = "apply_patch '*** Begin Patch\n*** Add File: ~/.bashrc\n+x\n*** End Patch'";
        assert!(!analyze_line(home).forbidden.is_empty());
        assert_eq!(below_home("~/.bashrc"), Some(".bashrc"));
        assert_eq!(below_home("~"), Some(""));
        assert_eq!(below_home("~//a"), Some("a"));
        assert_eq!(below_home("~user/a"), None);
        assert_eq!(below_home("a/~"), None);
        assert!(!analyze_line("apply_patch 'no patch'").forbidden.is_empty());
    }
}
