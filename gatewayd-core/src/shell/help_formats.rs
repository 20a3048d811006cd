//! Test support: the options a tool's help prints, in the formats that are not option
//! columns (`help_columns` reads those): less's `--help`, perl's `-h`, python's `--help`,
//! node's `--help` (columns, after its own preamble), mawk's `-W usage` and find's `--help`.
use super::{
    help_columns::{Name, Printed, Style, columns, merge},
    options::ValueSyntax,
};

/// Removes overstrike (`c\bc` bold, `_\bc` underline), as `less --help` prints it.
pub(super) fn strip_overstrike(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out
}

/// `less --help`: `-b [N]  ....  --buffers=[N]`; every value is required (less refuses an
/// option without its value).
pub(super) fn less(text: &str) -> Vec<Printed> {
    let text = strip_overstrike(text);
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if !trimmed.starts_with('-') || trimmed.starts_with("---") {
            continue;
        }
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let next_is_value = words
                .get(i + 1)
                .is_some_and(|n| !n.starts_with('-') && !n.starts_with('.'));
            if w.contains('<') {
                continue; // `--<name>`, in the prose
            }
            if let Some(long) = w.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, _)) => (n, ValueSyntax::Required),
                    None => (long, ValueSyntax::Flag),
                };
                out.push(Printed {
                    name: Name::Long(name.to_owned()),
                    value: Some(value),
                });
            } else if let Some(short) = w.strip_prefix('-') {
                let mut chars = short.chars();
                if let (Some(c), None) = (chars.next(), chars.next()) {
                    let value = if next_is_value {
                        ValueSyntax::Required
                    } else {
                        ValueSyntax::Flag
                    };
                    out.push(Printed {
                        name: Name::Short(c),
                        value: Some(value),
                    });
                }
            }
        }
    }
    merge(out)
}

/// `perl -h`: `-e commandline` a value, `-0[octal]` optional digits, `-Idirectory` attached.
pub(super) fn perl(text: &str) -> Vec<Printed> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(opt) = line.strip_prefix("  -") else {
            continue;
        };
        let spec = opt.split("  ").next().unwrap_or("");
        // `-[mM][-]module`: both letters.
        let (letters, rest): (Vec<char>, &str) = if let Some(rest) = spec.strip_prefix("[mM]") {
            (vec!['m', 'M'], rest)
        } else {
            let mut chars = spec.chars();
            let Some(c) = chars.next() else { continue };
            (vec![c], chars.as_str())
        };
        let value = if rest.is_empty() {
            ValueSyntax::Flag
        } else if rest.starts_with(' ') {
            ValueSyntax::Required
        } else if rest.starts_with("[oct") {
            ValueSyntax::AttachedDigits
        } else if rest.starts_with('[') {
            ValueSyntax::AttachedOnly
        } else {
            // `-Idirectory`, `-F/pattern/`: attached, checked by presence only.
            for c in letters {
                out.push(Printed {
                    name: Name::Short(c),
                    value: None,
                });
            }
            continue;
        };
        for c in letters {
            out.push(Printed {
                name: Name::Short(c),
                value: Some(value),
            });
        }
    }
    merge(out)
}

/// `python3 --help`: `-c cmd :` a value, `-b     :` a flag, `--check-hash-based-pycs
/// always|default|never:` a value; `-OO` is `-O` twice.
pub(super) fn python(text: &str) -> Vec<Printed> {
    let mut out = Vec::new();
    for line in text.lines() {
        if !line.starts_with('-') || line.starts_with("- ") {
            continue;
        }
        let spec = line.split(':').next().unwrap_or("").trim_end();
        let mut words = spec.split_whitespace();
        let Some(opt) = words.next() else { continue };
        let value = if words.next().is_some() {
            ValueSyntax::Required
        } else {
            ValueSyntax::Flag
        };
        let name = match opt.strip_prefix("--") {
            Some(long) => Name::Long(long.to_owned()),
            None => match opt.chars().nth(1) {
                Some(c) => Name::Short(c),
                None => continue,
            },
        };
        out.push(Printed {
            name,
            value: Some(value),
        });
    }
    merge(out)
}

/// `node --help`: GNU-like columns, `--opt=...` a value, `--inspect[=[host:]port]` optional.
pub(super) fn node(text: &str) -> Vec<Printed> {
    let options = text.split("Environment variables:").next().unwrap_or(text);
    columns(options, Style::Gnu, 2)
        .into_iter()
        .filter(|p| p.name != Name::Long(String::new()))
        .collect()
}

/// mawk's `-W usage`: `-f program-file`, `-W version` (the `-W` words are checked apart).
pub(super) fn mawk(text: &str) -> Vec<Printed> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(opt) = line.trim_start().strip_prefix('-') else {
            continue;
        };
        let Some(c) = opt.chars().next().filter(char::is_ascii_alphabetic) else {
            continue;
        };
        let value = if opt[1..].starts_with(' ') {
            ValueSyntax::Required
        } else {
            ValueSyntax::Flag
        };
        out.push(Printed {
            name: Name::Short(c),
            value: Some(value),
        });
    }
    merge(out)
}

/// find's `--help`: the primaries (`-name PATTERN`) with how many values follow them (`;`
/// for a command, as `-exec COMMAND ;`), and the leading options of its usage line.
pub(super) fn find(text: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut in_expression = false;
    for line in text.lines() {
        if line.starts_with("Usage:") {
            for w in line.split_whitespace() {
                if let Some(opt) = w.strip_prefix("[-").and_then(|w| w.strip_suffix(']')) {
                    out.push((format!("-{}", &opt[..1]), 0));
                }
            }
            out.push(("-D".into(), 1));
            continue;
        }
        if line.starts_with("Positional options") {
            in_expression = true;
        }
        if line.starts_with("Other common options") {
            in_expression = false;
        }
        if !in_expression || !line.starts_with(' ') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            i += 1;
            if !(w.starts_with('-') && w.len() > 1 && w[1..].starts_with(char::is_alphabetic)) {
                continue;
            }
            let mut values = 0;
            while let Some(v) = words.get(i) {
                let is_value = v.starts_with(char::is_uppercase) || v.starts_with('[');
                if !is_value || v.starts_with("EXPR") {
                    break;
                }
                values += 1;
                i += 1;
            }
            if matches!(w, "-exec" | "-execdir" | "-ok" | "-okdir") {
                values = usize::MAX;
            }
            if !out.iter().any(|(n, _)| n == w) {
                out.push((w.to_owned(), values));
            }
        }
    }
    out
}

/// find's manual page (`man -P cat find`): the primaries of its EXPRESSION section, which
/// lists some that `--help` does not (`-samefile`, `-ipath`, `-newerXY`), with how many
/// values follow each (`None`: a list such as `-warn, -nowarn`, or an operator).
pub(super) fn find_manual(text: &str) -> Vec<(String, Option<usize>)> {
    let mut out = Vec::new();
    let mut in_expression = false;
    for line in text.lines() {
        if line.starts_with(|c: char| c.is_ascii_uppercase()) {
            in_expression = line.starts_with("EXPRESSION");
            continue;
        }
        let Some(spec) = line.strip_prefix("       -") else {
            continue;
        };
        if !in_expression || !spec.starts_with(char::is_alphabetic) {
            continue;
        }
        let spec = format!("-{}", spec.split("  ").next().unwrap_or(""));
        // A list (`-warn, -nowarn`, `-ls and -printf.`): names only.
        if spec
            .split_whitespace()
            .next()
            .is_some_and(|w| w.ends_with(','))
        {
            let items = spec.split(", ").flat_map(|item| item.split(" and "));
            for item in items {
                let name = item.split_whitespace().next().unwrap_or("");
                let name = name.trim_end_matches('.');
                if name.starts_with('-') && name[1..].starts_with(char::is_alphabetic) {
                    out.push((name.to_owned(), None));
                }
            }
            continue;
        }
        let mut words = spec.split_whitespace();
        let name = words.next().unwrap_or("").to_owned();
        // Values are the words before the description (which starts with a capital).
        let values: Vec<&str> = words
            .take_while(|w| !w.starts_with(|c: char| c.is_ascii_uppercase()))
            .collect();
        let count = if matches!(name.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            usize::MAX
        } else {
            values.len()
        };
        out.push((name, Some(count)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_formats() {
        let less_text = "  -b [N]  ....  --buffers=[N]\n  -e  -E  ....  --quit-at-eof  --QUIT-AT-EOF\n                --file-size\n";
        let got: Vec<String> = less(less_text)
            .into_iter()
            .map(|p| format!("{}{:?}", p.name, p.value))
            .collect();
        assert_eq!(
            got,
            [
                "-bSome(Required)",
                "--buffersSome(Required)",
                "-eSome(Flag)",
                "-ESome(Flag)",
                "--quit-at-eofSome(Flag)",
                "--QUIT-AT-EOFSome(Flag)",
                "--file-sizeSome(Flag)"
            ]
        );
        assert_eq!(strip_overstrike("S\u{8}Sa_\u{8}b"), "Sab");
        let f = find(
            "Usage: find [-H] [-L] [-P] [-Olevel] [-D debugopts] [path...] [expression]\nPositional options (always true):\n      -daystart -follow\n      -fprintf FILE FORMAT -exec COMMAND ; -perm [-/]MODE\n      -not EXPR\nOther common options:\n      --help\n",
        );
        let m = find_manual(
            "OPTIONS\n       -P     Never follow\nEXPRESSION\n       -delete, -exec, -print and -printf.\n   TESTS\n       -empty File is empty\n       -gid n File's numeric\n       -fprintf file format\n       -exec command {} +\n       -true  Always true.\nUNUSUAL FILENAMES\n       -print0, -fprint0\n",
        );
        assert_eq!(
            m,
            [
                ("-delete".to_owned(), None),
                ("-exec".into(), None),
                ("-print".into(), None),
                ("-printf".into(), None),
                ("-empty".into(), Some(0)),
                ("-gid".into(), Some(1)),
                ("-fprintf".into(), Some(2)),
                ("-exec".into(), Some(usize::MAX)),
                ("-true".into(), Some(0)),
            ]
        );
        assert_eq!(
            f,
            [
                ("-H".to_owned(), 0),
                ("-L".into(), 0),
                ("-P".into(), 0),
                ("-O".into(), 0),
                ("-D".into(), 1),
                ("-daystart".into(), 0),
                ("-follow".into(), 0),
                ("-fprintf".into(), 2),
                ("-exec".into(), usize::MAX),
                ("-perm".into(), 1),
                ("-not".into(), 0),
            ]
        );
    }
}
