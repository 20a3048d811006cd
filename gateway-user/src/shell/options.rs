//! The getopt-like option parser shared by the command families, and the vocabulary of their
//! option tables: each known option says how it takes a value ([`ValueSyntax`]) and what it
//! does to the command's paths ([`Effect`]). The syntax it accepts is in the module
//! documentation of [`crate::shell`] ("Option syntax").
use std::path::{Path, PathBuf};

use super::{findings::Findings, tar::TarMode};

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ValueSyntax {
    /// No value.
    Flag,
    /// A value, attached (`-fF`, `--file=F`) or the next word (`-f F`, `--file F`).
    Required,
    /// A value only when attached (`-i.bak`, `--in-place=.bak`).
    AttachedOnly,
    /// Only attached digits (`perl -l0 -0777`); the cluster goes on after them (`-lne`).
    AttachedDigits,
}

/// What an option does to the command's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effect {
    /// No effect on paths.
    None,
    /// The value is a file that is read.
    Read,
    /// The value is a file that is written.
    Write,
    /// The value is a file read and rewritten.
    ReadWrite,
    /// The value is a file listing more operands: read, and forbidden (those are unseen).
    NamesFrom,
    /// The option is forbidden, for the reason given.
    Forbid(&'static str),
    /// Edits its operands in place: forbidden; operands are writes.
    InPlace,
    /// The command walks its operands recursively.
    Recursive,
    /// Recursive when the value abbreviates this word (`grep -d recurse`).
    RecursiveIf(&'static str),
    /// Cancels recursion (`tar --no-recursion`).
    NoRecursion,
    /// The walk follows symbolic links.
    FollowSymlinks,
    /// The value is the pattern/script/program, so no operand is.
    Pattern,
    /// The value is a file holding the pattern/script/program: read.
    PatternFile,
    /// No pattern at all: every operand is a path (`rg --files`).
    NoPattern,
    /// Target directory of cp/mv: written.
    TargetDir,
    /// Selects what tar does with its archive.
    TarMode(TarMode),
    /// The value is tar's archive.
    Archive,
    /// Later relative operands are under this directory (`tar -C`, `ruby -C`).
    ChangeDir,
    /// A date, or a file whose time is used when it looks like a path (`tar --newer`).
    DateOrFile,
    /// tar keeps the leading `/` of member names.
    AbsoluteNames,
    /// `tree --fromfile`: operands are listings, read, not walked.
    OperandsAreListings,
}

/// The reason shared by every option that runs a program named in its value.
pub(super) const RUNS_ANOTHER_COMMAND: Effect = Effect::Forbid("runs another command");

/// One option a command knows.
#[derive(Debug)]
pub(super) struct OptionSpec {
    /// The short form (`-f`); `'\0'`: none.
    pub(super) short: char,
    /// The long form without its dashes (`file`); `""`: none.
    pub(super) long: &'static str,
    /// How it takes its value.
    pub(super) value: ValueSyntax,
    /// What it does to the command's paths.
    pub(super) effect: Effect,
}

/// An option with both a short and a long form.
pub(super) const fn option(
    short: char,
    long: &'static str,
    value: ValueSyntax,
    effect: Effect,
) -> OptionSpec {
    OptionSpec {
        short,
        long,
        value,
        effect,
    }
}

/// An option with only a long form.
pub(super) const fn long_option(
    long: &'static str,
    value: ValueSyntax,
    effect: Effect,
) -> OptionSpec {
    option('\0', long, value, effect)
}

/// An option with only a short form.
pub(super) const fn short_option(short: char, value: ValueSyntax, effect: Effect) -> OptionSpec {
    option(short, "", value, effect)
}

impl OptionSpec {
    /// How forbidden findings name it: `-f` when it has a short form, else `--file`.
    fn display(&self) -> String {
        if self.short != '\0' {
            format!("-{}", self.short)
        } else {
            format!("--{}", self.long)
        }
    }
}

/// The options one command knows, and where it accepts them.
pub(super) struct OptionTable {
    options: &'static [OptionSpec],
    /// GNU permutation: options are recognised after operands too.
    permute: bool,
}

impl OptionTable {
    /// Options anywhere, before or after operands (GNU permutation).
    pub(super) const fn gnu(options: &'static [OptionSpec]) -> OptionTable {
        OptionTable {
            options,
            permute: true,
        }
    }

    /// Options up to the first operand only (interpreters: the rest belongs to the script).
    pub(super) const fn until_first_operand(options: &'static [OptionSpec]) -> OptionTable {
        OptionTable {
            options,
            permute: false,
        }
    }

    /// The long option `name` or the only one it abbreviates.
    fn long(&self, name: &str) -> Option<&OptionSpec> {
        let longs = || self.options.iter().filter(|o| !o.long.is_empty());
        if let Some(exact) = longs().find(|o| o.long == name) {
            return Some(exact);
        }
        if name.is_empty() {
            return None;
        }
        let mut hits = longs().filter(|o| o.long.starts_with(name));
        match (hits.next(), hits.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// The short option `c`.
    pub(super) fn short(&self, c: char) -> Option<&OptionSpec> {
        self.options.iter().find(|o| o.short == c)
    }
}

/// `word` relative to `dir` (set by `-C`), or as written when there is none.
pub(super) fn relative_to(dir: Option<&Path>, word: &str) -> PathBuf {
    match dir {
        Some(dir) => dir.join(word),
        None => PathBuf::from(word),
    }
}

/// `--name=value` as (`name`, `Some(value)`), `--name` as (`name`, `None`).
pub(super) fn split_attached(option: &str) -> (&str, Option<&str>) {
    match option.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (option, None),
    }
}

/// The words of a command, taken left to right.
pub(super) struct Words<'a>(std::slice::Iter<'a, String>);

impl<'a> Words<'a> {
    pub(super) fn new(args: &'a [String]) -> Words<'a> {
        Words(args.iter())
    }

    /// The next word, left in place.
    pub(super) fn peek(&self) -> Option<&'a str> {
        self.0.as_slice().first().map(String::as_str)
    }

    /// The words not taken yet.
    pub(super) fn rest(&self) -> &'a [String] {
        self.0.as_slice()
    }

    /// An option's value: the `attached` one, or else the next word (taken).
    pub(super) fn value(&mut self, attached: Option<&'a str>) -> Option<&'a str> {
        attached.or_else(|| self.next())
    }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    /// Takes the next word.
    fn next(&mut self) -> Option<&'a str> {
        self.0.next().map(String::as_str)
    }
}

/// An operand, with the directory it is relative to (`tar -C`, `ruby -C`), if any.
pub(super) struct Operand<'a> {
    pub(super) word: &'a str,
    dir: Option<PathBuf>,
}

impl Operand<'_> {
    /// The operand as a path, under its directory.
    pub(super) fn path(&self) -> PathBuf {
        relative_to(self.dir.as_deref(), self.word)
    }
}

/// The paths of `operands`.
pub(super) fn paths_of(operands: &[Operand]) -> Vec<PathBuf> {
    operands.iter().map(Operand::path).collect()
}

/// The outcome of [`parse_options`]: operands and the state the options set. Common effects
/// (reads, writes, forbidden, follows) are already recorded in the [`Findings`].
#[derive(Default)]
pub(super) struct ParsedArgs<'a> {
    pub(super) operands: Vec<Operand<'a>>,
    pub(super) recursive: bool,
    pub(super) no_recursion: bool,
    pub(super) pattern_given: bool,
    pub(super) no_pattern: bool,
    pub(super) in_place: bool,
    pub(super) target_dir: Option<&'a str>,
    pub(super) tar_mode: Option<TarMode>,
    pub(super) archive: Option<&'a str>,
    pub(super) absolute_names: bool,
    pub(super) operands_are_listings: bool,
    /// The directory later operands are relative to (`-C`).
    pub(super) dir: Option<PathBuf>,
}

impl<'a> ParsedArgs<'a> {
    /// The operands after the pattern/script/program: all of them when an option gave it (or
    /// there is none), else all but the first.
    pub(super) fn after_pattern(&self) -> &[Operand<'a>] {
        if self.pattern_given || self.no_pattern {
            &self.operands[..]
        } else {
            self.operands.get(1..).unwrap_or(&[])
        }
    }

    /// `value` as a path, under the current `-C` directory.
    fn path(&self, value: &str) -> PathBuf {
        relative_to(self.dir.as_deref(), value)
    }
}

/// Tokenizes `args` per `table`, records the common effects in `findings`, returns the rest.
pub(super) fn parse_options<'a>(
    args: &'a [String],
    table: &OptionTable,
    findings: &mut Findings,
) -> ParsedArgs<'a> {
    let mut parsed = ParsedArgs::default();
    let mut words = Words::new(args);
    let mut options_done = false;
    while let Some(word) = words.next() {
        if options_done || word == "-" || !word.starts_with('-') {
            parsed.operands.push(Operand {
                word,
                dir: parsed.dir.clone(),
            });
            if !table.permute {
                options_done = true;
            }
            continue;
        }
        if word == "--" {
            options_done = true;
            continue;
        }
        if let Some(body) = word.strip_prefix("--") {
            let (name, attached) = split_attached(body);
            match table.long(name) {
                Some(option) => {
                    let value = match option.value {
                        ValueSyntax::Required => words.value(attached),
                        ValueSyntax::Flag => None,
                        ValueSyntax::AttachedOnly | ValueSyntax::AttachedDigits => attached,
                    };
                    apply_effect(option, value, &mut parsed, findings);
                }
                None => {
                    if let Some(value) = attached {
                        findings.read(Path::new(value));
                    }
                }
            }
            continue;
        }
        let mut cluster = &word[1..];
        while let Some(c) = cluster.chars().next() {
            cluster = &cluster[c.len_utf8()..];
            let Some(option) = table.short(c) else {
                continue;
            };
            let value = match option.value {
                ValueSyntax::Flag => None,
                ValueSyntax::AttachedDigits => {
                    let (digits, more) = split_digits(c, cluster);
                    cluster = more;
                    (!digits.is_empty()).then_some(digits)
                }
                ValueSyntax::AttachedOnly => {
                    let value = std::mem::take(&mut cluster);
                    (!value.is_empty()).then_some(value)
                }
                ValueSyntax::Required if !cluster.is_empty() => Some(std::mem::take(&mut cluster)),
                ValueSyntax::Required => words.next(),
            };
            apply_effect(option, value, &mut parsed, findings);
        }
    }
    parsed
}

/// The leading digits of `cluster`, the value of short option `option`, and what follows
/// them: decimal digits, or hexadecimal after `-0x` (perl).
fn split_digits(option: char, cluster: &str) -> (&str, &str) {
    let hex = option == '0' && cluster.starts_with('x');
    let skip = usize::from(hex);
    let end = cluster[skip..]
        .find(|ch: char| !(ch.is_ascii_digit() || hex && ch.is_ascii_hexdigit()))
        .map_or(cluster.len(), |n| n + skip);
    cluster.split_at(end)
}

/// Records what `option` (with its `value`, if any) does.
fn apply_effect<'a>(
    option: &OptionSpec,
    value: Option<&'a str>,
    parsed: &mut ParsedArgs<'a>,
    findings: &mut Findings,
) {
    match option.effect {
        Effect::None => {}
        Effect::Read => {
            if let Some(v) = value {
                findings.read(&parsed.path(v));
            }
        }
        Effect::Write => {
            if let Some(v) = value {
                findings.write(&parsed.path(v));
            }
        }
        Effect::ReadWrite => {
            if let Some(v) = value {
                findings.read(&parsed.path(v));
                findings.write(&parsed.path(v));
            }
        }
        Effect::NamesFrom => {
            if let Some(v) = value {
                findings.read(&parsed.path(v));
            }
            findings.forbid(
                &option.display(),
                "takes more file names from a file, which cannot be checked",
            );
        }
        Effect::Forbid(why) => findings.forbid(&option.display(), why),
        Effect::InPlace => {
            parsed.in_place = true;
            findings.forbid(&option.display(), "edits files in place");
        }
        Effect::Recursive => parsed.recursive = true,
        Effect::RecursiveIf(word) => {
            if value.is_some_and(|v| !v.is_empty() && word.starts_with(v)) {
                parsed.recursive = true;
            }
        }
        Effect::NoRecursion => parsed.no_recursion = true,
        Effect::FollowSymlinks => findings.follows_symlinks = true,
        Effect::Pattern => parsed.pattern_given = true,
        Effect::PatternFile => {
            parsed.pattern_given = true;
            if let Some(v) = value {
                findings.read(&parsed.path(v));
            }
        }
        Effect::NoPattern => parsed.no_pattern = true,
        Effect::TargetDir => parsed.target_dir = value,
        Effect::TarMode(mode) => parsed.tar_mode = Some(mode),
        Effect::Archive => parsed.archive = value,
        Effect::ChangeDir => {
            if let Some(v) = value {
                parsed.dir = Some(parsed.path(v));
            }
        }
        Effect::DateOrFile => {
            if let Some(v) = value.filter(|v| v.starts_with('/') || v.starts_with('.')) {
                findings.read(&parsed.path(v));
            }
        }
        Effect::AbsoluteNames => parsed.absolute_names = true,
        Effect::OperandsAreListings => parsed.operands_are_listings = true,
    }
}
