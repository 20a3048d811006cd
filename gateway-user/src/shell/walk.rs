//! Commands that walk trees: `find` (its own expression syntax), `ls` (with `-R`), `du` and
//! `tree` (always). A walk with no operand walks the working directory.
use std::path::{Path, PathBuf};

use super::{
    findings::{Findings, or_working_dir},
    options::{
        Effect, OptionTable,
        ValueSyntax::{AttachedOnly, Flag, Required},
        Words, long_option, option, parse_options, paths_of, short_option,
    },
};

/// find tests that take one value that is not a file (`-name PATTERN`, `-mtime N`, …).
const FIND_TESTS_WITH_PLAIN_VALUE: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-lname",
    "-ilname",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-size",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-mtime",
    "-atime",
    "-ctime",
    "-mmin",
    "-amin",
    "-cmin",
    "-maxdepth",
    "-mindepth",
    "-links",
    "-inum",
    "-printf",
    "-used",
    "-fstype",
    "-context",
];

/// Reads the next word as a file (the value of a find test such as `-newer FILE`).
fn read_value(words: &mut Words, findings: &mut Findings) {
    if let Some(file) = words.next() {
        findings.read(Path::new(file));
    }
}

/// `find [-H -L -P -D opts -Olevel] [START…] [EXPRESSION]`: the start points (default `.`) are
/// walked; actions that run commands, delete or write files are forbidden.
pub(super) fn find(args: &[String], findings: &mut Findings) {
    let mut words = Words::new(args);
    // Leading options: -H -L -P -D debugopts -Olevel.
    while let Some(word) = words.peek() {
        match word {
            "-H" | "-P" => {}
            "-L" => findings.follows_symlinks = true,
            "-D" => {
                words.next();
            }
            s if s.starts_with("-O") => {}
            _ => break,
        }
        words.next();
    }
    let is_expression =
        |a: &str| (a.starts_with('-') && a.len() > 1) || matches!(a, "(" | "!" | ")" | ",");
    let mut start_points = Vec::new();
    while let Some(word) = words.peek().filter(|w| !is_expression(w)) {
        start_points.push(PathBuf::from(word));
        words.next();
    }
    while let Some(word) = words.next() {
        match word {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                findings.forbid(word, "runs another command");
                // The command's words run up to `;` or `+`.
                for arg in words.by_ref() {
                    if arg == ";" || arg == "+" {
                        break;
                    }
                }
            }
            "-delete" => findings.forbid(word, "deletes files"),
            "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                findings.forbid(word, "writes to a file");
                if let Some(file) = words.next() {
                    findings.write(Path::new(file));
                }
                if word == "-fprintf" {
                    words.next(); // its format
                }
            }
            "-files0-from" => {
                findings.forbid(
                    word,
                    "takes start points from a file, which cannot be checked",
                );
                read_value(&mut words, findings);
            }
            "-newer" | "-anewer" | "-cnewer" | "-samefile" => read_value(&mut words, findings),
            // -newerXY: Y = t compares with a date, anything else with a file.
            s if s.len() == 8 && s.starts_with("-newer") => {
                if s.ends_with('t') {
                    words.next();
                } else {
                    read_value(&mut words, findings);
                }
            }
            "-follow" => findings.follows_symlinks = true,
            s if FIND_TESTS_WITH_PLAIN_VALUE.contains(&s) => {
                words.next();
            }
            _ => {}
        }
    }
    for root in or_working_dir(start_points) {
        findings.walk(&root);
    }
}

/// ls: `-R` walks, `-L` follows links.
const LS: OptionTable = OptionTable::gnu(&[
    option('I', "ignore", Required, Effect::None),
    option('T', "tabsize", Required, Effect::None),
    option('w', "width", Required, Effect::None),
    option('R', "recursive", Flag, Effect::Recursive),
    option('L', "dereference", Flag, Effect::FollowSymlinks),
    long_option("hide", Required, Effect::None),
    long_option("format", Required, Effect::None),
    long_option("sort", Required, Effect::None),
    long_option("time", Required, Effect::None),
    long_option("time-style", Required, Effect::None),
    long_option("block-size", Required, Effect::None),
    long_option("quoting-style", Required, Effect::None),
    long_option("indicator-style", Required, Effect::None),
    long_option("color", AttachedOnly, Effect::None),
    long_option("hyperlink", AttachedOnly, Effect::None),
    long_option("classify", AttachedOnly, Effect::None),
    long_option("dereference-command-line", Flag, Effect::None),
    long_option(
        "dereference-command-line-symlink-to-dir",
        Flag,
        Effect::None,
    ),
]);

/// ls: the operands (default `.`) are read, or walked with `-R`.
pub(super) fn ls(args: &[String], findings: &mut Findings) {
    let parsed = parse_options(args, &LS, findings);
    for path in or_working_dir(paths_of(&parsed.operands)) {
        findings.read_or_walk(&path, parsed.recursive);
    }
}

/// du: `-X` reads an exclude list; `--files0-from` is forbidden.
pub(super) const DU: OptionTable = OptionTable::gnu(&[
    option('B', "block-size", Required, Effect::None),
    option('d', "max-depth", Required, Effect::None),
    option('t', "threshold", Required, Effect::None),
    option('X', "exclude-from", Required, Effect::Read),
    option('L', "dereference", Flag, Effect::FollowSymlinks),
    long_option("exclude", Required, Effect::None),
    long_option("files0-from", Required, Effect::NamesFrom),
    long_option("time-style", Required, Effect::None),
    long_option("time", AttachedOnly, Effect::None),
]);

/// tree: `-o` writes its output; `--fromfile` reads listings instead of walking.
pub(super) const TREE: OptionTable = OptionTable::gnu(&[
    short_option('L', Required, Effect::None),
    short_option('P', Required, Effect::None),
    short_option('I', Required, Effect::None),
    short_option('o', Required, Effect::Write),
    short_option('H', Required, Effect::None),
    short_option('T', Required, Effect::None),
    short_option('l', Flag, Effect::FollowSymlinks),
    long_option("charset", Required, Effect::None),
    long_option("filelimit", Required, Effect::None),
    long_option("timefmt", Required, Effect::None),
    long_option("sort", Required, Effect::None),
    long_option("gitfile", Required, Effect::Read),
    long_option("hintro", Required, Effect::Read),
    long_option("houtro", Required, Effect::Read),
    long_option("fromfile", Flag, Effect::OperandsAreListings),
]);

/// du, tree: always walk their operands (default `.`), except that `tree --fromfile` reads
/// them as listings.
pub(super) fn walk_operands(args: &[String], table: &OptionTable, findings: &mut Findings) {
    let parsed = parse_options(args, table, findings);
    let paths = paths_of(&parsed.operands);
    if parsed.operands_are_listings {
        for listing in paths {
            findings.read(&listing);
        }
    } else {
        for root in or_working_dir(paths) {
            findings.walk(&root);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::{
        ShellError, analyze, split,
        test_support::{analyze_line, clean, forbidden, paths},
    };

    #[test]
    fn find_walks_and_forbids() {
        let a = clean("find / -name x");
        assert_eq!(a.recursive_roots, paths(&["/"]));
        assert_eq!(clean("find -name x").recursive_roots, paths(&["."]));
        assert_eq!(
            clean("find a b -type f").recursive_roots,
            paths(&["a", "b"])
        );
        let f = forbidden(r"find / -name x -exec rm {} \;");
        assert!(f.contains("find -exec: runs another command"), "{f}");
        assert!(forbidden("find . -delete").contains("-delete"));
        assert!(forbidden("find . -execdir sh -c x +").contains("-execdir"));
        assert!(forbidden(r"find . -ok rm {} \;").contains("-ok"));
        assert!(forbidden(r"find . -okdir rm {} \;").contains("-okdir"));
        let a = analyze_line("find . -fprint /tmp/out");
        assert!(a.forbidden.join(";").contains("-fprint"));
        assert_eq!(a.writes, paths(&["/tmp/out"]));
        assert!(forbidden("find . -fprint0 o").contains("-fprint0"));
        assert!(forbidden("find . -fprintf o %p").contains("-fprintf"));
        assert!(forbidden("find . -fls o").contains("-fls"));
        assert!(forbidden("find -files0-from list").contains("-files0-from"));
        assert!(
            clean("find . -newer .env")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert!(
            clean("find . -newermm .env")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert!(
            !clean("find . -newermt 2024-01-01")
                .reads
                .contains(&PathBuf::from("2024-01-01"))
        );
        assert!(clean("find -L . -name x").follows_symlinks);
        // A -name value that looks like an option is not taken as a test.
        assert!(clean("find . -name -delete").forbidden.is_empty());
    }

    #[test]
    fn ls_du_tree() {
        assert_eq!(clean("ls -la src").reads, paths(&["src"]));
        assert!(clean("ls -la src").recursive_roots.is_empty());
        assert_eq!(clean("ls").reads, paths(&["."]));
        assert_eq!(clean("ls -lR /home").recursive_roots, paths(&["/home"]));
        assert_eq!(clean("ls -R").recursive_roots, paths(&["."]));
        // Through a shell `~` is refused; exec'd directly it is a file named `~`.
        assert!(matches!(
            split("ls -R ~", true),
            Err(ShellError::Metachar { ch: '~', .. })
        ));
        let direct = analyze(&split("ls -R ~", false).expect("split")).expect("analyze");
        assert_eq!(direct.recursive_roots, paths(&["~"]));
        assert_eq!(clean("du -sh").recursive_roots, paths(&["."]));
        assert_eq!(clean("du -d 1 /var").recursive_roots, paths(&["/var"]));
        assert!(forbidden("du --files0-from=list").contains("--files0-from"));
        assert_eq!(clean("tree -L 2 src").recursive_roots, paths(&["src"]));
        assert_eq!(clean("tree").recursive_roots, paths(&["."]));
        assert_eq!(clean("tree -o out.txt").writes, paths(&["out.txt"]));
    }
}
