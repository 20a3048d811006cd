//! Readers and text filters, coreutils and the like: `cat head tail sort wc cut stat file …`
//! read their operands, `less` and `uniq` may write a file, `diff` may walk, `sed` and `awk`
//! take a script first. Their option tables are in `coreutils_tables`; the programs nobody
//! has a table for are read by `builders`.

use super::{
    ShellError,
    builders::UNKNOWN,
    coreutils_tables::{DIFF, LESS, READERS},
    findings::Findings,
    options::{OptionTable, parse_options},
};

/// `stat`, `test` and `[`: each operand is a path whose name and metadata they look at. As
/// in `builders::operands`, a command with an option table (`stat`) takes paths; `test`'s
/// operands are any words (operators, strings, URLs), each looked at as a path only when
/// it could be one.
pub(super) fn look_at_operands(
    command: &str,
    args: &[String],
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let known = READERS.iter().find(|(names, _)| names.contains(&command));
    let table = known.map_or(&UNKNOWN, |(_, table)| table);
    let parsed = parse_options(args, table, findings)?;
    for operand in &parsed.operands {
        if known.is_some() {
            findings.look_at(&operand.path());
        } else {
            findings.look_at_argument(operand.word, &operand.path());
        }
    }
    for value in parsed.unknown_values {
        findings.look_at_argument(value, std::path::Path::new(value));
    }
    Ok(())
}

/// less: `+CMD` operands run less commands at start-up, and `!` there runs a shell.
pub(super) fn less(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &LESS, findings)?;
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
    Ok(())
}

/// xxd: the options xxd 2022 has (`-c 16`, `-c16`; its long spellings `-cols` and the like
/// are not taken).
pub(super) const XXD: OptionTable =
    OptionTable::gnu(&[]).inert("-a -b -C -d -E -e -h -i -p -r -R= -u -v -c= -g= -l= -n= -o= -s=");

/// hostname: prints the host's names; an operand (or `-F FILE`) would set it.
const HOSTNAME: OptionTable = OptionTable::gnu(&[]).inert(
    "-a --alias -A --all-fqdns -b --boot -d --domain -f --fqdn --long -i --ip-address -I \
     --all-ip-addresses -s --short -y --yp --nis -v --verbose -h --help -V --version",
);

/// hostname: prints; a name given would set the host's.
pub(super) fn hostname(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &HOSTNAME, findings)?;
    if !parsed.operands.is_empty() {
        findings.forbid("hostname", "sets the host's name");
    }
    Ok(())
}

/// `uniq [INPUT [OUTPUT]]` and `xxd [INFILE [OUTFILE]]` (also `-r`, which turns a dump
/// back into bytes), each with its `table`: the first operand is read, the second written.
pub(super) fn input_then_output(
    args: &[String],
    table: &OptionTable,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let parsed = parse_options(args, table, findings)?;
    if let Some(input) = parsed.operands.first() {
        findings.read(&input.path());
    }
    for output in parsed.operands.iter().skip(1) {
        findings.write(&output.path());
    }
    Ok(())
}

/// diff: the operands are read, or walked with `-r`, which follows symbolic links unless
/// `--no-dereference` is given.
pub(super) fn diff(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &DIFF, findings)?;
    if parsed.recursive && !args.iter().any(|a| a == "--no-dereference") {
        findings.follows_symlinks = true;
    }
    for operand in &parsed.operands {
        findings.read_or_walk(&operand.path(), parsed.recursive);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden, named, paths, unknown_option};

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
        assert!(forbidden("sed -f script.sed x").contains("not analysed"));
        // In place: its files are written (and their backups); the script is still read.
        let a = clean("sed -i s/a/b/ f g");
        assert_eq!(
            (a.reads, a.writes),
            (paths(&["f", "g"]), paths(&["f", "g"]))
        );
        assert_eq!(clean("sed -i.bak s/a/b/ f").writes, paths(&["f", "f.bak"]));
        assert_eq!(
            clean("sed --in-place=.orig -e s/a/b/ f").writes,
            paths(&["f", "f.orig"])
        );
        assert_eq!(clean("sed -ni p f").writes, paths(&["f"]));
        assert!(forbidden("sed -i'bak/*' s/a/b/ f").contains("pattern"));
        assert!(forbidden("sed -i 'w out' f").contains("script"));
        assert_eq!(clean("awk '{print $1}' a b").reads, paths(&["a", "b"]));
        assert!(forbidden("awk -F: -f prog.awk /etc/passwd").contains("not analysed"));
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
        assert_eq!(a.reads, paths(&[".", "data.json", "/etc/shadow"]));
        assert!(a.writes.is_empty(), "jq only prints");
        assert_eq!(
            clean("hexyl -n 16 id_rsa").reads,
            paths(&["16", "id_rsa"]),
            "unknown options are flags"
        );
    }

    #[test]
    fn xxd_reads_its_input_and_writes_its_output() {
        let a = clean("xxd -l 16 id_rsa");
        assert_eq!((a.reads, a.writes), (paths(&["id_rsa"]), Vec::new()));
        let a = clean("xxd -r -p dump.hex out.bin");
        assert_eq!(
            (a.reads, a.writes),
            (paths(&["dump.hex"]), paths(&["out.bin"]))
        );
        assert!(clean("hostname -I").writes.is_empty());
        assert!(
            crate::shell::test_support::forbidden("hostname evil").contains("sets the host's name")
        );
    }

    #[test]
    fn unknown_options_are_refused_naming_the_command() {
        assert_eq!(unknown_option("cat --unknown x"), named("cat", "--unknown"));
        assert_eq!(unknown_option("cat -nZ x"), named("cat", "-Z"));
        assert_eq!(
            unknown_option("sort --reverse --frob x"),
            named("sort", "--frob")
        );
        assert_eq!(
            unknown_option("sed --frob s/a/b/ f"),
            named("sed", "--frob")
        );
        assert_eq!(unknown_option("less -+S f"), named("less", "-+"));
        assert_eq!(unknown_option("uniq --frob a"), named("uniq", "--frob"));
        assert_eq!(unknown_option("diff --frob a b"), named("diff", "--frob"));
        // Abbreviations of one option, and `-NUM` where the tool takes a count, are known.
        assert_eq!(clean("cat --squeeze x").reads, paths(&["x"]));
        assert_eq!(clean("head -5 x").reads, paths(&["x"]));
        assert_eq!(clean("tail -n +2 -f x").reads, paths(&["x"]));
        assert_eq!(unknown_option("cat -5 x"), named("cat", "-5"));
        // A command nobody knows keeps the cautious reading of its options: each value
        // one may carry may be a file it reads or writes.
        let a = clean("frob --weird -xyz --in=data.txt out");
        assert_eq!(a.reads, paths(&["out", "yz", "data.txt"]));
        assert_eq!(a.writes, a.reads);
    }

    #[test]
    fn options_that_touch_files() {
        assert_eq!(
            clean("sort -T /tmp/s -o out in").writes,
            paths(&["/tmp/s", "out"])
        );
        assert!(forbidden("md5sum -c sums.md5").contains("md5sum -c: checks the files"));
        assert!(forbidden("sha256sum --check sums").contains("-c/--check"));
        assert!(forbidden("file -C -m magic").contains("file -C"));
        assert!(forbidden("wc --files0-from=list").contains("--files0-from"));
        assert!(forbidden("awk -W exec prog.awk f").contains("awk -W"));
        assert!(forbidden("awk -Wsprintf=9,exec f").contains("awk -W"));
        assert_eq!(clean("awk -W version").reads, paths(&[]));
        assert_eq!(clean("mawk -W random=3 1 f").reads, paths(&["f"]));
        assert!(forbidden("gawk --load=./x.so 1 f").contains("-l/--load"));
        let a = clean("diff -r a b");
        assert!(
            a.follows_symlinks,
            "diff -r follows links unless told not to"
        );
        assert_eq!(a.recursive_roots, paths(&["a", "b"]));
        assert!(!clean("diff -r --no-dereference a b").follows_symlinks);
    }

    #[test]
    fn uris_where_paths_are_expected() {
        let f = forbidden("cat file:///etc/passwd");
        assert!(f.contains("cat file:///etc/passwd: is a URI"), "{f}");
        assert!(forbidden("grep -f https://x.test/p a").contains("is a URI"));
        assert!(forbidden("sort -o file:///tmp/o in").contains("is a URI"));
        // Not a URI: a path with `://` inside, read as written.
        assert_eq!(clean("cat a/b://c").reads, paths(&["a/b://c"]));
        // A command nobody knows may take URIs: a local file URI is its path.
        let a = clean("jq . file:///etc/sh%61dow file://localhost/x https://h/y");
        assert_eq!(a.reads, paths(&[".", "/etc/shadow", "/x"]));
        assert!(forbidden("jq . file://evil.test/etc/passwd").contains("host `evil.test`"));
    }
}
