//! Lists of paths handed from one command to another ([`super::found`]): the list a
//! command writes (`find`, `git ls-files`, and the filters `grep`, `head`, `tail`, `sort`
//! that keep whole lines of it), how a pipeline hands it on to `xargs`, and a command
//! substitution that is one (`wc -l $(git ls-files)`). A list goes in only through
//! standard input with no redirection of it, and out only through standard output with
//! nothing but standard error redirected, to a file.
use brush_parser::ast::{self, Command, IoFileRedirectKind, IoFileRedirectTarget, IoRedirect};

use super::{
    Walk, Words,
    found::{Found, name_filter, splits_into_other_paths, start_points},
    input,
    words::RUNTIME_STAND_IN,
};
use crate::shell::{ShellError, WalkFilter, git_repo};

impl Walk {
    pub(super) fn pipeline(&mut self, p: &ast::Pipeline) -> Result<(), ShellError> {
        self.pipelines += 1;
        let mut list: Option<PathList> = None;
        if let [one] = p.seq.as_slice() {
            let start = self.out.len();
            self.output_is_pipe = false;
            self.command(one)?;
            list = self.list_written(start, one);
        } else {
            // Each command of a pipeline of several runs in a subshell: `cd x | cat a`
            // reads `./a`. A simple command that writes a list of paths hands it to the
            // next (`find … | xargs …`), and a `while` loop to the `read`s in it.
            // The pipe into each command after the first holds what the one before writes
            // ([`input::written_by`]).
            let loop_input = self.loop_input.take();
            let input_piped = self.input_piped;
            let pipe_input = self.pipe_input.clone();
            for (i, c) in p.seq.iter().enumerate() {
                self.input_piped = input_piped || i > 0;
                let start = self.out.len();
                let list_in = list.take();
                self.piped = list_in.clone().filter(|_| matches!(c, Command::Simple(_)));
                self.loop_input = list_in.filter(|l| !l.nul && is_plain_while(c));
                self.output_is_pipe = false;
                let r = self.subshell(|w| w.command(c));
                (self.piped, self.loop_input) = (None, None);
                r?;
                list = self.list_written(start, c);
                self.pipe_input = match (&self.out[start..], c) {
                    ([one], Command::Simple(_)) => input::written_by(Some(one)),
                    _ => input::written_by(None),
                };
            }
            self.input_piped = input_piped;
            self.pipe_input = pipe_input;
            self.loop_input = loop_input;
        }
        self.last_list = list;
        Ok(())
    }

    /// The list of paths that `c`, a command of a pipeline whose line commands start at
    /// `self.out[start]`, writes, if it is one ([`path_list`]).
    fn list_written(&mut self, start: usize, c: &Command) -> Option<PathList> {
        let before = self.listed.take();
        match (&self.out[start..], c) {
            ([one], Command::Simple(_))
                if one.found.is_none() && one.analyse && self.output_is_pipe =>
            {
                path_list(&one.argv, &one.cwd, before.as_ref())
            }
            _ => None,
        }
    }

    /// `read -r NAME` in a `while` loop a list of paths goes to: NAME stands for a path
    /// of the list (`find … | while read -r f; do wc -l "$f"; done`), as xargs's words
    /// do (the line splits at newlines; `read` strips blanks at either end). `false` when
    /// it is another `read`, which the builtins read as text.
    pub(super) fn read_found(&mut self, argv: &[String]) -> bool {
        let Some(list) = self.loop_input.clone() else {
            return false;
        };
        let [_, r, name] = argv else {
            return false;
        };
        if r != "-r" || !crate::shell::split::is_name(name) {
            return false;
        }
        let marker = self.found_var(Found {
            split: true,
            ..list.found
        });
        self.ctx.set_var(name, marker);
        true
    }

    /// A command's one word that is a variable `read` set to a path of a list
    /// ([`Walk::read_found`]): the word replaced by the list's roots, and what they stand
    /// for. `None` for any other word known only when the line runs.
    pub(super) fn paths_read(&mut self, words: &mut Words) -> Option<Found> {
        let ([word], []) = (words.runtime.as_slice(), words.substitutions.as_slice()) else {
            return None;
        };
        let index = word.index;
        let n: usize = words.argv[index]
            .strip_prefix(RUNTIME_STAND_IN)?
            .strip_prefix("found ")?
            .parse()
            .ok()?;
        let found = self.found_vars.get(n)?.clone();
        (index > 0).then(|| put_roots(words, index, found))
    }

    /// A command's one word that is a command substitution outside quotes whose line is a
    /// list of paths (`wc -l $(git ls-files src)`): its inner line walked, the word
    /// replaced by the list's roots, and what they stand for. `None` when the command has
    /// any other word known only when it runs, or the line is not one pipeline writing such
    /// a list (not NUL-ended: bash drops NUL bytes).
    pub(super) fn paths_substituted(
        &mut self,
        words: &mut Words,
    ) -> Result<Option<Found>, ShellError> {
        let ([word], [inner]) = (words.runtime.as_slice(), words.substitutions.as_slice()) else {
            return Ok(None);
        };
        if !word.splits || word.index == 0 || words.argv[word.index] != RUNTIME_STAND_IN {
            return Ok(None);
        }
        let (index, inner) = (word.index, inner.clone());
        let Some(found) = self.substituted_list(&inner)? else {
            return Ok(None);
        };
        words.substitutions.clear();
        Ok(Some(put_roots(words, index, found)))
    }

    /// The inner line of a command substitution outside quotes, walked: the paths it
    /// lists, when it is one pipeline writing a list of paths (not NUL-ended: bash drops
    /// NUL bytes), split by the shell.
    fn substituted_list(&mut self, inner: &str) -> Result<Option<Found>, ShellError> {
        let pipelines = self.pipelines;
        self.last_list = None;
        self.nested(inner)?;
        let list = self.last_list.take();
        Ok(list
            .filter(|l| !l.nul && self.pipelines == pipelines + 1)
            .map(|l| Found {
                split: true,
                ..l.found
            }))
    }

    /// `for NAME in $(LIST)`, the one word a command substitution outside quotes whose
    /// line is a list of paths (`for f in $(find . -name '*.py'); do wc -l "$f"; done`):
    /// its inner line walked, and the value NAME stands for in the body, each path of the
    /// list (as `read -r NAME` does in a `while` loop: [`Walk::read_found`]). `None` for any
    /// other word.
    pub(super) fn for_found(&mut self, raw: &str) -> Result<Option<String>, ShellError> {
        let word = self.ctx.word(raw)?;
        let ([inner], true) = (word.substitutions.as_slice(), word.splits) else {
            return Ok(None);
        };
        if word.fields != [RUNTIME_STAND_IN] {
            return Ok(None);
        }
        let inner = inner.clone();
        let Some(found) = self.substituted_list(&inner)? else {
            return Ok(None);
        };
        Ok(Some(self.found_var(found)))
    }

    /// A value standing for each path `found` stands for, for a variable.
    fn found_var(&mut self, found: Found) -> String {
        let marker = format!("{RUNTIME_STAND_IN}found {}", self.found_vars.len());
        self.found_vars.push(found);
        marker
    }
}

/// `words`' one word known only when the line runs, at `index`, replaced by the roots of
/// the paths `found` stands for; the shell splits and globs those paths.
fn put_roots(words: &mut Words, index: usize, found: Found) -> Found {
    words.runtime.clear();
    let roots = found.roots.iter().map(|r| r.to_string_lossy().into_owned());
    words.argv.splice(index..=index, roots);
    Found {
        split: true,
        ..found
    }
}

/// Whether `c` is a `while` loop with no redirection of its own.
fn is_plain_while(c: &Command) -> bool {
    matches!(
        c,
        Command::Compound(ast::CompoundCommand::WhileClause(_), None)
    )
}

/// What a command of a pipeline writes to the next, when it is a list of paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PathList {
    /// The paths: below these roots, the filter's files left out.
    pub(super) found: Found,
    /// Ended by NUL bytes (`find -print0`, `git ls-files -z`), not newlines.
    pub(super) nul: bool,
}

/// The list of paths `argv` (run in `cwd`) writes, if it is one: `find` printing what it
/// finds, `git ls-files`, or a filter that keeps some of the lines of `before` (`grep`,
/// `head`, `tail`, `sort` without files).
pub(super) fn path_list(
    argv: &[String],
    cwd: &std::path::Path,
    before: Option<&PathList>,
) -> Option<PathList> {
    let list = |roots: Vec<String>, filter, nul, tracked_from| {
        // Each path is printed after its root as written: a root xargs or the shell would
        // split is not a list of paths below it.
        if roots.iter().any(|r| splits_into_other_paths(r)) {
            return None;
        }
        Some(PathList {
            found: Found {
                roots: roots.iter().map(|r| cwd.join(r)).collect(),
                filter,
                split: false,
                skips_hidden: false,
                tracked_from,
            },
            nul,
        })
    };
    match argv[0].as_str() {
        "find" => {
            let (roots, at) = start_points(argv);
            let expression = &argv[at..];
            let nul = expression.iter().any(|w| w == "-print0");
            let prints_else = expression
                .iter()
                .any(|w| find_action(w) && w != "-print0" && (w != "-print" || nul));
            let filter = name_filter(expression, &roots);
            (!prints_else)
                .then(|| list(roots, filter, nul, None))
                .flatten()
        }
        "git" if argv.get(1).is_some_and(|v| v == "ls-files") => {
            let (options, paths): (Vec<&String>, Vec<&String>) =
                argv[2..].iter().partition(|w| w.starts_with('-'));
            let known = [
                "-z",
                "-c",
                "--cached",
                "-m",
                "--modified",
                "-o",
                "--others",
                "--exclude-standard",
                "-d",
                "--deleted",
                "--",
            ];
            if !options.iter().all(|o| known.contains(&o.as_str())) {
                return None;
            }
            let nul = options.iter().any(|o| *o == "-z");
            let (roots, filter) = pathspecs(&paths)?;
            let others = options.iter().any(|o| *o == "-o" || *o == "--others");
            list(roots, filter, nul, (!others).then(|| cwd.to_path_buf()))
        }
        "git" if argv.get(1).is_some_and(|v| v == "diff") => {
            let (roots, filter, nul) = changed_names(&argv[2..], cwd)?;
            list(roots, filter, nul, Some(cwd.to_path_buf()))
        }
        "grep" | "head" | "tail" | "sort" if keeps_lines(argv) => {
            before.filter(|b| !b.nul).cloned()
        }
        "rg" | "grep" => {
            let (roots, nul, skips_hidden) = files_searched(argv)?;
            let mut l = list(roots, WalkFilter::default(), nul, None)?;
            l.found.skips_hidden = skips_hidden;
            Some(l)
        }
        _ => None,
    }
}

/// What `git diff --name-only [-z] [-- PATHSPEC…]` lists, run at the top of the work tree
/// git finds ([`git_repo::work_tree`]): the files that differ from git's index, a part of
/// what it tracks, by their paths from the top (so only there are they paths from where it
/// runs). `None` for any other form: a revision or `--cached` compares with a commit,
/// whose paths are not the index's.
fn changed_names(
    args: &[String],
    cwd: &std::path::Path,
) -> Option<(Vec<String>, WalkFilter, bool)> {
    let (options, paths) = match args.iter().position(|w| w == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (args, &[][..]),
    };
    if !options.iter().all(|o| o == "--name-only" || o == "-z")
        || !options.iter().any(|o| o == "--name-only")
    {
        return None;
    }
    let here = std::fs::canonicalize(cwd).ok()?;
    if git_repo::work_tree(&here)? != here {
        return None;
    }
    let paths: Vec<&String> = paths.iter().collect();
    let (roots, filter) = pathspecs(&paths)?;
    Some((roots, filter, options.iter().any(|o| o == "-z")))
}

/// What `git ls-files PATHSPEC…` lists, as roots and a filter: plain paths (`.` when none),
/// or only globs of the form `[DIR/]*SUFFIX`, DIR and SUFFIX plain and SUFFIX without `/`
/// (`'*.py'`, `'src/*.rs'`). git's `*` matches `/` too, so such a glob keeps the files below
/// DIR whose path, and so whose name, ends in SUFFIX: find's `-name '*SUFFIX'` below DIR.
/// Several globs keep a file any of them keeps, below any of their DIRs (more, never
/// fewer). `None` for any other pathspec (magic `:(…)`, other globs, plain and globs mixed).
fn pathspecs(paths: &[&String]) -> Option<(Vec<String>, WalkFilter)> {
    const GLOB: [char; 4] = ['*', '?', '[', '\\'];
    let plain = |p: &str| !p.contains(GLOB) && !p.starts_with(':');
    if paths.iter().all(|p| plain(p)) {
        let roots: Vec<String> = paths.iter().map(|p| (*p).clone()).collect();
        if roots.is_empty() {
            return Some((vec![".".to_owned()], WalkFilter::default()));
        }
        return Some((roots, WalkFilter::default()));
    }
    let mut filter = WalkFilter::default();
    let mut roots = Vec::new();
    for p in paths {
        let (dir, name) = p
            .rsplit_once('/')
            .map_or((".", p.as_str()), |(d, n)| (d, n));
        let suffix = name.strip_prefix('*')?;
        if !plain(dir) || dir.is_empty() || suffix.is_empty() || !plain(suffix) {
            return None;
        }
        roots.push(dir.to_owned());
        filter
            .files
            .push((crate::shell::FileRule::Include, name.to_owned()));
    }
    Some((roots, filter))
}

/// The roots of `rg -l PATTERN [ROOTS]`, `rg --files [ROOTS]` or `grep -rl PATTERN
/// [ROOTS]` (`.` when none), which print the files below them that they search, and
/// whether NUL ends each (`-0`, `--null`, grep's `-Z`) and hidden files are left out (rg
/// without `--hidden`); `None` for an option not listed here.
fn files_searched(argv: &[String]) -> Option<(Vec<String>, bool, bool)> {
    let rg = argv[0] == "rg";
    let (mut lists, mut no_pattern, mut recursive, mut nul) = (false, false, rg, false);
    let mut skips_hidden = rg;
    let mut operands = Vec::new();
    let mut words = argv[1..].iter();
    while let Some(w) = words.next() {
        match w.as_str() {
            "--" => {
                operands.extend(words.by_ref().cloned());
            }
            "-l" | "--files-with-matches" => lists = true,
            "--files" if rg => (lists, no_pattern) = (true, true),
            "-r" | "--recursive" if !rg => recursive = true,
            "-0" if rg => nul = true,
            "--null" => nul = true,
            "-i" | "-s" | "-F" | "-w" | "-x" | "--ignore-case" | "--fixed-strings"
            | "--word-regexp" => {}
            "--hidden" if rg => skips_hidden = false,
            "-S" | "--smart-case" if rg => {}
            "-g" | "--glob" | "-t" | "--type" | "-T" | "--type-not" if rg => {
                words.next()?;
            }
            // Short options together (`-rl`, `-il`): only flags.
            _ if w.len() > 1 && w.starts_with('-') && !w.starts_with("--") => {
                for c in w[1..].chars() {
                    match (c, rg) {
                        ('l', _) => lists = true,
                        ('r', false) => recursive = true,
                        ('Z', false) | ('0', true) => nul = true,
                        ('i' | 's' | 'F' | 'w' | 'x', _) | ('E', false) | ('S', true) => {}
                        _ => return None,
                    }
                }
            }
            _ if w.starts_with('-') => return None,
            _ => operands.push(w.clone()),
        }
    }
    let roots = if no_pattern {
        operands
    } else {
        operands.get(1..)?.to_vec()
    };
    if !lists || !recursive {
        return None;
    }
    let roots = if roots.is_empty() {
        vec![".".to_owned()]
    } else {
        roots
    };
    Some((roots, nul, skips_hidden))
}

/// Whether a simple command with `redirects` reads its standard input from the pipe (no
/// redirection of descriptor 0, here-documents included), and writes to the pipe only its
/// own standard output (no redirection but of descriptor 2 to a file: `2>/dev/null`, not
/// `2>&1`).
pub(super) fn stdio(redirects: &[IoRedirect]) -> (bool, bool) {
    use IoFileRedirectKind::{DuplicateInput, Read, ReadAndWrite};
    let input_is_pipe = redirects.iter().all(|r| match r {
        IoRedirect::File(fd, kind, _) => {
            // A redirection without a number is of descriptor 0 when it reads, else 1.
            let reads = matches!(kind, Read | ReadAndWrite | DuplicateInput);
            fd.map_or(!reads, |n| n != 0)
        }
        IoRedirect::HereDocument(fd, _) | IoRedirect::HereString(fd, _) => fd.unwrap_or(0) != 0,
        IoRedirect::OutputAndError(..) => true,
    });
    let output_is_pipe = redirects.iter().all(|r| {
        matches!(
            r,
            IoRedirect::File(
                Some(2),
                IoFileRedirectKind::Write
                    | IoFileRedirectKind::Append
                    | IoFileRedirectKind::Clobber,
                IoFileRedirectTarget::Filename(_)
            )
        )
    });
    (input_is_pipe, output_is_pipe)
}

/// Whether `w` is one of find's actions (what it does with a path other than test it).
fn find_action(w: &str) -> bool {
    w.starts_with("-print")
        || w.starts_with("-fprint")
        || w.starts_with("-exec")
        || w.starts_with("-ok")
        || matches!(w, "-ls" | "-fls" | "-delete" | "-quit")
}

/// `grep PATTERN`, `head -n N`, `tail -N`, `sort -u`, …: each line it writes is a whole
/// line it read (no file operand, no option that writes parts or counts).
fn keeps_lines(argv: &[String]) -> bool {
    let args = &argv[1..];
    match argv[0].as_str() {
        "grep" => {
            let flags = [
                "-v",
                "-i",
                "-E",
                "-F",
                "-w",
                "-x",
                "--invert-match",
                "--ignore-case",
            ];
            let (options, operands): (Vec<&String>, Vec<&String>) =
                args.iter().partition(|a| a.starts_with('-'));
            options.iter().all(|o| flags.contains(&o.as_str())) && operands.len() == 1
        }
        "head" | "tail" => match args {
            [] => true,
            [n] => n
                .strip_prefix("-n")
                .or_else(|| n.strip_prefix('-'))
                .is_some_and(is_count),
            [o, n] => o == "-n" && is_count(n),
            _ => false,
        },
        _ => args
            .iter()
            .all(|a| ["-u", "-r", "-n", "-V", "-f"].contains(&a.as_str())),
    }
}

fn is_count(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
}

/// `xargs [OPTIONS] [COMMAND…]` on `list`: COMMAND with each root where the paths go (at
/// the end, or for `-I R`'s R), and what the paths stand for. `None` for an option it does
/// not read (`-a FILE`, `-E`, `-p`, …) or a NUL mode that is not the list's.
pub(super) fn xargs(args: &[String], list: &PathList) -> Option<Vec<(Vec<String>, Found)>> {
    let XargsOptions {
        command_at: i,
        nul,
        replace,
    } = xargs_options(args)?;
    if nul != list.nul {
        return None;
    }
    let command = xargs_command(args, i);
    let found = Found {
        split: !nul,
        ..list.found.clone()
    };
    let mut out = Vec::new();
    for root in &found.roots {
        let root = root.to_string_lossy().into_owned();
        let argv = match &replace {
            Some(r) if command.iter().any(|w| w != r && w.contains(r.as_str())) => return None,
            Some(r) => command
                .iter()
                .map(|w| if w == r { root.clone() } else { w.clone() })
                .collect(),
            None => command.iter().cloned().chain([root]).collect(),
        };
        out.push((argv, found.clone()));
    }
    Some(out)
}

/// `xargs [OPTIONS] COMMAND…` whose COMMAND takes text ([`super::runtime::TEXT_PROGRAMS`],
/// `echo` when none is given), on any input: the command with its own words, the ones xargs
/// adds being text. `None` for an option xargs's reading does not know, or another command.
pub(super) fn xargs_of_text(args: &[String]) -> Option<Vec<String>> {
    let command = xargs_command(args, xargs_options(args)?.command_at);
    super::runtime::TEXT_PROGRAMS
        .contains(&command[0].as_str())
        .then_some(command)
}

/// xargs's COMMAND, from `at` in its `args`: `echo` when none is given.
fn xargs_command(args: &[String], at: usize) -> Vec<String> {
    match &args[at..] {
        [] => vec!["echo".to_owned()],
        rest => rest.to_vec(),
    }
}

/// What xargs's options say: where its COMMAND starts, `-0`, and `-I`'s replacement.
struct XargsOptions {
    command_at: usize,
    nul: bool,
    replace: Option<String>,
}

/// xargs's options that the analysis reads; `None` for any other (`-a FILE`, `-E`, `-p`, …).
fn xargs_options(args: &[String]) -> Option<XargsOptions> {
    let mut i = 0;
    let (mut nul, mut replace) = (false, None);
    while let Some(a) = args.get(i) {
        let value_next = ["-n", "-P", "-L", "-s", "-I"].contains(&a.as_str());
        match a.as_str() {
            "-0" | "--null" => nul = true,
            "-r" | "--no-run-if-empty" | "-t" | "--verbose" | "-x" | "--exit" => {}
            "-I" => replace = Some(args.get(i + 1)?.clone()),
            _ if value_next => {
                if !is_count(args.get(i + 1)?) {
                    return None;
                }
            }
            _ if a.starts_with("-I") => replace = Some(a[2..].to_owned()),
            _ if a.starts_with("--replace=") => replace = Some(a[10..].to_owned()),
            _ if ["-n", "-P", "-L", "-s"].iter().any(|o| a.starts_with(o)) && is_count(&a[2..]) => {
            }
            _ if ["--max-args=", "--max-procs=", "--max-lines="]
                .iter()
                .any(|o| a.strip_prefix(o).is_some_and(is_count)) => {}
            _ if a.starts_with('-') => return None,
            _ => break,
        }
        i += if value_next { 2 } else { 1 };
    }
    Some(XargsOptions {
        command_at: i,
        nul,
        replace,
    })
}
