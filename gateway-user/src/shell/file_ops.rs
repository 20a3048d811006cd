//! Commands that copy, move, remove or change files: `cp mv rm chmod chown chgrp`. What they
//! change is a write; `-r` makes a walk of it (of the sources, for cp).
use std::path::{Path, PathBuf};

use super::{
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{AttachedOnly, Flag, Required},
        Words, long_option, option, parse_options, short_option, split_attached,
    },
};

/// cp, mv: `-t` names the destination directory; `-r -R -a` copy trees.
const CP_MV: OptionTable = OptionTable::gnu(&[
    option('t', "target-directory", Required, Effect::TargetDir),
    option('S', "suffix", Required, Effect::None),
    option('r', "recursive", Flag, Effect::Recursive),
    short_option('R', Flag, Effect::Recursive),
    option('a', "archive", Flag, Effect::Recursive),
    option('L', "dereference", Flag, Effect::FollowSymlinks),
    long_option("no-preserve", Required, Effect::None),
    long_option("sparse", Required, Effect::None),
    long_option("reflink", AttachedOnly, Effect::None),
    long_option("backup", AttachedOnly, Effect::None),
    long_option("preserve", AttachedOnly, Effect::None),
    long_option("update", AttachedOnly, Effect::None),
    long_option("context", AttachedOnly, Effect::None),
    long_option("no-target-directory", Flag, Effect::None),
    long_option("no-dereference", Flag, Effect::None),
]);

/// Whether the sources stay (cp) or go (mv).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transfer {
    Copy,
    Move,
}

/// cp (sources read, walked with -r) and mv (sources read and removed); the destination is the
/// last operand, or the `-t` directory.
pub(super) fn copy_or_move(args: &[String], transfer: Transfer, findings: &mut Findings) {
    let parsed = parse_options(args, &CP_MV, findings);
    let (sources, destination) = match (parsed.target_dir, parsed.operands.split_last()) {
        (Some(dir), _) => (&parsed.operands[..], Some(PathBuf::from(dir))),
        (None, Some((last, init))) if !init.is_empty() => (init, Some(last.path())),
        (None, _) => (&parsed.operands[..], None),
    };
    for source in sources {
        match transfer {
            Transfer::Copy => findings.read_or_walk(&source.path(), parsed.recursive),
            Transfer::Move => {
                findings.read(&source.path());
                findings.write(&source.path());
            }
        }
    }
    if let Some(destination) = destination {
        findings.write(&destination);
    }
}

/// A file the command changes: written, and walked first when the change is recursive.
fn change(path: &Path, recursive: bool, findings: &mut Findings) {
    if recursive {
        findings.walk(path);
    }
    findings.write(path);
}

/// rm: `-r -R` remove trees.
const RM: OptionTable = OptionTable::gnu(&[
    option('r', "recursive", Flag, Effect::Recursive),
    short_option('R', Flag, Effect::Recursive),
    long_option("interactive", AttachedOnly, Effect::None),
    long_option("preserve-root", AttachedOnly, Effect::None),
]);

/// rm: every operand is written (removed), and walked with `-r`.
pub(super) fn rm(args: &[String], findings: &mut Findings) {
    let parsed = parse_options(args, &RM, findings);
    for operand in &parsed.operands {
        change(&operand.path(), parsed.recursive, findings);
    }
}

/// A chmod MODE that looks like an option (`-w`, `-x`, `-rwx`): its letters after the `-`.
fn is_symbolic_mode(letters: &str) -> bool {
    letters
        .chars()
        .all(|c| "rwxXstugoa+-=,01234567".contains(c))
}

/// chmod, chown, chgrp: the first operand is the MODE/OWNER unless `--reference` is given;
/// with `is_chmod`, a word like `-w` or `-x` is chmod's MODE, not an option. The files are
/// written, and walked with `-R`.
pub(super) fn change_attributes(args: &[String], is_chmod: bool, findings: &mut Findings) {
    let mut recursive = false;
    let mut reference = false;
    let mut operands: Vec<&str> = Vec::new();
    let mut options_done = false;
    let mut words = Words::new(args);
    while let Some(word) = words.next() {
        if options_done || word == "-" || !word.starts_with('-') {
            operands.push(word);
        } else if word == "--" {
            options_done = true;
        } else if let Some(body) = word.strip_prefix("--") {
            let (name, attached) = split_attached(body);
            let abbreviates = |long: &str| !name.is_empty() && long.starts_with(name);
            if abbreviates("reference") {
                reference = true;
                if let Some(file) = words.value(attached) {
                    findings.read(Path::new(file));
                }
            } else if abbreviates("from") && attached.is_none() {
                words.next(); // its CURRENT_OWNER:CURRENT_GROUP
            } else if abbreviates("recursive") {
                recursive = true;
            } else if name == "dereference" {
                findings.follows_symlinks = true;
            }
        } else if is_chmod && is_symbolic_mode(&word[1..]) {
            operands.push(word);
        } else {
            for c in word[1..].chars() {
                match c {
                    'R' => recursive = true,
                    'L' => findings.follows_symlinks = true,
                    _ => {}
                }
            }
        }
    }
    let files = if reference {
        &operands[..]
    } else {
        operands.get(1..).unwrap_or(&[])
    };
    for file in files {
        change(Path::new(file), recursive, findings);
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, paths};

    #[test]
    fn cp_mv_rm_chmod() {
        let a = clean("cp .env /tmp/x");
        assert_eq!(a.reads, paths(&[".env"]));
        assert_eq!(a.writes, paths(&["/tmp/x"]));
        let a = clean("cp -r src dst");
        assert_eq!(a.recursive_roots, paths(&["src"]));
        assert_eq!(a.writes, paths(&["dst"]));
        assert_eq!(clean("cp -a src dst").recursive_roots, paths(&["src"]));
        let a = clean("cp -t /out a b");
        assert_eq!((a.reads, a.writes), (paths(&["a", "b"]), paths(&["/out"])));
        let a = clean("mv a b");
        assert_eq!((a.reads, a.writes), (paths(&["a"]), paths(&["a", "b"])));
        let a = clean("rm -rf build");
        assert_eq!(
            (a.recursive_roots, a.writes),
            (paths(&["build"]), paths(&["build"]))
        );
        assert_eq!(clean("rm a").writes, paths(&["a"]));
        let a = clean("chmod -R 600 keys");
        assert_eq!(
            (a.recursive_roots, a.writes),
            (paths(&["keys"]), paths(&["keys"]))
        );
        assert_eq!(clean("chmod -w f").writes, paths(&["f"]), "-w is a mode");
        assert_eq!(clean("chmod --reference=r f").writes, paths(&["f"]));
        assert_eq!(clean("chown root: f").writes, paths(&["f"]));
    }
}
