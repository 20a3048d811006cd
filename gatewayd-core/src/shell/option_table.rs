//! The vocabulary of the option tables: each option a command knows says how it takes a
//! value ([`ValueSyntax`]) and what it does to the command's paths ([`Effect`]); an
//! [`OptionTable`] holds a command's options (typed, and inert words) and resolves a short
//! option, or a long one as written (abbreviated, negated). `options` parses with them.
use super::{tar::TarMode, walk_filter::FileRule};

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
    /// The value is a file that gives what the first operand would (the pattern, script or
    /// program; chmod's MODE with `--reference`): read, and no operand is the pattern.
    PatternFile,
    /// No pattern at all: every operand is a path (`rg --files`).
    NoPattern,
    /// Target directory of cp/mv: written.
    TargetDir,
    /// cp/mv's destination is the file itself, never a directory to copy into (`-T`).
    NoTargetDir,
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
    /// The value ends with `:PATH`, a file that is read (`git log -L 1,9:src/a.rs`).
    ReadAfterColon,
    /// The value is one more operand (`tar --add-file=-x`).
    Operand,
    /// The value names what runs, and every later word is its argument (`python -m MOD`).
    EndsOptions,
    /// The value is the program an interpreter runs (`python -c CODE`, `node -e CODE`):
    /// not analysed, its text read by the engine ([`super::CommandAnalysis::inline_programs`]).
    /// With `true`, every later word is the program's argument (`python -c`).
    InlineProgram(bool),
    /// awk's `-W` words: forbidden unless each is known to touch no file.
    AwkW,
    /// The value is a URL the command connects to (`curl --url`).
    Url,
    /// The value is a glob of the files a walk reads or skips (`grep --include/--exclude`).
    WalkFiles(FileRule),
    /// The value is a glob of the directories a walk skips (`grep --exclude-dir`).
    WalkExcludeDir,
    /// The value is a ripgrep glob ([`super::RipgrepRules::globs`]); `true`: it ignores case.
    RipgrepGlob(bool),
    /// The value is data that may name a file the command reads, in curl's forms.
    CurlData(CurlData),
}

/// How a curl option's value names a file it reads (or writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CurlData {
    /// `@FILE` reads FILE (`-d`, `--data-binary`, `--json`, `-H`).
    At,
    /// `NAME=@FILE` or `NAME=<FILE` reads FILE (`-F`).
    Form,
    /// `@FILE` or `NAME@FILE` reads FILE (`--data-urlencode`).
    Urlencode,
    /// A cookie string when it holds `=`, else a file read (`-b`).
    CookieOrFile,
    /// A format, whose `%output{FILE}` writes FILE (`-w`).
    WriteOut,
}

/// The reason shared by every option that runs a program named in its value.
pub(super) const RUNS_ANOTHER_COMMAND: Effect = Effect::Forbid("runs another command");

/// One option a command knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// How forbidden findings name it: `-f` when it has a short form, else `--file`; both
    /// (`-f/--file`) when the command line wrote the long form.
    pub(super) fn display(&self, long_written: bool) -> String {
        match (self.short, self.long) {
            ('\0', long) => format!("--{long}"),
            (short, long) if long_written && !long.is_empty() => format!("-{short}/--{long}"),
            (short, _) => format!("-{short}"),
        }
    }

    /// A negated long option (`--no-verify` for git's `--verify`): a flag without effect.
    const fn negation(long: &'static str) -> OptionSpec {
        long_option(long, ValueSyntax::Flag, Effect::None)
    }
}

/// One word of an inert list (see [`OptionTable::inert`]) as an option without effect:
/// `-x`/`--name` a flag, `-x=`/`--name=` a required value, `-x[=]`/`--name[=]` an optional
/// attached value. `None` for a malformed word (the table tests reject those).
pub(super) fn inert_spec(word: &'static str) -> Option<OptionSpec> {
    let (name, value) = if let Some(name) = word.strip_suffix("[=]") {
        (name, ValueSyntax::AttachedOnly)
    } else if let Some(name) = word.strip_suffix('=') {
        (name, ValueSyntax::Required)
    } else {
        (word, ValueSyntax::Flag)
    };
    if let Some(long) = name.strip_prefix("--") {
        let ok = !long.is_empty() && !long.starts_with('-') && !long.contains(['=', '[', ']']);
        return ok.then(|| long_option(long, value, Effect::None));
    }
    let mut chars = name.strip_prefix('-')?.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c != '-' => Some(short_option(c, value, Effect::None)),
        _ => None,
    }
}

/// How a long option written on the command line resolves in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Long {
    /// The option it names or abbreviates (or a negation, for git).
    Known(OptionSpec),
    /// It abbreviates several options that differ, listed: the tool refuses it (getopt:
    /// ambiguous), unless the tool knows fewer options than the table (another version).
    Ambiguous(Vec<OptionSpec>),
    /// The table knows no such option.
    Unknown,
}

/// The options one command knows, and where it accepts them. Strict: an option the table
/// does not know is refused by [`super::options::parse_options`] (unless built with
/// [`OptionTable::lenient`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct OptionTable {
    /// Options with an effect on paths (or an unusual value syntax).
    pub(super) options: &'static [OptionSpec],
    /// Options without effect, in the [`inert_spec`] syntax, separated by whitespace.
    pub(super) inert: &'static str,
    /// Tables whose options this one shares (git's diff and revision options), one level
    /// deep: their own `shared` are not looked at.
    pub(super) shared: &'static [&'static OptionTable],
    /// GNU permutation: options are recognised after operands too.
    pub(super) permute: bool,
    /// An unknown option is refused (false only for commands nobody knows).
    pub(super) strict: bool,
    /// git: `--no-NAME` negates a known `--NAME`, and `--NAME` a known `--no-NAME`.
    pub(super) negatable: bool,
    /// `-NUM` is a count (`head -5`, `grep -3`, `git log -3`).
    pub(super) numeric: bool,
    /// Words starting with `-` that are operands all the same (chmod's MODE `-w`).
    pub(super) dash_operand: Option<fn(&str) -> bool>,
}

impl OptionTable {
    const fn new(options: &'static [OptionSpec], permute: bool) -> OptionTable {
        OptionTable {
            options,
            inert: "",
            shared: &[],
            permute,
            strict: true,
            negatable: false,
            numeric: false,
            dash_operand: None,
        }
    }

    /// Options anywhere, before or after operands (GNU permutation).
    pub(super) const fn gnu(options: &'static [OptionSpec]) -> OptionTable {
        OptionTable::new(options, true)
    }

    /// Options up to the first operand only (interpreters: the rest belongs to the script).
    pub(super) const fn until_first_operand(options: &'static [OptionSpec]) -> OptionTable {
        OptionTable::new(options, false)
    }

    /// git's parse-options: GNU permutation, and `--no-` negates.
    pub(super) const fn git(options: &'static [OptionSpec]) -> OptionTable {
        OptionTable::new(options, true).negatable()
    }

    /// `--no-NAME` negates a known `--NAME`, and `--NAME` a known `--no-NAME` (git, node).
    pub(super) const fn negatable(self) -> OptionTable {
        OptionTable {
            negatable: true,
            ..self
        }
    }

    /// For commands nobody knows: every option is unknown, and taken cautiously (a short
    /// option as a flag, the value of `--opt=value` as a read).
    pub(super) const fn lenient() -> OptionTable {
        OptionTable {
            strict: false,
            ..OptionTable::new(&[], true)
        }
    }

    /// Adds the options that have no effect on paths, in the [`inert_spec`] syntax.
    pub(super) const fn inert(self, inert: &'static str) -> OptionTable {
        OptionTable { inert, ..self }
    }

    /// Adds the options of `shared` tables.
    pub(super) const fn with(self, shared: &'static [&'static OptionTable]) -> OptionTable {
        OptionTable { shared, ..self }
    }

    /// Accepts `-NUM` (a count).
    pub(super) const fn numeric(self) -> OptionTable {
        OptionTable {
            numeric: true,
            ..self
        }
    }

    /// Takes words starting with `-` for which `is_operand` holds as operands.
    pub(super) const fn dash_operand(self, is_operand: fn(&str) -> bool) -> OptionTable {
        OptionTable {
            dash_operand: Some(is_operand),
            ..self
        }
    }

    /// This table's own options, typed first, then inert.
    fn own(&self) -> impl Iterator<Item = OptionSpec> + '_ {
        let inert = self.inert.split_whitespace().filter_map(inert_spec);
        self.options.iter().copied().chain(inert)
    }

    /// Every option: this table's, then its shared tables'.
    pub(super) fn specs(&self) -> impl Iterator<Item = OptionSpec> + '_ {
        self.own().chain(self.shared.iter().flat_map(|t| t.own()))
    }

    /// Whether the table accepts `-NUM` (for table tests).
    #[cfg(test)]
    pub(super) fn is_numeric(&self) -> bool {
        self.numeric
    }

    /// Whether `--no-NAME` negates (for table tests).
    #[cfg(test)]
    pub(super) fn is_negatable(&self) -> bool {
        self.negatable
    }

    /// The words of the inert lists of this table and its shared tables (for table tests).
    #[cfg(test)]
    pub(super) fn inert_words(&self) -> impl Iterator<Item = &'static str> + '_ {
        let shared = self.shared.iter().map(|t| t.inert);
        std::iter::once(self.inert)
            .chain(shared)
            .flat_map(str::split_whitespace)
    }

    /// The long option `name` as written (without `--` and `=value`): an exact match, else
    /// the options it abbreviates, which must all be alike. For git, `--no-NAME` and the
    /// positive form of a `--no-NAME` option are negations, flags without effect.
    pub(super) fn long(&self, name: &str) -> Long {
        if name.is_empty() {
            return Long::Unknown;
        }
        if let Some(exact) = self.specs().find(|o| o.long == name) {
            return Long::Known(exact);
        }
        let negated = || {
            let positive = name.strip_prefix("no-");
            self.specs().filter_map(move |o| {
                if o.long.is_empty() {
                    return None;
                }
                let hit = positive.is_some_and(|p| !p.is_empty() && o.long.starts_with(p))
                    || o.long
                        .strip_prefix("no-")
                        .is_some_and(|p| p.starts_with(name));
                hit.then(|| OptionSpec::negation(o.long))
            })
        };
        if self.negatable
            && let Some(exact) = negated().find(|o| {
                name.strip_prefix("no-") == Some(o.long) || o.long == format!("no-{name}")
            })
        {
            return Long::Known(exact);
        }
        // Abbreviations of real names first (git's `--no-ind` is `--no-index`, not the
        // negation of `--index`), then of negations.
        let abbreviated: Vec<OptionSpec> = self
            .specs()
            .filter(|o| !o.long.is_empty() && o.long.starts_with(name))
            .collect();
        let hits = if abbreviated.is_empty() && self.negatable {
            negated().collect()
        } else {
            abbreviated
        };
        match hits.split_first() {
            None => Long::Unknown,
            Some((first, rest))
                if rest
                    .iter()
                    .all(|o| (o.value, o.effect) == (first.value, first.effect)) =>
            {
                Long::Known(*first)
            }
            Some(_) => Long::Ambiguous(hits),
        }
    }

    /// The short option `c`.
    pub(super) fn short(&self, c: char) -> Option<OptionSpec> {
        self.specs().find(|o| o.short == c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ValueSyntax::*;

    const T: OptionTable = OptionTable::gnu(&[option('f', "file", Required, Effect::Read)])
        .inert("-v --verbose --files-with-matches --color[=] --colour[=] -n= --no-verify --label=");

    fn known(table: &OptionTable, name: &str) -> Option<(&'static str, ValueSyntax)> {
        match table.long(name) {
            Long::Known(o) => Some((o.long, o.value)),
            _ => None,
        }
    }

    #[test]
    fn inert_words() {
        assert_eq!(
            inert_spec("-x"),
            Some(short_option('x', Flag, Effect::None))
        );
        assert_eq!(
            inert_spec("-x="),
            Some(short_option('x', Required, Effect::None))
        );
        assert_eq!(
            inert_spec("-x[=]"),
            Some(short_option('x', AttachedOnly, Effect::None))
        );
        assert_eq!(
            inert_spec("--a-b="),
            Some(long_option("a-b", Required, Effect::None))
        );
        assert_eq!(
            inert_spec("--c[=]"),
            Some(long_option("c", AttachedOnly, Effect::None))
        );
        for bad in [
            "x", "-", "--", "-xy", "---x", "--a=b", "-=", "--=", "--a[b]",
        ] {
            assert_eq!(inert_spec(bad), None, "{bad}");
        }
    }

    #[test]
    fn long_options_exact_abbreviated_ambiguous() {
        assert_eq!(known(&T, "file"), Some(("file", Required)));
        assert_eq!(known(&T, "verb"), Some(("verbose", Flag)));
        assert_eq!(
            known(&T, "col"),
            Some(("color", AttachedOnly)),
            "alike: the first"
        );
        let Long::Ambiguous(both) = T.long("fil") else {
            panic!("file and files-with-matches differ");
        };
        assert_eq!(both.len(), 2);
        assert_eq!(T.long("frob"), Long::Unknown);
        assert_eq!(T.long(""), Long::Unknown);
        assert_eq!(T.long("verify"), Long::Unknown, "no negation outside git");
        assert_eq!(T.short('n').map(|o| o.value), Some(Required));
        assert_eq!(T.short('q'), None);
    }

    #[test]
    fn git_negations() {
        const G: OptionTable = T.negatable();
        assert_eq!(known(&G, "no-file"), Some(("file", Flag)), "--no-NAME");
        assert_eq!(
            known(&G, "verify"),
            Some(("no-verify", Flag)),
            "positive of --no-NAME"
        );
        assert_eq!(
            known(&G, "no-verify"),
            Some(("no-verify", Flag)),
            "exact first"
        );
        assert_eq!(known(&G, "no-verb"), Some(("verbose", Flag)));
        const INDEX: OptionTable =
            OptionTable::git(&[long_option("no-index", Flag, Effect::Recursive)]).inert("--index");
        assert_eq!(
            INDEX.long("no-ind"),
            Long::Known(long_option("no-index", Flag, Effect::Recursive)),
            "a real name before a negation, as git"
        );
        assert_eq!(G.long("no-frob"), Long::Unknown);
    }

    #[test]
    fn shared_tables_come_after_own_options() {
        const SHARED: OptionTable = OptionTable::gnu(&[]).inert("-n --extra= --label");
        const WITH: OptionTable = T.with(&[&SHARED]);
        assert_eq!(
            WITH.short('n').map(|o| o.value),
            Some(Required),
            "own first"
        );
        assert_eq!(known(&WITH, "extra"), Some(("extra", Required)));
        assert_eq!(
            known(&WITH, "label"),
            Some(("label", Required)),
            "own exact first"
        );
    }
}
