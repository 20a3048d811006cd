//! `gzip` and `gunzip`: each FILE is read and, in place, replaced by its compressed (or
//! uncompressed) copy: the copy is written, and the FILE removed (a write) unless `-k`.
//! With `-c`, `-l` or `-t` nothing is written; `-r` changes the trees it is given.
use std::path::PathBuf;

use super::{
    ShellError,
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{Flag, Required},
        option, parse_options,
    },
};

/// gzip 1.12's options.
pub(super) const GZIP: OptionTable = OptionTable::gnu(&[
    option('r', "recursive", Flag, Effect::Recursive),
    option('S', "suffix", Required, Effect::None),
])
.inert(
    "-c --stdout --to-stdout -d --decompress --uncompress -f --force -h --help -k --keep -l \
     --list -L --license -n --no-name -N --name -q --quiet --rsyncable --synchronous -t \
     --test -v --verbose -V --version -1 --fast -2 -3 -4 -5 -6 -7 -8 -9 --best",
);

/// The suffixes gzip takes off a compressed file's name, and what each becomes.
const SUFFIXES: [(&str, &str); 6] = [
    (".gz", ""),
    (".z", ""),
    ("-gz", ""),
    ("-z", ""),
    (".tgz", ".tar"),
    (".taz", ".tar"),
];

/// `gzip` (or `gunzip`, which is `gzip -d`).
pub(super) fn gzip(
    args: &[String],
    decompress: bool,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let parsed = parse_options(args, &GZIP, findings)?;
    let flag = |short, long| parsed.has(short, long);
    let decompress = decompress || flag('d', "decompress") || flag('d', "uncompress");
    let no_output =
        flag('c', "stdout") || flag('c', "to-stdout") || flag('l', "list") || flag('t', "test");
    let keep = flag('k', "keep");
    if decompress && flag('N', "name") {
        findings.forbid(
            "-N",
            "restores the name the compressed file holds, which the check does not read",
        );
    }
    let suffix = parsed.value_of('S', "suffix");
    for operand in parsed.operands.iter().filter(|o| o.word != "-") {
        let path = operand.path();
        if parsed.recursive {
            findings.walk(&path);
            if !no_output {
                findings.write(&path);
            }
            continue;
        }
        findings.read(&path);
        if no_output {
            continue;
        }
        let made = if decompress {
            uncompressed_name(operand.word, suffix)
        } else {
            Some(PathBuf::from(format!(
                "{}{}",
                operand.word,
                suffix.unwrap_or(".gz")
            )))
        };
        if let Some(made) = made {
            findings.write(&made);
        }
        if !keep {
            findings.write(&path);
        }
    }
    Ok(())
}

/// The file `gzip -d` makes of `name`: without its suffix (`-S SUF`'s, or one of
/// [`SUFFIXES`]); `None` when it has none, which gzip refuses.
fn uncompressed_name(name: &str, suffix: Option<&str>) -> Option<PathBuf> {
    if let Some(s) = suffix {
        return name
            .strip_suffix(s)
            .filter(|n| !n.is_empty())
            .map(PathBuf::from);
    }
    SUFFIXES.iter().find_map(|(s, to)| {
        name.strip_suffix(s)
            .filter(|n| !n.is_empty() && !n.ends_with('/'))
            .map(|n| PathBuf::from(format!("{n}{to}")))
    })
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn gzip_replaces_each_file_by_its_compressed_copy() {
        let a = clean("gzip notes.md");
        assert_eq!(a.reads, paths(&["notes.md"]));
        assert_eq!(a.writes, paths(&["notes.md.gz", "notes.md"]));
        assert_eq!(clean("gzip -k -9 a.txt").writes, paths(&["a.txt.gz"]));
        assert_eq!(clean("gzip -S .z a").writes, paths(&["a.z", "a"]));
        assert!(clean("gzip -c a.txt").writes.is_empty());
        assert!(clean("gzip -l a.gz").writes.is_empty());
        let a = clean("gzip -r logs");
        assert_eq!(
            (a.recursive_roots, a.writes),
            (paths(&["logs"]), paths(&["logs"]))
        );
    }

    #[test]
    fn gunzip_writes_the_name_without_its_suffix() {
        assert_eq!(
            clean("gunzip notes.md.gz").writes,
            paths(&["notes.md", "notes.md.gz"])
        );
        assert_eq!(clean("gzip -dk a.tgz").writes, paths(&["a.tar"]));
        assert!(clean("gunzip -c x.gz").writes.is_empty());
        assert_eq!(clean("gunzip odd").writes, paths(&["odd"]));
        assert!(forbidden("gunzip -N x.gz").contains("restores the name"));
        // GNU getopt's abbreviations are the options they abbreviate.
        assert_eq!(
            clean("gzip --decomp -f .env.gz").writes,
            paths(&[".env", ".env.gz"])
        );
        assert!(forbidden("gzip --decompress --na x.gz").contains("restores the name"));
        assert_eq!(clean("gzip --suff=.z a").writes, paths(&["a.z", "a"]));
    }
}
