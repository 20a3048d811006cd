//! `zip` and `unzip` (Info-ZIP 3.0 and 6.0). `unzip`: `unzip [-Z] [-opts[modifiers]] FILE[.zip] [LIST] [-x XLIST] [-d
//! EXDIR]`. Options are letters, several in one word (`-oq`), anywhere on the line; `-d`
//! takes the directory, `-P`, `-O` and `-I` a value, and `-x` starts a list of names to
//! leave out. Listing, testing and printing (`-l -v -t -z -p -c`, and `-Z`, zipinfo's mode)
//! write nothing; an extraction writes the archive's members below EXDIR, which the engine
//! reads when the call is decided ([`super::Extraction`]). `-:` (members outside EXDIR
//! through `../`) is forbidden. `zip ARCHIVE NAMES…` reads its names (walks them with
//! `-r`) and writes the archive; only the options of a plain archive are taken (the others
//! delete the files archived, run a program, read names or comments from the input, or
//! write elsewhere: refused as unknown).
use std::path::{Path, PathBuf};

use super::{Extraction, ShellError, findings::Findings};

/// Letters that select what unzip does without writing a file.
const NO_WRITE: &str = "lvtzpc";
/// Every other letter unzip 6.0 takes on Unix, none with a value.
const FLAGS: &str = "fuTabBCDjKLMnoqsUVWX^";

/// `unzip`.
pub(super) fn unzip(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    if args.first().is_some_and(|a| a == "-Z") {
        // zipinfo: lists the archive (its options are listing formats).
        if let Some(archive) = args[1..].iter().find(|a| !a.starts_with('-')) {
            read_archive(archive, findings);
        }
        return Ok(());
    }
    let mut operands: Vec<&str> = Vec::new();
    let (mut exdir, mut writes, mut junk_paths, mut excluding) = (None, true, false, false);
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let Some(letters) = word.strip_prefix('-').filter(|l| !l.is_empty()) else {
            if !excluding {
                operands.push(word);
            }
            continue;
        };
        // `-x` takes the words up to the next option.
        excluding = false;
        for (i, c) in letters.char_indices() {
            match c {
                'd' | 'P' | 'O' | 'I' => {
                    let attached = &letters[i + 1..];
                    let value = if attached.is_empty() {
                        words.next().map_or("", String::as_str)
                    } else {
                        attached
                    };
                    if c == 'd' {
                        exdir = Some(value);
                    }
                    break;
                }
                'x' => excluding = true,
                ':' => findings.forbid(
                    "-:",
                    "extracts members named with `../` outside the directory",
                ),
                'j' => junk_paths = true,
                c if NO_WRITE.contains(c) => writes = false,
                c if FLAGS.contains(c) => {}
                _ => {
                    return Err(ShellError::UnknownOption {
                        command: "unzip".into(),
                        option: format!("-{c}"),
                    });
                }
            }
        }
    }
    let Some(archive) = operands.first() else {
        return Ok(());
    };
    read_archive(archive, findings);
    if !writes {
        return Ok(());
    }
    let into = PathBuf::from(exdir.unwrap_or("."));
    if archive.contains(['*', '?', '[']) {
        // unzip matches the name itself against several archives: not one to read.
        findings.write(&into);
        return Ok(());
    }
    findings.extractions.push(Extraction {
        archive: PathBuf::from(archive_name(archive)),
        into,
        strip_components: 0,
        junk_paths,
    });
    Ok(())
}

/// zip's letters taken, none with a value: recursion, levels, quiet and verbose, paths
/// junked, links stored as links, no directory entries, no extra attributes, update,
/// freshen.
const ZIP_FLAGS: &str = "rRqvjyDXuf0123456789";

/// `zip [-opts] ARCHIVE NAMES… [-x|-i PATTERNS…]`.
pub(super) fn zip(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let (mut operands, mut recursive, mut patterns) = (Vec::new(), false, false);
    for word in args {
        match word.strip_prefix('-').filter(|l| !l.is_empty()) {
            Some("x" | "i") => patterns = true,
            Some(letters) => {
                patterns = false;
                for c in letters.chars() {
                    if !ZIP_FLAGS.contains(c) {
                        return Err(ShellError::UnknownOption {
                            command: "zip".into(),
                            option: format!("-{c}"),
                        });
                    }
                    recursive |= c == 'r' || c == 'R';
                }
            }
            None if patterns => {}
            None => operands.push(word.as_str()),
        }
    }
    // Without `-y`, zip archives what each link it meets leads to, anywhere.
    let links_kept = args.iter().any(|a| a.starts_with('-') && a.contains('y'));
    if recursive && !links_kept {
        findings.forbid(
            "-r",
            "archives what each link below its names leads to, which may be anywhere: add `-y`, which stores links as links",
        );
    }
    let Some((archive, names)) = operands.split_first() else {
        return Ok(());
    };
    findings.read(Path::new(archive));
    findings.write(Path::new(archive));
    if names.is_empty() {
        findings.forbid(
            "zip",
            "archives the names on its input, which the check does not see: name them",
        );
    }
    for name in names {
        findings.read_or_walk(Path::new(name), recursive);
    }
    Ok(())
}

/// The archive, read as FILE and, when FILE does not end in `.zip`, as `FILE.zip` (unzip
/// tries both).
fn read_archive(archive: &str, findings: &mut Findings) {
    findings.read(Path::new(archive));
    if !named_zip(archive) {
        findings.read(&PathBuf::from(format!("{archive}.zip")));
    }
}

/// Whether `archive` ends in `.zip` (any case).
fn named_zip(archive: &str) -> bool {
    Path::new(archive)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"))
}

/// The file unzip opens for `archive`: FILE when it is there, else `FILE.zip`.
fn archive_name(archive: &str) -> String {
    let given = Path::new(archive);
    if named_zip(archive) || given.exists() {
        archive.to_owned()
    } else {
        format!("{archive}.zip")
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, extraction, forbidden, named, paths, unknown_option};

    #[test]
    fn unzip_extracts_members_below_its_directory() {
        let a = clean("unzip -o dist.zip -d out");
        assert_eq!(a.reads, paths(&["dist.zip"]));
        assert_eq!(a.extractions, [extraction("dist.zip", "out", 0, false)]);
        let a = clean("unzip -qoj dist.zip 'docs/*' -x '*.tmp' -d site");
        assert_eq!(a.extractions, [extraction("dist.zip", "site", 0, true)]);
        let a = clean("unzip -ddir dist.zip");
        assert_eq!(a.extractions, [extraction("dist.zip", "dir", 0, false)]);
        for line in [
            "unzip -l dist.zip",
            "unzip -v dist",
            "unzip -p dist.zip a.txt",
            "unzip -Z -1 dist.zip",
            "unzip -tq dist.zip",
        ] {
            let a = clean(line);
            assert!(a.writes.is_empty() && a.extractions.is_empty(), "{line}");
            assert!(!a.reads.is_empty(), "{line}");
        }
        assert_eq!(clean("unzip '*.zip'").writes, paths(&["."]));
        assert!(forbidden("unzip -: evil.zip").contains("`../`"));
        assert_eq!(unknown_option("unzip -R a.zip"), named("unzip", "-R"));
    }

    #[test]
    fn zip_reads_its_names_and_writes_its_archive() {
        let a = clean("zip -qr9y site.zip build docs -x '*.map'");
        assert_eq!(a.reads, paths(&["site.zip", "build", "docs"]));
        assert_eq!(a.writes, paths(&["site.zip"]));
        assert_eq!(a.recursive_roots, paths(&["build", "docs"]));
        assert!(forbidden("zip -r out.zip src").contains("add `-y`"));
        assert_eq!(clean("zip out.zip a.txt").recursive_roots, paths(&[]));
        for option in [
            "-m", "-T", "-@", "-b", "-O", "-e", "-c", "-z", "-d", "-F", "-A",
        ] {
            let line = format!("zip {option} out.zip a.txt");
            assert_eq!(unknown_option(&line), named("zip", option), "{line}");
        }
        assert!(forbidden("zip out.zip").contains("input"));
    }
}
