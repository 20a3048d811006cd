//! A word of a shell line as bash expands it, for [`super`]: quotes, `~`, `$HOME`,
//! `$PWD` and the variables the line itself set ([`Context::vars`]), and globs against the
//! file system. A command substitution is known only when the line runs: its inner line is
//! handed back to be analysed as commands of their own, and the word is marked
//! ([`ExpandedWord::runtime`]) with a stand-in for its value ([`RUNTIME_STAND_IN`]); where
//! such a word may stand is `runtime`'s rule. Anything else known only when the line
//! runs is refused.
use std::path::Path;

use brush_parser::word::{
    Parameter, ParameterExpr, SpecialParameter, TildeExpr, WordPiece, WordPieceWithSource,
};

use super::{Context, braces::brace_words, options, unanalysable};
use crate::shell::{LAST_JOB, ShellError, TEXT_VARIABLES, git_repo, walk_filter::fnmatch_brackets};

/// Paths one glob word may expand to before the line is refused.
const MAX_GLOB_MATCHES: usize = 4096;

/// What a command substitution's value is taken as, in the words the analysis reads: a
/// text that no file, option or URL of a line can be mistaken for by accident (a line that
/// writes it literally only makes the rule of `runtime` stricter).
pub(super) const RUNTIME_STAND_IN: &str = runtime_stand_in!();

/// The inner line of the one command substitution taken as known before it runs
/// ([`Context::top_level`]).
const TOP_LEVEL: &str = "git rev-parse --show-toplevel";

/// Why a word with a command substitution in it is refused where it stands.
pub(super) const SUBSTITUTION_REFUSED: &str = "command substitution (its result is known only when it runs; run the inner command on its own)";

/// A word's expansion.
#[derive(Debug, Default)]
pub(super) struct ExpandedWord {
    /// Its fields: its text, or its glob's matches.
    pub(super) fields: Vec<String>,
    /// It holds a value known only when the line runs (a command substitution's, a
    /// [`TEXT_VARIABLES`] one's), so its text holds [`RUNTIME_STAND_IN`] for it: why such a
    /// word is refused where it is not text.
    pub(super) runtime: Option<String>,
    /// A command substitution outside double quotes: bash splits its value into words and
    /// globs them, so the word may become any number of words.
    pub(super) splits: bool,
    /// The inner lines of its command substitutions, in order.
    pub(super) substitutions: Vec<String>,
}

impl Context {
    /// A word that must expand to exactly one text known before the line runs, without
    /// globbing (an assignment's value, a here-string).
    pub(super) fn static_text(&self, raw: &str) -> Result<String, ShellError> {
        let pieces = brush_parser::word::parse(raw, &options())
            .map_err(|e| ShellError::Syntax(e.to_string()))?;
        let mut e = Expanded::default();
        self.text_of(&pieces, &mut e)?;
        match e.runtime {
            Some(why) => Err(unanalysable(why)),
            None => Ok(e.text),
        }
    }

    /// An assignment's value that may hold values known only when the line runs (`x=$(wc
    /// -l < f)`): its text, with [`RUNTIME_STAND_IN`] for each, and the inner lines of its
    /// command substitutions, to be walked.
    pub(super) fn runtime_text(&self, raw: &str) -> Result<(String, Vec<String>), ShellError> {
        let pieces = brush_parser::word::parse(raw, &options())
            .map_err(|e| ShellError::Syntax(e.to_string()))?;
        let mut e = Expanded::default();
        self.text_of(&pieces, &mut e)?;
        Ok((e.text, e.substitutions))
    }

    /// A word whose every field must be known before the line runs (a redirection's file,
    /// a `for` loop's value).
    pub(super) fn static_word(&self, raw: &str) -> Result<Vec<String>, ShellError> {
        let w = self.word(raw)?;
        match w.runtime {
            Some(why) => Err(unanalysable(why)),
            None => Ok(w.fields),
        }
    }

    /// A word's fields: its text, or its glob's matches.
    /// A word's fields: for each word its braces make ([`brace_words`]), its text or its
    /// glob's matches.
    pub(super) fn word(&self, raw: &str) -> Result<ExpandedWord, ShellError> {
        let mut out = ExpandedWord::default();
        if let Some(top) = self.top_level(raw) {
            out.fields.push(top);
            out.substitutions.push(TOP_LEVEL.to_owned());
            return Ok(out);
        }
        if raw.contains('{') {
            for one in brace_words(raw)? {
                self.expand_into(&one, &mut out)?;
            }
        } else {
            self.expand_into(raw, &mut out)?;
        }
        Ok(out)
    }

    /// `"$(git rev-parse --show-toplevel)"`, the whole word, where the line is at the top of
    /// the work tree git finds ([`git_repo::work_tree`]): this directory. Should git fail
    /// when the line runs, the word is empty, which names no file and leaves `cd` where it
    /// is, here. Any other form of it (unquoted, which is `cd` alone when empty; in a
    /// longer word, which is `/…` when empty) is a substitution like any other.
    fn top_level(&self, raw: &str) -> Option<String> {
        let inner = raw.strip_prefix("\"$(")?.strip_suffix(")\"")?;
        if inner != TOP_LEVEL {
            return None;
        }
        let here = std::fs::canonicalize(&self.cwd).ok()?;
        (git_repo::work_tree(&here)? == here).then(|| self.cwd.to_string_lossy().into_owned())
    }

    /// One word after brace expansion, expanded onto `out`.
    fn expand_into(&self, raw: &str, out: &mut ExpandedWord) -> Result<(), ShellError> {
        let pieces = brush_parser::word::parse(raw, &options())
            .map_err(|e| ShellError::Syntax(e.to_string()))?;
        let mut e = Expanded::default();
        self.text_of(&pieces, &mut e)?;
        if e.glob {
            out.fields.extend(self.glob(&e)?);
        } else {
            out.fields.push(e.text);
        }
        out.runtime = out.runtime.take().or(e.runtime);
        out.splits |= e.splits;
        out.substitutions.extend(e.substitutions);
        Ok(())
    }

    fn glob(&self, e: &Expanded) -> Result<Vec<String>, ShellError> {
        // bash without `globstar`: `**` is `*`.
        let relative = bash_brackets(&e.pattern.replace("**", "*"))?;
        let absolute = Path::new(&relative).is_absolute();
        let pattern = if absolute {
            relative.clone()
        } else {
            format!(
                "{}/{relative}",
                glob::Pattern::escape(&self.cwd.to_string_lossy())
            )
        };
        // Dotfiles are matched only by a component that starts with a literal `.`, as bash
        // does; the glob crate's own option misses `.e*`, so it is applied here.
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        // Not a pattern after all (`[` alone, say): bash passes it as written. One with a
        // bracket expression the glob crate does not take may still be one to bash.
        let Ok(paths) = glob::glob_with(&pattern, opts) else {
            if relative
                .find('[')
                .is_some_and(|at| relative[at..].contains(']'))
            {
                return Err(unanalysable(format!(
                    "the glob `{}`, whose bracket expression bash may read otherwise",
                    e.text
                )));
            }
            return Ok(vec![e.text.clone()]);
        };
        let wanted: Vec<&str> = pattern.split('/').collect();
        let mut out = Vec::new();
        for p in paths.flatten() {
            let shown = p.to_string_lossy().into_owned();
            let hidden_unasked = shown
                .split('/')
                .zip(&wanted)
                .any(|(got, want)| got.starts_with('.') && !want.starts_with('.'));
            if hidden_unasked {
                continue;
            }
            if out.len() == MAX_GLOB_MATCHES {
                return Err(unanalysable(format!(
                    "the glob `{}`, which matches more than {MAX_GLOB_MATCHES} paths",
                    e.text
                )));
            }
            let shown = if absolute {
                p
            } else {
                p.strip_prefix(&self.cwd)
                    .map(Path::to_path_buf)
                    .unwrap_or(p)
            };
            out.push(shown.to_string_lossy().into_owned());
        }
        if out.is_empty() {
            // bash passes a pattern that matches nothing as written.
            out.push(e.text.clone());
        }
        Ok(out)
    }

    /// Whether the directory's path, unquoted, stays one word that matches no glob.
    fn cwd_is_one_word(&self) -> bool {
        !self
            .cwd
            .to_string_lossy()
            .contains(|c: char| c.is_whitespace() || "*?[".contains(c))
    }

    /// Appends the pieces' expansion to `e`; refuses what is not known before running.
    pub(super) fn text_of(
        &self,
        pieces: &[WordPieceWithSource],
        e: &mut Expanded,
    ) -> Result<(), ShellError> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(t) => {
                    if has_brace_expansion(t) {
                        return Err(unanalysable(format!("brace expansion in `{t}`")));
                    }
                    e.unquoted(t);
                }
                WordPiece::SingleQuotedText(t) => e.quoted(t),
                WordPiece::AnsiCQuotedText(t) => e.quoted(&ansi_c(t)?),
                WordPiece::EscapeSequence(t) => e.quoted(t.strip_prefix('\\').unwrap_or(t)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    let mut q = Expanded {
                        in_quotes: true,
                        ..Expanded::default()
                    };
                    self.text_of(inner, &mut q)?;
                    e.quoted(&q.text);
                    e.substitutions.append(&mut q.substitutions);
                    e.runtime = e.runtime.take().or(q.runtime);
                }
                WordPiece::TildeExpansion(t) => {
                    let home = match t {
                        TildeExpr::Home => self.home(),
                        TildeExpr::UserHome(u) => (self.home_of)(u),
                        TildeExpr::WorkingDir => Some(self.cwd.clone()),
                        _ => return Err(unanalysable("a directory-stack `~` expansion")),
                    };
                    let home =
                        home.ok_or_else(|| unanalysable("`~` of a user whose home is not known"))?;
                    e.quoted(&home.to_string_lossy());
                }
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(name),
                    indirect: false,
                }) if name == "HOME" || name == "PWD" => {
                    let value = if name == "PWD" {
                        Some(self.cwd.clone())
                    } else {
                        self.home()
                    };
                    let value = value
                        .ok_or_else(|| unanalysable("`$HOME` of a user whose home is not known"))?;
                    e.quoted(&value.to_string_lossy());
                }
                // A variable the line set to a value known only when it runs.
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(name),
                    indirect: false,
                }) if self.var(name).is_some_and(|v| v.contains(RUNTIME_STAND_IN)) => {
                    e.runtime.get_or_insert_with(|| {
                        format!(
                            "the variable `${name}`, set from a command substitution or `read` (its value is known only when the line runs)"
                        )
                    });
                    e.splits |= !e.in_quotes;
                    e.quoted(self.var(name).unwrap_or(RUNTIME_STAND_IN));
                }
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(name),
                    indirect: false,
                }) if self.var(name).is_some() => {
                    let value = self.var(name).unwrap_or_default();
                    if !e.in_quotes
                        && (value.is_empty() || value.contains([' ', '\t', '\n', '*', '?', '[']))
                    {
                        return Err(unanalysable(format!(
                            "the variable `${name}` outside double quotes, whose value `{value}` bash would split into words, glob or drop (write \"${name}\")"
                        )));
                    }
                    e.quoted(value);
                }
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(name),
                    indirect: false,
                }) if TEXT_VARIABLES.contains(&name.as_str()) => {
                    e.runtime.get_or_insert_with(|| {
                        format!(
                            "the variable `${name}` (its value is known only when the line runs)"
                        )
                    });
                    e.splits |= !e.in_quotes;
                    e.quoted(RUNTIME_STAND_IN);
                }
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Special(SpecialParameter::LastBackgroundProcessId),
                    indirect: false,
                }) => {
                    e.runtime.get_or_insert_with(|| {
                        "`$!` (its value is known only when the line runs)".to_owned()
                    });
                    e.quoted(LAST_JOB);
                }
                // `$?`, `$$` and `$#` are decimal integers: text that never splits or globs.
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter:
                        Parameter::Special(
                            x @ (SpecialParameter::LastExitStatus
                            | SpecialParameter::ProcessId
                            | SpecialParameter::PositionalParameterCount),
                        ),
                    indirect: false,
                }) => {
                    e.runtime.get_or_insert_with(|| {
                        format!("`${x}` (its value is known only when the line runs)")
                    });
                    e.quoted(RUNTIME_STAND_IN);
                }
                WordPiece::ParameterExpansion(x) => {
                    return Err(unanalysable(format!(
                        "{} (its value is known only when the line runs)",
                        parameter_named(x)
                    )));
                }
                // `$(pwd)`: the directory the command runs in, which the walk knows (bash's
                // `pwd` prints it as `cd` left it). Unquoted, only where it makes one word.
                WordPiece::CommandSubstitution(inner)
                | WordPiece::BackquotedCommandSubstitution(inner)
                    if inner.trim() == "pwd" && (e.in_quotes || self.cwd_is_one_word()) =>
                {
                    e.substitutions.push(inner.clone());
                    e.quoted(&self.cwd.to_string_lossy());
                }
                WordPiece::CommandSubstitution(inner)
                | WordPiece::BackquotedCommandSubstitution(inner) => {
                    e.substitutions.push(inner.clone());
                    e.runtime
                        .get_or_insert_with(|| SUBSTITUTION_REFUSED.to_owned());
                    e.splits |= !e.in_quotes;
                    e.quoted(RUNTIME_STAND_IN);
                }
                // Of integers written out only: no name, `$` or subscript, which bash would
                // evaluate as expressions that can run commands. Its value is an integer.
                WordPiece::ArithmeticExpression(x)
                    if x.value
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b" \t+-*/%()<>=!&|^~?:".contains(&b)) =>
                {
                    e.runtime.get_or_insert_with(|| {
                        "an arithmetic expansion (its value is known only when the line runs)"
                            .to_owned()
                    });
                    e.quoted(RUNTIME_STAND_IN);
                }
                WordPiece::ArithmeticExpression(_) => {
                    return Err(unanalysable(
                        "an arithmetic expansion `$((…))` of anything but integers written out",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `pattern`'s bracket expressions in the glob crate's syntax ([`fnmatch_brackets`]): bash's
/// `[^…]` is `[!…]`. A character class, equivalence class or collating symbol inside one
/// (`[[:lower:]]`) is refused: the glob crate would take its characters one by one (`cat
/// .[[:lower:]]nv` is `.env` to bash).
fn bash_brackets(pattern: &str) -> Result<String, ShellError> {
    fnmatch_brackets(pattern).ok_or_else(|| {
        unanalysable(format!(
            "the glob `{pattern}`, with a character class (`[[:…:]]`) the check cannot match as bash does"
        ))
    })
}

/// The text of bash's `$'…'`: its escapes of one character (`\n`, `\t`, `\\`, `\'`, …)
/// decoded as bash does. The escapes that name a character by its code (`\x2e`, `\056`,
/// `\u…`, `\cX`) are refused: they could spell any path (`$'.e\x6ev'` is `.env`).
fn ansi_c(raw: &str) -> Result<String, ShellError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let decoded = match chars.next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some('a') => '\u{7}',
            Some('b') => '\u{8}',
            Some('e' | 'E') => '\u{1b}',
            Some('f') => '\u{c}',
            Some('v') => '\u{b}',
            Some(c @ ('\\' | '\'' | '"' | '?')) => c,
            Some(other) => {
                return Err(unanalysable(format!(
                    "the escape `\\{other}` in a `$'…'` word (one that names a character by its code could spell any path; write the character itself)"
                )));
            }
            None => '\\',
        };
        out.push(decoded);
    }
    Ok(out)
}

/// How a refused parameter expansion is named in the reason.
fn parameter_named(x: &ParameterExpr) -> String {
    match x {
        ParameterExpr::Parameter {
            parameter: Parameter::Named(n),
            ..
        } => format!("the variable `${n}`"),
        _ => "a parameter expansion".into(),
    }
}

/// A word being expanded: its text, and the glob pattern where only the unquoted parts may
/// match (quoted parts escaped).
#[derive(Debug, Default)]
pub(super) struct Expanded {
    pub(super) text: String,
    pattern: String,
    glob: bool,
    /// Inside double quotes: no field splitting, no globbing.
    in_quotes: bool,
    /// A command substitution outside double quotes.
    splits: bool,
    /// The inner lines of its command substitutions.
    pub(super) substitutions: Vec<String>,
    /// Why it is known only when the line runs, if it is.
    runtime: Option<String>,
}

impl Expanded {
    fn unquoted(&mut self, t: &str) {
        self.text.push_str(t);
        self.pattern.push_str(t);
        self.glob |= t.contains(['*', '?', '[']);
    }

    fn quoted(&mut self, t: &str) {
        self.text.push_str(t);
        self.pattern.push_str(&glob::Pattern::escape(t));
    }
}

/// `{a,b}` or `{1..3}` in unquoted text: bash makes several words of it.
fn has_brace_expansion(t: &str) -> bool {
    let Some(open) = t.find('{') else {
        return false;
    };
    let rest = &t[open + 1..];
    rest.find('}')
        .is_some_and(|close| rest[..close].contains(',') || rest[..close].contains(".."))
}

/// bash expands `~` after the `=` of an argument that looks like an assignment, and after
/// each `:` of its value (`dd if=~/.ssh/id_rsa`, `make X=a:~/b`); the walk does not, so such
/// an argument is refused.
pub(super) fn tilde_after_equals(raw: &str) -> Result<(), ShellError> {
    let value = raw.split_once('=').map_or("", |(_, v)| v);
    if value.starts_with('~') || value.contains(":~") {
        return Err(unanalysable(format!(
            "`{raw}`: bash expands `~` after `=` or `:` in an argument like an assignment (write the path)"
        )));
    }
    Ok(())
}

/// A decimal integer, signed or not (`5`, `-10`, `+3`).
pub(super) fn is_integer(word: &str) -> bool {
    let digits = word.strip_prefix(['-', '+']).unwrap_or(word);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}
