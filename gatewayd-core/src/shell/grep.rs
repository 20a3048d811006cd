//! grep and ripgrep: the first operand is the pattern unless an option gave it; the other
//! operands are files read, or trees walked (`grep -r`, `rgrep`, and `rg` always).

use super::{
    ShellError,
    findings::{Findings, or_working_dir},
    options::{
        Effect, OptionTable, RUNS_ANOTHER_COMMAND,
        ValueSyntax::{Flag, Required},
        long_option, option, parse_options, paths_of,
    },
    walk_filter::FileRule,
};

/// grep (GNU grep 3.8, and `-y`, the old `-i`): `-e` gives the pattern, `-f` reads it;
/// `-r`, `-R` and `-d recurse` walk.
pub(super) const GREP: OptionTable = OptionTable::gnu(&[
    option('e', "regexp", Required, Effect::Pattern),
    option('f', "file", Required, Effect::PatternFile),
    option('d', "directories", Required, Effect::RecursiveIf("recurse")),
    option('r', "recursive", Flag, Effect::Recursive),
    option('R', "dereference-recursive", Flag, Effect::FollowSymlinks),
    long_option("exclude-from", Required, Effect::Read),
    long_option("include", Required, Effect::WalkFiles(FileRule::Include)),
    long_option("exclude", Required, Effect::WalkFiles(FileRule::Exclude)),
    long_option("exclude-dir", Required, Effect::WalkExcludeDir),
])
.inert(
    "-E --extended-regexp -F --fixed-strings -G --basic-regexp -P --perl-regexp -i \
     --ignore-case --no-ignore-case -y -w --word-regexp -x --line-regexp -z --null-data -s \
     --no-messages -v --invert-match -V --version --help -m= --max-count= -b --byte-offset -n \
     --line-number --line-buffered -H --with-filename -h --no-filename --label= -o \
     --only-matching -q --quiet --silent --binary-files= -a --text -I -D= --devices= \
     -L --files-without-match -l --files-with-matches -c \
     --count -T --initial-tab -Z --null -B= --before-context= -A= --after-context= -C= \
     --context= --group-separator= --no-group-separator --color[=] --colour[=] -U --binary",
)
.numeric();

/// grep, egrep, fgrep, and rgrep (`always_recursive`): files after the pattern are read, or
/// walked (default `.`) when recursive.
pub(super) fn grep(
    args: &[String],
    always_recursive: bool,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let parsed = parse_options(args, &GREP, findings)?;
    // -R / --dereference-recursive: recursive and following links.
    let recursive = always_recursive || parsed.recursive || findings.follows_symlinks;
    let files = paths_of(parsed.after_pattern());
    if recursive {
        for root in or_working_dir(files) {
            findings.walk(&root);
        }
        findings.walk_filter = parsed.walk_filter;
    } else {
        for file in files {
            findings.read(&file);
        }
    }
    Ok(())
}

/// rg (ripgrep 14; not installed here, so taken from its flag definitions): `--files` takes
/// no pattern; `--pre` and `--hostname-bin` run programs. Every flag has a `--no-` form.
pub(super) const RG: OptionTable = OptionTable::gnu(&[
    option('e', "regexp", Required, Effect::Pattern),
    option('f', "file", Required, Effect::PatternFile),
    option('L', "follow", Flag, Effect::FollowSymlinks),
    long_option("files", Flag, Effect::NoPattern),
    option('g', "glob", Required, Effect::RipgrepGlob(false)),
    long_option("iglob", Required, Effect::RipgrepGlob(true)),
    long_option("type-list", Flag, Effect::NoPattern),
    long_option("ignore-file", Required, Effect::Read),
    long_option(
        "pre",
        Required,
        Effect::Forbid("runs a preprocessor command on every file"),
    ),
    long_option("hostname-bin", Required, RUNS_ANOTHER_COMMAND),
])
.inert(
    "-A= --after-context= --auto-hybrid-regex --no-auto-hybrid-regex -B= --before-context= \
     --binary --no-binary --block-buffered --no-block-buffered -b --byte-offset \
     --no-byte-offset -s --case-sensitive --color= --colors= --column --no-column -C= \
     --context= --context-separator= --no-context-separator -c --count --count-matches \
     --crlf --no-crlf --debug --dfa-size-limit= -E= --encoding= --no-encoding --engine= \
     --field-context-separator= --field-match-separator= -l --files-with-matches \
     --files-without-match -F --fixed-strings --no-fixed-strings --no-follow --generate= \
     --glob-case-insensitive --no-glob-case-insensitive --heading --no-heading -h \
     --help -. --hidden --no-hidden --hyperlink-format= -i --ignore-case \
     --ignore-file-case-insensitive --no-ignore-file-case-insensitive --include-zero \
     --no-include-zero -v --invert-match --no-invert-match --json --no-json --line-buffered \
     --no-line-buffered -n --line-number -N --no-line-number -x --line-regexp -M= \
     --max-columns= --max-columns-preview --no-max-columns-preview -m= --max-count= -d= \
     --max-depth= --maxdepth= --max-filesize= --mmap --no-mmap -U --multiline --no-multiline \
     --multiline-dotall --no-multiline-dotall --no-config --no-ignore --ignore \
     --no-ignore-dot --ignore-dot --no-ignore-exclude --ignore-exclude --no-ignore-files \
     --ignore-files --no-ignore-global --ignore-global --no-ignore-messages --ignore-messages \
     --no-ignore-parent --ignore-parent --no-ignore-vcs --ignore-vcs --no-messages --messages \
     --no-pcre2-unicode --pcre2-unicode --no-require-git --require-git --no-unicode --unicode \
     -0 --null --null-data --one-file-system --no-one-file-system -o --only-matching \
     --path-separator= --passthru --passthrough -P --pcre2 --no-pcre2 --pcre2-version --no-pre \
     --pre-glob= -p --pretty -q --quiet --regex-size-limit= -r= --replace= -z --search-zip \
     --no-search-zip -S --smart-case --sort-files --no-sort-files --sort= --sortr= --stats \
     --no-stats --stop-on-nonmatch -a --text --no-text -j= --threads= --trace --trim --no-trim \
     -t= --type= --type-add= --type-clear= -T= --type-not= -u --unrestricted -V --version \
     --vimgrep -H --with-filename -I --no-filename -w --word-regexp",
);

/// rg: always walks the operands after the pattern (default `.`), skipping what its own
/// walker skips ([`RipgrepRules`]).
pub(super) fn ripgrep(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let mut parsed = parse_options(args, &RG, findings)?;
    findings.skips_hidden = !ripgrep_shows_hidden(args);
    let mut rules = parsed.walk_filter.ripgrep.take().unwrap_or_default();
    rules.ignore_files = !args.iter().any(|a| {
        a.starts_with("--no-ignore") || a == "--unrestricted" || in_short_cluster(a, &['u'])
    });
    // Every glob ignores case once any word asks (the flag may come after them).
    if args.iter().any(|a| a == "--glob-case-insensitive") {
        for (_, ignores_case) in &mut rules.globs {
            *ignores_case = true;
        }
    }
    findings.walk_filter.ripgrep = Some(rules);
    for root in or_working_dir(paths_of(parsed.after_pattern())) {
        findings.walk(&root);
    }
    Ok(())
}

/// Whether ripgrep's walk enters hidden entries: `--hidden`, or a short-option cluster with
/// `.` or `u` (`-uu` shows hidden entries; one `-u` does not, but any is taken as showing
/// them). Every word is looked at, operands too: a word read wrongly only widens the walk.
fn ripgrep_shows_hidden(args: &[String]) -> bool {
    args.iter()
        .any(|a| a == "--hidden" || in_short_cluster(a, &['.', 'u']))
}

/// Whether `arg` is a cluster of short options (`-nu`) holding one of `flags`.
fn in_short_cluster(arg: &str, flags: &[char]) -> bool {
    arg.strip_prefix('-')
        .is_some_and(|s| !s.starts_with('-') && s.contains(flags))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, forbidden, named, paths, unknown_option};

    #[test]
    fn ripgrep_skips_hidden_entries_unless_told() {
        assert!(clean("rg -n TODO").walks_skip_hidden);
        assert!(clean("rg --files src").walks_skip_hidden);
        for shows in ["rg --hidden x", "rg -uu x", "rg -. x", "rg -nu x"] {
            assert!(!clean(shows).walks_skip_hidden, "{shows}");
        }
        assert!(
            !clean("grep -rn x .").walks_skip_hidden,
            "grep -r reads hidden files"
        );
    }

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
    fn grep_walks_skip_what_include_and_exclude_leave_out() {
        use crate::shell::{FileRule, WalkFilter};
        let a = clean("grep -rn TODO . --include='*.rs' --exclude=x --exclude-dir .git");
        assert_eq!(
            a.walk_filter,
            WalkFilter {
                files: vec![
                    (FileRule::Include, "*.rs".into()),
                    (FileRule::Exclude, "x".into())
                ],
                dirs: vec![".git".into()],
                top_dirs: Vec::new(),
                ripgrep: None,
            }
        );
        assert_eq!(a.recursive_roots, paths(&["."]));
        assert!(
            clean("grep -n x --include='*.rs' a").walk_filter.is_empty(),
            "not recursive: the files named are read"
        );
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

    #[test]
    fn unknown_grep_options_are_refused() {
        assert_eq!(
            unknown_option("grep --no-such-flag x f"),
            named("grep", "--no-such-flag")
        );
        assert_eq!(unknown_option("egrep -rQ x d"), named("egrep", "-Q"));
        assert_eq!(unknown_option("rg --frob x"), named("rg", "--frob"));
        assert_eq!(
            clean("grep -2 -in x f").reads,
            paths(&["f"]),
            "-NUM is context"
        );
        assert_eq!(
            clean("rg --no-follow -. x d").recursive_roots,
            paths(&["d"])
        );
    }
}
