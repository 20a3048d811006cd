//! The option tables against the tools themselves, on this machine: every option a known
//! command's help prints (`--help`; git's `-h`; the manual pages of find and of the git
//! subcommands whose `-h` is incomplete; see `help_columns`, `help_formats`) must be in the
//! command's table, taking its value the same way, unless [`EXCEPTIONS`] says why not. A tool that is not installed is skipped and named on stderr; the core set (GNU
//! coreutils, grep, find, tar, git) must be installed.
use std::process::Command;

use super::{
    coreutils_tables::{AWK, DIFF, LESS, READERS, SED, UNIQ},
    file_ops::{CHMOD, CHOWN, CP, LN, MKTEMP, MV, RM, RMDIR},
    git::GLOBAL,
    git_tables::{SUBCOMMANDS, Sub},
    grep::GREP,
    help_columns::{self, Name, Printed, Style},
    help_formats,
    interpreters::{NODE, PERL, PYTHON},
    options::{Effect, OptionSpec, OptionTable, ValueSyntax, long_option},
    tar::TAR,
    walk::{DU, LS, Primary, find_primary},
};

/// Printed options deliberately absent from a table or taking their value differently,
/// each with the reason, as (command, option as printed, why).
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    // Words of a help text that look like options but are not.
    (
        "cut",
        "-M",
        "`-M` is a LIST range (from first to M'th), not an option",
    ),
    (
        "diff",
        "--GTYPE-group-format",
        "a pattern: the table lists --old/new/unchanged/changed-group-format",
    ),
    (
        "diff",
        "--LTYPE-line-format",
        "a pattern: the table lists --old/new/unchanged-line-format",
    ),
    (
        "file",
        "-P",
        "takes NAME=VALUE, which the help does not show",
    ),
    ("find", "-regextype", "the help lists it without its TYPE"),
    (
        "ss",
        "-N",
        "takes the namespace's name (getopt `N:`), which the help does not show",
    ),
    (
        "ss",
        "--net",
        "takes the namespace's name (getopt `N:`), which the help does not show",
    ),
    (
        "find",
        "-n",
        "the manual's `-n` is a numeric argument (less than n), not a primary",
    ),
    (
        "git cat-file",
        "--path",
        "takes a path; the help prints the literal `blob|tree` and its description after one space",
    ),
    (
        "git config",
        "--get-urlmatch",
        "an action flag: the manual writes its operands after it",
    ),
    (
        "git config",
        "--get-color",
        "an action flag: the manual writes its operands after it",
    ),
    (
        "git config",
        "--get-colorbool",
        "an action flag: the manual writes its operands after it",
    ),
    (
        "git format-patch",
        "--base",
        "the manual shows its value optional; git's own -h shows it required",
    ),
    (
        "git am",
        "--resolvemsg",
        "takes a message, which the help does not show",
    ),
    (
        "git shortlog",
        "--committer",
        "shortlog's own flag `-c, --committer` shadows the revision option `--committer=`",
    ),
    (
        "file",
        "--parameter",
        "takes NAME=VALUE, which the help does not show",
    ),
    // git manual pages that write an operand after an option.
    (
        "git blame",
        "--reverse",
        "the manual writes the range after it, which is an operand",
    ),
    (
        "git submodule",
        "--summary-limit",
        "the manual does not show its value",
    ),
    ("git submodule", "-n", "the manual does not show its value"),
    (
        "git submodule",
        "--name",
        "the manual does not show its value",
    ),
    (
        "git submodule",
        "--depth",
        "the manual does not show its value",
    ),
];

/// Whether `command`'s `option` is an exception.
fn excepted(command: &str, name: &Name) -> bool {
    let printed = name.to_string();
    EXCEPTIONS
        .iter()
        .any(|(c, o, _)| *c == command && *o == printed)
}

/// `argv`'s standard output and error, or `None` when it cannot run.
fn run(argv: &[&str]) -> Option<String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .env("LC_ALL", "C")
        .env("MANWIDTH", "200")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .output()
        .ok()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Some(text)
}

/// The table's option named `name` exactly (a negation counts, for a negatable table).
fn exact(table: &OptionTable, name: &Name) -> Option<OptionSpec> {
    match name {
        Name::Short(c) => table.short(*c),
        Name::Long(l) => table.specs().find(|o| o.long == l).or_else(|| {
            let known = |long: &str| table.specs().any(|o| o.long == long);
            let negation = l.strip_prefix("no-").is_some_and(known) || known(&format!("no-{l}"));
            (table.is_negatable() && negation)
                .then(|| long_option("", ValueSyntax::Flag, Effect::None))
        }),
        Name::Numeric => None,
    }
}

/// Where the printed options come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The tool's own help, generated from its option parser.
    Help,
    /// A manual page, written by hand: it writes `--abbrev=<n>` for an optional value too.
    Manual,
}

/// Whether a table's `spec` takes its value the way `printed` says. A long option that
/// takes an optional value may be printed as a flag; a manual may print an optional value
/// as a required one (reading it as optional only reads more words as operands).
fn compatible(name: &Name, printed: ValueSyntax, table: ValueSyntax, source: Source) -> bool {
    use ValueSyntax::*;
    printed == table
        || matches!(
            (name, printed, table),
            (Name::Long(_), Flag, AttachedOnly) | (_, AttachedOnly, AttachedDigits)
        )
        || (source == Source::Manual && (printed, table) == (Required, AttachedOnly))
}

/// What is wrong with `table` for the options `printed` by `command`'s help.
fn problems(command: &str, table: &OptionTable, printed: &[Printed]) -> Vec<String> {
    problems_from(command, table, printed, Source::Help)
}

/// [`problems`], for options read from `source`.
fn problems_from(
    command: &str,
    table: &OptionTable,
    printed: &[Printed],
    source: Source,
) -> Vec<String> {
    let mut out = Vec::new();
    for p in printed {
        if excepted(command, &p.name) {
            continue;
        }
        if p.name == Name::Numeric {
            if !table.is_numeric() {
                out.push(format!("{command}: -NUM (a count) is not accepted"));
            }
            continue;
        }
        match (exact(table, &p.name), p.value) {
            (None, value) => out.push(format!(
                "{command}: {} is missing (the help shows it taking {value:?})",
                p.name
            )),
            (Some(spec), Some(value)) if !compatible(&p.name, value, spec.value, source) => {
                out.push(format!(
                    "{command}: {} takes {value:?} in the help, {:?} in the table",
                    p.name, spec.value
                ));
            }
            _ => {}
        }
    }
    out
}

/// The problems of every checked command, and the tools skipped as not installed.
#[derive(Default)]
struct Report {
    problems: Vec<String>,
    skipped: Vec<String>,
    checked: usize,
}

impl Report {
    /// Checks `table` against what `parse` reads from the output of `argv`, which must
    /// print at least one option.
    fn check(
        &mut self,
        command: &str,
        argv: &[&str],
        table: &OptionTable,
        parse: fn(&str) -> Vec<Printed>,
    ) {
        self.check_may_be_empty(command, argv, table, parse, false);
    }

    /// [`Report::check`]; `may_be_empty`: the help may print no option (git's usage-only
    /// `-h` of commands whose options are in their manual).
    fn check_may_be_empty(
        &mut self,
        command: &str,
        argv: &[&str],
        table: &OptionTable,
        parse: fn(&str) -> Vec<Printed>,
        may_be_empty: bool,
    ) {
        let Some(text) = run(argv) else {
            self.skipped.push(argv.join(" "));
            return;
        };
        let printed = parse(&text);
        if printed.is_empty() && !may_be_empty {
            self.problems
                .push(format!("{}: no option read from its help", argv.join(" ")));
        }
        self.checked += printed.len();
        self.problems.extend(problems(command, table, &printed));
    }

    /// Fails with every problem found.
    fn finish(self) {
        eprintln!(
            "{} printed options checked; skipped (not installed): {:?}",
            self.checked, self.skipped
        );
        assert!(
            self.problems.is_empty(),
            "{} problems:\n{}",
            self.problems.len(),
            self.problems.join("\n")
        );
    }
}

fn gnu(text: &str) -> Vec<Printed> {
    help_columns::columns(text, Style::Gnu, 8)
}

fn git_h(text: &str) -> Vec<Printed> {
    help_columns::columns(text, Style::Git, 6)
}

#[test]
fn gnu_tables_cover_the_help_of_their_tools() {
    let mut report = Report::default();
    for (names, table) in READERS {
        for name in *names {
            report.check(name, &[name, "--help"], table, gnu);
        }
    }
    let tables: &[(&str, &OptionTable)] = &[
        ("uniq", &UNIQ),
        ("diff", &DIFF),
        ("sed", &SED),
        ("grep", &GREP),
        ("egrep", &GREP),
        ("fgrep", &GREP),
        ("ls", &LS),
        ("du", &DU),
        ("tar", &TAR),
        ("cp", &CP),
        ("mv", &MV),
        ("rm", &RM),
        ("rmdir", &RMDIR),
        ("ln", &LN),
        ("gzip", &super::compress::GZIP),
        ("ss", &super::processes::SS),
        ("mktemp", &MKTEMP),
        ("chmod", &CHMOD),
        ("chown", &CHOWN),
        ("chgrp", &CHOWN),
    ];
    for (name, table) in tables {
        report.check(name, &[name, "--help"], table, gnu);
    }
    report.check("less", &["less", "--help"], &LESS, help_formats::less);
    report.check("awk", &["mawk", "-W", "usage"], &AWK, help_formats::mawk);
    report.check("perl", &["perl", "-h"], &PERL, help_formats::perl);
    report.check(
        "python3",
        &["python3", "--help"],
        &PYTHON,
        help_formats::python,
    );
    report.check("node", &["node", "--help"], &NODE, help_formats::node);
    for core in ["cat", "grep", "tar", "ls", "cp"] {
        assert!(
            !report.skipped.iter().any(|s| s.starts_with(core)),
            "{core} must be installed for this test"
        );
    }
    report.finish();
}

/// The number of values find's `primary` takes in the table, `None` when it is missing.
fn find_values(primary: &str) -> Option<usize> {
    Some(match find_primary(primary)? {
        Primary::Flag | Primary::Follows | Primary::Deletes => 0,
        Primary::Value | Primary::ReadsFile | Primary::NamesFrom | Primary::MaxDepth => 1,
        Primary::WritesFile { formats } => 1 + formats,
        Primary::Runs => usize::MAX,
    })
}

/// What is wrong with find's table for the primaries `printed` (with their value counts).
fn find_problems(printed: &[(String, Option<usize>)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, values) in printed {
        // Leading options (read apart by `walk::find`), and the manual's pattern -newerXY.
        let name = match name.as_str() {
            "-H" | "-L" | "-P" | "-O" | "-D" => continue,
            "-newerXY" => "-newerBm",
            n => n,
        };
        if EXCEPTIONS
            .iter()
            .any(|(c, o, _)| *c == "find" && *o == name)
        {
            continue;
        }
        let Some(expected) = find_values(name) else {
            problems.push(format!("find {name} is missing"));
            continue;
        };
        // Operators print their operand expression, not a value.
        let operator = matches!(name, "-not" | "-a" | "-and" | "-o" | "-or");
        if values.is_some_and(|v| v != expected) && !operator {
            problems.push(format!(
                "find {name} takes {expected} values in the table, {values:?} in the help"
            ));
        }
    }
    problems
}

#[test]
fn find_knows_every_primary_of_its_help_and_manual() {
    let text = run(&["find", "--help"]).expect("find must be installed for this test");
    let printed: Vec<(String, Option<usize>)> = help_formats::find(&text)
        .into_iter()
        .map(|(name, values)| (name, Some(values)))
        .collect();
    assert!(printed.len() > 50, "{printed:?}");
    let mut problems = find_problems(&printed);
    match run(&["man", "-P", "cat", "find"]).filter(|t| t.contains("EXPRESSION")) {
        Some(manual) => {
            let printed = help_formats::find_manual(&manual);
            assert!(printed.len() > 60, "{printed:?}");
            problems.extend(find_problems(&printed));
        }
        None => eprintln!("skipped (not installed): man find"),
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A git repository to run `git SUB VERB -h` in (some subcommands need one).
fn scratch_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let status = Command::new("git")
        .args(["init", "-q"])
        .arg(dir.path())
        .status()
        .expect("git must be installed for this test");
    assert!(status.success());
    dir
}

/// The git subcommands whose `-h` does not list every option, and the manual pages that do.
const GIT_MANUALS: &[(&str, &str)] = &[
    ("log", "git-log"),
    ("show", "git-show"),
    ("diff", "git-diff"),
    ("rev-list", "git-rev-list"),
    ("rev-parse", "git-rev-parse"),
    ("format-patch", "git-format-patch"),
    ("shortlog", "git-shortlog"),
    ("blame", "git-blame"),
    ("bisect", "git-bisect"),
    ("config", "git-config"),
    ("submodule", "git-submodule"),
];

#[test]
fn git_tables_cover_git_help() {
    let repo = scratch_repo();
    let repo = repo.path().to_str().expect("utf-8 tempdir");
    let mut report = Report::default();
    // Every subcommand the table lists is one git has.
    let all = run(&["git", "help", "-a"]).expect("git help -a");
    for (sub, _) in SUBCOMMANDS {
        let listed = all
            .lines()
            .any(|l| l.split_whitespace().next() == Some(sub));
        if !listed {
            report
                .problems
                .push(format!("git {sub} is not in `git help -a`"));
        }
    }
    let usage = run(&["git"]).unwrap_or_default();
    let global: Vec<Printed> = usage
        .split(['[', ']', '|'])
        .filter_map(|part| {
            let part = part.trim();
            part.starts_with('-')
                .then(|| help_columns::columns(&format!(" {part}"), Style::Git, 1))
        })
        .flatten()
        .collect();
    report.checked += global.len();
    report.problems.extend(problems("git", &GLOBAL, &global));
    let man = |page: &str| run(&["man", "-P", "cat", page]).filter(|t| t.contains("OPTIONS"));
    if let Some(text) = man("git") {
        let printed = help_columns::man_options(&text);
        report.checked += printed.len();
        report
            .problems
            .extend(problems_from("git", &GLOBAL, &printed, Source::Manual));
    }
    // Outside a repository, `git diff -h` lists every diff option (inside, an old summary).
    let outside = tempfile::tempdir().expect("tempdir");
    let outside = outside.path().to_str().expect("utf-8 tempdir");
    for (sub, how) in SUBCOMMANDS {
        let command = format!("git {sub}");
        match how {
            Sub::Table(table) => {
                let manual = GIT_MANUALS.iter().find(|(s, _)| s == sub);
                let at = if *sub == "diff" { outside } else { repo };
                let argv = ["git", "-C", at, sub, "-h"];
                report.check_may_be_empty(&command, &argv, table, git_h, manual.is_some());
                if let Some((_, page)) = manual {
                    match man(page) {
                        Some(text) => {
                            let printed = help_columns::man_options(&text);
                            report.checked += printed.len();
                            let found = problems_from(&command, table, &printed, Source::Manual);
                            report.problems.extend(found);
                        }
                        None => report.skipped.push(format!("man {page}")),
                    }
                }
            }
            Sub::Verbs(verbs) => {
                let argv = ["git", "-C", repo, sub, "-h"];
                report.check_may_be_empty(&command, &argv, verbs.before, git_h, true);
                for (verb, table) in verbs.verbs {
                    let verb_command = format!("{command} {verb}");
                    let Some(text) = run(&["git", "-C", repo, sub, verb, "-h"]) else {
                        continue;
                    };
                    if !text.contains(&format!("git {sub}")) {
                        report
                            .skipped
                            .push(format!("{verb_command} (not in this git)"));
                        continue;
                    }
                    report.checked += 1;
                    report
                        .problems
                        .extend(problems(&verb_command, table, &git_h(&text)));
                }
            }
        }
    }
    report.finish();
}

#[test]
fn the_check_fails_on_a_missing_option_or_a_wrong_value() {
    let table = OptionTable::gnu(&[]).inert("-a --all -n --lines");
    let printed = gnu("  -a, --all     every\n  -n, --lines=NUM  count\n  -z, --zero   nul\n");
    let found = problems("x", &table, &printed);
    assert_eq!(
        found,
        [
            "x: -n takes Required in the help, Flag in the table",
            "x: --lines takes Required in the help, Flag in the table",
            "x: -z is missing (the help shows it taking Some(Flag))",
            "x: --zero is missing (the help shows it taking Some(Flag))",
        ]
    );
    let printed = gnu("  -NUM   same as -n NUM\n");
    assert_eq!(
        problems("x", &table, &printed),
        ["x: -NUM (a count) is not accepted"]
    );
    assert!(problems("x", &table.numeric(), &printed).is_empty());
}

#[test]
fn every_inert_word_is_an_option() {
    let mut tables: Vec<(&str, &OptionTable)> = vec![
        ("uniq", &UNIQ),
        ("diff", &DIFF),
        ("sed", &SED),
        ("awk", &AWK),
        ("less", &LESS),
        ("grep", &GREP),
        ("rg", &super::grep::RG),
        ("ls", &LS),
        ("du", &DU),
        ("tree", &super::walk::TREE),
        ("tar", &TAR),
        ("cp", &CP),
        ("mv", &MV),
        ("rm", &RM),
        ("rmdir", &RMDIR),
        ("ln", &LN),
        ("chmod", &CHMOD),
        ("chown", &CHOWN),
        ("python", &PYTHON),
        ("node", &NODE),
        ("perl", &PERL),
        ("ruby", &super::interpreters::RUBY),
        ("ss", &super::processes::SS),
        ("git", &GLOBAL),
    ];
    for (names, table) in READERS {
        tables.push((names[0], table));
    }
    for (sub, how) in SUBCOMMANDS {
        match how {
            Sub::Table(table) => tables.push((sub, table)),
            Sub::Verbs(verbs) => {
                tables.push((sub, verbs.before));
                tables.extend(verbs.verbs.iter().map(|(_, t)| (*sub, *t)));
            }
        }
    }
    for (name, table) in tables {
        for word in table.inert_words() {
            assert!(
                super::option_table::inert_spec(word).is_some(),
                "{name}: `{word}` is not an option word"
            );
        }
    }
}
