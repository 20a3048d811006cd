//! Readers and text filters, coreutils and the like: `cat head tail sort wc cut stat file …`
//! read their operands, `less` and `uniq` may write a file, `diff` may walk, `sed` and `awk`
//! take a script first. Also the reading of commands nobody knows: every operand is read.

use super::{
    findings::Findings,
    options::{
        Effect, OptionTable, RUNS_ANOTHER_COMMAND, ValueSyntax::*, long_option, option,
        parse_options, short_option,
    },
};

/// Commands this module does not know: no option is known to take a value.
const UNKNOWN: OptionTable = OptionTable::gnu(&[]);

/// Simple readers, by command name: every operand is read. Only the options that take a value
/// or touch a file are listed (an unknown short option is read as a flag).
const READERS: &[(&[&str], OptionTable)] = &[
    (&["cat"], OptionTable::gnu(&[])),
    (
        &["tac"],
        OptionTable::gnu(&[option('s', "separator", Required, Effect::None)]),
    ),
    (
        &["nl"],
        OptionTable::gnu(&[
            option('b', "body-numbering", Required, Effect::None),
            option('d', "section-delimiter", Required, Effect::None),
            option('f', "footer-numbering", Required, Effect::None),
            option('h', "header-numbering", Required, Effect::None),
            option('i', "line-increment", Required, Effect::None),
            option('l', "join-blank-lines", Required, Effect::None),
            option('n', "number-format", Required, Effect::None),
            option('s', "number-separator", Required, Effect::None),
            option('v', "starting-line-number", Required, Effect::None),
            option('w', "number-width", Required, Effect::None),
        ]),
    ),
    (
        &["more"],
        OptionTable::gnu(&[option('n', "lines", Required, Effect::None)]),
    ),
    (
        &["head", "tail"],
        OptionTable::gnu(&[
            option('n', "lines", Required, Effect::None),
            option('c', "bytes", Required, Effect::None),
            option('s', "sleep-interval", Required, Effect::None),
            long_option("pid", Required, Effect::None),
            long_option("max-unchanged-stats", Required, Effect::None),
            long_option("follow", AttachedOnly, Effect::None),
        ]),
    ),
    (
        &["wc", "md5sum", "sha1sum", "sha256sum", "sha512sum"],
        OptionTable::gnu(&[long_option("files0-from", Required, Effect::NamesFrom)]),
    ),
    (
        &["sort"],
        OptionTable::gnu(&[
            option('k', "key", Required, Effect::None),
            option('o', "output", Required, Effect::Write),
            option('t', "field-separator", Required, Effect::None),
            option('S', "buffer-size", Required, Effect::None),
            option('T', "temporary-directory", Required, Effect::None),
            long_option("files0-from", Required, Effect::NamesFrom),
            long_option("compress-program", Required, RUNS_ANOTHER_COMMAND),
            long_option("random-source", Required, Effect::Read),
            long_option("parallel", Required, Effect::None),
            long_option("batch-size", Required, Effect::None),
            long_option("sort", Required, Effect::None),
        ]),
    ),
    (
        &["cut"],
        OptionTable::gnu(&[
            option('b', "bytes", Required, Effect::None),
            option('c', "characters", Required, Effect::None),
            option('f', "fields", Required, Effect::None),
            option('d', "delimiter", Required, Effect::None),
            long_option("output-delimiter", Required, Effect::None),
        ]),
    ),
    (
        &["stat"],
        OptionTable::gnu(&[
            option('c', "format", Required, Effect::None),
            long_option("printf", Required, Effect::None),
            option('L', "dereference", Flag, Effect::None),
        ]),
    ),
    (
        &["file"],
        OptionTable::gnu(&[
            option('m', "magic-file", Required, Effect::Read),
            option('f', "files-from", Required, Effect::NamesFrom),
            option('F', "separator", Required, Effect::None),
            option('e', "exclude", Required, Effect::None),
            option('P', "parameter", Required, Effect::None),
        ]),
    ),
];

/// Reads every operand of `command`, with its table from [`READERS`] (or none, for a
/// command nobody knows). Unknown `--opt=value` values are reads too.
pub(super) fn read_operands(command: &str, args: &[String], findings: &mut Findings) {
    let table = READERS
        .iter()
        .find(|(names, _)| names.contains(&command))
        .map_or(&UNKNOWN, |(_, table)| table);
    let parsed = parse_options(args, table, findings);
    for operand in &parsed.operands {
        findings.read(&operand.path());
    }
}

/// less: the log file options write, the lesskey and tag files are read.
const LESS: OptionTable = OptionTable::gnu(&[
    option('b', "buffers", Required, Effect::None),
    option('h', "max-back-scroll", Required, Effect::None),
    option('j', "jump-target", Required, Effect::None),
    option('k', "lesskey-file", Required, Effect::Read),
    option('o', "log-file", Required, Effect::Write),
    option('O', "LOG-FILE", Required, Effect::Write),
    option('p', "pattern", Required, Effect::None),
    option('P', "prompt", Required, Effect::None),
    option('t', "tag", Required, Effect::None),
    option('T', "tag-file", Required, Effect::Read),
    option('x', "tabs", Required, Effect::None),
    option('y', "max-forw-scroll", Required, Effect::None),
    option('z', "window", Required, Effect::None),
    option('#', "shift", Required, Effect::None),
]);

/// less: `+CMD` operands run less commands at start-up, and `!` there runs a shell.
pub(super) fn less(args: &[String], findings: &mut Findings) {
    let parsed = parse_options(args, &LESS, findings);
    for operand in &parsed.operands {
        if operand.word.starts_with('+') {
            findings.forbid(
                operand.word,
                "runs a less command at start-up (which may run a shell)",
            );
        } else {
            findings.read(&operand.path());
        }
    }
}

/// uniq: only value-taking options.
const UNIQ: OptionTable = OptionTable::gnu(&[
    option('f', "skip-fields", Required, Effect::None),
    option('s', "skip-chars", Required, Effect::None),
    option('w', "check-chars", Required, Effect::None),
    long_option("all-repeated", AttachedOnly, Effect::None),
    long_option("group", AttachedOnly, Effect::None),
]);

/// `uniq [INPUT [OUTPUT]]`: the second operand is written.
pub(super) fn uniq(args: &[String], findings: &mut Findings) {
    let parsed = parse_options(args, &UNIQ, findings);
    if let Some(input) = parsed.operands.first() {
        findings.read(&input.path());
    }
    for output in parsed.operands.iter().skip(1) {
        findings.write(&output.path());
    }
}

/// diff: `-r` walks the operands; `--diff-program` runs one.
const DIFF: OptionTable = OptionTable::gnu(&[
    option('C', "context", Required, Effect::None),
    option('U', "unified", Required, Effect::None),
    option('F', "show-function-line", Required, Effect::None),
    option('I', "ignore-matching-lines", Required, Effect::None),
    option('x', "exclude", Required, Effect::None),
    option('X', "exclude-from", Required, Effect::Read),
    option('S', "starting-file", Required, Effect::None),
    option('L', "label", Required, Effect::None),
    option('D', "ifdef", Required, Effect::None),
    option('W', "width", Required, Effect::None),
    option('r', "recursive", Flag, Effect::Recursive),
    long_option("from-file", Required, Effect::Read),
    long_option("to-file", Required, Effect::Read),
    long_option("diff-program", Required, RUNS_ANOTHER_COMMAND),
    long_option("color", AttachedOnly, Effect::None),
    long_option("palette", Required, Effect::None),
    long_option("tabsize", Required, Effect::None),
    long_option("horizon-lines", Required, Effect::None),
    long_option("line-format", Required, Effect::None),
    long_option("old-line-format", Required, Effect::None),
    long_option("new-line-format", Required, Effect::None),
    long_option("unchanged-line-format", Required, Effect::None),
    long_option("old-group-format", Required, Effect::None),
    long_option("new-group-format", Required, Effect::None),
    long_option("changed-group-format", Required, Effect::None),
    long_option("unchanged-group-format", Required, Effect::None),
]);

/// diff: the operands are read, or walked with `-r`.
pub(super) fn diff(args: &[String], findings: &mut Findings) {
    let parsed = parse_options(args, &DIFF, findings);
    for operand in &parsed.operands {
        findings.read_or_walk(&operand.path(), parsed.recursive);
    }
}

/// sed: `-e` gives the script, `-f` reads it; `-i` edits in place (forbidden).
pub(super) const SED: OptionTable = OptionTable::gnu(&[
    option('e', "expression", Required, Effect::Pattern),
    option('f', "file", Required, Effect::PatternFile),
    option('l', "line-length", Required, Effect::None),
    option('i', "in-place", AttachedOnly, Effect::InPlace),
    option('s', "separate", Flag, Effect::None),
    long_option("sandbox", Flag, Effect::None),
    long_option("silent", Flag, Effect::None),
]);

/// awk: `-f/-E` read the program, `-o -p -d` write; `-l` loads a shared library.
pub(super) const AWK: OptionTable = OptionTable::gnu(&[
    option('f', "file", Required, Effect::PatternFile),
    option('E', "exec", Required, Effect::PatternFile),
    option('e', "source", Required, Effect::Pattern),
    option('i', "include", Required, Effect::Read),
    option(
        'l',
        "load",
        Required,
        Effect::Forbid("loads a shared library"),
    ),
    option('v', "assign", Required, Effect::None),
    option('F', "field-separator", Required, Effect::None),
    short_option('W', Required, Effect::None),
    option('o', "pretty-print", AttachedOnly, Effect::Write),
    option('p', "profile", AttachedOnly, Effect::Write),
    option('d', "dump-variables", AttachedOnly, Effect::Write),
    option('L', "lint", AttachedOnly, Effect::None),
]);

/// sed, awk: the first operand is the script unless one was given by option; the rest are
/// files read (written too with sed -i).
pub(super) fn script_then_files(args: &[String], table: &OptionTable, findings: &mut Findings) {
    let parsed = parse_options(args, table, findings);
    for file in parsed.after_pattern() {
        findings.read(&file.path());
        if parsed.in_place {
            findings.write(&file.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{analyze_line, clean, forbidden, paths};

    #[test]
    fn cat_reads_every_operand() {
        let a = clean("cat a b");
        assert_eq!(a.program, "cat");
        assert_eq!(a.reads, paths(&["a", "b"]));
        assert!(a.recursive_roots.is_empty() && a.writes.is_empty());
        assert_eq!(
            clean("/bin/cat -n -- -x /etc/passwd").reads,
            paths(&["-x", "/etc/passwd"])
        );
        assert_eq!(clean("cat - a").reads, paths(&["a"]), "stdin is not a path");
        assert_eq!(clean("head -n 5 a").reads, paths(&["a"]));
        assert_eq!(clean("head -n5 a").reads, paths(&["a"]));
        assert_eq!(clean("tail --lines 5 a").reads, paths(&["a"]));
        assert_eq!(clean("wc -l a b").reads, paths(&["a", "b"]));
        assert_eq!(clean("cat -n a").reads, paths(&["a"]), "cat -n is a flag");
        assert_eq!(clean("less -N a").reads, paths(&["a"]));
        assert_eq!(clean("less -o log a").writes, paths(&["log"]));
        assert!(forbidden("less '+!id' a").contains("less +!id"));
    }

    #[test]
    fn sed_and_awk() {
        let a = clean("sed -n 1,5p a.txt");
        assert_eq!(a.reads, paths(&["a.txt"]), "first operand is the script");
        assert_eq!(clean("sed -e s/a/b/ x y").reads, paths(&["x", "y"]));
        assert_eq!(
            clean("sed -f script.sed x").reads,
            paths(&["script.sed", "x"])
        );
        let a = analyze_line("sed -i s/a/b/ f");
        assert!(
            a.forbidden
                .join(";")
                .contains("sed -i: edits files in place"),
            "{a:?}"
        );
        assert_eq!(a.writes, paths(&["f"]));
        assert!(forbidden("sed -i.bak s/a/b/ f").contains("-i"));
        assert!(forbidden("sed --in-place s/a/b/ f").contains("-i"));
        assert!(forbidden("sed -ni p f").contains("-i"));
        assert_eq!(clean("awk '{print $1}' a b").reads, paths(&["a", "b"]));
        assert_eq!(
            clean("awk -F: -f prog.awk /etc/passwd").reads,
            paths(&["prog.awk", "/etc/passwd"])
        );
        assert_eq!(clean("awk -v x=1 'BEGIN{}' f").reads, paths(&["f"]));
        assert!(forbidden("gawk -l ./evil.so 1 f").contains("-l"));
    }

    #[test]
    fn uniq_and_sort_write_their_output() {
        assert_eq!(clean("uniq in out").writes, paths(&["out"]));
        assert_eq!(clean("sort -o out in").writes, paths(&["out"]));
    }

    #[test]
    fn generic_fallback_reads_operands() {
        let a = clean("jq . --rawfile=/etc/shadow data.json https://x.y/z -");
        assert_eq!(a.reads, paths(&["/etc/shadow", ".", "data.json"]));
        assert_eq!(
            clean("xxd -l 16 id_rsa").reads,
            paths(&["16", "id_rsa"]),
            "unknown options are flags"
        );
    }
}
