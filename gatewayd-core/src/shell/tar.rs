//! tar: what it reads and writes depends on its mode (create, extract, list, …); options
//! that run programs are forbidden, and so is a remote `host:file` archive. The old style
//! `tar xzf a.tgz` bundle is rewritten as separate short options first.
use std::path::{Path, PathBuf};

use super::{
    Extraction, ShellError,
    findings::Findings,
    options::{
        Effect, OptionTable, ParsedArgs, RUNS_ANOTHER_COMMAND,
        ValueSyntax::{AttachedOnly, Flag, Required},
        long_option, option, parse_options,
    },
};

/// What tar does with its archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TarMode {
    /// `-c`: writes a new archive from the operands.
    Create,
    /// `-x`: writes the members below the `-C` directory.
    Extract,
    /// `-t`: reads the archive only.
    List,
    /// `-r -u -A`: reads the archive and adds the operands to it.
    Append,
    /// `-d`: compares the archive with the `-C` directory.
    Diff,
    /// `--delete`: rewrites the archive.
    Delete,
}

/// tar (GNU tar 1.34): the mode, the archive, `-C`, and the options that run programs,
/// read lists or write files.
pub(super) const TAR: OptionTable = OptionTable::gnu(&[
    option('c', "create", Flag, Effect::TarMode(TarMode::Create)),
    option('x', "extract", Flag, Effect::TarMode(TarMode::Extract)),
    long_option("get", Flag, Effect::TarMode(TarMode::Extract)),
    option('t', "list", Flag, Effect::TarMode(TarMode::List)),
    long_option("test-label", Flag, Effect::TarMode(TarMode::List)),
    option('r', "append", Flag, Effect::TarMode(TarMode::Append)),
    option('u', "update", Flag, Effect::TarMode(TarMode::Append)),
    option('A', "catenate", Flag, Effect::TarMode(TarMode::Append)),
    long_option("concatenate", Flag, Effect::TarMode(TarMode::Append)),
    option('d', "diff", Flag, Effect::TarMode(TarMode::Diff)),
    long_option("compare", Flag, Effect::TarMode(TarMode::Diff)),
    long_option("delete", Flag, Effect::TarMode(TarMode::Delete)),
    option('f', "file", Required, Effect::Archive),
    option('T', "files-from", Required, Effect::NamesFrom),
    option('X', "exclude-from", Required, Effect::Read),
    option('C', "directory", Required, Effect::ChangeDir),
    long_option("add-file", Required, Effect::Operand),
    option('I', "use-compress-program", Required, RUNS_ANOTHER_COMMAND),
    option('F', "info-script", Required, RUNS_ANOTHER_COMMAND),
    long_option("new-volume-script", Required, RUNS_ANOTHER_COMMAND),
    long_option("to-command", Required, RUNS_ANOTHER_COMMAND),
    long_option("checkpoint-action", Required, RUNS_ANOTHER_COMMAND),
    long_option("rsh-command", Required, RUNS_ANOTHER_COMMAND),
    long_option("rmt-command", Required, RUNS_ANOTHER_COMMAND),
    long_option(
        "remove-files",
        Flag,
        Effect::Forbid("removes the files it archives"),
    ),
    option('g', "listed-incremental", Required, Effect::ReadWrite),
    long_option("volno-file", Required, Effect::ReadWrite),
    long_option("index-file", Required, Effect::Write),
    long_option("one-top-level", AttachedOnly, Effect::Write),
    option('N', "newer", Required, Effect::DateOrFile),
    long_option("after-date", Required, Effect::DateOrFile),
    long_option("newer-mtime", Required, Effect::DateOrFile),
    long_option("mtime", Required, Effect::DateOrFile),
    option('P', "absolute-names", Flag, Effect::AbsoluteNames),
    option('h', "dereference", Flag, Effect::FollowSymlinks),
    long_option("no-recursion", Flag, Effect::NoRecursion),
    long_option("owner-map", Required, Effect::Read),
    long_option("group-map", Required, Effect::Read),
])
.inert(
    "--check-device -G --incremental --hole-detection= --ignore-failed-read --level= \
     --no-check-device --no-seek -n --seek --occurrence[=] --sparse-version= -S --sparse \
     --exclude= --exclude-backups --exclude-caches --exclude-caches-all \
     --exclude-caches-under --exclude-ignore= --exclude-ignore-recursive= --exclude-tag= \
     --exclude-tag-all= --exclude-tag-under= --exclude-vcs --exclude-vcs-ignores --no-null \
     --no-unquote --no-verbatim-files-from --null --recursion --unquote \
     --verbatim-files-from --anchored --ignore-case --no-anchored --no-ignore-case \
     --no-wildcards --no-wildcards-match-slash --wildcards --wildcards-match-slash \
     --keep-directory-symlink --keep-newer-files -k --keep-old-files --no-overwrite-dir \
     --overwrite --overwrite-dir --recursive-unlink --skip-old-files -U --unlink-first -W \
     --verify --ignore-command-error --no-ignore-command-error -O --to-stdout \
     --atime-preserve[=] --clamp-mtime --delay-directory-restore --group= --mode= -m --touch \
     --no-delay-directory-restore --no-same-owner --no-same-permissions --numeric-owner \
     --owner= -p --preserve-permissions --same-permissions --same-owner --sort= -s \
     --preserve-order --same-order --acls --no-acls --no-selinux --no-xattrs --selinux \
     --xattrs --xattrs-exclude= --xattrs-include= --force-local -L= --tape-length= -M \
     --multi-volume -b= --blocking-factor= -B --read-full-records -i --ignore-zeros \
     --record-size= -H= --format= --old-archive --portability --pax-option= --posix -V= \
     --label= -a --auto-compress -j --bzip2 -J --xz --lzip --lzma --lzop --no-auto-compress \
     --zstd -z --gzip --gunzip --ungzip -Z --compress --uncompress --backup[=] \
     --hard-dereference -K= --starting-file= --one-file-system --suffix= \
     --strip-components= --transform= --xform= --checkpoint[=] --full-time -l --check-links \
     --no-quote-chars= --quote-chars= --quoting-style= -R --block-number --show-defaults \
     --show-omitted-dirs --show-snapshot-field-ranges --show-transformed-names \
     --show-stored-names --totals[=] --utc -v --verbose --warning= -w --interactive \
     --confirmation -o -? --help --restrict --usage --version",
);

/// Old style `tar xvf a.tar ...`: the first word is a bundle of letters whose values are the
/// following words, in order. Rewritten as separate short options (`-x -v -f a.tar ...`).
fn unbundle(args: &[String]) -> Vec<String> {
    let mut normal: Vec<String> = Vec::with_capacity(args.len() + 4);
    let mut rest = args.iter();
    if let Some(bundle) = args
        .first()
        .filter(|a| !a.is_empty() && !a.starts_with('-'))
    {
        rest.next();
        for letter in bundle.chars() {
            normal.push(format!("-{letter}"));
            if TAR.short(letter).is_some_and(|o| o.value == Required)
                && let Some(value) = rest.next()
            {
                normal.push(value.clone());
            }
        }
    }
    normal.extend(rest.cloned());
    normal
}

/// GNU tar treats `host:file` as a remote archive and runs rsh/ssh to reach it.
fn is_remote(archive: &str) -> bool {
    archive
        .split_once(':')
        .is_some_and(|(host, _)| !host.contains('/'))
}

/// tar: the archive is read unless created, written when created, appended to or deleted
/// from; created and appended operands are walked (under `-C`), extraction writes below `-C`.
pub(super) fn tar(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let args = unbundle(args);
    let parsed = parse_options(&args, &TAR, findings)?;
    let force_local = args.iter().any(|a| a == "--force-local");
    if parsed.archive.is_some_and(is_remote) && !force_local {
        findings.forbid("-f", "remote archive (tar runs a remote shell to reach it)");
    }
    let mode = parsed.tar_mode;
    if let Some(archive) = parsed.archive.map(Path::new) {
        if mode != Some(TarMode::Create) {
            findings.read(archive);
        }
        if matches!(
            mode,
            Some(TarMode::Create | TarMode::Append | TarMode::Delete)
        ) {
            findings.write(archive);
        }
    }
    // The directory members are extracted to or compared with.
    let here = parsed.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    match mode {
        Some(TarMode::Create | TarMode::Append) => {
            for operand in &parsed.operands {
                findings.read_or_walk(&operand.path(), !parsed.no_recursion);
            }
        }
        Some(TarMode::Extract) => {
            if parsed.absolute_names {
                findings.forbid("-P", "extracts to absolute paths, outside the working dir");
            }
            extract(&parsed, here, findings);
        }
        Some(TarMode::Diff) => findings.walk(&here),
        Some(TarMode::List | TarMode::Delete) | None => {}
    }
    Ok(())
}

/// What `tar -x` writes: nothing with `-O` (the members go to its output); the members of
/// a local archive below `into`, read by the engine ([`Extraction`]), when nothing renames
/// them (`--transform`, `--one-top-level`); else anything below `into`.
fn extract(parsed: &ParsedArgs, into: PathBuf, findings: &mut Findings) {
    if parsed.has('O', "to-stdout") {
        return;
    }
    let renamed = ["transform", "xform", "one-top-level"]
        .iter()
        .any(|long| parsed.has('\0', long));
    let strip = match parsed.value_of('\0', "strip-components") {
        Some(n) => n.parse::<usize>().ok(),
        None => Some(0),
    };
    match (parsed.archive.filter(|a| *a != "-"), strip) {
        (Some(archive), Some(strip_components)) if !renamed => {
            findings.extractions.push(Extraction {
                archive: PathBuf::from(archive),
                into,
                strip_components,
                junk_paths: false,
            });
        }
        _ => findings.write(&into),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, extraction, forbidden, named, paths, unknown_option};

    #[test]
    fn tar_modes() {
        let a = clean("tar -xf a.tar");
        assert_eq!(a.reads, paths(&["a.tar"]));
        assert_eq!(a.writes, Vec::<PathBuf>::new());
        assert_eq!(a.extractions, [extraction("a.tar", ".", 0, false)]);
        let a = clean("tar xzf a.tgz -C out");
        assert_eq!(a.reads, paths(&["a.tgz"]), "old-style bundle");
        assert_eq!(a.extractions, [extraction("a.tgz", "out", 0, false)]);
        let a = clean("tar -xzf a.tgz --strip-components=1");
        assert_eq!(a.extractions, [extraction("a.tgz", ".", 1, false)]);
        // Members renamed, or an archive from the input: anything below the directory.
        for line in [
            "tar -xf a.tar --transform s/a/b/",
            "tar --one-top-level -xf a.tar",
            "tar -xf -",
            "tar -xf a.tar --strip-components=x",
        ] {
            let a = clean(line);
            assert_eq!((a.writes, a.extractions), (paths(&["."]), vec![]), "{line}");
        }
        let a = clean("tar -xOf a.tar config.json");
        assert!(
            a.writes.is_empty() && a.extractions.is_empty(),
            "to its output"
        );
        let a = clean("tar -tvf a.tar");
        assert_eq!((a.reads, a.writes), (paths(&["a.tar"]), vec![]));
        let a = clean("tar -czf out.tgz src README");
        assert_eq!(a.writes, paths(&["out.tgz"]));
        assert_eq!(a.recursive_roots, paths(&["src", "README"]));
        let a = clean("tar -cf out.tar -C /etc shadow");
        assert_eq!(
            a.recursive_roots,
            paths(&["/etc/shadow"]),
            "operands are under -C"
        );
        let a = clean("tar cfX out.tar excl src");
        assert_eq!(a.writes, paths(&["out.tar"]));
        assert!(
            a.reads.contains(&PathBuf::from("excl")) && a.reads.contains(&PathBuf::from("src"))
        );
        assert!(forbidden("tar -xf a.tar --to-command=sh").contains("--to-command"));
        assert!(
            forbidden("tar -cf a.tar --checkpoint=1 --checkpoint-action=exec=id x")
                .contains("--checkpoint-action")
        );
        assert!(forbidden("tar -I ./evil -xf a.tar").contains("-I"));
        assert!(forbidden("tar --use-compress-program=./evil -xf a.tar").contains("-I"));
        assert!(forbidden("tar -cf a.tar -T list").contains("-T"));
        assert!(forbidden("tar -xPf a.tar").contains("-P"));
        assert!(forbidden("tar -xf host:a.tar").contains("remote archive"));
        assert!(clean("tar -xf ./dir/a:b.tar").forbidden.is_empty());
        assert!(clean("tar --force-local -xf c:a.tar").forbidden.is_empty());
    }

    #[test]
    fn tar_options_are_known_or_refused() {
        assert_eq!(
            unknown_option("tar -xf a.tar --frob"),
            named("tar", "--frob")
        );
        assert_eq!(unknown_option("tar xQf a.tar"), named("tar", "-Q"));
        assert!(forbidden("tar -cf a.tar --remove-files src").contains("--remove-files"));
        let a = clean("tar -cf a.tar --add-file=-odd src");
        assert_eq!(a.recursive_roots, paths(&["-odd", "src"]));
        let a = clean("tar -C out -xf a.tar --one-top-level=top");
        assert_eq!(a.writes, paths(&["out/top", "out"]));
        assert!(
            clean("tar --exclude-vcs -czf a.tgz src")
                .forbidden
                .is_empty()
        );
    }
}
