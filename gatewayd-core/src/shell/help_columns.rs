//! Test support: the options a tool's help prints in option columns: GNU `--help`
//! (coreutils, grep, tar, diff, sed, file, util-linux, node), git's `-h`, and git's manual
//! pages. `help_formats` reads the other formats; `help_check` proves the tables with both.
use super::options::ValueSyntax;

/// An option's name as printed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Name {
    /// `-x`.
    Short(char),
    /// `--name` (without the dashes; git's `--[no-]name` is `name`).
    Long(String),
    /// `-<number>`: a count (`git log -3`, `more -5`).
    Numeric,
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Name::Short(c) => write!(f, "-{c}"),
            Name::Long(l) => write!(f, "--{l}"),
            Name::Numeric => write!(f, "-NUM"),
        }
    }
}

/// One option as the help prints it: its name and how it takes a value (`None`: the help
/// does not say precisely, only its presence is checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Printed {
    pub(super) name: Name,
    pub(super) value: Option<ValueSyntax>,
}

/// The help style, which decides what follows an option name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    /// GNU `--help` and argp: `-f, --file=FILE`; a short paired with a long takes the
    /// long's mandatory value; a value after one space is the option's (`--label LABEL`).
    Gnu,
    /// git's `-h`: values are `<x>`, `[=<x>]`, `[<x>]`, literal `(a|b)`, or a literal word
    /// ending the line; a short paired with a long with an optional value takes it attached
    /// only.
    Git,
    /// git's manual pages: as `-h`, but a word after one space is prose (`--full-history
    /// results.` wraps a sentence).
    Manual,
}

/// One option token of an option column: its name and value as written.
#[derive(Debug)]
struct Token {
    name: Name,
    /// `Some(syntax)` when the token writes a value (`=X`, `[=X]`, ` X`, `[X]`).
    value: Option<ValueSyntax>,
    /// Whether the value names a placeholder (`FILE`, `<file>`, `[-]NUM`) rather than a
    /// literal (`--check=quiet`).
    placeholder: bool,
}

/// Whether a value as printed is a placeholder: it has an upper-case letter or `<`, is
/// node's `...`, or starts with a bracket (`[host:]port`).
fn is_placeholder(v: &str) -> bool {
    v.chars().any(|c| c.is_ascii_uppercase() || c == '<') || v.contains("...") || v.starts_with('[')
}

/// The end of a bracketed group starting at `s[0]` (`[`, `(`, `{`, `<`), nested.
fn group_end(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' | '{' | '<' => depth += 1,
            ']' | ')' | '}' | '>' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// A value written right after an option name: returns the value text, its syntax, and
/// the rest of the line.
fn value_after(rest: &str, style: Style, short: bool) -> (Option<(String, ValueSyntax)>, &str) {
    if let Some(r) = rest.strip_prefix("[=") {
        let end = group_end(rest);
        let v = r[..end.saturating_sub(2).min(r.len())].trim_end_matches(']');
        return (
            Some((v.to_owned(), ValueSyntax::AttachedOnly)),
            &rest[end..],
        );
    }
    if let Some(r) = rest.strip_prefix('=') {
        let end = value_end(r);
        return (
            Some((r[..end].to_owned(), ValueSyntax::Required)),
            &r[end..],
        );
    }
    if rest.starts_with('[') {
        // One or more optional groups (`[<n>]`, `[<n>][/<m>]`), then maybe a literal tail:
        // `[(amend|reword):]commit` (git) is a required value.
        let mut end = 0;
        while rest[end..].starts_with('[') {
            end += group_end(&rest[end..]);
        }
        let tail_end = rest[end..].find([' ', ',']).unwrap_or(rest.len() - end);
        let syntax = if tail_end == 0 {
            ValueSyntax::AttachedOnly
        } else {
            ValueSyntax::Required
        };
        return (
            Some((rest[..end + tail_end].to_owned(), syntax)),
            &rest[end + tail_end..],
        );
    }
    if rest.starts_with('<')
        || (short && rest.starts_with(|c: char| c.is_ascii_punctuation() && !"=[,".contains(c)))
    {
        // Attached placeholder (`-S<string>`, `-L<start>,<end>:<file>`, `-L:<name>:<file>`):
        // up to a space or `, `.
        let end = rest
            .find(", ")
            .or_else(|| rest.find(' '))
            .unwrap_or(rest.len());
        return (
            Some((rest[..end].to_owned(), ValueSyntax::Required)),
            &rest[end..],
        );
    }
    match rest.strip_prefix(' ') {
        Some(r) if spaced_value(r, style) => {
            let end = value_end(r);
            (
                Some((r[..end].to_owned(), ValueSyntax::Required)),
                &r[end..],
            )
        }
        _ => (None, rest),
    }
}

/// Where a value that starts `r` ends: after its bracketed group and what is attached to it,
/// or at a space or comma.
fn value_end(r: &str) -> usize {
    if r.starts_with(['[', '{', '<', '(']) {
        let g = group_end(r);
        g + r[g..].find([' ', ',']).unwrap_or(r[g..].len())
    } else {
        r.find([' ', ',']).unwrap_or(r.len())
    }
}

/// Whether `r`, what follows an option name and one space, starts its value.
fn spaced_value(r: &str, style: Style) -> bool {
    let word = r.split([' ', ',']).next().unwrap_or("");
    let bracketed = r.starts_with(['<', '[', '(', '{']);
    match style {
        // A metavariable (`LIST`, `N`), or a word an option follows (`-e script, --expr…`);
        // not the first word of a description after a single space.
        Style::Gnu => {
            bracketed
                || (!word.is_empty() && !word.chars().any(|c| c.is_ascii_lowercase()))
                || r[word.len()..].starts_with(", -")
        }
        // A bracketed value, or a literal one that ends the line (`--path blob|tree`).
        Style::Git => bracketed || (!word.is_empty() && r.trim_end() == word),
        Style::Manual => bracketed,
    }
}

/// The option tokens at the start of `line` (already trimmed, starting with `-`).
fn option_column(line: &str, style: Style) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut rest = line;
    while let Some(after) = rest.strip_prefix('-') {
        let (name, after_name) = if let Some(long) = after.strip_prefix('-') {
            let long = long.strip_prefix("[no-]").unwrap_or(long);
            // Names are letters, digits, `-` and `_`, and `.` between digits (`--tls-max-v1.2`).
            let bytes = long.as_bytes();
            let in_name = |i: usize| {
                let c = bytes[i];
                c.is_ascii_alphanumeric()
                    || c == b'-'
                    || c == b'_'
                    || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
            };
            let end = (0..bytes.len())
                .find(|&i| !in_name(i))
                .unwrap_or(bytes.len());
            if end == 0 {
                break;
            }
            (Name::Long(long[..end].to_owned()), &long[end..])
        } else if after.starts_with('<') {
            (Name::Numeric, &after[group_end(after)..])
        } else if let Some(rest) = after.strip_prefix("NUM") {
            (Name::Numeric, rest)
        } else {
            let Some(c) = after
                .chars()
                .next()
                .filter(|c| !c.is_whitespace() && !c.is_control() && *c != ',')
            else {
                break;
            };
            (Name::Short(c), &after[c.len_utf8()..])
        };
        let short = matches!(name, Name::Short(_));
        let (value, after_value) = value_after(after_name, style, short);
        let placeholder = value.as_ref().is_some_and(|(v, _)| is_placeholder(v));
        tokens.push(Token {
            name,
            value: value.map(|(_, s)| s),
            placeholder,
        });
        rest = after_value;
        if let Some(r) = rest.strip_prefix(", ") {
            rest = r.trim_start();
        } else if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if rest.starts_with("  ") && rest.trim_start().starts_with("--") {
            // `-c  --format=FORMAT` (stat): two spaces, then more of the same option.
            rest = rest.trim_start();
        } else {
            break;
        }
    }
    tokens
}

/// The printed options of one option column, shorts paired with the line's first long; a
/// long without a value before another long with one is its alias (`--loader,
/// --experimental-loader=...`, node).
fn pair(mut tokens: Vec<Token>, style: Style) -> Vec<Printed> {
    let last_value = tokens
        .iter()
        .rev()
        .find(|t| matches!(t.name, Name::Long(_)) && t.value.is_some())
        .map(|t| (t.name.clone(), t.value, t.placeholder));
    if let Some((last, value, placeholder)) = last_value.filter(|_| style == Style::Gnu) {
        for t in tokens.iter_mut().take_while(|t| t.name != last) {
            if matches!(t.name, Name::Long(_)) && t.value.is_none() && placeholder {
                t.value = value;
                t.placeholder = placeholder;
            }
        }
    }
    let long_value = tokens
        .iter()
        .find(|t| matches!(t.name, Name::Long(_)))
        .map(|t| (t.value, t.placeholder));
    tokens
        .into_iter()
        .map(|t| {
            let value = match (&t.name, t.value, long_value) {
                (Name::Numeric, ..) => {
                    return Printed {
                        name: t.name,
                        value: None,
                    };
                }
                (Name::Short(_), None, Some((Some(ValueSyntax::Required), true))) => {
                    ValueSyntax::Required
                }
                (Name::Short(_), None, Some((Some(ValueSyntax::AttachedOnly), _)))
                    if style != Style::Gnu =>
                {
                    ValueSyntax::AttachedOnly
                }
                (_, Some(v), _) => v,
                (_, None, _) => ValueSyntax::Flag,
            };
            Printed {
                name: t.name,
                value: Some(value),
            }
        })
        .collect()
}

/// Options printed in lines whose option column starts within `max_indent` spaces.
pub(super) fn columns(text: &str, style: Style, max_indent: usize) -> Vec<Printed> {
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let column_zero = indent == 0 && style == Style::Gnu; // descriptions (`stat`)
        if column_zero
            || indent > max_indent
            || !trimmed.starts_with('-')
            || trimmed.starts_with("---")
        {
            continue;
        }
        out.extend(pair(option_column(trimmed, style), style));
    }
    merge(out)
}

/// One entry per option: a long printed both as a flag and with a value (sort's `--check`,
/// `--check=quiet`), or with an optional value anywhere, takes an optional value.
pub(super) fn merge(printed: Vec<Printed>) -> Vec<Printed> {
    let mut out: Vec<Printed> = Vec::new();
    for p in printed {
        match out.iter_mut().find(|o| o.name == p.name) {
            None => out.push(p),
            Some(o) if o.value != p.value => {
                let optional = matches!(o.name, Name::Long(_))
                    && [o.value, p.value]
                        .iter()
                        .all(|v| v.is_some_and(|v| v != ValueSyntax::AttachedDigits));
                o.value = optional.then_some(ValueSyntax::AttachedOnly);
            }
            Some(_) => {}
        }
    }
    out
}

/// The sections of a man page (rendered by `man -P cat`) whose title contains `OPTIONS`.
pub(super) fn man_options(text: &str) -> Vec<Printed> {
    let mut out = Vec::new();
    let mut in_options = false;
    for line in text.lines() {
        if line.starts_with(|c: char| c.is_ascii_uppercase()) {
            in_options = line.contains("OPTIONS");
            continue;
        }
        let trimmed = line.trim_start();
        if in_options && line.len() - trimmed.len() == 7 && trimmed.starts_with('-') {
            out.extend(pair(option_column(trimmed, Style::Manual), Style::Manual));
        }
    }
    merge(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ValueSyntax::*;

    fn one(line: &str, style: Style) -> Vec<(String, Option<ValueSyntax>)> {
        columns(line, style, 8)
            .into_iter()
            .map(|p| (p.name.to_string(), p.value))
            .collect()
    }

    fn v(items: &[(&str, ValueSyntax)]) -> Vec<(String, Option<ValueSyntax>)> {
        items
            .iter()
            .map(|(n, s)| ((*n).to_owned(), Some(*s)))
            .collect()
    }

    #[test]
    fn gnu_columns() {
        assert_eq!(
            one("  -c, --bytes=[-]NUM       print", Style::Gnu),
            v(&[("-c", Required), ("--bytes", Required)])
        );
        assert_eq!(
            one("  -f, --follow[={name|descriptor}]", Style::Gnu),
            v(&[("-f", Flag), ("--follow", AttachedOnly)])
        );
        assert_eq!(
            one("  -c  --format=FORMAT   use", Style::Gnu),
            v(&[("-c", Required), ("--format", Required)])
        );
        assert_eq!(
            one("  -e script, --expression=script", Style::Gnu),
            v(&[("-e", Required), ("--expression", Required)])
        );
        assert_eq!(
            one("  -i[SUFFIX], --in-place[=SUFFIX]", Style::Gnu),
            v(&[("-i", AttachedOnly), ("--in-place", AttachedOnly)])
        );
        assert_eq!(
            one("  -m, --magic-file LIST      use", Style::Gnu),
            v(&[("-m", Required), ("--magic-file", Required)])
        );
        assert_eq!(
            one(
                "  -c, --check, --check=diagnose-first  check\n  -C, --check=quiet, --check=silent  like",
                Style::Gnu
            ),
            v(&[("-c", Flag), ("--check", AttachedOnly), ("-C", Flag)])
        );
        assert_eq!(
            one("  -R, -r, --recursive          copy", Style::Gnu),
            v(&[("-R", Flag), ("-r", Flag), ("--recursive", Flag)])
        );
        assert!(one("                             --diff, --extract", Style::Gnu).is_empty());
    }

    #[test]
    fn git_columns() {
        assert_eq!(
            one("    -F, --[no-]file <file>", Style::Git),
            v(&[("-F", Required), ("--file", Required)])
        );
        assert_eq!(
            one("    -u, --[no-]untracked-files[=<mode>]", Style::Git),
            v(&[("-u", AttachedOnly), ("--untracked-files", AttachedOnly)])
        );
        assert_eq!(
            one("    -s, --[no-]hash[=<n>] only show SHA1", Style::Git),
            v(&[("-s", AttachedOnly), ("--hash", AttachedOnly)])
        );
        assert_eq!(
            one("    --[no-]fixup [(amend|reword):]commit", Style::Git),
            v(&[("--fixup", Required)])
        );
        assert_eq!(
            one("    -n, --no-verify       bypass", Style::Git),
            v(&[("-n", Flag), ("--no-verify", Flag)])
        );
        let man = "OPTIONS\n       -<number>, -n <number>, --max-count=<number>\n       -L<start>,<end>:<file>, -L:<funcname>:<file>\n       -M[<n>], --find-renames[=<n>]\nEXAMPLES\n       -x\n";
        let got: Vec<(String, Option<ValueSyntax>)> = man_options(man)
            .into_iter()
            .map(|p| (p.name.to_string(), p.value))
            .collect();
        assert_eq!(
            got,
            [
                ("-NUM".to_owned(), None),
                ("-n".into(), Some(Required)),
                ("--max-count".into(), Some(Required)),
                ("-L".into(), Some(Required)),
                ("-M".into(), Some(AttachedOnly)),
                ("--find-renames".into(), Some(AttachedOnly)),
            ]
        );
    }
}
