//! Command lines as agents write them, for a line that runs through a shell: parsed by
//! brush's bash parser into its simple commands, each with its argv as the shell would pass
//! it, the directory it runs in and the files its redirections open.
//!
//! Understood: lists (`;` `&&` `||` `&`), pipelines, `{ …; }`, `( … )`, `if`/`while`
//! bodies, redirections (`<` is a read, `>` `>>` `&>` a write, `2>&1` and `/dev/null`
//! nothing), here-documents without expansions, `cd DIR` (the directory carries to the next
//! commands of the line; a subshell's does not leave it), `NAME=value` before a command,
//! `~`, `~USER`, `$HOME` and `$PWD`, glob words (expanded against the file system as bash
//! does: no match leaves the word as written), and `bash -c BODY` (and `sh`, `dash`, `zsh`,
//! with `-l`, `-e` and the like), whose BODY is a line of its own.
//!
//! Refused ([`ShellError::Unanalysable`]), because what they do is not on the line: command
//! and process substitution, variables other than `HOME` and `PWD`, arithmetic, brace
//! expansion, `for` and `case`, functions, `eval`, `source`, `.`, `alias`, `pushd`/`popd`,
//! `cd -`, and assignments that choose what a program runs or loads (`PATH`, `LD_*`,
//! `*_COMMAND`, `GIT_DIR`, `NODE_OPTIONS`, …).
use std::path::{Path, PathBuf};

use brush_parser::{
    ParserOptions,
    ast::{self, Command, CommandPrefixOrSuffixItem as Item, CompoundCommand, IoRedirect},
};

use super::{ShellError, line_words::Expanded};

/// `bash -c` bodies analysed inside one another, at most.
const MAX_DEPTH: usize = 3;

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
}

impl Context {
    /// The home of the user the line runs as.
    pub(super) fn home(&self) -> Option<PathBuf> {
        self.user.as_deref().and_then(self.home_of)
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
}

/// The simple commands of `line`, in order.
pub fn parse_line(line: &str, ctx: &Context) -> Result<Vec<LineCommand>, ShellError> {
    let mut walk = Walk {
        ctx: ctx.clone(),
        depth: 0,
        out: Vec::new(),
    };
    walk.line(line)?;
    Ok(walk.out)
}

pub use crate::sys::user_home;

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
    depth: usize,
    out: Vec<LineCommand>,
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
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &ast::Pipeline) -> Result<(), ShellError> {
        for c in &p.seq {
            self.command(c)?;
        }
        Ok(())
    }

    fn command(&mut self, c: &Command) -> Result<(), ShellError> {
        match c {
            Command::Simple(s) => self.simple(s),
            Command::Compound(compound, redirects) => {
                let first = self.out.len();
                self.compound(compound)?;
                // The group's redirections apply to each of its commands.
                if let Some(r) = redirects {
                    let (reads, writes) = self.redirects(&r.0)?;
                    for cmd in &mut self.out[first..] {
                        cmd.reads.extend(reads.iter().cloned());
                        cmd.writes.extend(writes.iter().cloned());
                    }
                }
                Ok(())
            }
            Command::Function(_) => Err(unanalysable("a function definition")),
            Command::ExtendedTest(..) => Err(unanalysable("a `[[ … ]]` test")),
        }
    }

    fn compound(&mut self, c: &CompoundCommand) -> Result<(), ShellError> {
        match c {
            CompoundCommand::BraceGroup(g) => self.list(&g.list),
            CompoundCommand::Subshell(s) => {
                let cwd = self.ctx.cwd.clone();
                let r = self.list(&s.list);
                self.ctx.cwd = cwd;
                r
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition)?;
                self.list(&i.then)?;
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.list(cond)?;
                    }
                    self.list(&e.body)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0)?;
                self.list(&w.1.list)
            }
            CompoundCommand::ForClause(_) | CompoundCommand::ArithmeticForClause(_) => Err(
                unanalysable("a `for` loop (its variable's values are known only when it runs)"),
            ),
            CompoundCommand::CaseClause(_) => Err(unanalysable("a `case` statement")),
            CompoundCommand::Arithmetic(_) => Err(unanalysable("an arithmetic command")),
            CompoundCommand::Coprocess(_) => Err(unanalysable("a coprocess")),
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand) -> Result<(), ShellError> {
        let mut argv: Vec<String> = Vec::new();
        let mut redirects: Vec<&IoRedirect> = Vec::new();
        for item in s.prefix.iter().flat_map(|p| &p.0) {
            match item {
                Item::AssignmentWord(a, _) => self.assignment(a)?,
                Item::IoRedirect(r) => redirects.push(r),
                Item::Word(w) => argv.extend(self.ctx.word(&w.value)?),
                Item::ProcessSubstitution(..) => {
                    return Err(unanalysable("a process substitution `<(…)`/`>(…)`"));
                }
            }
        }
        if let Some(w) = &s.word_or_name {
            argv.extend(self.ctx.word(&w.value)?);
        }
        for item in s.suffix.iter().flat_map(|p| &p.0) {
            match item {
                Item::Word(w) | Item::AssignmentWord(_, w) => argv.extend(self.ctx.word(&w.value)?),
                Item::IoRedirect(r) => redirects.push(r),
                Item::ProcessSubstitution(..) => {
                    return Err(unanalysable("a process substitution `<(…)`/`>(…)`"));
                }
            }
        }
        let owned: Vec<IoRedirect> = redirects.into_iter().cloned().collect();
        let (reads, writes) = self.redirects(&owned)?;
        if argv.is_empty() {
            // Assignments or redirections alone: `> file` truncates it.
            if !reads.is_empty() || !writes.is_empty() {
                self.push(Vec::new(), reads, writes, false);
            }
            return Ok(());
        }
        self.run(argv, reads, writes)
    }

    /// A command with its words expanded: the shell's own builtins that change the walk, a
    /// shell's `-c` body, or a program.
    fn run(
        &mut self,
        argv: Vec<String>,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
    ) -> Result<(), ShellError> {
        match argv[0].as_str() {
            "cd" => return self.cd(&argv[1..]),
            // Builtins that run nothing and open no file.
            "wait" | "exit" | "return" | ":" | "unset" | "set" => return Ok(()),
            "eval" | "source" | "." | "alias" | "pushd" | "popd" | "trap" | "enable"
            | "builtin" | "coproc" => {
                return Err(unanalysable(format!(
                    "`{}` runs code or changes the shell in ways not on the line",
                    argv[0]
                )));
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for a in &argv[1..] {
                    if let Some((name, value)) = a.split_once('=') {
                        check_assignment(name, Some(value))?;
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        if let Some(body) = shell_body(&argv) {
            if self.depth >= MAX_DEPTH {
                return Err(unanalysable(format!(
                    "shells nested more than {MAX_DEPTH} deep with `-c`"
                )));
            }
            self.push(vec![argv[0].clone()], reads, writes, false);
            self.depth += 1;
            let cwd = self.ctx.cwd.clone();
            let r = self.line(&body);
            self.ctx.cwd = cwd;
            self.depth -= 1;
            return r;
        }
        self.push(argv, reads, writes, true);
        Ok(())
    }

    fn push(
        &mut self,
        argv: Vec<String>,
        reads: Vec<PathBuf>,
        writes: Vec<PathBuf>,
        analyse: bool,
    ) {
        self.out.push(LineCommand {
            argv,
            cwd: self.ctx.cwd.clone(),
            reads,
            writes,
            analyse,
        });
    }

    fn cd(&mut self, args: &[String]) -> Result<(), ShellError> {
        let args: Vec<&String> = args
            .iter()
            .filter(|a| *a != "--" && *a != "-P" && *a != "-L")
            .collect();
        let target = match args.as_slice() {
            [] => self
                .ctx
                .home()
                .ok_or_else(|| unanalysable("`cd` to a home that is not known"))?,
            [d] if d.as_str() == "-" => return Err(unanalysable("`cd -`")),
            [d] => self.ctx.cwd.join(d),
            _ => return Err(unanalysable("`cd` with several operands")),
        };
        self.ctx.cwd = lexical(&target);
        Ok(())
    }

    fn assignment(&self, a: &ast::Assignment) -> Result<(), ShellError> {
        let ast::AssignmentName::VariableName(name) = &a.name else {
            return Err(unanalysable("an array assignment"));
        };
        let ast::AssignmentValue::Scalar(w) = &a.value else {
            return Err(unanalysable("an array assignment"));
        };
        // The name first: a refused name is refused whatever its value.
        check_assignment(name, None)?;
        let value = self.ctx.static_text(&w.value)?;
        check_assignment(name, Some(&value))
    }

    /// The files the redirections read and write; descriptor duplications and `/dev/null`
    /// are neither.
    fn redirects(&self, list: &[IoRedirect]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ShellError> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T};
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for r in list {
            match r {
                IoRedirect::File(_, kind, target) => {
                    let word = match target {
                        T::Filename(w) => w,
                        T::Fd(_) => continue,
                        T::Duplicate(w) => {
                            let t = self.ctx.static_text(&w.value)?;
                            if t == "-" || t.bytes().all(|b| b.is_ascii_digit()) {
                                continue;
                            }
                            w
                        }
                        T::ProcessSubstitution(..) => {
                            return Err(unanalysable("a process substitution `<(…)`/`>(…)`"));
                        }
                    };
                    let Some(path) = self.redirect_path(&word.value)? else {
                        continue;
                    };
                    match kind {
                        K::Read | K::DuplicateInput => reads.push(path),
                        K::ReadAndWrite => {
                            reads.push(path.clone());
                            writes.push(path);
                        }
                        K::Write | K::Append | K::Clobber | K::DuplicateOutput => writes.push(path),
                    }
                }
                IoRedirect::OutputAndError(w, _) => {
                    if let Some(path) = self.redirect_path(&w.value)? {
                        writes.push(path);
                    }
                }
                IoRedirect::HereString(_, w) => {
                    self.ctx.static_text(&w.value)?;
                }
                IoRedirect::HereDocument(_, doc) => {
                    if doc.requires_expansion {
                        let pieces = brush_parser::word::parse_heredoc(&doc.doc.value, &options())
                            .map_err(|e| ShellError::Syntax(e.to_string()))?;
                        self.ctx.text_of(&pieces, &mut Expanded::default())?;
                    }
                }
            }
        }
        Ok((reads, writes))
    }

    /// A redirection's file, absolute; `None` for `/dev/null`.
    fn redirect_path(&self, raw: &str) -> Result<Option<PathBuf>, ShellError> {
        let words = self.ctx.word(raw)?;
        let [one] = words.as_slice() else {
            return Err(unanalysable(format!(
                "a redirection to `{raw}`, which names several files"
            )));
        };
        if one == "/dev/null" {
            return Ok(None);
        }
        Ok(Some(self.ctx.cwd.join(one)))
    }
}

/// Assignments that choose what a program runs or loads: refused, as their value decides
/// what the line does and the analysis cannot follow it.
fn check_assignment(name: &str, value: Option<&str>) -> Result<(), ShellError> {
    const NAMES: [&str; 22] = [
        "PATH",
        "BASH_ENV",
        "ENV",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "HOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
    ];
    let pager_ok = value.is_none_or(|v| ["", "cat", "less", "more"].contains(&v));
    let refused = NAMES.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("GIT_CONFIG")
        || name.starts_with("DYLD_")
        || name.ends_with("_COMMAND")
        || name.ends_with("_ASKPASS")
        || name.ends_with("EDITOR")
        || name == "VISUAL"
        || name == "GIT_SSH"
        || name == "GIT_EXTERNAL_DIFF"
        || (name.ends_with("PAGER") && !pager_ok);
    if refused {
        return Err(unanalysable(format!(
            "the assignment `{name}=…` (it chooses what a program runs or loads)"
        )));
    }
    Ok(())
}

/// Whether `argv` is a shell given a `-c` body ([`parse_line`] analyses the body).
pub fn runs_a_body(argv: &[String]) -> bool {
    !argv.is_empty() && shell_body(argv).is_some()
}

/// The body of `bash -c BODY` (`sh`, `dash`, `zsh`; options such as `-l`, `-e`, `-x`,
/// `-o pipefail`, `--login`, `--norc` before it); `None` for any other command.
fn shell_body(argv: &[String]) -> Option<String> {
    let name = Path::new(&argv[0]).file_name()?.to_str()?;
    if !["bash", "sh", "dash", "zsh"].contains(&name) {
        return None;
    }
    let mut i = 1;
    let mut seen_c = false;
    while i < argv.len() {
        let a = argv[i].as_str();
        if seen_c {
            return Some(argv[i].clone());
        }
        match a {
            "--login" | "--norc" | "--noprofile" | "--posix" => {}
            "-o" | "+o" => i += 1,
            _ if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") => {
                if !a[1..].chars().all(|c| "lexuc".contains(c)) {
                    return None;
                }
                seen_c = a.contains('c');
            }
            _ => return None,
        }
        i += 1;
    }
    None
}

/// `p` with `.` and `..` resolved by name (as `cd` does with its logical path).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}
