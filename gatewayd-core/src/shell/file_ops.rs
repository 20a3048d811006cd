//! Commands that copy, move, make, link, remove or change files: `cp mv mkdir mktemp touch
//! rm rmdir ln chmod chown chgrp`. What they change is a write; `-r` makes a walk of it (of
//! the sources, for cp).
use std::path::{Path, PathBuf};

use super::{
    ShellError,
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{AttachedOnly, Flag, Required},
        long_option, option, parse_options, short_option,
    },
};

/// cp: `-t` names the destination directory; `-r -R -a` copy trees.
pub(super) const CP: OptionTable = OptionTable::gnu(&[
    option('t', "target-directory", Required, Effect::TargetDir),
    option('T', "no-target-directory", Flag, Effect::NoTargetDir),
    option('r', "recursive", Flag, Effect::Recursive),
    short_option('R', Flag, Effect::Recursive),
    option('a', "archive", Flag, Effect::Recursive),
    option('L', "dereference", Flag, Effect::FollowSymlinks),
])
.inert(
    "--attributes-only --backup[=] -b --copy-contents -d -f --force -i --interactive -H -l \
     --link -n --no-clobber -P --no-dereference -p --preserve[=] --no-preserve= --parents \
     --reflink[=] --remove-destination --sparse= --strip-trailing-slashes -s --symbolic-link \
     -S= --suffix= -u --update[=] -v --verbose -x --one-file-system -Z --context[=] --help \
     --version",
);

/// mv: `-t` names the destination directory.
pub(super) const MV: OptionTable = OptionTable::gnu(&[
    option('t', "target-directory", Required, Effect::TargetDir),
    option('T', "no-target-directory", Flag, Effect::NoTargetDir),
])
.inert(
    "--backup[=] -b -f --force -i --interactive -n --no-clobber --strip-trailing-slashes -S= \
     --suffix= -u --update[=] -v --verbose -Z --context --help --version",
);

/// Whether the sources stay (cp) or go (mv).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transfer {
    Copy,
    Move,
}

/// cp (sources read, walked with -r) and mv (sources read and removed); the destination is the
/// last operand, or the `-t` directory. A destination that is a directory receives each
/// source under its own name and is not itself replaced: unless `-T` says the destination is
/// the file itself, it is written into ([`Findings::write_into`]).
pub(super) fn copy_or_move(
    args: &[String],
    transfer: Transfer,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let table = match transfer {
        Transfer::Copy => &CP,
        Transfer::Move => &MV,
    };
    let parsed = parse_options(args, table, findings)?;
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
    let Some(destination) = destination else {
        return Ok(());
    };
    let names: Option<Vec<PathBuf>> = sources.iter().map(|s| entry_name(s.word)).collect();
    match names {
        Some(names) if !parsed.no_target_dir && !names.is_empty() => {
            findings.write_into(&destination, names);
        }
        _ => findings.write(&destination),
    }
    Ok(())
}

/// The name a source takes in a destination directory: its last component. A source that
/// ends in `.` or `..`, or is `/`, has none: `cp -r src/. dest` copies what `src` holds into
/// `dest`, so the destination itself is written.
fn entry_name(word: &str) -> Option<PathBuf> {
    let last = word.trim_end_matches('/').rsplit('/').next()?;
    match last {
        "" | "." | ".." => None,
        name => Some(PathBuf::from(name)),
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
pub(super) const RM: OptionTable = OptionTable::gnu(&[
    option('r', "recursive", Flag, Effect::Recursive),
    short_option('R', Flag, Effect::Recursive),
])
.inert(
    "-f --force -i -I --interactive[=] --one-file-system --no-preserve-root \
     --preserve-root[=] -d --dir -v --verbose --help --version",
);

/// rm: every operand is written (removed), and walked with `-r`.
pub(super) fn rm(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &RM, findings)?;
    for operand in &parsed.operands {
        change(&operand.path(), parsed.recursive, findings);
    }
    Ok(())
}

/// mkdir: every operand is made (a write); `-p` also makes its parents, which lie on the
/// same path.
pub(super) const MKDIR: OptionTable = OptionTable::gnu(&[])
    .inert("-p --parents -m= --mode= -v --verbose -Z --context[=] --help --version");

/// rmdir: every operand is removed (a write); `-p` removes its parents as written too.
pub(super) const RMDIR: OptionTable = OptionTable::gnu(&[])
    .inert("-p --parents --ignore-fail-on-non-empty -v --verbose --help --version");

/// rmdir: each operand, and with `-p` each of its ancestors as written (`rmdir -p a/b`
/// removes `a/b`, then `a`).
pub(super) fn rmdir(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &RMDIR, findings)?;
    let parents = parsed.has('p', "parents");
    for operand in &parsed.operands {
        let path = operand.path();
        findings.write(&path);
        if parents {
            for ancestor in path.ancestors().skip(1) {
                if !matches!(ancestor.to_str(), Some("" | "/" | "." | "..")) {
                    findings.write(ancestor);
                }
            }
        }
    }
    Ok(())
}

/// ln: `-t` names the directory the links go in; `-T` says the last operand is the link.
pub(super) const LN: OptionTable = OptionTable::gnu(&[
    option('t', "target-directory", Required, Effect::TargetDir),
    option('T', "no-target-directory", Flag, Effect::NoTargetDir),
])
.inert(
    "--backup[=] -b -d -F --directory -f --force -i --interactive -L --logical -n \
     --no-dereference -P --physical -r --relative -s --symbolic -S= --suffix= -v --verbose \
     --help --version",
);

/// ln: each link is written, and so is each TARGET it names: through a link (hard or
/// symbolic), whatever later writes to the link writes to the target, so a link may only
/// name a file the agent may write (`ln -s ~/.bashrc notes` is refused). A relative TARGET
/// of a symbolic link is taken from the link's directory (the destination's, or the
/// destination itself when it is a directory: both are written), of a hard link (or `-r`)
/// from where the command runs.
pub(super) fn ln(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &LN, findings)?;
    let from_link_dir = parsed.has('s', "symbolic") && !parsed.has('r', "relative");
    let (targets, destination) = match (parsed.target_dir, parsed.operands.split_last()) {
        (Some(dir), _) => (&parsed.operands[..], Some(PathBuf::from(dir))),
        (None, Some((last, init))) if !init.is_empty() => (init, Some(last.path())),
        (None, _) => (&parsed.operands[..], None),
    };
    // The directories a link may be in: the destination's, and the destination itself
    // when it is a directory; where the command runs when there is none.
    let link_dirs: Vec<PathBuf> = match &destination {
        Some(d) if parsed.target_dir.is_some() => vec![d.clone()],
        Some(d) => vec![
            d.parent().map_or_else(PathBuf::new, Path::to_path_buf),
            d.clone(),
        ],
        None => vec![PathBuf::new()],
    };
    for target in targets {
        let path = target.path();
        if from_link_dir {
            for dir in &link_dirs {
                findings.write(&dir.join(&path));
            }
        } else {
            findings.write(&path);
        }
    }
    let names: Option<Vec<PathBuf>> = targets.iter().map(|t| entry_name(t.word)).collect();
    match (destination, names) {
        (Some(d), Some(names)) if !parsed.no_target_dir && !names.is_empty() => {
            findings.write_into(&d, names);
        }
        (Some(d), _) => findings.write(&d),
        (None, Some(names)) => names.iter().for_each(|n| findings.write(n)),
        (None, None) => findings.forbid("ln", "makes a link whose name is not known"),
    }
    Ok(())
}

/// mktemp: `-p DIR` and `--tmpdir=DIR` name the directory the new file goes in.
pub(super) const MKTEMP: OptionTable = OptionTable::gnu(&[
    short_option('p', Required, Effect::TargetDir),
    long_option("tmpdir", AttachedOnly, Effect::TargetDir),
])
.inert("-d --directory -u --dry-run -q --quiet --suffix= -t --help --version");

/// The template mktemp makes a name from when it is given none.
const MKTEMP_TEMPLATE: &str = "tmp.XXXXXXXXXX";

/// mktemp: makes a new file (or directory) whose name is TEMPLATE with its `X`s replaced.
/// Where depends on `-p DIR`, `--tmpdir`, `-t` and `$TMPDIR`, so every place it may be is a
/// write: DIR/TEMPLATE, `/tmp/TEMPLATE` (`$TMPDIR` is taken to be `/tmp`: a line may not
/// set it), and TEMPLATE itself where the line is.
pub(super) fn mktemp(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &MKTEMP, findings)?;
    let template = match parsed.operands.as_slice() {
        [] => MKTEMP_TEMPLATE,
        [one] => {
            findings.write(&one.path());
            one.word
        }
        _ => {
            findings.forbid("mktemp", "takes one TEMPLATE at most");
            return Ok(());
        }
    };
    let name = Path::new(template);
    let in_dir = |dir: &Path| match name.file_name() {
        Some(last) if !name.is_absolute() => dir.join(last),
        _ => name.to_path_buf(),
    };
    if let Some(dir) = parsed.target_dir {
        findings.write(&in_dir(Path::new(dir)));
    }
    findings.write(&in_dir(Path::new("/tmp")));
    Ok(())
}

/// tee: every operand is written.
pub(super) const TEE: OptionTable = OptionTable::gnu(&[])
    .inert("-a --append -i --ignore-interrupts -p --output-error[=] --help --version");

/// touch: `-r`/`--reference` reads a file's times.
pub(super) const TOUCH: OptionTable =
    OptionTable::gnu(&[option('r', "reference", Required, Effect::PatternFile)]).inert(
        "-a -c --no-create -d= --date= -f -h --no-dereference -m -t= --time= --help --version",
    );

/// mkdir, touch and tee: every operand is written (made, or its times set); touch's `-r` file is
/// read.
pub(super) fn make(
    args: &[String],
    table: &OptionTable,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let parsed = parse_options(args, table, findings)?;
    for operand in &parsed.operands {
        findings.write(&operand.path());
    }
    Ok(())
}

/// chmod: `--reference` gives the MODE from a file; `-R` changes trees.
pub(super) const CHMOD: OptionTable = OptionTable::gnu(&[
    long_option("reference", Required, Effect::PatternFile),
    option('R', "recursive", Flag, Effect::Recursive),
])
.inert(
    "-c --changes -f --silent --quiet -v --verbose --no-preserve-root --preserve-root --help \
     --version",
)
.dash_operand(is_symbolic_mode);

/// chown, chgrp: `--reference` gives the owner from a file; `-R` changes trees, following
/// links with `-L` or `--dereference`.
pub(super) const CHOWN: OptionTable = OptionTable::gnu(&[
    long_option("reference", Required, Effect::PatternFile),
    option('R', "recursive", Flag, Effect::Recursive),
    short_option('L', Flag, Effect::FollowSymlinks),
    long_option("dereference", Flag, Effect::FollowSymlinks),
])
.inert(
    "-c --changes -f --silent --quiet -v --verbose -h --no-dereference --from= \
     --no-preserve-root --preserve-root -H -P --help --version",
);

/// A chmod MODE that looks like an option (`-w`, `-x`, `-rwx`, not `--`).
fn is_symbolic_mode(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|letters| {
        !letters.is_empty()
            && !letters.starts_with('-')
            && letters
                .chars()
                .all(|c| "rwxXstugoa+-=,01234567".contains(c))
    })
}

/// chmod, chown, chgrp: the first operand is the MODE/OWNER unless `--reference` is given;
/// with `is_chmod`, a word like `-w` or `-x` is chmod's MODE, not an option. The files are
/// written, and walked with `-R`.
pub(super) fn change_attributes(
    args: &[String],
    is_chmod: bool,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let table = if is_chmod { &CHMOD } else { &CHOWN };
    let parsed = parse_options(args, table, findings)?;
    for file in parsed.after_pattern() {
        change(&file.path(), parsed.recursive, findings);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, named, paths, unknown_option};

    #[test]
    fn mktemp_writes_every_place_its_file_may_go() {
        assert_eq!(clean("mktemp -d").writes, paths(&["/tmp/tmp.XXXXXXXXXX"]));
        assert_eq!(
            clean("mktemp -p out -q x.XXXX").writes,
            paths(&["x.XXXX", "out/x.XXXX", "/tmp/x.XXXX"])
        );
        assert_eq!(
            clean("mktemp --tmpdir=/var/tmp --suffix=.txt").writes,
            paths(&["/var/tmp/tmp.XXXXXXXXXX", "/tmp/tmp.XXXXXXXXXX"])
        );
        assert_eq!(
            clean("mktemp /tmp/build.XXXXXX").writes,
            paths(&["/tmp/build.XXXXXX"])
        );
        assert!(
            !crate::shell::test_support::analyze_line("mktemp a.XXX b.XXX")
                .forbidden
                .is_empty()
        );
        assert_eq!(
            unknown_option("mktemp --dry-run --frobnicate"),
            named("mktemp", "--frobnicate")
        );
    }

    /// The destination's entries by name, when the destination is a directory.
    fn written_into(line: &str) -> Vec<(PathBuf, Vec<PathBuf>)> {
        clean(line)
            .written_into
            .into_iter()
            .map(|w| (w.dir, w.names))
            .collect()
    }

    #[test]
    fn a_destination_directory_receives_each_source_by_its_last_name() {
        let into = |dir: &str, names: &[&str]| vec![(PathBuf::from(dir), paths(names))];
        assert_eq!(written_into("cp docs/guide.md ."), into(".", &["guide.md"]));
        assert_eq!(written_into("mv a b/c/ out"), into("out", &["a", "c"]));
        assert_eq!(written_into("cp -r src/ ./"), into("./", &["src"]));
        assert_eq!(written_into("cp -t out a ./b"), into("out", &["a", "b"]));
        // The destination is the file itself: `-T`, or a source with no name of its own
        // (`src/.` copies what src holds).
        for line in [
            "cp -T a out",
            "mv --no-target-directory a out",
            "cp -r src/. out",
        ] {
            assert_eq!(written_into(line), [], "{line}");
            assert_eq!(
                clean(line).writes.last(),
                Some(&PathBuf::from("out")),
                "{line}"
            );
        }
        assert_eq!(written_into("cp -r .. out"), []);
        assert_eq!(written_into("cp -r / out"), []);
        assert_eq!(written_into("cp a"), []);
    }

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

    #[test]
    fn mkdir_and_touch_write_their_operands() {
        assert_eq!(
            clean("mkdir -p build/out src").writes,
            paths(&["build/out", "src"])
        );
        assert_eq!(clean("mkdir -m 700 d").writes, paths(&["d"]));
        assert_eq!(clean("touch a b").writes, paths(&["a", "b"]));
        assert_eq!(
            clean("tee -a log.txt out.txt").writes,
            paths(&["log.txt", "out.txt"])
        );
        let a = clean("touch -r ref.txt new.txt");
        assert_eq!(
            (a.reads, a.writes),
            (paths(&["ref.txt"]), paths(&["new.txt"]))
        );
        assert_eq!(unknown_option("mkdir --frob d"), named("mkdir", "--frob"));
    }

    #[test]
    fn unknown_options_and_the_owner_options() {
        assert_eq!(unknown_option("cp --frob a b"), named("cp", "--frob"));
        assert_eq!(unknown_option("mv -r a b"), named("mv", "-r"));
        assert_eq!(unknown_option("rm -rfQ d"), named("rm", "-Q"));
        assert_eq!(
            unknown_option("chmod --frob 600 f"),
            named("chmod", "--frob")
        );
        // chmod's `-rwx` MODE is no option; after `--` neither is `-w`.
        assert_eq!(clean("chmod -rwx f").writes, paths(&["f"]));
        assert_eq!(clean("chmod -R -- -w d").writes, paths(&["d"]));
        assert_eq!(clean("chown --from=a:b root f").writes, paths(&["f"]));
        assert!(clean("chown -R --dereference u d").follows_symlinks);
        assert_eq!(clean("chgrp --reference=r f").reads, paths(&["r"]));
    }

    #[test]
    fn rmdir_removes_its_operands_and_with_p_their_parents() {
        assert_eq!(clean("rmdir build").writes, paths(&["build"]));
        assert_eq!(
            clean("rmdir -p a/b/c").writes,
            paths(&["a/b/c", "a/b", "a"])
        );
        assert_eq!(clean("rmdir -v a/b").writes, paths(&["a/b"]));
        assert_eq!(clean("rmdir --par a/b").writes, paths(&["a/b", "a"]));
    }

    #[test]
    fn a_link_writes_its_name_and_the_file_it_names() {
        let a = clean("ln -s src/app.py app_link.py");
        assert_eq!(a.writes.first(), Some(&PathBuf::from("src/app.py")));
        assert!(a.writes.contains(&PathBuf::from("app_link.py")), "{a:?}");
        // A relative target of a symbolic link is taken from the link's directory too.
        let a = clean("ln -s ../x sub/link");
        assert!(!a.writes.contains(&PathBuf::from("../x")), "{a:?}");
        assert!(a.writes.contains(&PathBuf::from("sub/../x")), "{a:?}");
        assert!(a.writes.contains(&PathBuf::from("sub/link/../x")), "{a:?}");
        let a = clean("ln --symb ../x sub/link");
        assert!(a.writes.contains(&PathBuf::from("sub/../x")), "{a:?}");
        // A hard link's (and `-r`'s) from where the command runs; `-S.s` is a suffix.
        for line in [
            "ln ../x sub/link",
            "ln -sr ../x sub/link",
            "ln -S.s ../x sub/link",
        ] {
            assert_eq!(
                clean(line).writes.first(),
                Some(&PathBuf::from("../x")),
                "{line}"
            );
        }
        let a = clean("ln -sf /home/u/.bashrc notes");
        assert!(a.writes.iter().any(|w| w.ends_with(".bashrc")), "{a:?}");
        assert_eq!(
            clean("ln -s /opt/tool").writes,
            paths(&["/opt/tool", "tool"])
        );
        assert_eq!(
            written_into("ln -t bin a b"),
            vec![(PathBuf::from("bin"), paths(&["a", "b"]))]
        );
    }
}
