//! Commands that walk trees: `find` (its own expression syntax), `ls` (with `-R`), `du` and
//! `tree` (always). A walk with no operand walks the working directory.
use std::path::{Path, PathBuf};

use super::{
    ShellError,
    findings::{Findings, or_working_dir},
    options::{
        Effect, OptionTable,
        ValueSyntax::{Flag, Required},
        Words, long_option, option, parse_options, paths_of, short_option,
    },
};

/// What a find primary takes and does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Primary {
    /// No value, no effect on paths (`-print`, `-empty`, `-not`).
    Flag,
    /// One value that is not a file (`-name PATTERN`, `-mtime N`).
    Value,
    /// One value, a file whose times or identity are read (`-newer FILE`).
    ReadsFile,
    /// Start points from a file, which cannot be checked: forbidden.
    NamesFrom,
    /// Writes the file its value names: forbidden; `formats` more values follow.
    WritesFile { formats: usize },
    /// Runs a command, whose words run up to `;` or `+`: forbidden.
    Runs,
    /// Deletes what it finds: forbidden.
    Deletes,
    /// Follows symbolic links (`-follow`).
    Follows,
    /// `-maxdepth LEVELS`: 0 and 1 make the search a read, not a walk.
    MaxDepth,
}

/// Every primary of GNU find 4.9 (options, tests, actions, operators) but `-newerXY`, which
/// [`newer_xy`] reads.
pub(super) const FIND_PRIMARIES: &[(&str, Primary)] = &[
    // Options.
    ("-d", Primary::Flag),
    ("-depth", Primary::Flag),
    ("-daystart", Primary::Flag),
    ("-follow", Primary::Follows),
    ("-files0-from", Primary::NamesFrom),
    ("-help", Primary::Flag),
    ("--help", Primary::Flag),
    ("-ignore_readdir_race", Primary::Flag),
    ("-noignore_readdir_race", Primary::Flag),
    ("-maxdepth", Primary::MaxDepth),
    ("-mindepth", Primary::Value),
    ("-mount", Primary::Flag),
    ("-xdev", Primary::Flag),
    ("-noleaf", Primary::Flag),
    ("-nowarn", Primary::Flag),
    ("-warn", Primary::Flag),
    ("-regextype", Primary::Value),
    ("-version", Primary::Flag),
    ("--version", Primary::Flag),
    // Tests.
    ("-amin", Primary::Value),
    ("-anewer", Primary::ReadsFile),
    ("-atime", Primary::Value),
    ("-cmin", Primary::Value),
    ("-cnewer", Primary::ReadsFile),
    ("-context", Primary::Value),
    ("-ctime", Primary::Value),
    ("-empty", Primary::Flag),
    ("-executable", Primary::Flag),
    ("-false", Primary::Flag),
    ("-fstype", Primary::Value),
    ("-gid", Primary::Value),
    ("-group", Primary::Value),
    ("-ilname", Primary::Value),
    ("-iname", Primary::Value),
    ("-inum", Primary::Value),
    ("-ipath", Primary::Value),
    ("-iregex", Primary::Value),
    ("-iwholename", Primary::Value),
    ("-links", Primary::Value),
    ("-lname", Primary::Value),
    ("-mmin", Primary::Value),
    ("-mtime", Primary::Value),
    ("-name", Primary::Value),
    ("-newer", Primary::ReadsFile),
    ("-nogroup", Primary::Flag),
    ("-nouser", Primary::Flag),
    ("-path", Primary::Value),
    ("-perm", Primary::Value),
    ("-readable", Primary::Flag),
    ("-regex", Primary::Value),
    ("-samefile", Primary::ReadsFile),
    ("-size", Primary::Value),
    ("-true", Primary::Flag),
    ("-type", Primary::Value),
    ("-uid", Primary::Value),
    ("-used", Primary::Value),
    ("-user", Primary::Value),
    ("-wholename", Primary::Value),
    ("-writable", Primary::Flag),
    ("-xtype", Primary::Value),
    // Actions.
    ("-delete", Primary::Deletes),
    ("-exec", Primary::Runs),
    ("-execdir", Primary::Runs),
    ("-ok", Primary::Runs),
    ("-okdir", Primary::Runs),
    ("-fls", Primary::WritesFile { formats: 0 }),
    ("-fprint", Primary::WritesFile { formats: 0 }),
    ("-fprint0", Primary::WritesFile { formats: 0 }),
    ("-fprintf", Primary::WritesFile { formats: 1 }),
    ("-ls", Primary::Flag),
    ("-print", Primary::Flag),
    ("-print0", Primary::Flag),
    ("-printf", Primary::Value),
    ("-prune", Primary::Flag),
    ("-quit", Primary::Flag),
    // Operators (`( ) ! ,` are not options).
    ("-not", Primary::Flag),
    ("-a", Primary::Flag),
    ("-and", Primary::Flag),
    ("-o", Primary::Flag),
    ("-or", Primary::Flag),
];

/// find's `-newerXY` (X, Y among `a B c m`, Y also `t`): `Some(true)` when it compares with
/// a file (read), `Some(false)` with a date (`t`), `None` when `word` is not one.
fn newer_xy(word: &str) -> Option<bool> {
    let xy = word.strip_prefix("-newer")?.as_bytes();
    match xy {
        [x, y] if b"aBcm".contains(x) && b"aBcmt".contains(y) => Some(*y != b't'),
        _ => None,
    }
}

/// find's primary `word`, `-newerXY` included.
pub(super) fn find_primary(word: &str) -> Option<Primary> {
    if let Some(reads_file) = newer_xy(word) {
        return Some(if reads_file {
            Primary::ReadsFile
        } else {
            Primary::Value
        });
    }
    FIND_PRIMARIES
        .iter()
        .find(|(name, _)| *name == word)
        .map(|(_, p)| *p)
}

/// `find [-H -L -P -D opts -Olevel] [START…] [EXPRESSION]`: the start points (default `.`)
/// are walked, or only read with `-maxdepth 0` (the start points themselves) or
/// `-maxdepth 1` (their entries, as `ls` lists them); actions that run commands, delete or
/// write files are forbidden; a primary find does not have is refused.
pub(super) fn find(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let mut words = Words::new(args);
    // Leading options: -H -L -P -D debugopts -Olevel.
    while let Some(word) = words.peek() {
        match word {
            "-H" | "-P" => {}
            "-L" => findings.follows_symlinks = true,
            "-D" => {
                words.next();
            }
            s if s.starts_with("-O") && s[2..].chars().all(|c| c.is_ascii_digit()) => {}
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
    // The last -maxdepth wins (find applies it wherever it is); unreadable: a walk.
    let mut max_depth: Option<u64> = None;
    while let Some(word) = words.next() {
        if !is_expression(word) || matches!(word, "(" | "!" | ")" | ",") {
            continue; // operators, or a stray word find itself refuses
        }
        let primary = find_primary(word).ok_or_else(|| ShellError::UnknownOption {
            command: "find".into(),
            option: word.into(),
        })?;
        match primary {
            Primary::Flag => {}
            Primary::Value => {
                words.next();
            }
            Primary::ReadsFile => {
                if let Some(file) = words.next() {
                    findings.read(Path::new(file));
                }
            }
            Primary::NamesFrom => {
                findings.forbid(
                    word,
                    "takes start points from a file, which cannot be checked",
                );
                if let Some(file) = words.next() {
                    findings.read(Path::new(file));
                }
            }
            Primary::WritesFile { formats } => {
                findings.forbid(word, "writes to a file");
                if let Some(file) = words.next() {
                    findings.write(Path::new(file));
                }
                for _ in 0..formats {
                    words.next();
                }
            }
            Primary::Runs => {
                findings.forbid(word, "runs another command");
                // The command's words run up to `;` or `+`.
                for arg in words.by_ref() {
                    if arg == ";" || arg == "+" {
                        break;
                    }
                }
            }
            Primary::Deletes => findings.forbid(word, "deletes files"),
            Primary::Follows => findings.follows_symlinks = true,
            Primary::MaxDepth => max_depth = words.next().and_then(|d| d.parse().ok()),
        }
    }
    let shallow = max_depth.is_some_and(|depth| depth <= 1);
    for root in or_working_dir(start_points) {
        findings.read_or_walk(&root, !shallow);
    }
    Ok(())
}

/// ls: `-R` walks, `-L` follows links.
pub(super) const LS: OptionTable = OptionTable::gnu(&[
    option('R', "recursive", Flag, Effect::Recursive),
    option('L', "dereference", Flag, Effect::FollowSymlinks),
])
.inert(
    "-a --all -A --almost-all --author -b --escape --block-size= -B --ignore-backups -c -C \
     --color[=] -d --directory -D --dired -f -F --classify[=] --file-type --format= \
     --full-time -g --group-directories-first -G --no-group -h --human-readable --si -H \
     --dereference-command-line --dereference-command-line-symlink-to-dir --hide= \
     --hyperlink[=] --indicator-style= -i --inode -I= --ignore= -k --kibibytes -l -m -n \
     --numeric-uid-gid -N --literal -o -p -q --hide-control-chars --show-control-chars -Q \
     --quote-name --quoting-style= -r --reverse -s --size -S --sort= --time= --time-style= -t \
     -T= --tabsize= -u -U -v -w= --width= -x -X -Z --context --zero -1 --help --version",
);

/// ls: the operands (default `.`) are read, or walked with `-R`.
pub(super) fn ls(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &LS, findings)?;
    for path in or_working_dir(paths_of(&parsed.operands)) {
        if parsed.recursive {
            findings.walk(&path);
        } else {
            findings.look_at(&path);
        }
    }
    Ok(())
}

/// du: `-X` reads an exclude list; `--files0-from` is forbidden.
pub(super) const DU: OptionTable = OptionTable::gnu(&[
    option('X', "exclude-from", Required, Effect::Read),
    option('L', "dereference", Flag, Effect::FollowSymlinks),
    long_option("files0-from", Required, Effect::NamesFrom),
])
.inert(
    "-0 --null -a --all --apparent-size -B= --block-size= -b --bytes -c --total -D \
     --dereference-args -d= --max-depth= -H -h --human-readable --inodes -k -l --count-links \
     -m -P --no-dereference -S --separate-dirs --si -s --summarize -t= --threshold= --time[=] \
     --time-style= --exclude= -x --one-file-system --help --version",
);

/// tree (2.x; not installed here, taken from its manual): `-o` writes its output, `-R`
/// writes an HTML file in every directory; `--fromfile` reads listings instead of walking.
pub(super) const TREE: OptionTable = OptionTable::gnu(&[
    short_option('o', Required, Effect::Write),
    short_option('l', Flag, Effect::FollowSymlinks),
    short_option(
        'R',
        Flag,
        Effect::Forbid("writes a 00Tree.html file in every directory"),
    ),
    long_option("gitfile", Required, Effect::Read),
    long_option("infofile", Required, Effect::Read),
    long_option("hintro", Required, Effect::Read),
    long_option("houtro", Required, Effect::Read),
    long_option("fromfile", Flag, Effect::OperandsAreListings),
    long_option("fromtabfile", Flag, Effect::OperandsAreListings),
])
.inert(
    "-a -d -f -x -L= -P= -I= --gitignore --ignore-case --matchdirs --metafirst --prune --info \
     --noreport --charset= --filelimit= --timefmt= -q -N -Q -p -u -g -s -h --si --du -D -F \
     --inodes --device -v -t -c -U -r --dirsfirst --filesfirst --sort= -i -A -S -n -C -X -J \
     -H= -T= --nolinks --fflinks --condense --version -V --help",
);

/// du, tree: always walk their operands (default `.`), except that `tree --fromfile` reads
/// them as listings.
pub(super) fn walk_operands(
    args: &[String],
    table: &OptionTable,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let parsed = parse_options(args, table, findings)?;
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::{
        ShellError, analyze, split,
        test_support::{analyze_line, clean, forbidden, named, paths, unknown_option},
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

    #[test]
    fn find_maxdepth_0_and_1_read_instead_of_walking() {
        let a = clean("find . -maxdepth 0");
        assert_eq!((a.reads, a.recursive_roots), (paths(&["."]), vec![]));
        let a = clean("find src docs -maxdepth 1 -name '*.md'");
        assert_eq!(a.reads, paths(&["src", "docs"]));
        assert!(a.recursive_roots.is_empty());
        assert!(clean("find -maxdepth 1").recursive_roots.is_empty());
        let a = clean("find -L . -maxdepth 1");
        assert!(a.follows_symlinks && a.recursive_roots.is_empty());
        // Deeper, unreadable, or overridden by a later -maxdepth: a walk.
        assert_eq!(clean("find . -maxdepth 2").recursive_roots, paths(&["."]));
        assert_eq!(clean("find . -maxdepth x").recursive_roots, paths(&["."]));
        assert_eq!(
            clean("find . -maxdepth 0 -maxdepth 3").recursive_roots,
            paths(&["."])
        );
        assert_eq!(clean("find . -mindepth 1").recursive_roots, paths(&["."]));
        // Forbidden actions stay forbidden at any depth.
        assert!(forbidden("find . -maxdepth 0 -delete").contains("-delete"));
    }

    #[test]
    fn unknown_primaries_and_options_are_refused() {
        assert_eq!(
            unknown_option("find . -frobnicate"),
            named("find", "-frobnicate")
        );
        assert_eq!(
            unknown_option("find . -newerXY x"),
            named("find", "-newerXY")
        );
        assert_eq!(
            unknown_option("find . -newertm x"),
            named("find", "-newertm")
        );
        assert!(
            clean("find . -newerBa f -readable -print0")
                .reads
                .contains(&PathBuf::from("f"))
        );
        assert_eq!(unknown_option("ls --frob"), named("ls", "--frob"));
        assert_eq!(unknown_option("du -sQ"), named("du", "-Q"));
        assert_eq!(unknown_option("tree --frob"), named("tree", "--frob"));
        assert!(forbidden("tree -R -H . -o x").contains("tree -R"));
    }
}
