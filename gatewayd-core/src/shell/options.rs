//! The getopt-like option parser shared by the command families, which reads a command's
//! words with its [`OptionTable`] (the tables' vocabulary is in `option_table`, re-exported
//! here). The syntax it accepts is in the module documentation of [`crate::shell`] ("Option
//! syntax").
use std::path::{Path, PathBuf};

pub(super) use super::option_table::{
    Effect, Long, OptionSpec, OptionTable, RUNS_ANOTHER_COMMAND, ValueSyntax, long_option, option,
    short_option,
};
use super::{ShellError, WalkFilter, coreutils_tables, findings::Findings, tar::TarMode};

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
    /// The patterns/scripts options gave (`-e SCRIPT`), in order.
    pub(super) patterns: Vec<&'a str>,
    /// An option gave the pattern/script in a file (`-f FILE`).
    pub(super) pattern_file: bool,
    pub(super) no_pattern: bool,
    pub(super) in_place: bool,
    /// The backup suffix an in-place edit was given (`sed -i.bak`).
    pub(super) in_place_suffix: Option<&'a str>,
    /// What the walks skip (`grep --include/--exclude/--exclude-dir`).
    pub(super) walk_filter: WalkFilter,
    pub(super) target_dir: Option<&'a str>,
    /// cp/mv `-T`: the last operand is the destination itself, never a directory.
    pub(super) no_target_dir: bool,
    pub(super) tar_mode: Option<TarMode>,
    pub(super) archive: Option<&'a str>,
    pub(super) absolute_names: bool,
    pub(super) operands_are_listings: bool,
    /// The directory later operands are relative to (`-C`).
    pub(super) dir: Option<PathBuf>,
    /// A lenient table's unknown options' values, any of which may be a path: attached to a
    /// long option (`--out=FILE`) or what follows a short one in its word (`-o=FILE`,
    /// `-oFILE`, and `a` of `-la` alike).
    pub(super) unknown_values: Vec<&'a str>,
    /// An option ended the options ([`Effect::EndsOptions`]): every later word is an operand.
    pub(super) options_done: bool,
    /// Each option given, with its value, as the table resolved it (an abbreviation to its
    /// option; not one that is ambiguous, which the tool refuses).
    pub(super) given: Vec<(OptionSpec, Option<&'a str>)>,
}

impl<'a> ParsedArgs<'a> {
    /// The scripts or programs given (sed's, awk's): each `-e` value, else the first operand.
    pub(super) fn scripts(&self) -> Vec<&'a str> {
        if self.pattern_given {
            self.patterns.clone()
        } else {
            self.operands.first().map(|o| o.word).into_iter().collect()
        }
    }

    /// The operands after the pattern/script/program: all of them when an option gave it (or
    /// there is none), else all but the first.
    pub(super) fn after_pattern(&self) -> &[Operand<'a>] {
        if self.pattern_given || self.no_pattern {
            &self.operands[..]
        } else {
            self.operands.get(1..).unwrap_or(&[])
        }
    }

    /// Whether `-short` or `--long` was given (either, in a table that lists them apart).
    pub(super) fn has(&self, short: char, long: &str) -> bool {
        self.given.iter().any(|(o, _)| names(o, short, long))
    }

    /// The value given last to `-short` or `--long`.
    pub(super) fn value_of(&self, short: char, long: &str) -> Option<&'a str> {
        self.given
            .iter()
            .rev()
            .find(|(o, _)| names(o, short, long))
            .and_then(|(_, v)| *v)
    }

    /// `value` as a path, under the current `-C` directory.
    fn path(&self, value: &str) -> PathBuf {
        relative_to(self.dir.as_deref(), value)
    }
}

/// Whether `option` is `-short` or `--long`.
fn names(option: &OptionSpec, short: char, long: &str) -> bool {
    (short != '\0' && option.short == short) || (!long.is_empty() && option.long == long)
}

/// The refusal of `option`, which the table of `findings`' command does not know.
fn unknown(findings: &Findings, option: &str) -> ShellError {
    ShellError::UnknownOption {
        command: findings.command().to_owned(),
        option: option.to_owned(),
    }
}

/// Tokenizes `args` per `table`, records the common effects in `findings`, returns the rest.
/// An option a strict table does not know is refused ([`ShellError::UnknownOption`]).
pub(super) fn parse_options<'a>(
    args: &'a [String],
    table: &OptionTable,
    findings: &mut Findings,
) -> Result<ParsedArgs<'a>, ShellError> {
    let mut parsed = ParsedArgs::default();
    let mut words = Words::new(args);
    while let Some(word) = words.next() {
        let dash_operand = table.dash_operand.is_some_and(|f| f(word));
        if parsed.options_done || word == "-" || !word.starts_with('-') || dash_operand {
            parsed.operands.push(Operand {
                word,
                dir: parsed.dir.clone(),
            });
            if !table.permute {
                parsed.options_done = true;
            }
            continue;
        }
        if word == "--" {
            parsed.options_done = true;
            continue;
        }
        match word.strip_prefix("--") {
            Some(body) => parse_long(body, table, &mut words, &mut parsed, findings)?,
            None => parse_cluster(&word[1..], table, &mut words, &mut parsed, findings)?,
        }
    }
    Ok(parsed)
}

/// One long option, `--` cut off `body` (with its value attached after `=`, or the next word).
fn parse_long<'a>(
    body: &'a str,
    table: &OptionTable,
    words: &mut Words<'a>,
    parsed: &mut ParsedArgs<'a>,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let (name, attached) = split_attached(body);
    match table.long(name) {
        Long::Known(option) => {
            let value = match option.value {
                ValueSyntax::Required => words.value(attached),
                ValueSyntax::Flag => None,
                ValueSyntax::AttachedOnly | ValueSyntax::AttachedDigits => attached,
            };
            apply_effect(&option, value, true, parsed, findings);
            parsed.given.push((option, value));
        }
        Long::Unknown if table.strict => {
            return Err(unknown(findings, &format!("--{name}")));
        }
        // Ambiguous: the tool refuses it, or (another version, hidden options) takes one of
        // them: every one's effect, with the attached value only.
        Long::Ambiguous(candidates) => {
            for option in &candidates {
                apply_effect(option, attached, true, parsed, findings);
            }
        }
        // A command nobody knows: the cautious reading.
        Long::Unknown => {
            if let Some(value) = attached {
                parsed.unknown_values.push(value);
            }
        }
    }
    Ok(())
}

/// A cluster of short options, `-` cut off (`-abc`, `-ovalue`, `-n5`).
fn parse_cluster<'a>(
    mut cluster: &'a str,
    table: &OptionTable,
    words: &mut Words<'a>,
    parsed: &mut ParsedArgs<'a>,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    while let Some(c) = cluster.chars().next() {
        cluster = &cluster[c.len_utf8()..];
        if table.numeric && c.is_ascii_digit() {
            cluster = cluster.trim_start_matches(|d: char| d.is_ascii_digit());
            continue;
        }
        let Some(option) = table.short(c) else {
            if table.strict {
                return Err(unknown(findings, &format!("-{c}")));
            }
            // A command nobody knows: the rest of the cluster may be this option's value
            // (`-o=FILE`, as Go's flags take it; `-oFILE`, as getopt does).
            let value = cluster.split_once('=').map_or(cluster, |(_, value)| value);
            if !value.is_empty() {
                parsed.unknown_values.push(value);
            }
            break;
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
        apply_effect(&option, value, false, parsed, findings);
        parsed.given.push((option, value));
        if parsed.options_done {
            break;
        }
    }
    Ok(())
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

/// Records what `option` (with its `value`, if any; written in its long form when
/// `long_written`) does: what it makes the command read, write or refuse here, and what it
/// changes in the parse ([`set_state`]).
fn apply_effect<'a>(
    option: &OptionSpec,
    value: Option<&'a str>,
    long_written: bool,
    parsed: &mut ParsedArgs<'a>,
    findings: &mut Findings,
) {
    let name = || option.display(long_written);
    let path = |parsed: &ParsedArgs<'a>| value.map(|v| parsed.path(v));
    match option.effect {
        Effect::Url => {
            if let Some(v) = value {
                super::curl::url_operand(v, findings);
            }
        }
        Effect::CurlData(form) => {
            if let Some(v) = value {
                super::curl::data_value(form, v, &|f| parsed.path(f), findings);
            }
        }
        effect @ (Effect::Read | Effect::Write | Effect::ReadWrite) => {
            if let Some(p) = path(parsed) {
                if effect != Effect::Write {
                    findings.read(&p);
                }
                if effect != Effect::Read {
                    findings.write(&p);
                }
            }
        }
        Effect::NamesFrom => {
            if let Some(p) = path(parsed) {
                findings.read(&p);
            }
            findings.forbid(
                &name(),
                "takes more file names from a file, which cannot be checked",
            );
        }
        Effect::Forbid(why) => findings.forbid(&name(), why),
        Effect::InlineProgram(ends_options) => {
            findings.inline_programs.extend(value.map(str::to_owned));
            parsed.options_done |= ends_options;
        }
        Effect::InPlace => {
            parsed.in_place = true;
            parsed.in_place_suffix = value.filter(|v| !v.is_empty());
        }
        Effect::FollowSymlinks => findings.follows_symlinks = true,
        Effect::PatternFile => {
            parsed.pattern_given = true;
            parsed.pattern_file = true;
            if let Some(p) = path(parsed) {
                findings.read(&p);
            }
        }
        Effect::DateOrFile => {
            if let Some(v) = value.filter(|v| v.starts_with('/') || v.starts_with('.')) {
                findings.read(&parsed.path(v));
            }
        }
        Effect::AwkW => {
            if !value.is_some_and(coreutils_tables::awk_w_is_inert) {
                findings.forbid(
                    &name(),
                    "takes a word that may name a program file or run something; only \
                     version, dump, help, usage, interactive, posix_space, random=, sprintf= \
                     and the flags are allowed",
                );
            }
        }
        Effect::ReadAfterColon => {
            if let Some((_, file)) = value.and_then(|v| v.rsplit_once(':')) {
                findings.read(&parsed.path(file));
            }
        }
        state => set_state(state, value, parsed),
    }
}

/// What an option changes in the parse itself (recursion, patterns, operands, the
/// directory later names are taken from); the effects on files are [`apply_effect`]'s.
fn set_state<'a>(effect: Effect, value: Option<&'a str>, parsed: &mut ParsedArgs<'a>) {
    match effect {
        Effect::Recursive => parsed.recursive = true,
        Effect::RecursiveIf(word) => {
            if value.is_some_and(|v| !v.is_empty() && word.starts_with(v)) {
                parsed.recursive = true;
            }
        }
        Effect::NoRecursion => parsed.no_recursion = true,
        Effect::Pattern => {
            parsed.pattern_given = true;
            parsed.patterns.extend(value);
        }
        Effect::NoPattern => parsed.no_pattern = true,
        Effect::TargetDir => parsed.target_dir = value,
        Effect::NoTargetDir => parsed.no_target_dir = true,
        Effect::TarMode(mode) => parsed.tar_mode = Some(mode),
        Effect::Archive => parsed.archive = value,
        Effect::ChangeDir => {
            if let Some(v) = value {
                parsed.dir = Some(parsed.path(v));
            }
        }
        Effect::AbsoluteNames => parsed.absolute_names = true,
        Effect::OperandsAreListings => parsed.operands_are_listings = true,
        Effect::Operand => {
            if let Some(word) = value {
                parsed.operands.push(Operand {
                    word,
                    dir: parsed.dir.clone(),
                });
            }
        }
        Effect::EndsOptions => parsed.options_done = true,
        Effect::WalkFiles(rule) => {
            if let Some(glob) = value {
                parsed.walk_filter.files.push((rule, glob.to_owned()));
            }
        }
        Effect::WalkExcludeDir => parsed.walk_filter.dirs.extend(value.map(str::to_owned)),
        Effect::RipgrepGlob(ignores_case) => {
            let rules = parsed.walk_filter.ripgrep.get_or_insert_default();
            rules
                .globs
                .extend(value.map(|g| (g.to_owned(), ignores_case)));
        }
        // None, and the effects on files, which apply_effect handles.
        Effect::None
        | Effect::Url
        | Effect::CurlData(_)
        | Effect::Read
        | Effect::Write
        | Effect::ReadWrite
        | Effect::NamesFrom
        | Effect::Forbid(_)
        | Effect::InlineProgram(_)
        | Effect::InPlace
        | Effect::FollowSymlinks
        | Effect::PatternFile
        | Effect::DateOrFile
        | Effect::AwkW
        | Effect::ReadAfterColon => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ValueSyntax::Required;

    const T: OptionTable = OptionTable::gnu(&[
        option('o', "output", Required, Effect::Write),
        option('x', "exec", Required, RUNS_ANOTHER_COMMAND),
        short_option('m', Required, Effect::EndsOptions),
    ])
    .inert("-v --verbose")
    .numeric()
    .dash_operand(|w| w == "-w");

    fn parse(line: &str, table: &OptionTable) -> Result<(Vec<String>, Findings), ShellError> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        let mut findings = Findings::new("t");
        let parsed = parse_options(&args, table, &mut findings)?;
        let operands = parsed.operands.iter().map(|o| o.word.to_owned()).collect();
        Ok((operands, findings))
    }

    fn unknown(option: &str) -> ShellError {
        ShellError::UnknownOption {
            command: "t".into(),
            option: option.into(),
        }
    }

    #[test]
    fn strict_tables_refuse_unknown_options() {
        assert_eq!(parse("-vZ a", &T).err(), Some(unknown("-Z")));
        assert_eq!(parse("a --frob=x", &T).err(), Some(unknown("--frob")));
        assert_eq!(
            parse("-- --frob -Z", &T).map(|(o, _)| o).ok(),
            Some(vec!["--frob".into(), "-Z".into()])
        );
        assert_eq!(
            parse("-12v -w a", &T).map(|(o, _)| o).ok(),
            Some(vec!["-w".into(), "a".into()])
        );
    }

    #[test]
    fn lenient_tables_keep_every_value_an_unknown_option_may_have() {
        let args: Vec<String> = "-Z --frob=v -o=out -I../inc -la a"
            .split_whitespace()
            .map(String::from)
            .collect();
        let mut findings = Findings::new("t");
        let parsed = parse_options(&args, &OptionTable::lenient(), &mut findings).expect("lenient");
        let operands: Vec<&str> = parsed.operands.iter().map(|o| o.word).collect();
        assert_eq!(operands, ["a"]);
        assert_eq!(parsed.unknown_values, ["v", "out", "../inc", "a"]);
    }

    #[test]
    fn effects_and_their_names() {
        let (operands, findings) = parse("-m mod -v --exec x a", &T).expect("parse");
        assert_eq!(operands, ["-v", "--exec", "x", "a"], "-m ends the options");
        assert!(findings.into_analysis("t").forbidden.is_empty());
        let (_, findings) = parse("--exec=x -x y --out o", &T).expect("parse");
        let a = findings.into_analysis("t");
        assert_eq!(
            a.forbidden,
            [
                "t -x/--exec: runs another command",
                "t -x: runs another command"
            ]
        );
        assert_eq!(a.writes, [PathBuf::from("o")]);
        // `--ex` abbreviates `--exec` and `--extra`, which differ: each one's effect, with
        // the attached value only.
        const AMBIGUOUS: OptionTable = T.inert("--extra=");
        let (operands, findings) = parse("--ex=v w", &AMBIGUOUS).expect("parse");
        assert_eq!(operands, ["w"]);
        assert_eq!(
            findings.into_analysis("t").forbidden,
            ["t -x/--exec: runs another command"]
        );
    }
}
