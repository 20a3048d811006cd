//! Command lines as agents write them, for a line that runs through a shell: parsed by
//! brush's bash parser into its simple commands, each with its argv as the shell would pass
//! it, the directory it runs in and the files its redirections open.
//!
//! Understood: lists (`;` `&&` `||` `&`), pipelines, `{ …; }`, `( … )`, `if`/`while`
//! bodies, redirections (`<` is a read, `>` `>>` `&>` a write, `2>&1` and `/dev/null`
//! nothing), here-documents, `cd DIR` (the directory carries to the next commands of the
//! line; a subshell's does not leave it, nor does that of a command of a pipeline of
//! several or of one run in the background with `&`, each in a subshell of its own),
//! `NAME=value` before a command, and alone as a command (it sets a variable for the rest
//! of the line), `~`, `~USER`, `$HOME` and `$PWD`, brace expansion (`braces`), glob words
//! (expanded against the file system as bash does: no match leaves the word as written), `for NAME in WORDS` (its body
//! walked once for each value, `$NAME` being that value), command substitutions (their
//! inner line analysed as commands of their own; their value allowed only where the
//! command takes text, `runtime`), `bash -c BODY` (and `sh`, `dash`, `zsh`, with
//! `-l`, `-e` and the like), whose BODY is a line of its own, `source FILE` (as `bash
//! FILE`), and commands run on the paths another command found (`find -exec`, `… | xargs`,
//! `cat $(find …)`: `found`, `pipes`).
//!
//! Process substitutions (`diff <(sort a) <(sort b)`) are commands of the line whose word is
//! a pipe (`-`, no file).
//!
//! Refused ([`ShellError::Unanalysable`]), because what they do is not on the line: process
//! substitution before a command's name, variables other than `HOME`, `PWD` and those the
//! line set, a substitution's value where it is not text, arithmetic of anything but
//! integers written out, braces in an assignment, arithmetic `for`, a `case` branch that goes
//! on into the next,
//! a `[[ … ]]` of words not known before the line runs or arithmetic of non-integers,
//! functions, `eval`, `alias`, `pushd`/`popd`, `cd -`, and assignments that
//! choose what a program runs or loads (`PATH`, `LD_*`, `*_COMMAND`, `GIT_DIR`,
//! `NODE_OPTIONS`, …).
use std::path::PathBuf;

use brush_parser::{
    ParserOptions,
    ast::{self, Command, CommandPrefixOrSuffixItem as Item, CompoundCommand, IoRedirect},
};

use super::ShellError;
use builtins::check_assignment;
use runtime::RuntimeWord;
use words::{ExpandedWord, RUNTIME_STAND_IN};

mod braces;
mod builtins;
mod flow;
mod found;
mod input;
mod pipes;
mod redirects;
mod runtime;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_found;
mod words;
mod wrappers;

/// `bash -c` bodies and command substitutions analysed inside one another, at most.
const MAX_DEPTH: usize = 3;

/// The most values a `for` loop's body is walked for, and the most walks of loop bodies in a
/// line (loops inside loops).
const MAX_LOOP_WALKS: usize = 256;

/// Where a line runs, and whose home `~` is.
#[derive(Debug, Clone)]
pub struct Context {
    /// The working directory the line starts in (absolute).
    pub cwd: PathBuf,
    /// The user the line runs as; `None`: `~` and `$HOME` are refused.
    pub user: Option<String>,
    /// A user's home ([`user_home`]), looked up only when a line names one (`~`, `~USER`,
    /// `$HOME`, `cd` alone): the user database is slow to read.
    pub home_of: fn(&str) -> Option<PathBuf>,
    /// The variables the line has set so far, each known before it runs: a `for` loop's
    /// variable in its body, `NAME=value` alone as a command. A line starts with none: the
    /// environment's values are not known.
    vars: Vars,
}

/// Variables the line set, and each name set or unset so far, in order (what a part of the
/// line that may not run changed is forgotten after it: `flow`).
#[derive(Debug, Clone, Default)]
struct Vars {
    known: Vec<(String, String)>,
    changed: Vec<String>,
}

impl Context {
    /// A line that starts in `cwd`, run by `user` (`None`: `~` and `$HOME` are refused),
    /// whose homes `home_of` looks up ([`user_home`]).
    pub fn new(cwd: PathBuf, user: Option<String>, home_of: fn(&str) -> Option<PathBuf>) -> Self {
        Context {
            cwd,
            user,
            home_of,
            vars: Vars::default(),
        }
    }

    /// The home of the user the line runs as.
    pub(super) fn home(&self) -> Option<PathBuf> {
        self.user.as_deref().and_then(self.home_of)
    }

    /// The value of a variable the line set.
    pub(super) fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .known
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `name` to `value`; a value that still holds a `~` is left unknown (bash expands
    /// `~` after `=` and `:` in assignments, which the walk does not follow), so a later
    /// `$name` is refused.
    pub(super) fn set_var(&mut self, name: &str, value: String) {
        self.unset_var(name);
        if !value.contains('~') {
            self.vars.known.push((name.to_owned(), value));
        }
    }

    /// Forgets `name`'s value: a later `$name` is refused.
    pub(super) fn unset_var(&mut self, name: &str) {
        self.vars.known.retain(|(n, _)| n != name);
        self.vars.changed.push(name.to_owned());
    }
}

/// One simple command of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineCommand {
    /// The words the program gets, expanded; argv\[0\] is the program. Empty for
    /// redirections alone (`> file`).
    pub argv: Vec<String>,
    /// The directory it runs in (absolute): relative paths of its arguments start here.
    pub cwd: PathBuf,
    /// Files its redirections read (absolute).
    pub reads: Vec<PathBuf>,
    /// Files its redirections write (absolute).
    pub writes: Vec<PathBuf>,
    /// Whether its arguments are to be analysed; `false` for a shell whose `-c` body was
    /// analysed as commands of their own (only the program is checked).
    pub analyse: bool,
    /// It runs on paths another command found (`find -exec`, `… | xargs`): its operands
    /// that name a root stand for the paths below it.
    pub found: Option<Found>,
    /// Its standard input: given by the line (a redirection, a here-document, the pipe from
    /// the command before it), or the host's.
    pub input: Input,
}

/// The simple commands of `line`, in order.
pub fn parse_line(line: &str, ctx: &Context) -> Result<Vec<LineCommand>, ShellError> {
    // The walk marks values known only when the line runs with this character
    // ([`words::RUNTIME_STAND_IN`]); a line may not write it.
    if line.contains('\u{1}') {
        return Err(unanalysable("the control character U+0001"));
    }
    let mut walk = Walk {
        ctx: ctx.clone(),
        cwd_known: true,
        cds: 0,
        dir_stack: Some(Vec::new()),
        cds_that_may_fail: 0,
        depth: 0,
        loop_walks: 0,
        loop_exits: 0,
        out: Vec::new(),
        piped: None,
        listed: None,
        output_is_pipe: false,
        pipelines: 0,
        last_list: None,
        loop_input: None,
        found_vars: Vec::new(),
        input_piped: false,
        pipe_input: Input::Host,
        input: Input::Host,
    };
    walk.line(line)?;
    Ok(walk.out)
}

pub use crate::sys::user_home;
pub use found::{Found, splits_into_other_paths};
pub use input::Input;

pub(super) fn unanalysable(what: impl Into<String>) -> ShellError {
    ShellError::Unanalysable(what.into())
}

pub(super) fn options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

struct Walk {
    ctx: Context,
    /// Whether `ctx.cwd` is where the next command runs. It is not after a `cd` that might
    /// not have run or might have failed (below `if`, a loop, `||`, after `&&`, or to a
    /// directory that is not there): a command then is refused.
    cwd_known: bool,
    /// `cd`s so far (`pushd` and `popd` among them).
    cds: usize,
    /// The directories `pushd` left, last on top, each with whether it was known; `None`
    /// when a `pushd` or `popd` that may not have run makes the stack not known.
    dir_stack: Option<Vec<(PathBuf, bool)>>,
    /// `cd`s so far to a directory that is not there when the line is checked (it may be
    /// made by the line, or the `cd` fails and the directory stays).
    cds_that_may_fail: usize,
    depth: usize,
    loop_walks: usize,
    /// `break`s and `continue`s met so far: after one, the rest of a loop's body may not
    /// have run.
    loop_exits: usize,
    out: Vec<LineCommand>,
    /// The list of paths the command before in the pipeline writes, for the simple command
    /// being walked (`xargs`).
    piped: Option<pipes::PathList>,
    /// The list the last simple command of a pipeline read ([`Walk::piped`]), for a filter
    /// (`grep`) that hands it on.
    listed: Option<pipes::PathList>,
    /// The last simple command's standard output is the pipe, with only its own output in
    /// it (no redirection but of its standard error to a file).
    output_is_pipe: bool,
    /// Pipelines walked so far.
    pipelines: usize,
    /// The list of paths the last pipeline walked writes, if it is one.
    last_list: Option<pipes::PathList>,
    /// The list of paths a pipeline hands to the `while` loop being walked, for its
    /// `read -r NAME` ([`Walk::read_found`]).
    loop_input: Option<pipes::PathList>,
    /// What each variable `read` set from a list stands for, by the number in its value.
    found_vars: Vec<Found>,
    /// The command being walked reads the pipe from the command before it (it is not the
    /// first of its pipeline, or is inside a compound command that is).
    input_piped: bool,
    /// What the pipe into the command being walked holds, when [`Walk::input_piped`].
    pipe_input: Input,
    /// [`LineCommand::input`] for the commands the simple command being walked pushes.
    input: Input,
}

/// A simple command's words as they are expanded: its argv, which of them hold a command
/// substitution, and those substitutions' inner lines.
#[derive(Default)]
struct Words {
    argv: Vec<String>,
    runtime: Vec<RuntimeWord>,
    substitutions: Vec<String>,
}

impl Words {
    fn add(&mut self, word: ExpandedWord) {
        for field in word.fields {
            if let Some(why) = &word.runtime {
                let stand_ins = field.matches(RUNTIME_STAND_IN).count();
                self.runtime.push(RuntimeWord {
                    index: self.argv.len(),
                    splits: word.splits,
                    why: why.clone(),
                    numbers_only: stand_ins == word.substitutions.len()
                        && word
                            .substitutions
                            .iter()
                            .all(|s| runtime::prints_a_number(s)),
                });
            }
            self.argv.push(field);
        }
        self.substitutions.extend(word.substitutions);
    }
}

impl Walk {
    fn line(&mut self, line: &str) -> Result<(), ShellError> {
        let program = brush_parser::Parser::new(std::io::Cursor::new(line), &options())
            .parse_program()
            .map_err(|e| ShellError::Syntax(e.to_string()))?;
        for list in &program.complete_commands {
            self.list(list)?;
        }
        Ok(())
    }

    fn list(&mut self, list: &ast::CompoundList) -> Result<(), ShellError> {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            match separator {
                // `… &` runs in a subshell: its `cd` and variables stay there.
                ast::SeparatorOperator::Async => self.subshell(|w| w.and_or(and_or))?,
                ast::SeparatorOperator::Sequence => self.and_or(and_or)?,
            }
        }
        Ok(())
    }

    pub(super) fn command(&mut self, c: &Command) -> Result<(), ShellError> {
        match c {
            Command::Simple(s) => self.simple(s),
            Command::Compound(compound, redirects) => {
                // The shell opens the group's redirections before it runs the group, from
                // where the group starts, even if no command of it opens a file itself
                // (`{ :; } > file` empties the file).
                if let Some(r) = redirects {
                    let (reads, writes) = self.redirects(&r.0)?;
                    self.opened_without_a_program(reads, writes)?;
                }
                self.compound(compound)
            }
            Command::Function(_) => Err(unanalysable("a function definition")),
            Command::ExtendedTest(test, redirects) => {
                if let Some(r) = redirects {
                    let (reads, writes) = self.redirects(&r.0)?;
                    self.opened_without_a_program(reads, writes)?;
                }
                self.ctx.extended_test(&test.expr)
            }
        }
    }

    fn compound(&mut self, c: &CompoundCommand) -> Result<(), ShellError> {
        match c {
            CompoundCommand::BraceGroup(g) => self.list(&g.list),
            CompoundCommand::Subshell(s) => self.subshell(|w| w.list(&s.list)),
            CompoundCommand::IfClause(i) => self.may_run(|w| {
                w.list(&i.condition)?;
                w.may_run(|w| w.list(&i.then))?;
                for e in i.elses.iter().flatten() {
                    w.may_run(|w| {
                        if let Some(cond) = &e.condition {
                            w.list(cond)?;
                        }
                        w.list(&e.body)
                    })?;
                }
                Ok(())
            }),
            CompoundCommand::WhileClause(l) | CompoundCommand::UntilClause(l) => {
                self.may_run(|w| w.while_loop(&l.0, &l.1.list))
            }
            CompoundCommand::ForClause(f) => self.may_run(|w| w.for_loop(f)),
            CompoundCommand::ArithmeticForClause(_) => Err(unanalysable(
                "an arithmetic `for` loop (its variable's values are known only when it runs)",
            )),
            CompoundCommand::CaseClause(c) => self.case(c),
            CompoundCommand::Arithmetic(_) => Err(unanalysable("an arithmetic command")),
            CompoundCommand::Coprocess(_) => Err(unanalysable("a coprocess")),
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand) -> Result<(), ShellError> {
        // What the pipeline hands this command, not the lines inside its substitutions.
        let piped = self.piped.take();
        let mut words = Words::default();
        let mut assignments = Vec::new();
        let mut redirects: Vec<&IoRedirect> = Vec::new();
        for item in s.prefix.iter().flat_map(|p| &p.0) {
            match item {
                Item::AssignmentWord(a, _) => assignments.push(self.assignment(a)?),
                Item::IoRedirect(r) => redirects.push(r),
                Item::Word(w) => words.add(self.ctx.word(&w.value)?),
                Item::ProcessSubstitution(..) => {
                    return Err(unanalysable(
                        "a process substitution `<(…)`/`>(…)` before the command's name",
                    ));
                }
            }
        }
        if let Some(w) = &s.word_or_name {
            words.add(self.ctx.word(&w.value)?);
        }
        for item in s.suffix.iter().flat_map(|p| &p.0) {
            match item {
                Item::Word(w) => words.add(self.ctx.word(&w.value)?),
                Item::AssignmentWord(_, w) => {
                    // The declaration builtins take it as an assignment (`export X=~/a`:
                    // a value with `~` is unknown to the walk).
                    let name = s.word_or_name.as_ref().map(|n| n.value.as_str());
                    if !matches!(
                        name,
                        Some("export" | "declare" | "typeset" | "local" | "readonly")
                    ) {
                        words::tilde_after_equals(&w.value)?;
                    }
                    words.add(self.ctx.word(&w.value)?);
                }
                Item::IoRedirect(r) => redirects.push(r),
                Item::ProcessSubstitution(_, sub) => {
                    self.process_substitution(sub)?;
                    words.add(ExpandedWord {
                        fields: vec!["-".to_owned()],
                        ..ExpandedWord::default()
                    });
                }
            }
        }
        let mut found = None;
        if let Err(refused) = runtime::check(&words.argv, &words.runtime) {
            let read = self.paths_read(&mut words);
            found = Some(match read {
                Some(f) => f,
                None => self.paths_substituted(&mut words)?.ok_or(refused)?,
            });
        }
        let owned: Vec<IoRedirect> = redirects.into_iter().cloned().collect();
        let (reads, writes) = self.redirects(&owned)?;
        // The substitutions run before the command, each in a subshell.
        for inner in &words.substitutions {
            self.nested(inner)?;
        }
        if words.argv.is_empty() {
            // Assignments alone set variables for the rest of the line.
            for (name, value) in assignments {
                self.ctx.set_var(&name, value);
            }
            // Redirections alone: `> file` truncates it.
            return self.opened_without_a_program(reads, writes);
        }
        // A list goes in only through standard input, and out only through standard
        // output with nothing else in it.
        let (input_is_pipe, output_is_pipe) = pipes::stdio(&owned);
        self.output_is_pipe = output_is_pipe;
        self.input = match self.redirected_input(&owned)? {
            Some(given) => given,
            None if self.input_piped => self.pipe_input.clone(),
            None => Input::Host,
        };
        if let Some(found) = found {
            return self.push_found(words.argv, reads, writes, found);
        }
        // `read -r NAME` in a loop a list of paths goes to ([`Walk::read_found`]).
        if words.argv[0] == "read" && input_is_pipe && self.read_found(&words.argv) {
            return self.opened_without_a_program(reads, writes);
        }
        self.piped = piped.filter(|_| input_is_pipe);
        self.run(words.argv, reads, writes)
    }

    /// `for NAME in WORDS; do BODY; done`: BODY walked once for each value of WORDS (known
    /// before the line runs), `$NAME` being that value; or once for a list of paths
    /// (`for f in $(git ls-files); do …`), `$NAME` standing for each ([`Walk::for_found`]).
    fn for_loop(&mut self, f: &ast::ForClauseCommand) -> Result<(), ShellError> {
        let Some(words) = &f.values else {
            return Err(unanalysable(
                "a `for` loop over the script's arguments (`for NAME; do`)",
            ));
        };
        check_assignment(&f.variable_name, None)?;
        if let [word] = words.as_slice()
            && let Some(marker) = self.for_found(&word.value)?
        {
            // One walk of the body stands for every path of the list.
            self.loop_walks += 1;
            self.ctx.set_var(&f.variable_name, marker);
            return self.iteration(&f.body.list);
        }
        let mut values = Vec::new();
        for w in words {
            values.extend(self.ctx.static_word(&w.value)?);
        }
        for value in values {
            self.loop_walks += 1;
            if self.loop_walks > MAX_LOOP_WALKS {
                return Err(unanalysable(format!(
                    "`for` loops that run their bodies more than {MAX_LOOP_WALKS} times in all"
                )));
            }
            check_assignment(&f.variable_name, Some(&value))?;
            self.ctx.set_var(&f.variable_name, value);
            self.iteration(&f.body.list)?;
        }
        Ok(())
    }

    /// A command with its words expanded: one of the shell's own builtins, a shell's `-c`
    /// body, or a program.
    fn run(
        &mut self,
        argv: Vec<String>,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
    ) -> Result<(), ShellError> {
        // The list a pipeline hands this command, for xargs or a filter of it; not for a
        // wrapped command or a shell's body.
        let piped = self.piped.take();
        self.listed.clone_from(&piped);
        if argv[0] == "break" || argv[0] == "continue" {
            self.loop_exits += 1;
        }
        if argv[0] == "cd" || argv[0] == "pushd" || argv[0] == "popd" {
            match argv[0].as_str() {
                "cd" => self.cd(&argv[1..])?,
                "pushd" => self.pushd(&argv[1..])?,
                _ => self.popd(&argv[1..])?,
            }
            return self.opened_without_a_program(reads, writes);
        }
        if let Some(script) = builtins::sourced(&argv)? {
            return self.push(script, reads, writes, true);
        }
        if self.ctx.builtin(&argv)? {
            return self.opened_without_a_program(reads, writes);
        }
        if let Some(body) = wrappers::shell_body(&argv) {
            self.push(vec![argv[0].clone()], reads, writes, false)?;
            return self.nested(&body);
        }
        if let Some(f) = found::find_exec(&argv)? {
            return self.find_exec(f, reads, writes);
        }
        if let Some(commands) = piped
            .as_ref()
            .filter(|_| argv[0] == "xargs")
            .and_then(|list| pipes::xargs(&argv[1..], list))
        {
            self.push(vec![argv[0].clone()], reads, writes, false)?;
            for (argv, found) in commands {
                self.push_found(argv, Vec::new(), Vec::new(), found)?;
            }
            return Ok(());
        }
        if argv[0] == "xargs"
            && let Some(command) = pipes::xargs_of_text(&argv[1..])
        {
            self.push(vec![argv[0].clone()], reads, writes, false)?;
            return self.push(command, Vec::new(), Vec::new(), true);
        }
        if argv[0] == "xargs" {
            return Err(unanalysable(
                "`xargs` on an input other than a list of paths that `find`, `git ls-files`, \
                 `rg -l` or `grep -rl` writes to the pipe, with options the check reads \
                 (`find src -name '*.rs' | xargs wc -l`; the arguments it would make are known \
                 only when it runs)",
            ));
        }
        if let Some(w) = wrappers::wrapped(&argv)? {
            let mut writes = writes;
            writes.extend(w.writes.map(|f| self.ctx.cwd.join(f)));
            self.push(vec![argv[0].clone()], reads, writes, false)?;
            return self.run(argv[w.at..].to_vec(), Vec::new(), Vec::new());
        }
        self.push(argv, reads, writes, true)
    }

    /// Files redirections open with no program of their own: a builtin's (`: > file`
    /// empties the file), a compound command's, or alone (`> file`).
    fn opened_without_a_program(
        &mut self,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
    ) -> Result<(), ShellError> {
        if reads.is_empty() && writes.is_empty() {
            return Ok(());
        }
        self.push(Vec::new(), reads, writes, false)
    }

    fn push(
        &mut self,
        argv: Vec<String>,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
        analyse: bool,
    ) -> Result<(), ShellError> {
        if !self.cwd_known {
            return Err(unanalysable(
                "the directory a command runs in, after a `cd` that may not have run or may have \
                 failed (in `if`, a loop, after `||` or at the end of an `&&` chain, or to a \
                 directory that is not there; write `cd DIR && COMMAND`)",
            ));
        }
        self.out.push(LineCommand {
            argv,
            cwd: self.ctx.cwd.clone(),
            reads,
            writes,
            analyse,
            found: None,
            input: self.input.clone(),
        });
        Ok(())
    }

    /// `NAME=value`, checked: its name and value.
    /// `NAME=value`, checked: its name and value. A value known only when the line runs
    /// (`n=$(git rev-list --count HEAD)`) has its substitutions walked, and `$NAME` is then
    /// allowed only where a substitution's value is ([`runtime`]).
    fn assignment(&mut self, a: &ast::Assignment) -> Result<(String, String), ShellError> {
        let ast::AssignmentName::VariableName(name) = &a.name else {
            return Err(unanalysable("an array assignment"));
        };
        let ast::AssignmentValue::Scalar(w) = &a.value else {
            return Err(unanalysable("an array assignment"));
        };
        // The name first: a refused name is refused whatever its value.
        check_assignment(name, None)?;
        let value = match self.ctx.static_text(&w.value) {
            Ok(value) => value,
            Err(refused) => {
                let (value, substitutions) = self.ctx.runtime_text(&w.value)?;
                // A value known only when the line runs: a substitution's, or `$!` alone.
                if substitutions.is_empty() && value != crate::shell::LAST_JOB {
                    return Err(refused);
                }
                for inner in &substitutions {
                    self.nested(inner)?;
                }
                value
            }
        };
        check_assignment(name, Some(&value))?;
        Ok((name.clone(), value))
    }
}

/// Whether `argv` is a shell given a `-c` body ([`parse_line`] analyses the body), a
/// program that runs the command after its words (`timeout`, `nice`, `env NAME=V`, …, which
/// [`parse_line`] analyses as a command of their own), or starts with a word of the shell's
/// own that [`parse_line`] reads (`cd`, `export`, `time`, `source`, …:
/// [`builtins::SHELL_WORDS`]), which no program of that name runs.
pub fn runs_inner_commands(argv: &[String]) -> bool {
    !argv.is_empty()
        && (wrappers::shell_body(argv).is_some()
            || builtins::SHELL_WORDS.contains(&argv[0].as_str())
            || matches!(found::find_exec(argv), Ok(Some(_)))
            || !matches!(wrappers::wrapped(argv), Ok(None)))
}
