//! grep and ripgrep: the first operand is the pattern unless an option gave it; the other
//! operands are files read, or trees walked (`grep -r`, `rgrep`, and `rg` always).

use super::{
    findings::{Findings, or_working_dir},
    options::{
        Effect, OptionTable, RUNS_ANOTHER_COMMAND,
        ValueSyntax::{AttachedOnly, Flag, Required},
        long_option, option, parse_options, paths_of,
    },
};

/// grep: `-e` gives the pattern, `-f` reads it; `-r`, `-R` and `-d recurse` walk.
const GREP: OptionTable = OptionTable::gnu(&[
    option('e', "regexp", Required, Effect::Pattern),
    option('f', "file", Required, Effect::PatternFile),
    option('m', "max-count", Required, Effect::None),
    option('A', "after-context", Required, Effect::None),
    option('B', "before-context", Required, Effect::None),
    option('C', "context", Required, Effect::None),
    option('d', "directories", Required, Effect::RecursiveIf("recurse")),
    option('D', "devices", Required, Effect::None),
    option('r', "recursive", Flag, Effect::Recursive),
    option('R', "dereference-recursive", Flag, Effect::FollowSymlinks),
    long_option("include", Required, Effect::None),
    long_option("exclude", Required, Effect::None),
    long_option("exclude-from", Required, Effect::Read),
    long_option("exclude-dir", Required, Effect::None),
    long_option("label", Required, Effect::None),
    long_option("binary-files", Required, Effect::None),
    long_option("color", AttachedOnly, Effect::None),
    long_option("colour", AttachedOnly, Effect::None),
    long_option("files-with-matches", Flag, Effect::None),
    long_option("files-without-match", Flag, Effect::None),
    long_option("fixed-strings", Flag, Effect::None),
    long_option("line-buffered", Flag, Effect::None),
    long_option("line-number", Flag, Effect::None),
    long_option("line-regexp", Flag, Effect::None),
    long_option("null", Flag, Effect::None),
    long_option("null-data", Flag, Effect::None),
    long_option("context-separator", Required, Effect::None),
]);

/// grep, egrep, fgrep, and rgrep (`always_recursive`): files after the pattern are read, or
/// walked (default `.`) when recursive.
pub(super) fn grep(args: &[String], always_recursive: bool, findings: &mut Findings) {
    let parsed = parse_options(args, &GREP, findings);
    // -R / --dereference-recursive: recursive and following links.
    let recursive = always_recursive || parsed.recursive || findings.follows_symlinks;
    let files = paths_of(parsed.after_pattern());
    if recursive {
        for root in or_working_dir(files) {
            findings.walk(&root);
        }
    } else {
        for file in files {
            findings.read(&file);
        }
    }
}

/// rg: `--files` takes no pattern; `--pre` and `--hostname-bin` run programs.
const RG: OptionTable = OptionTable::gnu(&[
    option('e', "regexp", Required, Effect::Pattern),
    option('f', "file", Required, Effect::PatternFile),
    option('g', "glob", Required, Effect::None),
    long_option("iglob", Required, Effect::None),
    option('t', "type", Required, Effect::None),
    option('T', "type-not", Required, Effect::None),
    long_option("type-add", Required, Effect::None),
    long_option("type-clear", Required, Effect::None),
    option('m', "max-count", Required, Effect::None),
    option('A', "after-context", Required, Effect::None),
    option('B', "before-context", Required, Effect::None),
    option('C', "context", Required, Effect::None),
    option('j', "threads", Required, Effect::None),
    option('M', "max-columns", Required, Effect::None),
    option('E', "encoding", Required, Effect::None),
    option('r', "replace", Required, Effect::None),
    option('d', "max-depth", Required, Effect::None),
    option('L', "follow", Flag, Effect::FollowSymlinks),
    long_option("files", Flag, Effect::NoPattern),
    long_option("type-list", Flag, Effect::NoPattern),
    long_option("max-filesize", Required, Effect::None),
    long_option("ignore-file", Required, Effect::Read),
    long_option(
        "pre",
        Required,
        Effect::Forbid("runs a preprocessor command on every file"),
    ),
    long_option("pre-glob", Required, Effect::None),
    long_option("hostname-bin", Required, RUNS_ANOTHER_COMMAND),
    long_option("sort", Required, Effect::None),
    long_option("sortr", Required, Effect::None),
    long_option("path-separator", Required, Effect::None),
    long_option("colors", Required, Effect::None),
    long_option("color", Required, Effect::None),
    long_option("context-separator", Required, Effect::None),
    long_option("field-match-separator", Required, Effect::None),
    long_option("field-context-separator", Required, Effect::None),
    long_option("dfa-size-limit", Required, Effect::None),
    long_option("regex-size-limit", Required, Effect::None),
    long_option("engine", Required, Effect::None),
    long_option("generate", Required, Effect::None),
    long_option("hyperlink-format", Required, Effect::None),
]);

/// rg: always walks the operands after the pattern (default `.`).
pub(super) fn ripgrep(args: &[String], findings: &mut Findings) {
    let parsed = parse_options(args, &RG, findings);
    for root in or_working_dir(paths_of(parsed.after_pattern())) {
        findings.walk(&root);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn grep_pattern_and_files() {
        let a = clean("grep -n secret a.txt b.txt");
        assert_eq!(
            a.reads,
            paths(&["a.txt", "b.txt"]),
            "first operand is the pattern"
        );
        assert!(a.recursive_roots.is_empty());
        assert_eq!(
            clean("grep -e x -e y a").reads,
            paths(&["a"]),
            "with -e every operand is a file"
        );
        assert_eq!(clean("grep --regexp=x a").reads, paths(&["a"]));
        assert_eq!(clean("grep x").reads, Vec::<PathBuf>::new());
        assert_eq!(clean("grep x -- -f").reads, paths(&["-f"]));
    }

    #[test]
    fn grep_file_valued_options() {
        assert_eq!(clean("grep -f .env x").reads, paths(&[".env", "x"]));
        assert_eq!(clean("grep --file=.env x").reads, paths(&[".env", "x"]));
        assert_eq!(clean("grep --file .env x").reads, paths(&[".env", "x"]));
        assert_eq!(
            clean("grep --exclude-f=/etc/shadow p x").reads,
            paths(&["/etc/shadow", "x"]),
            "abbreviated long option"
        );
        // Ambiguous abbreviation (grep refuses it): its value is still taken as a read.
        assert!(
            clean("grep --fil=.env x")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert_eq!(
            clean("grep -f.env x").reads,
            paths(&[".env", "x"]),
            "attached"
        );
        assert_eq!(clean("grep -nf.env x").reads, paths(&[".env", "x"]));
        assert_eq!(
            clean("grep --exclude-from=/etc/shadow p a").reads,
            paths(&["/etc/shadow", "a"])
        );
        assert_eq!(clean("grep --color=auto p a").reads, paths(&["a"]));
    }

    #[test]
    fn grep_recursive() {
        let a = clean("grep -rf .env x");
        assert_eq!(
            a.reads,
            paths(&[".env", "x"]),
            "combined -r and -f with value"
        );
        assert_eq!(a.recursive_roots, paths(&["x"]));
        let a = clean("grep -r secret /home");
        assert_eq!(a.recursive_roots, paths(&["/home"]));
        assert!(a.reads.contains(&PathBuf::from("/home")));
        assert_eq!(
            clean("grep -r secret").recursive_roots,
            paths(&["."]),
            "defaults to ."
        );
        let a = clean("grep -Rn secret src");
        assert_eq!(a.recursive_roots, paths(&["src"]));
        assert!(a.follows_symlinks);
        assert_eq!(
            clean("grep secret src --recursive").recursive_roots,
            paths(&["src"]),
            "permuted"
        );
        assert_eq!(
            clean("grep --recur secret src").recursive_roots,
            paths(&["src"])
        );
        assert_eq!(
            clean("grep -d recurse secret src").recursive_roots,
            paths(&["src"])
        );
        assert_eq!(
            clean("grep --directories=rec s src").recursive_roots,
            paths(&["src"])
        );
        assert!(clean("grep -d skip s src").recursive_roots.is_empty());
        assert_eq!(clean("rgrep secret /etc").recursive_roots, paths(&["/etc"]));
        assert_eq!(clean("egrep -r 'a|b' d").recursive_roots, paths(&["d"]));
    }

    #[test]
    fn rg_always_walks() {
        assert_eq!(clean("rg secret").recursive_roots, paths(&["."]));
        assert_eq!(
            clean("rg -i secret a b").recursive_roots,
            paths(&["a", "b"])
        );
        assert_eq!(clean("rg -e secret a").recursive_roots, paths(&["a"]));
        assert_eq!(clean("rg --files /home").recursive_roots, paths(&["/home"]));
        let a = clean("rg -f .env -g '*.rs' src");
        assert!(a.reads.contains(&PathBuf::from(".env")));
        assert_eq!(a.recursive_roots, paths(&["src"]));
        assert!(forbidden("rg --pre ./evil x").contains("--pre"));
        assert!(clean("rg -L x").follows_symlinks);
    }
}
