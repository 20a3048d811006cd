//! Helpers shared by the unit tests of the command families.
use std::path::PathBuf;

use super::{CommandAnalysis, Extraction, analyze, split};

/// `line` split as a line that runs through a shell; panics when it is refused.
pub(super) fn split_for_shell(line: &str) -> Vec<String> {
    split(line, true).unwrap_or_else(|e| panic!("split {line:?}: {e}"))
}

/// The analysis of `line` split through a shell; panics when either step fails.
pub(super) fn analyze_line(line: &str) -> CommandAnalysis {
    analyze(&split_for_shell(line)).unwrap_or_else(|e| panic!("analyze {line:?}: {e}"))
}

pub(super) fn paths(v: &[&str]) -> Vec<PathBuf> {
    v.iter().map(PathBuf::from).collect()
}

/// The forbidden findings of `line`, joined by `; `; panics when there are none.
pub(super) fn forbidden(line: &str) -> String {
    let a = analyze_line(line);
    assert!(
        !a.forbidden.is_empty(),
        "{line:?} should be forbidden: {a:?}"
    );
    a.forbidden.join("; ")
}

/// The analysis of `line`; panics when anything in it is forbidden.
pub(super) fn clean(line: &str) -> CommandAnalysis {
    let a = analyze_line(line);
    assert!(
        a.forbidden.is_empty(),
        "{line:?} should not be forbidden: {a:?}"
    );
    a
}

/// The command and option of the [`super::ShellError::UnknownOption`] that `line` is
/// refused with; panics when it is not refused so.
pub(super) fn unknown_option(line: &str) -> (String, String) {
    match analyze(&split_for_shell(line)) {
        Err(super::ShellError::UnknownOption { command, option }) => (command, option),
        other => panic!("{line:?} should be refused as an unknown option: {other:?}"),
    }
}

/// `(command, option)` as [`unknown_option`] returns them.
pub(super) fn named(command: &str, option: &str) -> (String, String) {
    (command.to_owned(), option.to_owned())
}

/// An extraction of `archive` below `into`, as `tar -x` and `unzip` name one.
pub(super) fn extraction(
    archive: &str,
    into: &str,
    strip_components: usize,
    junk_paths: bool,
) -> Extraction {
    Extraction {
        archive: PathBuf::from(archive),
        into: PathBuf::from(into),
        strip_components,
        junk_paths,
    }
}
