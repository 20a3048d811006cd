//! Shell command lines parsed to argv without a shell, and what a command touches.
//!
//! Pure parsing and command knowledge, no policy: [`split`] turns a line into argv the way
//! POSIX `sh` would for a simple command (refusing everything a shell would interpret beyond
//! quoting when the line will run through one), and [`analyze`] says which files the command
//! reads and writes, which trees it walks, and which of its arguments are forbidden because
//! they run another command or write where a reader should not. The engine resolves every
//! path (they stay as written: relative paths are relative to the command's working dir) and
//! checks them against the sandbox.
//!
//! # Option syntax
//! Short options may be combined (`-rf .env`, `-Rn`); an option's value may be attached
//! (`-fF`) or the next word (`-f F`); long options take `--opt=value` or `--opt value` and may
//! be abbreviated to a unique prefix, as GNU getopt allows; options may follow operands (GNU
//! permutation) except for interpreters, which stop at the script; `--` ends options. An
//! unknown short option is taken as a flag (so the next word stays an operand, the cautious
//! reading); the value of an unknown `--opt=value` is taken as a read.
//!
//! # Command knowledge
//! Commands are known by the file name of argv\[0\] (`/usr/bin/grep` is `grep`).
//!
//! | command | reads | recursive roots | writes | forbidden |
//! |---|---|---|---|---|
//! | `cat tac nl more wc head tail less` and `sort uniq cut stat file md5sum sha1sum sha256sum sha512sum` | operands; `less -k/-T` files, `sort --random-source`, `file -m` | — | `less -o/-O/--log-file`, `sort -o`, `uniq IN OUT`'s OUT | `--files0-from` (`wc sort md5sum…`), `file -f` (names from a file), `sort --compress-program`, `less +CMD` (start-up commands, `!` runs a shell) |
//! | `grep egrep fgrep rgrep` | files after the PATTERN (first operand unless `-e`/`-f`); `-f/--file`, `--exclude-from` | with `-r -R --recursive --dereference-recursive -d recurse`, or `rgrep`: the files, default `.` | — | — |
//! | `rg` | `-f/--file`, `--ignore-file` | always: operands after the pattern (all of them with `--files`), default `.` | — | `--pre`, `--hostname-bin` (run a program) |
//! | `find` | `-newer -anewer -cnewer -samefile -newerXY` (Y≠t) files | each start point, default `.` | — | `-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls -files0-from` |
//! | `ls` | operands, default `.` | with `-R`: operands, default `.` | — | — |
//! | `du tree` | `du -X/--exclude-from` | always: operands, default `.` (`tree --fromfile`: none) | `tree -o` | `du --files0-from` |
//! | `diff` | operands, `-X/--exclude-from`, `--from-file/--to-file` | with `-r`: operands | — | `--diff-program` |
//! | `sed` | files after the SCRIPT (first operand unless `-e`/`-f`); `-f` | — | with `-i`: the files | `-i/--in-place` |
//! | `awk gawk mawk nawk` | files after the PROGRAM (unless `-f/-e/-E`); `-f -E -i` files | — | `-o -p -d` files | `-l/--load` (shared library) |
//! | `tar` (also old style `tar xf a`) | `-f` archive unless creating; `-X`; `-c/-r/-u` operands (under `-C`) | `-c/-r/-u` operands unless `--no-recursion`; `-d` the dir | `-c/-r/-u/--delete` archive; `-x`: the dir (`-C` or `.`); `--index-file` | `--to-command --checkpoint-action -I/--use-compress-program -F/--info-script/--new-volume-script --rsh-command --rmt-command -T/--files-from`, `-x -P`, remote archive `host:file` |
//! | `cp` | sources | sources with `-r -R -a` | destination (last operand or `-t DIR`) | — |
//! | `mv` | sources | — | sources and destination | — |
//! | `rm` | — | operands with `-r -R` | operands | — |
//! | `chmod chown chgrp` | `--reference` file | operands with `-R` | operands after MODE/OWNER | — |
//! | `git` | every operand (and the path of `REV:PATH`), `--git-dir --work-tree`, `-F/--file`; relative to `-C` | `grep --no-index/--untracked`: `.` | `-o/--output/--output-directory` | `-c KEY=V` (except `color.*`, `core.quotepath`, `advice.*`), `--config-env`, `--exec-path=`, `--upload-pack -u --receive-pack --exec`, `rebase -x`, `clone/init --template`, `clone -c/--config`, `grep -O`, `ext::`/`fd::` URLs, `config` except reads, subcommands `filter-branch daemon instaweb shell mergetool difftool send-email`, `submodule foreach`, `bisect run` |
//! | `python* node nodejs perl* ruby` | every operand (script and its arguments) | — | — | inline code (`python -c`, `node -e/-p`, `perl -e/-E`, `ruby -e`), in-place edits (`perl/ruby -i`) |
//! | shells `sh bash dash zsh ksh mksh fish csh tcsh busybox` | — | — | — | always (runs commands the gateway cannot see) |
//! | `xargs env eval exec nohup timeout nice ionice stdbuf setsid chroot sudo su doas runuser unshare nsenter watch time command builtin strace ltrace script parallel flock` | — | — | — | always ("runs another command") |
//! | anything else | every operand and `--opt=value` value, except `-` and URLs | — | — | — |
//!
//! A directory in `writes` (tar's extraction dir, cp's target dir) means anything below it
//! may be written. `follows_symlinks` is set for `grep -R`, `rg -L`, `find -L/-follow`,
//! `ls/du/cp -L`, `tree -l`, `tar -h`, `chmod -L`: a walk that may leave its root.
//!
//! # Limits
//! - No shell runs, so aliases, functions and `$PATH` lookups do not exist here; the engine
//!   checks argv\[0\] against the exec allowlist.
//! - Unknown commands get the generic reading above: an option we do not know that takes a
//!   value makes that value look like an operand (over-reading, never under-reading, unless an
//!   option is wrongly listed as taking a value).
//! - Programs inside arguments are not analysed: `sed` scripts (`e`, `w`, `r` commands), `awk`
//!   programs (`system()`, `getline`, `>`), interpreter scripts, `less`'s interactive `!cmd`,
//!   git hooks and repository config (`core.fsmonitor`, `core.pager` in `.git/config`). The
//!   allowlist and the sandbox (protecting `.git/config` and hooks) must cover these.
//! - `git` operands are all taken as reads, revisions included (harmless relative names);
//!   `git config KEY` (an implicit get) is forbidden like a set.
use std::path::{Path, PathBuf};

/// Why a line or argv cannot be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellError {
    #[error("`{ch}` at byte {pos} {what}: refused because the line runs through a shell")]
    Metachar {
        ch: char,
        pos: usize,
        what: &'static str,
    },
    #[error("unterminated {quote} quote starting at byte {pos}")]
    Unterminated { quote: &'static str, pos: usize },
    #[error("backslash at the end of the line")]
    TrailingBackslash,
    #[error(
        "`{0}=` before the command sets a variable for it: refused because the line runs \
         through a shell"
    )]
    Assignment(String),
    #[error("NUL byte in the command")]
    Nul,
    #[error("empty command")]
    Empty,
    #[error("{0} arguments: more than the {MAX_ARGS} a command may have here")]
    TooManyArgs(usize),
}

/// The most arguments [`analyze`] looks at; a longer command is refused (the analysis is
/// quadratic in the number of file operands, and no tool call needs thousands).
pub const MAX_ARGS: usize = 1024;

/// Splits a command line into argv like POSIX sh would for simple commands: single quotes,
/// double quotes (with `\"` `\\` `\$` `` \` `` escapes), backslash escapes, whitespace.
/// Refuses ([`ShellError`]) anything a shell would interpret beyond that, when `through_shell`
/// is true: `;` `&` `|` `` ` `` `$(` `${` `$VAR` `>` `<` `>>` `2>` newline, glob chars `*` `?`
/// `[` outside quotes, `~` at word start, unterminated quotes. When `through_shell` is false
/// (the host execs argv directly) metacharacters are plain bytes.
///
/// Also refused through a shell: `( )`, `{` (bash brace expansion), `#` at a word start (a
/// comment), `~` after an unquoted `=` or `:`, any `$` or backquote inside double quotes, and a
/// leading `NAME=value` word (an assignment for the command). Words are separated by spaces
/// and tabs; backslash-newline is a line continuation. Quotes and backslashes are processed in
/// both modes; an unterminated quote or a final lone backslash is an error in both.
pub fn split(line: &str, through_shell: bool) -> Result<Vec<String>, ShellError> {
    if line.contains('\0') {
        return Err(ShellError::Nul);
    }
    let refuse = |ch, pos, what| Err(ShellError::Metachar { ch, pos, what });
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    // Everything in the current word so far was unquoted (for `NAME=` detection).
    let mut all_unquoted = true;
    // The previous character of the current word, when it was unquoted (for `=~`, `:~`).
    let mut prev_unquoted: Option<char> = None;
    let mut chars = line.char_indices().peekable();
    while let Some((pos, c)) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                all_unquoted = true;
                prev_unquoted = None;
            }
            '\'' => {
                in_word = true;
                all_unquoted = false;
                prev_unquoted = None;
                loop {
                    match chars.next() {
                        None => {
                            return Err(ShellError::Unterminated {
                                quote: "single",
                                pos,
                            });
                        }
                        Some((_, '\'')) => break,
                        Some((_, ch)) => cur.push(ch),
                    }
                }
            }
            '"' => {
                in_word = true;
                all_unquoted = false;
                prev_unquoted = None;
                loop {
                    match chars.next() {
                        None => {
                            return Err(ShellError::Unterminated {
                                quote: "double",
                                pos,
                            });
                        }
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.peek() {
                            Some(&(_, n @ ('"' | '\\' | '$' | '`'))) => {
                                cur.push(n);
                                chars.next();
                            }
                            Some(&(_, '\n')) => {
                                chars.next();
                            }
                            _ => cur.push('\\'),
                        },
                        Some((p, ch @ '$')) if through_shell => {
                            return refuse(ch, p, "expands a variable or command");
                        }
                        Some((p, ch @ '`')) if through_shell => {
                            return refuse(ch, p, "substitutes a command");
                        }
                        Some((_, ch)) => cur.push(ch),
                    }
                }
            }
            '\\' => match chars.next() {
                None => return Err(ShellError::TrailingBackslash),
                Some((_, '\n')) => {}
                Some((_, ch)) => {
                    cur.push(ch);
                    in_word = true;
                    all_unquoted = false;
                    prev_unquoted = None;
                }
            },
            // A whole word `{}` (find's placeholder) is not brace-expanded; `{},x}` would be.
            '{' if through_shell
                && !in_word
                && line[pos..].starts_with("{}")
                && line[pos + 2..]
                    .chars()
                    .next()
                    .is_none_or(|n| n == ' ' || n == '\t') =>
            {
                chars.next();
                cur.push_str("{}");
                in_word = true;
                prev_unquoted = Some('}');
            }
            _ if through_shell => {
                if let Some(what) = shell_meaning(c, in_word, prev_unquoted) {
                    return refuse(c, pos, what);
                }
                if c == '=' && words.is_empty() && all_unquoted && is_name(&cur) {
                    return Err(ShellError::Assignment(cur));
                }
                cur.push(c);
                in_word = true;
                prev_unquoted = Some(c);
            }
            _ => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// What an unquoted character means to a shell, when it means more than itself.
fn shell_meaning(c: char, in_word: bool, prev: Option<char>) -> Option<&'static str> {
    Some(match c {
        ';' | '\n' => "separates commands",
        '&' => "runs in the background or chains commands",
        '|' => "pipes into another command",
        '<' | '>' => "redirects input or output",
        '(' | ')' => "starts a subshell",
        '`' => "substitutes a command",
        '$' => "expands a variable or command",
        '*' | '?' | '[' => "is a glob pattern",
        '{' => "is brace expansion",
        '#' if !in_word => "starts a comment",
        '~' if !in_word || matches!(prev, Some('=' | ':')) => "expands to a home directory",
        _ => return None,
    })
}

fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c == b'_' || c.is_ascii_alphabetic())
        && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
}

/// What a command touches, as far as the policy cares. Paths are as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandAnalysis {
    /// argv\[0\] as written.
    pub program: String,
    /// File operands and file-valued options the command reads. Every recursive root is
    /// listed here too.
    pub reads: Vec<PathBuf>,
    /// Files the command writes, deletes or changes (a directory: anything below it).
    pub writes: Vec<PathBuf>,
    /// Directories walked recursively.
    pub recursive_roots: Vec<PathBuf>,
    /// Forbidden options or programs found, each as `what: why`.
    pub forbidden: Vec<String>,
    /// The walk follows symbolic links, so it may leave its roots.
    pub follows_symlinks: bool,
}

/// Says what `argv` reads, writes and walks, and which of its options are forbidden.
/// See the module documentation for each command's knowledge.
pub fn analyze(argv: &[String]) -> Result<CommandAnalysis, ShellError> {
    let Some(program) = argv.first() else {
        return Err(ShellError::Empty);
    };
    if program.is_empty() {
        return Err(ShellError::Empty);
    }
    if argv.len() > MAX_ARGS {
        return Err(ShellError::TooManyArgs(argv.len()));
    }
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(ShellError::Nul);
    }
    let name = program.rsplit('/').next().unwrap_or(program.as_str());
    let args = &argv[1..];
    let mut acc = Acc::new(name);
    match name {
        "grep" | "egrep" | "fgrep" => grep(args, false, &mut acc),
        "rgrep" => grep(args, true, &mut acc),
        "rg" => rg(args, &mut acc),
        "find" => find(args, &mut acc),
        "ls" => ls(args, &mut acc),
        "du" => walker(args, &DU, &mut acc),
        "tree" => walker(args, &TREE, &mut acc),
        "diff" => diff(args, &mut acc),
        "sed" => scripted(args, &SED, &mut acc),
        "awk" | "gawk" | "mawk" | "nawk" => scripted(args, &AWK, &mut acc),
        "tar" => tar(args, &mut acc),
        "cp" => copy_move(args, false, &mut acc),
        "mv" => copy_move(args, true, &mut acc),
        "rm" => rm(args, &mut acc),
        "chmod" | "chown" | "chgrp" => chmod(args, &mut acc),
        "uniq" => uniq(args, &mut acc),
        "less" => less(args, &mut acc),
        "git" => git(args, &mut acc),
        "node" | "nodejs" => interpreter(args, &NODE, &mut acc),
        "ruby" => interpreter(args, &RUBY, &mut acc),
        n if n.starts_with("python") => interpreter(args, &PYTHON, &mut acc),
        n if n.starts_with("perl") => interpreter(args, &PERL, &mut acc),
        n if SHELLS.contains(&n) => {
            let why = if args.iter().any(|a| a == "-c") {
                "runs inline shell commands"
            } else {
                "runs a shell (commands the gateway cannot see)"
            };
            acc.forbid(n, why);
        }
        n if RUNS_ANOTHER.contains(&n) => acc.forbid(n, "runs another command"),
        n => {
            let spec = READERS
                .iter()
                .find(|(names, _)| names.contains(&n))
                .map_or(&GENERIC, |(_, spec)| spec);
            let p = parse(args, spec, &mut acc);
            for op in &p.operands {
                acc.read(&op.path());
            }
        }
    }
    Ok(acc.finish(program))
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
];

const RUNS_ANOTHER: &[&str] = &[
    "xargs", "env", "eval", "exec", "nohup", "timeout", "nice", "ionice", "stdbuf", "setsid",
    "chroot", "sudo", "su", "doas", "runuser", "unshare", "nsenter", "watch", "time", "command",
    "builtin", "strace", "ltrace", "script", "parallel", "flock",
];

/// Collected findings.
struct Acc {
    name: String,
    reads: Vec<PathBuf>,
    writes: Vec<PathBuf>,
    roots: Vec<PathBuf>,
    forbidden: Vec<String>,
    follows: bool,
}

fn push_unique(v: &mut Vec<PathBuf>, p: PathBuf) {
    if !v.contains(&p) {
        v.push(p);
    }
}

/// An operand or option value that can name a file: not empty, not `-` (stdin/stdout), not a
/// URL.
fn names_file(p: &Path) -> bool {
    let s = p.as_os_str();
    !s.is_empty() && s != "-" && !p.to_string_lossy().contains("://")
}

impl Acc {
    fn new(name: &str) -> Acc {
        Acc {
            name: name.to_string(),
            reads: Vec::new(),
            writes: Vec::new(),
            roots: Vec::new(),
            forbidden: Vec::new(),
            follows: false,
        }
    }
    fn read(&mut self, p: &Path) {
        if names_file(p) {
            push_unique(&mut self.reads, p.to_path_buf());
        }
    }
    fn write(&mut self, p: &Path) {
        if names_file(p) {
            push_unique(&mut self.writes, p.to_path_buf());
        }
    }
    /// A recursively walked root, also a read.
    fn root(&mut self, p: &Path) {
        if names_file(p) {
            self.read(p);
            push_unique(&mut self.roots, p.to_path_buf());
        }
    }
    fn forbid(&mut self, what: &str, why: &str) {
        let s = if what == self.name {
            format!("{what}: {why}")
        } else {
            format!("{} {what}: {why}", self.name)
        };
        if !self.forbidden.contains(&s) {
            self.forbidden.push(s);
        }
    }
    fn finish(self, program: &str) -> CommandAnalysis {
        CommandAnalysis {
            program: program.to_string(),
            reads: self.reads,
            writes: self.writes,
            recursive_roots: self.roots,
            forbidden: self.forbidden,
            follows_symlinks: self.follows,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Option tables and the getopt-like tokenizer.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    /// A value, attached or the next word.
    Req,
    /// A value only when attached (`-i.bak`, `--in-place=.bak`).
    Opt,
    /// Only attached digits (`perl -l0 -0777`); the cluster goes on after them (`-lne`).
    OptDigits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TarMode {
    Create,
    Extract,
    List,
    Append,
    Diff,
    Delete,
}

/// What an option means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eff {
    /// No effect on paths.
    Plain,
    /// The value is a file that is read.
    Read,
    /// The value is a file that is written.
    Write,
    /// The value is a file read and rewritten.
    ReadWrite,
    /// The value is a file listing more operands: read, and forbidden (those are unseen).
    NamesFrom,
    Forbid(&'static str),
    /// Edits its operands in place: forbidden; operands are writes.
    InPlace,
    Recursive,
    /// Recursive when the value abbreviates this word (`grep -d recurse`).
    RecursiveIf(&'static str),
    NoRecursion,
    Follow,
    /// The value is the pattern/script/program, so no operand is.
    Pattern,
    /// The value is a file holding the pattern/script/program: read.
    PatternFile,
    /// No pattern at all: every operand is a path (`rg --files`).
    NoPattern,
    /// Target directory of cp/mv: written.
    TargetDir,
    Mode(TarMode),
    Archive,
    /// Later relative operands are under this directory (`tar -C`, `ruby -C`).
    ChDir,
    /// A date, or a file whose time is used when it looks like a path (`tar --newer`).
    DateOrFile,
    AbsoluteNames,
    /// `tree --fromfile`: operands are listings, read, not walked.
    FromFile,
}

#[derive(Debug)]
struct Opt {
    /// `'\0'`: no short form.
    short: char,
    /// `""`: no long form.
    long: &'static str,
    arity: Arity,
    eff: Eff,
}

const fn o(short: char, long: &'static str, arity: Arity, eff: Eff) -> Opt {
    Opt {
        short,
        long,
        arity,
        eff,
    }
}

impl Opt {
    fn display(&self) -> String {
        if self.short != '\0' {
            format!("-{}", self.short)
        } else {
            format!("--{}", self.long)
        }
    }
}

struct Spec {
    opts: &'static [Opt],
    /// GNU permutation: options are recognised after operands too.
    permute: bool,
}

use Arity::{Flag, Opt as OptV, OptDigits, Req};

/// An operand, with the directory it is relative to (`tar -C`, `ruby -C`), if any.
struct Operand<'a> {
    word: &'a str,
    base: Option<PathBuf>,
}

impl Operand<'_> {
    fn path(&self) -> PathBuf {
        match &self.base {
            Some(b) => b.join(self.word),
            None => PathBuf::from(self.word),
        }
    }
}

/// The outcome of [`parse`]: operands and the state the options set. Common effects (reads,
/// writes, forbidden, follows) are already recorded in the [`Acc`].
#[derive(Default)]
struct Parsed<'a> {
    operands: Vec<Operand<'a>>,
    recursive: bool,
    no_recursion: bool,
    pattern_given: bool,
    no_pattern: bool,
    in_place: bool,
    target_dir: Option<&'a str>,
    mode: Option<TarMode>,
    archive: Option<&'a str>,
    absolute_names: bool,
    from_file: bool,
    base: Option<PathBuf>,
}

fn lookup_long<'s>(spec: &'s Spec, name: &str) -> Option<&'s Opt> {
    let longs = || spec.opts.iter().filter(|o| !o.long.is_empty());
    if let Some(o) = longs().find(|o| o.long == name) {
        return Some(o);
    }
    if name.is_empty() {
        return None;
    }
    let mut hits = longs().filter(|o| o.long.starts_with(name));
    match (hits.next(), hits.next()) {
        (Some(o), None) => Some(o),
        _ => None,
    }
}

fn lookup_short(spec: &Spec, c: char) -> Option<&Opt> {
    spec.opts.iter().find(|o| o.short == c)
}

/// Tokenizes `args` per `spec`, records the common effects in `acc`, returns the rest.
fn parse<'a>(args: &'a [String], spec: &Spec, acc: &mut Acc) -> Parsed<'a> {
    let mut p = Parsed::default();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        if options_done || a == "-" || !a.starts_with('-') {
            p.operands.push(Operand {
                word: a,
                base: p.base.clone(),
            });
            if !spec.permute {
                options_done = true;
            }
            continue;
        }
        if a == "--" {
            options_done = true;
            continue;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            match lookup_long(spec, name) {
                Some(opt) => {
                    let value = match (opt.arity, inline) {
                        (Req, None) => {
                            let v = args.get(i).map(String::as_str);
                            i += usize::from(v.is_some());
                            v
                        }
                        (Flag, _) => None,
                        (_, v) => v,
                    };
                    apply(opt, value, &mut p, acc);
                }
                None => {
                    if let Some(v) = inline {
                        acc.read(Path::new(v));
                    }
                }
            }
            continue;
        }
        let mut cluster = &a[1..];
        while let Some(c) = cluster.chars().next() {
            cluster = &cluster[c.len_utf8()..];
            let Some(opt) = lookup_short(spec, c) else {
                continue;
            };
            let value = match opt.arity {
                Flag => None,
                OptDigits => {
                    // Decimal digits; `-0xHH` (perl) in hex.
                    let hex = c == '0' && cluster.starts_with('x');
                    let skip = usize::from(hex);
                    let n = cluster[skip..]
                        .find(|ch: char| !(ch.is_ascii_digit() || hex && ch.is_ascii_hexdigit()))
                        .map_or(cluster.len(), |n| n + skip);
                    let (digits, more) = cluster.split_at(n);
                    cluster = more;
                    (!digits.is_empty()).then_some(digits)
                }
                OptV => {
                    let v = std::mem::take(&mut cluster);
                    (!v.is_empty()).then_some(v)
                }
                Req if !cluster.is_empty() => Some(std::mem::take(&mut cluster)),
                Req => {
                    let v = args.get(i).map(String::as_str);
                    i += usize::from(v.is_some());
                    v
                }
            };
            apply(opt, value, &mut p, acc);
        }
    }
    p
}

fn apply<'a>(opt: &Opt, value: Option<&'a str>, p: &mut Parsed<'a>, acc: &mut Acc) {
    let under = |base: &Option<PathBuf>, v: &str| match base {
        Some(b) => b.join(v),
        None => PathBuf::from(v),
    };
    match opt.eff {
        Eff::Plain => {}
        Eff::Read => {
            if let Some(v) = value {
                acc.read(&under(&p.base, v));
            }
        }
        Eff::Write => {
            if let Some(v) = value {
                acc.write(&under(&p.base, v));
            }
        }
        Eff::ReadWrite => {
            if let Some(v) = value {
                acc.read(&under(&p.base, v));
                acc.write(&under(&p.base, v));
            }
        }
        Eff::NamesFrom => {
            if let Some(v) = value {
                acc.read(&under(&p.base, v));
            }
            acc.forbid(
                &opt.display(),
                "takes more file names from a file, which cannot be checked",
            );
        }
        Eff::Forbid(why) => acc.forbid(&opt.display(), why),
        Eff::InPlace => {
            p.in_place = true;
            acc.forbid(&opt.display(), "edits files in place");
        }
        Eff::Recursive => p.recursive = true,
        Eff::RecursiveIf(word) => {
            if value.is_some_and(|v| !v.is_empty() && word.starts_with(v)) {
                p.recursive = true;
            }
        }
        Eff::NoRecursion => p.no_recursion = true,
        Eff::Follow => acc.follows = true,
        Eff::Pattern => p.pattern_given = true,
        Eff::PatternFile => {
            p.pattern_given = true;
            if let Some(v) = value {
                acc.read(&under(&p.base, v));
            }
        }
        Eff::NoPattern => p.no_pattern = true,
        Eff::TargetDir => p.target_dir = value,
        Eff::Mode(m) => p.mode = Some(m),
        Eff::Archive => p.archive = value,
        Eff::ChDir => {
            if let Some(v) = value {
                p.base = Some(under(&p.base, v));
            }
        }
        Eff::DateOrFile => {
            if let Some(v) = value.filter(|v| v.starts_with('/') || v.starts_with('.')) {
                acc.read(&under(&p.base, v));
            }
        }
        Eff::AbsoluteNames => p.absolute_names = true,
        Eff::FromFile => p.from_file = true,
    }
}

// ---------------------------------------------------------------------------------------------
// Per-command knowledge.

const GENERIC: Spec = Spec {
    opts: &[],
    permute: true,
};

/// Simple readers: every operand is read. Only options known to take a value are listed.
const READERS: &[(&[&str], Spec)] = &[
    (
        &["cat"],
        Spec {
            opts: &[],
            permute: true,
        },
    ),
    (
        &["tac"],
        Spec {
            opts: &[o('s', "separator", Req, Eff::Plain)],
            permute: true,
        },
    ),
    (
        &["nl"],
        Spec {
            opts: &[
                o('b', "body-numbering", Req, Eff::Plain),
                o('d', "section-delimiter", Req, Eff::Plain),
                o('f', "footer-numbering", Req, Eff::Plain),
                o('h', "header-numbering", Req, Eff::Plain),
                o('i', "line-increment", Req, Eff::Plain),
                o('l', "join-blank-lines", Req, Eff::Plain),
                o('n', "number-format", Req, Eff::Plain),
                o('s', "number-separator", Req, Eff::Plain),
                o('v', "starting-line-number", Req, Eff::Plain),
                o('w', "number-width", Req, Eff::Plain),
            ],
            permute: true,
        },
    ),
    (
        &["more"],
        Spec {
            opts: &[o('n', "lines", Req, Eff::Plain)],
            permute: true,
        },
    ),
    (
        &["head", "tail"],
        Spec {
            opts: &[
                o('n', "lines", Req, Eff::Plain),
                o('c', "bytes", Req, Eff::Plain),
                o('s', "sleep-interval", Req, Eff::Plain),
                o('\0', "pid", Req, Eff::Plain),
                o('\0', "max-unchanged-stats", Req, Eff::Plain),
                o('\0', "follow", OptV, Eff::Plain),
            ],
            permute: true,
        },
    ),
    (
        &["less"],
        Spec {
            opts: &[
                o('b', "buffers", Req, Eff::Plain),
                o('h', "max-back-scroll", Req, Eff::Plain),
                o('j', "jump-target", Req, Eff::Plain),
                o('k', "lesskey-file", Req, Eff::Read),
                o('o', "log-file", Req, Eff::Write),
                o('O', "LOG-FILE", Req, Eff::Write),
                o('p', "pattern", Req, Eff::Plain),
                o('P', "prompt", Req, Eff::Plain),
                o('t', "tag", Req, Eff::Plain),
                o('T', "tag-file", Req, Eff::Read),
                o('x', "tabs", Req, Eff::Plain),
                o('y', "max-forw-scroll", Req, Eff::Plain),
                o('z', "window", Req, Eff::Plain),
                o('#', "shift", Req, Eff::Plain),
            ],
            permute: true,
        },
    ),
    (
        &["wc", "md5sum", "sha1sum", "sha256sum", "sha512sum"],
        Spec {
            opts: &[o('\0', "files0-from", Req, Eff::NamesFrom)],
            permute: true,
        },
    ),
    (
        &["sort"],
        Spec {
            opts: &[
                o('k', "key", Req, Eff::Plain),
                o('o', "output", Req, Eff::Write),
                o('t', "field-separator", Req, Eff::Plain),
                o('S', "buffer-size", Req, Eff::Plain),
                o('T', "temporary-directory", Req, Eff::Plain),
                o('\0', "files0-from", Req, Eff::NamesFrom),
                o(
                    '\0',
                    "compress-program",
                    Req,
                    Eff::Forbid("runs another command"),
                ),
                o('\0', "random-source", Req, Eff::Read),
                o('\0', "parallel", Req, Eff::Plain),
                o('\0', "batch-size", Req, Eff::Plain),
                o('\0', "sort", Req, Eff::Plain),
            ],
            permute: true,
        },
    ),
    (
        &["cut"],
        Spec {
            opts: &[
                o('b', "bytes", Req, Eff::Plain),
                o('c', "characters", Req, Eff::Plain),
                o('f', "fields", Req, Eff::Plain),
                o('d', "delimiter", Req, Eff::Plain),
                o('\0', "output-delimiter", Req, Eff::Plain),
            ],
            permute: true,
        },
    ),
    (
        &["stat"],
        Spec {
            opts: &[
                o('c', "format", Req, Eff::Plain),
                o('\0', "printf", Req, Eff::Plain),
                o('L', "dereference", Flag, Eff::Plain),
            ],
            permute: true,
        },
    ),
    (
        &["file"],
        Spec {
            opts: &[
                o('m', "magic-file", Req, Eff::Read),
                o('f', "files-from", Req, Eff::NamesFrom),
                o('F', "separator", Req, Eff::Plain),
                o('e', "exclude", Req, Eff::Plain),
                o('P', "parameter", Req, Eff::Plain),
            ],
            permute: true,
        },
    ),
];

const GREP: Spec = Spec {
    opts: &[
        o('e', "regexp", Req, Eff::Pattern),
        o('f', "file", Req, Eff::PatternFile),
        o('m', "max-count", Req, Eff::Plain),
        o('A', "after-context", Req, Eff::Plain),
        o('B', "before-context", Req, Eff::Plain),
        o('C', "context", Req, Eff::Plain),
        o('d', "directories", Req, Eff::RecursiveIf("recurse")),
        o('D', "devices", Req, Eff::Plain),
        o('r', "recursive", Flag, Eff::Recursive),
        o('R', "dereference-recursive", Flag, Eff::Follow),
        o('\0', "include", Req, Eff::Plain),
        o('\0', "exclude", Req, Eff::Plain),
        o('\0', "exclude-from", Req, Eff::Read),
        o('\0', "exclude-dir", Req, Eff::Plain),
        o('\0', "label", Req, Eff::Plain),
        o('\0', "binary-files", Req, Eff::Plain),
        o('\0', "color", OptV, Eff::Plain),
        o('\0', "colour", OptV, Eff::Plain),
        o('\0', "files-with-matches", Flag, Eff::Plain),
        o('\0', "files-without-match", Flag, Eff::Plain),
        o('\0', "fixed-strings", Flag, Eff::Plain),
        o('\0', "line-buffered", Flag, Eff::Plain),
        o('\0', "line-number", Flag, Eff::Plain),
        o('\0', "line-regexp", Flag, Eff::Plain),
        o('\0', "null", Flag, Eff::Plain),
        o('\0', "null-data", Flag, Eff::Plain),
        o('\0', "context-separator", Req, Eff::Plain),
    ],
    permute: true,
};

fn grep(args: &[String], always_recursive: bool, acc: &mut Acc) {
    let p = parse(args, &GREP, acc);
    // -R / --dereference-recursive: recursive and following links.
    let recursive = always_recursive || p.recursive || acc.follows;
    let files = if p.pattern_given {
        &p.operands[..]
    } else {
        p.operands.get(1..).unwrap_or(&[])
    };
    if recursive {
        if files.is_empty() {
            acc.root(Path::new("."));
        }
        for f in files {
            acc.root(&f.path());
        }
    } else {
        for f in files {
            acc.read(&f.path());
        }
    }
}

const RG: Spec = Spec {
    opts: &[
        o('e', "regexp", Req, Eff::Pattern),
        o('f', "file", Req, Eff::PatternFile),
        o('g', "glob", Req, Eff::Plain),
        o('\0', "iglob", Req, Eff::Plain),
        o('t', "type", Req, Eff::Plain),
        o('T', "type-not", Req, Eff::Plain),
        o('\0', "type-add", Req, Eff::Plain),
        o('\0', "type-clear", Req, Eff::Plain),
        o('m', "max-count", Req, Eff::Plain),
        o('A', "after-context", Req, Eff::Plain),
        o('B', "before-context", Req, Eff::Plain),
        o('C', "context", Req, Eff::Plain),
        o('j', "threads", Req, Eff::Plain),
        o('M', "max-columns", Req, Eff::Plain),
        o('E', "encoding", Req, Eff::Plain),
        o('r', "replace", Req, Eff::Plain),
        o('d', "max-depth", Req, Eff::Plain),
        o('L', "follow", Flag, Eff::Follow),
        o('\0', "files", Flag, Eff::NoPattern),
        o('\0', "type-list", Flag, Eff::NoPattern),
        o('\0', "max-filesize", Req, Eff::Plain),
        o('\0', "ignore-file", Req, Eff::Read),
        o(
            '\0',
            "pre",
            Req,
            Eff::Forbid("runs a preprocessor command on every file"),
        ),
        o('\0', "pre-glob", Req, Eff::Plain),
        o(
            '\0',
            "hostname-bin",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o('\0', "sort", Req, Eff::Plain),
        o('\0', "sortr", Req, Eff::Plain),
        o('\0', "path-separator", Req, Eff::Plain),
        o('\0', "colors", Req, Eff::Plain),
        o('\0', "color", Req, Eff::Plain),
        o('\0', "context-separator", Req, Eff::Plain),
        o('\0', "field-match-separator", Req, Eff::Plain),
        o('\0', "field-context-separator", Req, Eff::Plain),
        o('\0', "dfa-size-limit", Req, Eff::Plain),
        o('\0', "regex-size-limit", Req, Eff::Plain),
        o('\0', "engine", Req, Eff::Plain),
        o('\0', "generate", Req, Eff::Plain),
        o('\0', "hyperlink-format", Req, Eff::Plain),
    ],
    permute: true,
};

fn rg(args: &[String], acc: &mut Acc) {
    let p = parse(args, &RG, acc);
    let roots = if p.pattern_given || p.no_pattern {
        &p.operands[..]
    } else {
        p.operands.get(1..).unwrap_or(&[])
    };
    if roots.is_empty() {
        acc.root(Path::new("."));
    }
    for r in roots {
        acc.root(&r.path());
    }
}

/// find tests that take one value that is not a file.
const FIND_ONE_ARG: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-lname",
    "-ilname",
    "-regex",
    "-iregex",
    "-regextype",
    "-type",
    "-xtype",
    "-size",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-mtime",
    "-atime",
    "-ctime",
    "-mmin",
    "-amin",
    "-cmin",
    "-maxdepth",
    "-mindepth",
    "-links",
    "-inum",
    "-printf",
    "-used",
    "-fstype",
    "-context",
];

fn find(args: &[String], acc: &mut Acc) {
    let mut i = 0;
    // Leading options: -H -L -P -D debugopts -Olevel.
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-H" | "-P" => i += 1,
            "-L" => {
                acc.follows = true;
                i += 1;
            }
            "-D" => i += 2,
            s if s.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let is_expr =
        |a: &str| (a.starts_with('-') && a.len() > 1) || matches!(a, "(" | "!" | ")" | ",");
    let mut starts = Vec::new();
    while let Some(a) = args.get(i).filter(|a| !is_expr(a)) {
        starts.push(a.as_str());
        i += 1;
    }
    while let Some(a) = args.get(i) {
        i += 1;
        let a = a.as_str();
        match a {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                acc.forbid(a, "runs another command");
                while let Some(t) = args.get(i) {
                    i += 1;
                    if t == ";" || t == "+" {
                        break;
                    }
                }
            }
            "-delete" => acc.forbid(a, "deletes files"),
            "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                acc.forbid(a, "writes to a file");
                if let Some(f) = args.get(i) {
                    acc.write(Path::new(f));
                }
                i += if a == "-fprintf" { 2 } else { 1 };
            }
            "-files0-from" => {
                acc.forbid(a, "takes start points from a file, which cannot be checked");
                if let Some(f) = args.get(i) {
                    acc.read(Path::new(f));
                }
                i += 1;
            }
            "-newer" | "-anewer" | "-cnewer" | "-samefile" => {
                if let Some(f) = args.get(i) {
                    acc.read(Path::new(f));
                }
                i += 1;
            }
            // -newerXY: Y = t compares with a date, anything else with a file.
            s if s.len() == 8 && s.starts_with("-newer") => {
                if !s.ends_with('t')
                    && let Some(f) = args.get(i)
                {
                    acc.read(Path::new(f));
                }
                i += 1;
            }
            "-follow" => acc.follows = true,
            s if FIND_ONE_ARG.contains(&s) => i += 1,
            _ => {}
        }
    }
    if starts.is_empty() {
        acc.root(Path::new("."));
    }
    for s in starts {
        acc.root(Path::new(s));
    }
}

const LS: Spec = Spec {
    opts: &[
        o('I', "ignore", Req, Eff::Plain),
        o('T', "tabsize", Req, Eff::Plain),
        o('w', "width", Req, Eff::Plain),
        o('R', "recursive", Flag, Eff::Recursive),
        o('L', "dereference", Flag, Eff::Follow),
        o('\0', "hide", Req, Eff::Plain),
        o('\0', "format", Req, Eff::Plain),
        o('\0', "sort", Req, Eff::Plain),
        o('\0', "time", Req, Eff::Plain),
        o('\0', "time-style", Req, Eff::Plain),
        o('\0', "block-size", Req, Eff::Plain),
        o('\0', "quoting-style", Req, Eff::Plain),
        o('\0', "indicator-style", Req, Eff::Plain),
        o('\0', "color", OptV, Eff::Plain),
        o('\0', "hyperlink", OptV, Eff::Plain),
        o('\0', "classify", OptV, Eff::Plain),
        o('\0', "dereference-command-line", Flag, Eff::Plain),
        o(
            '\0',
            "dereference-command-line-symlink-to-dir",
            Flag,
            Eff::Plain,
        ),
    ],
    permute: true,
};

fn ls(args: &[String], acc: &mut Acc) {
    let p = parse(args, &LS, acc);
    let dot = [Operand {
        word: ".",
        base: None,
    }];
    let ops = if p.operands.is_empty() {
        &dot[..]
    } else {
        &p.operands[..]
    };
    for op in ops {
        if p.recursive {
            acc.root(&op.path());
        } else {
            acc.read(&op.path());
        }
    }
}

const DU: Spec = Spec {
    opts: &[
        o('B', "block-size", Req, Eff::Plain),
        o('d', "max-depth", Req, Eff::Plain),
        o('t', "threshold", Req, Eff::Plain),
        o('X', "exclude-from", Req, Eff::Read),
        o('L', "dereference", Flag, Eff::Follow),
        o('\0', "exclude", Req, Eff::Plain),
        o('\0', "files0-from", Req, Eff::NamesFrom),
        o('\0', "time-style", Req, Eff::Plain),
        o('\0', "time", OptV, Eff::Plain),
    ],
    permute: true,
};

const TREE: Spec = Spec {
    opts: &[
        o('L', "", Req, Eff::Plain),
        o('P', "", Req, Eff::Plain),
        o('I', "", Req, Eff::Plain),
        o('o', "", Req, Eff::Write),
        o('H', "", Req, Eff::Plain),
        o('T', "", Req, Eff::Plain),
        o('l', "", Flag, Eff::Follow),
        o('\0', "charset", Req, Eff::Plain),
        o('\0', "filelimit", Req, Eff::Plain),
        o('\0', "timefmt", Req, Eff::Plain),
        o('\0', "sort", Req, Eff::Plain),
        o('\0', "gitfile", Req, Eff::Read),
        o('\0', "hintro", Req, Eff::Read),
        o('\0', "houtro", Req, Eff::Read),
        o('\0', "fromfile", Flag, Eff::FromFile),
    ],
    permute: true,
};

/// du, tree: always walk their operands (default `.`).
fn walker(args: &[String], spec: &Spec, acc: &mut Acc) {
    let p = parse(args, spec, acc);
    if p.from_file {
        for op in &p.operands {
            acc.read(&op.path());
        }
        return;
    }
    if p.operands.is_empty() {
        acc.root(Path::new("."));
    }
    for op in &p.operands {
        acc.root(&op.path());
    }
}

const DIFF: Spec = Spec {
    opts: &[
        o('C', "context", Req, Eff::Plain),
        o('U', "unified", Req, Eff::Plain),
        o('F', "show-function-line", Req, Eff::Plain),
        o('I', "ignore-matching-lines", Req, Eff::Plain),
        o('x', "exclude", Req, Eff::Plain),
        o('X', "exclude-from", Req, Eff::Read),
        o('S', "starting-file", Req, Eff::Plain),
        o('L', "label", Req, Eff::Plain),
        o('D', "ifdef", Req, Eff::Plain),
        o('W', "width", Req, Eff::Plain),
        o('r', "recursive", Flag, Eff::Recursive),
        o('\0', "from-file", Req, Eff::Read),
        o('\0', "to-file", Req, Eff::Read),
        o(
            '\0',
            "diff-program",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o('\0', "color", OptV, Eff::Plain),
        o('\0', "palette", Req, Eff::Plain),
        o('\0', "tabsize", Req, Eff::Plain),
        o('\0', "horizon-lines", Req, Eff::Plain),
        o('\0', "line-format", Req, Eff::Plain),
        o('\0', "old-line-format", Req, Eff::Plain),
        o('\0', "new-line-format", Req, Eff::Plain),
        o('\0', "unchanged-line-format", Req, Eff::Plain),
        o('\0', "old-group-format", Req, Eff::Plain),
        o('\0', "new-group-format", Req, Eff::Plain),
        o('\0', "changed-group-format", Req, Eff::Plain),
        o('\0', "unchanged-group-format", Req, Eff::Plain),
    ],
    permute: true,
};

fn diff(args: &[String], acc: &mut Acc) {
    let p = parse(args, &DIFF, acc);
    for op in &p.operands {
        if p.recursive {
            acc.root(&op.path());
        } else {
            acc.read(&op.path());
        }
    }
}

const SED: Spec = Spec {
    opts: &[
        o('e', "expression", Req, Eff::Pattern),
        o('f', "file", Req, Eff::PatternFile),
        o('l', "line-length", Req, Eff::Plain),
        o('i', "in-place", OptV, Eff::InPlace),
        o('s', "separate", Flag, Eff::Plain),
        o('\0', "sandbox", Flag, Eff::Plain),
        o('\0', "silent", Flag, Eff::Plain),
    ],
    permute: true,
};

const AWK: Spec = Spec {
    opts: &[
        o('f', "file", Req, Eff::PatternFile),
        o('E', "exec", Req, Eff::PatternFile),
        o('e', "source", Req, Eff::Pattern),
        o('i', "include", Req, Eff::Read),
        o('l', "load", Req, Eff::Forbid("loads a shared library")),
        o('v', "assign", Req, Eff::Plain),
        o('F', "field-separator", Req, Eff::Plain),
        o('W', "", Req, Eff::Plain),
        o('o', "pretty-print", OptV, Eff::Write),
        o('p', "profile", OptV, Eff::Write),
        o('d', "dump-variables", OptV, Eff::Write),
        o('L', "lint", OptV, Eff::Plain),
    ],
    permute: true,
};

/// sed, awk: the first operand is the script unless one was given by option; the rest are
/// files read (written too with sed -i).
fn scripted(args: &[String], spec: &Spec, acc: &mut Acc) {
    let p = parse(args, spec, acc);
    let files = if p.pattern_given {
        &p.operands[..]
    } else {
        p.operands.get(1..).unwrap_or(&[])
    };
    for f in files {
        acc.read(&f.path());
        if p.in_place {
            acc.write(&f.path());
        }
    }
}

const TAR: Spec = Spec {
    opts: &[
        o('c', "create", Flag, Eff::Mode(TarMode::Create)),
        o('x', "extract", Flag, Eff::Mode(TarMode::Extract)),
        o('\0', "get", Flag, Eff::Mode(TarMode::Extract)),
        o('t', "list", Flag, Eff::Mode(TarMode::List)),
        o('r', "append", Flag, Eff::Mode(TarMode::Append)),
        o('u', "update", Flag, Eff::Mode(TarMode::Append)),
        o('A', "catenate", Flag, Eff::Mode(TarMode::Append)),
        o('\0', "concatenate", Flag, Eff::Mode(TarMode::Append)),
        o('d', "diff", Flag, Eff::Mode(TarMode::Diff)),
        o('\0', "compare", Flag, Eff::Mode(TarMode::Diff)),
        o('\0', "delete", Flag, Eff::Mode(TarMode::Delete)),
        o('f', "file", Req, Eff::Archive),
        o('T', "files-from", Req, Eff::NamesFrom),
        o('X', "exclude-from", Req, Eff::Read),
        o('C', "directory", Req, Eff::ChDir),
        o(
            'I',
            "use-compress-program",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o('F', "info-script", Req, Eff::Forbid("runs another command")),
        o(
            '\0',
            "new-volume-script",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o('\0', "to-command", Req, Eff::Forbid("runs another command")),
        o(
            '\0',
            "checkpoint-action",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o(
            '\0',
            "rsh-command",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o(
            '\0',
            "rmt-command",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o('g', "listed-incremental", Req, Eff::ReadWrite),
        o('\0', "volno-file", Req, Eff::ReadWrite),
        o('\0', "index-file", Req, Eff::Write),
        o('N', "newer", Req, Eff::DateOrFile),
        o('\0', "after-date", Req, Eff::DateOrFile),
        o('\0', "newer-mtime", Req, Eff::DateOrFile),
        o('\0', "mtime", Req, Eff::DateOrFile),
        o('P', "absolute-names", Flag, Eff::AbsoluteNames),
        o('h', "dereference", Flag, Eff::Follow),
        o('\0', "no-recursion", Flag, Eff::NoRecursion),
        o('\0', "recursion", Flag, Eff::Plain),
        o('b', "blocking-factor", Req, Eff::Plain),
        o('H', "format", Req, Eff::Plain),
        o('K', "starting-file", Req, Eff::Plain),
        o('L', "tape-length", Req, Eff::Plain),
        o('V', "label", Req, Eff::Plain),
        o('\0', "exclude", Req, Eff::Plain),
        o('\0', "transform", Req, Eff::Plain),
        o('\0', "xform", Req, Eff::Plain),
        o('\0', "owner", Req, Eff::Plain),
        o('\0', "group", Req, Eff::Plain),
        o('\0', "mode", Req, Eff::Plain),
        o('\0', "suffix", Req, Eff::Plain),
        o('\0', "strip-components", Req, Eff::Plain),
        o('\0', "record-size", Req, Eff::Plain),
        o('\0', "exclude-tag", Req, Eff::Plain),
        o('\0', "exclude-tag-under", Req, Eff::Plain),
        o('\0', "exclude-tag-all", Req, Eff::Plain),
        o('\0', "owner-map", Req, Eff::Read),
        o('\0', "group-map", Req, Eff::Read),
        o('\0', "force-local", Flag, Eff::Plain),
    ],
    permute: true,
};

fn tar(args: &[String], acc: &mut Acc) {
    // Old style `tar xvf a.tar ...`: the first word is a bundle of letters whose values are
    // the following words, in order. Rewrite it as separate short options.
    let mut norm: Vec<String> = Vec::with_capacity(args.len() + 4);
    let mut rest = args.iter();
    if let Some(first) = args
        .first()
        .filter(|a| !a.is_empty() && !a.starts_with('-'))
    {
        rest.next();
        for c in first.chars() {
            norm.push(format!("-{c}"));
            if lookup_short(&TAR, c).is_some_and(|o| o.arity == Req)
                && let Some(v) = rest.next()
            {
                norm.push(v.clone());
            }
        }
    }
    norm.extend(rest.cloned());
    let p = parse(&norm, &TAR, acc);
    let force_local = norm.iter().any(|a| a == "--force-local");
    if let Some(archive) = p.archive {
        // GNU tar treats `host:file` as a remote archive and runs rsh/ssh to reach it.
        if !force_local
            && archive
                .split_once(':')
                .is_some_and(|(h, _)| !h.contains('/'))
        {
            acc.forbid("-f", "remote archive (tar runs a remote shell to reach it)");
        }
    }
    let archive = p.archive.map(Path::new);
    let here = p.base.clone().unwrap_or_else(|| PathBuf::from("."));
    match p.mode {
        Some(TarMode::Create | TarMode::Append) => {
            if let Some(a) = archive {
                if p.mode == Some(TarMode::Append) {
                    acc.read(a);
                }
                acc.write(a);
            }
            for op in &p.operands {
                if p.no_recursion {
                    acc.read(&op.path());
                } else {
                    acc.root(&op.path());
                }
            }
        }
        Some(TarMode::Extract) => {
            if let Some(a) = archive {
                acc.read(a);
            }
            acc.write(&here);
            if p.absolute_names {
                acc.forbid("-P", "extracts to absolute paths, outside the working dir");
            }
        }
        Some(TarMode::List) => {
            if let Some(a) = archive {
                acc.read(a);
            }
        }
        Some(TarMode::Diff) => {
            if let Some(a) = archive {
                acc.read(a);
            }
            acc.root(&here);
        }
        Some(TarMode::Delete) => {
            if let Some(a) = archive {
                acc.read(a);
                acc.write(a);
            }
        }
        None => {
            if let Some(a) = archive {
                acc.read(a);
            }
        }
    }
}

const CP_MV: Spec = Spec {
    opts: &[
        o('t', "target-directory", Req, Eff::TargetDir),
        o('S', "suffix", Req, Eff::Plain),
        o('r', "recursive", Flag, Eff::Recursive),
        o('R', "", Flag, Eff::Recursive),
        o('a', "archive", Flag, Eff::Recursive),
        o('L', "dereference", Flag, Eff::Follow),
        o('\0', "no-preserve", Req, Eff::Plain),
        o('\0', "sparse", Req, Eff::Plain),
        o('\0', "reflink", OptV, Eff::Plain),
        o('\0', "backup", OptV, Eff::Plain),
        o('\0', "preserve", OptV, Eff::Plain),
        o('\0', "update", OptV, Eff::Plain),
        o('\0', "context", OptV, Eff::Plain),
        o('\0', "no-target-directory", Flag, Eff::Plain),
        o('\0', "no-dereference", Flag, Eff::Plain),
    ],
    permute: true,
};

/// cp (sources read, walked with -r) and mv (sources read and removed); the destination is the
/// last operand, or the `-t` directory.
fn copy_move(args: &[String], is_mv: bool, acc: &mut Acc) {
    let p = parse(args, &CP_MV, acc);
    let (sources, dest) = match (p.target_dir, p.operands.split_last()) {
        (Some(t), _) => (&p.operands[..], Some(PathBuf::from(t))),
        (None, Some((last, init))) if !init.is_empty() => (init, Some(last.path())),
        (None, _) => (&p.operands[..], None),
    };
    for s in sources {
        if p.recursive && !is_mv {
            acc.root(&s.path());
        } else {
            acc.read(&s.path());
        }
        if is_mv {
            acc.write(&s.path());
        }
    }
    if let Some(d) = dest {
        acc.write(&d);
    }
}

const RM: Spec = Spec {
    opts: &[
        o('r', "recursive", Flag, Eff::Recursive),
        o('R', "", Flag, Eff::Recursive),
        o('\0', "interactive", OptV, Eff::Plain),
        o('\0', "preserve-root", OptV, Eff::Plain),
    ],
    permute: true,
};

fn rm(args: &[String], acc: &mut Acc) {
    let p = parse(args, &RM, acc);
    for op in &p.operands {
        if p.recursive {
            acc.root(&op.path());
        }
        acc.write(&op.path());
    }
}

/// chmod, chown, chgrp: the first operand is the MODE/OWNER unless `--reference` is given;
/// a word like `-w` or `-x` is chmod's MODE, not an option.
fn chmod(args: &[String], acc: &mut Acc) {
    let is_chmod = acc.name == "chmod";
    let mut recursive = false;
    let mut reference = false;
    let mut operands: Vec<&str> = Vec::new();
    let mut options_done = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        let a = a.as_str();
        if options_done || a == "-" || !a.starts_with('-') {
            operands.push(a);
        } else if a == "--" {
            options_done = true;
        } else if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            if !name.is_empty() && "reference".starts_with(name) {
                reference = true;
                let v = inline.or_else(|| {
                    let v = args.get(i).map(String::as_str);
                    i += usize::from(v.is_some());
                    v
                });
                if let Some(v) = v {
                    acc.read(Path::new(v));
                }
            } else if !name.is_empty() && "from".starts_with(name) && inline.is_none() {
                i += 1;
            } else if !name.is_empty() && "recursive".starts_with(name) {
                recursive = true;
            } else if name == "dereference" {
                acc.follows = true;
            }
        } else if is_chmod && a[1..].chars().all(|c| "rwxXstugoa+-=,01234567".contains(c)) {
            operands.push(a);
        } else {
            for c in a[1..].chars() {
                match c {
                    'R' => recursive = true,
                    'L' => acc.follows = true,
                    _ => {}
                }
            }
        }
    }
    let files = if reference {
        &operands[..]
    } else {
        operands.get(1..).unwrap_or(&[])
    };
    for f in files {
        if recursive {
            acc.root(Path::new(f));
        }
        acc.write(Path::new(f));
    }
}

const UNIQ: Spec = Spec {
    opts: &[
        o('f', "skip-fields", Req, Eff::Plain),
        o('s', "skip-chars", Req, Eff::Plain),
        o('w', "check-chars", Req, Eff::Plain),
        o('\0', "all-repeated", OptV, Eff::Plain),
        o('\0', "group", OptV, Eff::Plain),
    ],
    permute: true,
};

/// uniq [INPUT [OUTPUT]]: the second operand is written.
fn uniq(args: &[String], acc: &mut Acc) {
    let p = parse(args, &UNIQ, acc);
    if let Some(input) = p.operands.first() {
        acc.read(&input.path());
    }
    for out in p.operands.iter().skip(1) {
        acc.write(&out.path());
    }
}

/// less: `+CMD` operands run less commands at start-up, and `!` there runs a shell.
fn less(args: &[String], acc: &mut Acc) {
    let spec = READERS
        .iter()
        .find(|(names, _)| names.contains(&"less"))
        .map_or(&GENERIC, |(_, spec)| spec);
    let p = parse(args, spec, acc);
    for op in &p.operands {
        if op.word.starts_with('+') {
            acc.forbid(
                op.word,
                "runs a less command at start-up (which may run a shell)",
            );
        } else {
            acc.read(&op.path());
        }
    }
}

const GIT_SUB: Spec = Spec {
    opts: &[
        o('m', "message", Req, Eff::Plain),
        o('n', "max-count", Req, Eff::Plain),
        o('b', "branch", Req, Eff::Plain),
        o('B', "", Req, Eff::Plain),
        o('X', "strategy-option", Req, Eff::Plain),
        o('F', "file", Req, Eff::Read),
        o('o', "output-directory", Req, Eff::Write),
        o('\0', "output", Req, Eff::Write),
        o('\0', "pathspec-from-file", Req, Eff::Read),
        o('\0', "reference", Req, Eff::Read),
        o('\0', "separate-git-dir", Req, Eff::Write),
        o('\0', "template", Req, Eff::Read),
        o(
            '\0',
            "upload-pack",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o(
            '\0',
            "receive-pack",
            Req,
            Eff::Forbid("runs another command"),
        ),
        o('\0', "exec", Req, Eff::Forbid("runs another command")),
        o(
            '\0',
            "config",
            Req,
            Eff::Forbid("configuration can run commands"),
        ),
        o('\0', "author", Req, Eff::Plain),
        o('\0', "committer", Req, Eff::Plain),
        o('\0', "grep", Req, Eff::Plain),
        o('\0', "since", Req, Eff::Plain),
        o('\0', "until", Req, Eff::Plain),
        o('\0', "after", Req, Eff::Plain),
        o('\0', "before", Req, Eff::Plain),
        o('\0', "date", Req, Eff::Plain),
        o('\0', "depth", Req, Eff::Plain),
        o('\0', "origin", Req, Eff::Plain),
        o('\0', "onto", Req, Eff::Plain),
        o('\0', "strategy", Req, Eff::Plain),
        o('\0', "format", OptV, Eff::Plain),
        o('\0', "pretty", OptV, Eff::Plain),
        o('\0', "color", OptV, Eff::Plain),
        o('\0', "abbrev", OptV, Eff::Plain),
        o('\0', "decorate", OptV, Eff::Plain),
        o(
            '\0',
            "open-files-in-pager",
            OptV,
            Eff::Forbid("runs a pager command"),
        ),
    ],
    permute: true,
};

const GIT_FORBIDDEN_SUBCOMMANDS: &[&str] = &[
    "filter-branch",
    "daemon",
    "instaweb",
    "shell",
    "mergetool",
    "difftool",
    "send-email",
    "upload-pack",
    "receive-pack",
];

/// `git -c KEY=VALUE`: only keys that cannot name a command are allowed.
fn git_config_ok(kv: &str) -> bool {
    let key = kv
        .split_once('=')
        .map_or(kv, |(k, _)| k)
        .to_ascii_lowercase();
    key.starts_with("color.") || key.starts_with("advice.") || key == "core.quotepath"
}

fn git(args: &[String], acc: &mut Acc) {
    let mut base: Option<PathBuf> = None;
    let under = |base: &Option<PathBuf>, v: &str| match base {
        Some(b) => b.join(v),
        None => PathBuf::from(v),
    };
    let mut i = 0;
    while let Some(a) = args.get(i).filter(|a| a.starts_with('-')) {
        i += 1;
        let a = a.as_str();
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (a, None),
        };
        let mut value = || {
            inline.or_else(|| {
                let v = args.get(i).map(String::as_str);
                i += usize::from(v.is_some());
                v
            })
        };
        match name {
            "-C" => {
                if let Some(d) = value() {
                    base = Some(under(&base, d));
                }
            }
            "-c" => {
                let allowed = value().is_none_or(git_config_ok);
                if !allowed {
                    acc.forbid(
                        "-c",
                        "configuration can run commands (core.pager, core.sshCommand, alias.*, ...)",
                    );
                }
            }
            "--config-env" => {
                value();
                acc.forbid("--config-env", "configuration can run commands");
            }
            "--exec-path" if inline.is_some() => {
                acc.forbid("--exec-path", "runs git commands from another directory");
            }
            "--git-dir" | "--work-tree" => {
                if let Some(d) = value() {
                    acc.read(&under(&base, d));
                }
            }
            "--namespace" | "--super-prefix" | "--list-cmds" | "--attr-source" => {
                value();
            }
            _ => {}
        }
    }
    let Some(sub) = args.get(i).map(String::as_str) else {
        return;
    };
    let rest = &args[i + 1..];
    let has = |w: &[&str]| rest.iter().any(|a| w.contains(&a.as_str()));
    let starts = |w: &str| rest.iter().any(|a| a.starts_with(w));
    if GIT_FORBIDDEN_SUBCOMMANDS.contains(&sub) {
        acc.forbid(sub, "runs other commands");
    }
    match sub {
        "submodule" if has(&["foreach"]) => acc.forbid("submodule foreach", "runs another command"),
        "bisect" if rest.first().is_some_and(|a| a == "run") => {
            acc.forbid("bisect run", "runs another command");
        }
        "rebase"
            if rest
                .iter()
                .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('x')) =>
        {
            acc.forbid("rebase -x", "runs another command");
        }
        "config"
            if !has(&[
                "--get",
                "--get-all",
                "--get-regexp",
                "--get-urlmatch",
                "--list",
                "-l",
            ]) && !rest.first().is_some_and(|a| a == "get" || a == "list") =>
        {
            acc.forbid("config", "changes configuration, which can run commands");
        }
        "clone" | "fetch" | "pull" | "ls-remote" | "archive" if has(&["-u"]) => {
            acc.forbid(&format!("{sub} -u"), "runs another command (--upload-pack)");
        }
        "grep" if rest.iter().any(|a| a.starts_with("-O")) => {
            acc.forbid("grep -O", "runs a pager command");
        }
        _ => {}
    }
    if matches!(sub, "clone" | "init") && starts("--template") {
        acc.forbid(
            &format!("{sub} --template"),
            "installs hooks that run commands",
        );
    }
    if sub == "clone" && starts("-c") {
        acc.forbid("clone -c", "configuration can run commands");
    }
    if rest
        .iter()
        .any(|a| a.starts_with("ext::") || a.starts_with("fd::"))
    {
        acc.forbid(sub, "ext::/fd:: transport runs another command");
    }
    let p = parse(rest, &GIT_SUB, acc);
    if sub == "grep" && has(&["--no-index", "--untracked"]) {
        acc.root(&base.clone().unwrap_or_else(|| PathBuf::from(".")));
    }
    for op in &p.operands {
        let w = op.word;
        if w.starts_with(":/") || w.contains("://") {
            continue;
        }
        acc.read(&under(&base, w));
        // REV:PATH names a file (as of a revision).
        if let Some((_, path)) = w.split_once(':')
            && !path.is_empty()
        {
            acc.read(&under(&base, path));
        }
    }
}

const PYTHON: Spec = Spec {
    opts: &[
        o('c', "", Req, Eff::Forbid("runs inline code")),
        o('m', "", Req, Eff::Plain),
        o('W', "", Req, Eff::Plain),
        o('X', "", Req, Eff::Plain),
        o('\0', "check-hash-based-pycs", Req, Eff::Plain),
    ],
    permute: false,
};

const NODE: Spec = Spec {
    opts: &[
        o('e', "eval", Req, Eff::Forbid("runs inline code")),
        o('p', "print", Req, Eff::Forbid("runs inline code")),
        o('r', "require", Req, Eff::Plain),
        o('\0', "import", Req, Eff::Plain),
        o('\0', "env-file", Req, Eff::Read),
        o('\0', "input-type", Req, Eff::Plain),
        o('\0', "loader", Req, Eff::Plain),
        o('\0', "experimental-loader", Req, Eff::Plain),
        o('\0', "conditions", Req, Eff::Plain),
        o('\0', "title", Req, Eff::Plain),
    ],
    permute: false,
};

const PERL: Spec = Spec {
    opts: &[
        o('e', "", Req, Eff::Forbid("runs inline code")),
        o('E', "", Req, Eff::Forbid("runs inline code")),
        o('I', "", Req, Eff::Read),
        o('i', "", OptV, Eff::InPlace),
        o('M', "", OptV, Eff::Plain),
        o('m', "", OptV, Eff::Plain),
        o('l', "", OptDigits, Eff::Plain),
        o('0', "", OptDigits, Eff::Plain),
        o('F', "", OptV, Eff::Plain),
        o('x', "", OptV, Eff::Plain),
        o('C', "", OptDigits, Eff::Plain),
        o('d', "", OptV, Eff::Plain),
        o('D', "", OptV, Eff::Plain),
    ],
    permute: false,
};

const RUBY: Spec = Spec {
    opts: &[
        o('e', "", Req, Eff::Forbid("runs inline code")),
        o('I', "", Req, Eff::Read),
        o('r', "", Req, Eff::Plain),
        o('C', "", Req, Eff::ChDir),
        o('E', "encoding", Req, Eff::Plain),
        o('i', "", OptV, Eff::InPlace),
        o('F', "", OptV, Eff::Plain),
        o('x', "", OptV, Eff::Plain),
        o('0', "", OptDigits, Eff::Plain),
        o('W', "", OptDigits, Eff::Plain),
        o('\0', "external-encoding", Req, Eff::Plain),
        o('\0', "internal-encoding", Req, Eff::Plain),
        o('\0', "enable", Req, Eff::Plain),
        o('\0', "disable", Req, Eff::Plain),
    ],
    permute: false,
};

/// Interpreters: options stop at the script; the script and its arguments are all reads.
fn interpreter(args: &[String], spec: &Spec, acc: &mut Acc) {
    let p = parse(args, spec, acc);
    for op in &p.operands {
        acc.read(&op.path());
        if p.in_place {
            acc.write(&op.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_arguments_are_refused() {
        let mut argv = vec!["cat".to_string()];
        argv.extend((0..MAX_ARGS).map(|i| format!("f{i}")));
        assert_eq!(
            analyze(&argv).unwrap_err(),
            ShellError::TooManyArgs(MAX_ARGS + 1)
        );
        argv.pop();
        assert_eq!(analyze(&argv).unwrap().reads.len(), MAX_ARGS - 1);
    }

    fn sp(line: &str) -> Vec<String> {
        split(line, true).unwrap_or_else(|e| panic!("split {line:?}: {e}"))
    }

    fn an(line: &str) -> CommandAnalysis {
        analyze(&sp(line)).unwrap_or_else(|e| panic!("analyze {line:?}: {e}"))
    }

    fn paths(v: &[&str]) -> Vec<PathBuf> {
        v.iter().map(PathBuf::from).collect()
    }

    fn forbidden(line: &str) -> String {
        let a = an(line);
        assert!(
            !a.forbidden.is_empty(),
            "{line:?} should be forbidden: {a:?}"
        );
        a.forbidden.join("; ")
    }

    fn clean(line: &str) -> CommandAnalysis {
        let a = an(line);
        assert!(
            a.forbidden.is_empty(),
            "{line:?} should not be forbidden: {a:?}"
        );
        a
    }

    // --- split ---

    #[test]
    fn splits_words_and_quotes() {
        assert_eq!(sp("  cat  a\tb  "), ["cat", "a", "b"]);
        assert_eq!(
            sp("echo 'a b' \"c d\" e\\ f"),
            ["echo", "a b", "c d", "e f"]
        );
        assert_eq!(sp("x 'it''s' a\"b\"c"), ["x", "its", "abc"]);
        assert_eq!(sp("x '' \"\""), ["x", "", ""]);
        assert_eq!(sp(r#"x "a\"b\\c\$d\`e\n""#), ["x", "a\"b\\c$d`e\\n"]);
        assert_eq!(sp(r"x 'a\b'"), ["x", "a\\b"]);
        assert_eq!(
            sp("x a\\\nb"),
            ["x", "ab"],
            "backslash-newline continues the line"
        );
        assert_eq!(
            sp("x 'a;b|c>d$e*f'"),
            ["x", "a;b|c>d$e*f"],
            "metachars quoted"
        );
        assert_eq!(sp(r"find . -name x \;"), ["find", ".", "-name", "x", ";"]);
        assert_eq!(
            sp("git log HEAD~1"),
            ["git", "log", "HEAD~1"],
            "~ mid-word is literal"
        );
        assert_eq!(
            sp("x a=b"),
            ["x", "a=b"],
            "assignment-looking operand is fine"
        );
        assert_eq!(sp("x 'a'#b"), ["x", "a#b"], "# mid-word is literal");
        assert_eq!(sp("x '~' \\~"), ["x", "~", "~"]);
        assert_eq!(split("", true), Ok(vec![]));
    }

    #[test]
    fn unterminated_quotes_and_trailing_backslash_fail_in_both_modes() {
        for shell in [true, false] {
            assert!(matches!(
                split("cat 'a", shell),
                Err(ShellError::Unterminated {
                    quote: "single",
                    pos: 4
                })
            ));
            assert!(matches!(
                split("cat \"a", shell),
                Err(ShellError::Unterminated {
                    quote: "double",
                    ..
                })
            ));
            assert!(matches!(
                split("cat \"a\\\"", shell),
                Err(ShellError::Unterminated { .. })
            ));
            assert_eq!(split("cat a\\", shell), Err(ShellError::TrailingBackslash));
            assert_eq!(split("cat a\0b", shell), Err(ShellError::Nul));
        }
    }

    #[test]
    fn metacharacters_refused_through_a_shell_and_bytes_otherwise() {
        let cases = [
            ("cat a; rm b", ';'),
            ("cat a & rm b", '&'),
            ("cat a && rm b", '&'),
            ("cat a | sh", '|'),
            ("cat a || true", '|'),
            ("cat `id`", '`'),
            ("cat $(id)", '$'),
            ("cat ${HOME}", '$'),
            ("cat $HOME/x", '$'),
            ("cat a > b", '>'),
            ("cat a >> b", '>'),
            ("cat a 2> b", '>'),
            ("cat < a", '<'),
            ("cat a\nrm b", '\n'),
            ("cat *.env", '*'),
            ("cat a?", '?'),
            ("cat [ab]", '['),
            ("ls ~", '~'),
            ("ls ~root/x", '~'),
            ("x --file=~/x", '~'),
            ("x PATH=a:~/b", '~'),
            ("cat {.env,x}", '{'),
            ("cat {a}", '{'),
            ("cat {},.env}", '{'),
            ("cat a{}", '{'),
            ("cat {}{a,b}", '{'),
            ("(cat a)", '('),
            ("cat a #comment", '#'),
            ("cat \"$HOME\"", '$'),
            ("cat \"`id`\"", '`'),
        ];
        for (line, ch) in cases {
            match split(line, true) {
                Err(ShellError::Metachar { ch: c, .. }) => assert_eq!(c, ch, "{line:?}"),
                other => panic!("{line:?} through a shell: {other:?}"),
            }
            let argv = split(line, false).unwrap_or_else(|e| panic!("{line:?} direct: {e}"));
            assert!(
                argv.concat().contains(ch),
                "{line:?}: {ch:?} kept as a byte: {argv:?}"
            );
        }
        assert_eq!(
            split("cat a;b $X", false),
            Ok(vec!["cat".into(), "a;b".into(), "$X".into()])
        );
        assert_eq!(split("ls ~", false), Ok(vec!["ls".into(), "~".into()]));
    }

    #[test]
    fn leading_assignment_refused_through_a_shell() {
        assert_eq!(
            split("LD_PRELOAD=/tmp/x.so cat a", true),
            Err(ShellError::Assignment("LD_PRELOAD".into()))
        );
        assert_eq!(
            sp("'A'=b cat")[0],
            "A=b",
            "a quoted name is not an assignment"
        );
        assert_eq!(split("A=b cat", false).map(|v| v.len()), Ok(2));
    }

    // --- analyze ---

    #[test]
    fn cat_reads_every_operand() {
        let a = clean("cat a b");
        assert_eq!(a.program, "cat");
        assert_eq!(a.reads, paths(&["a", "b"]));
        assert!(a.recursive_roots.is_empty() && a.writes.is_empty());
        assert_eq!(
            clean("/bin/cat -n -- -x /etc/passwd").reads,
            paths(&["-x", "/etc/passwd"])
        );
        assert_eq!(clean("cat - a").reads, paths(&["a"]), "stdin is not a path");
        assert_eq!(clean("head -n 5 a").reads, paths(&["a"]));
        assert_eq!(clean("head -n5 a").reads, paths(&["a"]));
        assert_eq!(clean("tail --lines 5 a").reads, paths(&["a"]));
        assert_eq!(clean("wc -l a b").reads, paths(&["a", "b"]));
        assert_eq!(clean("cat -n a").reads, paths(&["a"]), "cat -n is a flag");
        assert_eq!(clean("less -N a").reads, paths(&["a"]));
        assert_eq!(clean("less -o log a").writes, paths(&["log"]));
        assert!(forbidden("less '+!id' a").contains("less +!id"));
    }

    #[test]
    fn grep_pattern_and_files() {
        let a = clean("grep -n secret a.txt b.txt");
        assert_eq!(
            a.reads,
            paths(&["a.txt", "b.txt"]),
            "first operand is the pattern"
        );
        assert!(a.recursive_roots.is_empty());
        assert_eq!(
            clean("grep -e x -e y a").reads,
            paths(&["a"]),
            "with -e every operand is a file"
        );
        assert_eq!(clean("grep --regexp=x a").reads, paths(&["a"]));
        assert_eq!(clean("grep x").reads, Vec::<PathBuf>::new());
        assert_eq!(clean("grep x -- -f").reads, paths(&["-f"]));
    }

    #[test]
    fn grep_file_valued_options() {
        assert_eq!(clean("grep -f .env x").reads, paths(&[".env", "x"]));
        assert_eq!(clean("grep --file=.env x").reads, paths(&[".env", "x"]));
        assert_eq!(clean("grep --file .env x").reads, paths(&[".env", "x"]));
        assert_eq!(
            clean("grep --exclude-f=/etc/shadow p x").reads,
            paths(&["/etc/shadow", "x"]),
            "abbreviated long option"
        );
        // Ambiguous abbreviation (grep refuses it): its value is still taken as a read.
        assert!(
            clean("grep --fil=.env x")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert_eq!(
            clean("grep -f.env x").reads,
            paths(&[".env", "x"]),
            "attached"
        );
        assert_eq!(clean("grep -nf.env x").reads, paths(&[".env", "x"]));
        assert_eq!(
            clean("grep --exclude-from=/etc/shadow p a").reads,
            paths(&["/etc/shadow", "a"])
        );
        assert_eq!(clean("grep --color=auto p a").reads, paths(&["a"]));
    }

    #[test]
    fn grep_recursive() {
        let a = clean("grep -rf .env x");
        assert_eq!(
            a.reads,
            paths(&[".env", "x"]),
            "combined -r and -f with value"
        );
        assert_eq!(a.recursive_roots, paths(&["x"]));
        let a = clean("grep -r secret /home");
        assert_eq!(a.recursive_roots, paths(&["/home"]));
        assert!(a.reads.contains(&PathBuf::from("/home")));
        assert_eq!(
            clean("grep -r secret").recursive_roots,
            paths(&["."]),
            "defaults to ."
        );
        let a = clean("grep -Rn secret src");
        assert_eq!(a.recursive_roots, paths(&["src"]));
        assert!(a.follows_symlinks);
        assert_eq!(
            clean("grep secret src --recursive").recursive_roots,
            paths(&["src"]),
            "permuted"
        );
        assert_eq!(
            clean("grep --recur secret src").recursive_roots,
            paths(&["src"])
        );
        assert_eq!(
            clean("grep -d recurse secret src").recursive_roots,
            paths(&["src"])
        );
        assert_eq!(
            clean("grep --directories=rec s src").recursive_roots,
            paths(&["src"])
        );
        assert!(clean("grep -d skip s src").recursive_roots.is_empty());
        assert_eq!(clean("rgrep secret /etc").recursive_roots, paths(&["/etc"]));
        assert_eq!(clean("egrep -r 'a|b' d").recursive_roots, paths(&["d"]));
    }

    #[test]
    fn rg_always_walks() {
        assert_eq!(clean("rg secret").recursive_roots, paths(&["."]));
        assert_eq!(
            clean("rg -i secret a b").recursive_roots,
            paths(&["a", "b"])
        );
        assert_eq!(clean("rg -e secret a").recursive_roots, paths(&["a"]));
        assert_eq!(clean("rg --files /home").recursive_roots, paths(&["/home"]));
        let a = clean("rg -f .env -g '*.rs' src");
        assert!(a.reads.contains(&PathBuf::from(".env")));
        assert_eq!(a.recursive_roots, paths(&["src"]));
        assert!(forbidden("rg --pre ./evil x").contains("--pre"));
        assert!(clean("rg -L x").follows_symlinks);
    }

    #[test]
    fn find_walks_and_forbids() {
        let a = clean("find / -name x");
        assert_eq!(a.recursive_roots, paths(&["/"]));
        assert_eq!(clean("find -name x").recursive_roots, paths(&["."]));
        assert_eq!(
            clean("find a b -type f").recursive_roots,
            paths(&["a", "b"])
        );
        let f = forbidden(r"find / -name x -exec rm {} \;");
        assert!(f.contains("find -exec: runs another command"), "{f}");
        assert!(forbidden("find . -delete").contains("-delete"));
        assert!(forbidden("find . -execdir sh -c x +").contains("-execdir"));
        assert!(forbidden(r"find . -ok rm {} \;").contains("-ok"));
        assert!(forbidden(r"find . -okdir rm {} \;").contains("-okdir"));
        let a = an("find . -fprint /tmp/out");
        assert!(a.forbidden.join(";").contains("-fprint"));
        assert_eq!(a.writes, paths(&["/tmp/out"]));
        assert!(forbidden("find . -fprint0 o").contains("-fprint0"));
        assert!(forbidden("find . -fprintf o %p").contains("-fprintf"));
        assert!(forbidden("find . -fls o").contains("-fls"));
        assert!(forbidden("find -files0-from list").contains("-files0-from"));
        assert!(
            clean("find . -newer .env")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert!(
            clean("find . -newermm .env")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert!(
            !clean("find . -newermt 2024-01-01")
                .reads
                .contains(&PathBuf::from("2024-01-01"))
        );
        assert!(clean("find -L . -name x").follows_symlinks);
        // A -name value that looks like an option is not taken as a test.
        assert!(clean("find . -name -delete").forbidden.is_empty());
    }

    #[test]
    fn ls_du_tree() {
        assert_eq!(clean("ls -la src").reads, paths(&["src"]));
        assert!(clean("ls -la src").recursive_roots.is_empty());
        assert_eq!(clean("ls").reads, paths(&["."]));
        assert_eq!(clean("ls -lR /home").recursive_roots, paths(&["/home"]));
        assert_eq!(clean("ls -R").recursive_roots, paths(&["."]));
        // Through a shell `~` is refused; exec'd directly it is a file named `~`.
        assert!(matches!(
            split("ls -R ~", true),
            Err(ShellError::Metachar { ch: '~', .. })
        ));
        let direct = analyze(&split("ls -R ~", false).expect("split")).expect("analyze");
        assert_eq!(direct.recursive_roots, paths(&["~"]));
        assert_eq!(clean("du -sh").recursive_roots, paths(&["."]));
        assert_eq!(clean("du -d 1 /var").recursive_roots, paths(&["/var"]));
        assert!(forbidden("du --files0-from=list").contains("--files0-from"));
        assert_eq!(clean("tree -L 2 src").recursive_roots, paths(&["src"]));
        assert_eq!(clean("tree").recursive_roots, paths(&["."]));
        assert_eq!(clean("tree -o out.txt").writes, paths(&["out.txt"]));
    }

    #[test]
    fn sed_and_awk() {
        let a = clean("sed -n 1,5p a.txt");
        assert_eq!(a.reads, paths(&["a.txt"]), "first operand is the script");
        assert_eq!(clean("sed -e s/a/b/ x y").reads, paths(&["x", "y"]));
        assert_eq!(
            clean("sed -f script.sed x").reads,
            paths(&["script.sed", "x"])
        );
        let a = an("sed -i s/a/b/ f");
        assert!(
            a.forbidden
                .join(";")
                .contains("sed -i: edits files in place"),
            "{a:?}"
        );
        assert_eq!(a.writes, paths(&["f"]));
        assert!(forbidden("sed -i.bak s/a/b/ f").contains("-i"));
        assert!(forbidden("sed --in-place s/a/b/ f").contains("-i"));
        assert!(forbidden("sed -ni p f").contains("-i"));
        assert_eq!(clean("awk '{print $1}' a b").reads, paths(&["a", "b"]));
        assert_eq!(
            clean("awk -F: -f prog.awk /etc/passwd").reads,
            paths(&["prog.awk", "/etc/passwd"])
        );
        assert_eq!(clean("awk -v x=1 'BEGIN{}' f").reads, paths(&["f"]));
        assert!(forbidden("gawk -l ./evil.so 1 f").contains("-l"));
    }

    #[test]
    fn tar_modes() {
        let a = clean("tar -xf a.tar");
        assert_eq!(a.reads, paths(&["a.tar"]));
        assert_eq!(a.writes, paths(&["."]));
        let a = clean("tar xzf a.tgz -C out");
        assert_eq!(a.reads, paths(&["a.tgz"]), "old-style bundle");
        assert_eq!(a.writes, paths(&["out"]));
        let a = clean("tar -tvf a.tar");
        assert_eq!((a.reads, a.writes), (paths(&["a.tar"]), vec![]));
        let a = clean("tar -czf out.tgz src README");
        assert_eq!(a.writes, paths(&["out.tgz"]));
        assert_eq!(a.recursive_roots, paths(&["src", "README"]));
        let a = clean("tar -cf out.tar -C /etc shadow");
        assert_eq!(
            a.recursive_roots,
            paths(&["/etc/shadow"]),
            "operands are under -C"
        );
        let a = clean("tar cfX out.tar excl src");
        assert_eq!(a.writes, paths(&["out.tar"]));
        assert!(
            a.reads.contains(&PathBuf::from("excl")) && a.reads.contains(&PathBuf::from("src"))
        );
        assert!(forbidden("tar -xf a.tar --to-command=sh").contains("--to-command"));
        assert!(
            forbidden("tar -cf a.tar --checkpoint=1 --checkpoint-action=exec=id x")
                .contains("--checkpoint-action")
        );
        assert!(forbidden("tar -I ./evil -xf a.tar").contains("-I"));
        assert!(forbidden("tar --use-compress-program=./evil -xf a.tar").contains("-I"));
        assert!(forbidden("tar -cf a.tar -T list").contains("-T"));
        assert!(forbidden("tar -xPf a.tar").contains("-P"));
        assert!(forbidden("tar -xf host:a.tar").contains("remote archive"));
        assert!(clean("tar -xf ./dir/a:b.tar").forbidden.is_empty());
        assert!(clean("tar --force-local -xf c:a.tar").forbidden.is_empty());
    }

    #[test]
    fn cp_mv_rm_chmod() {
        let a = clean("cp .env /tmp/x");
        assert_eq!(a.reads, paths(&[".env"]));
        assert_eq!(a.writes, paths(&["/tmp/x"]));
        let a = clean("cp -r src dst");
        assert_eq!(a.recursive_roots, paths(&["src"]));
        assert_eq!(a.writes, paths(&["dst"]));
        assert_eq!(clean("cp -a src dst").recursive_roots, paths(&["src"]));
        let a = clean("cp -t /out a b");
        assert_eq!((a.reads, a.writes), (paths(&["a", "b"]), paths(&["/out"])));
        let a = clean("mv a b");
        assert_eq!((a.reads, a.writes), (paths(&["a"]), paths(&["a", "b"])));
        let a = clean("rm -rf build");
        assert_eq!(
            (a.recursive_roots, a.writes),
            (paths(&["build"]), paths(&["build"]))
        );
        assert_eq!(clean("rm a").writes, paths(&["a"]));
        let a = clean("chmod -R 600 keys");
        assert_eq!(
            (a.recursive_roots, a.writes),
            (paths(&["keys"]), paths(&["keys"]))
        );
        assert_eq!(clean("chmod -w f").writes, paths(&["f"]), "-w is a mode");
        assert_eq!(clean("chmod --reference=r f").writes, paths(&["f"]));
        assert_eq!(clean("chown root: f").writes, paths(&["f"]));
        assert_eq!(clean("uniq in out").writes, paths(&["out"]));
        assert_eq!(clean("sort -o out in").writes, paths(&["out"]));
    }

    #[test]
    fn git_paths_and_forbidden_options() {
        let a = clean("git diff -- src/a.rs");
        assert!(a.reads.contains(&PathBuf::from("src/a.rs")));
        assert!(
            clean("git show HEAD:.env")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert!(
            clean("git -C /srv/repo log a.txt")
                .reads
                .contains(&PathBuf::from("/srv/repo/a.txt"))
        );
        assert!(clean("git log --author alice -n 3").reads.is_empty());
        assert!(
            clean("git commit -m msg -F .env")
                .reads
                .contains(&PathBuf::from(".env"))
        );
        assert!(clean("git status").reads.is_empty());
        assert!(clean("git -c color.ui=never log").forbidden.is_empty());
        assert!(forbidden("git -c core.sshCommand=evil fetch").contains("-c"));
        assert!(forbidden("git -c core.pager=evil log").contains("-c"));
        assert!(forbidden("git -c alias.x=!sh x").contains("-c"));
        assert!(forbidden("git --exec-path=/tmp status").contains("--exec-path"));
        assert!(forbidden("git fetch --upload-pack=evil origin").contains("--upload-pack"));
        assert!(forbidden("git clone -u evil repo").contains("-u"));
        assert!(forbidden("git push --receive-pack=evil").contains("--receive-pack"));
        assert!(forbidden("git rebase --exec id main").contains("--exec"));
        assert!(forbidden("git rebase -x id main").contains("rebase -x"));
        assert!(forbidden("git submodule foreach id").contains("foreach"));
        assert!(forbidden("git bisect run ./t").contains("bisect run"));
        assert!(forbidden("git clone ext::sh x").contains("ext::"));
        assert!(forbidden("git config core.pager evil").contains("config"));
        assert!(clean("git config --get user.name").forbidden.is_empty());
        assert!(forbidden("git clone --template=/tmp/t r").contains("--template"));
        assert!(forbidden("git grep -Oevil x").contains("-O"));
        assert!(forbidden("git difftool").contains("difftool"));
        assert!(clean("git add -u").forbidden.is_empty());
    }

    #[test]
    fn interpreters_inline_code() {
        assert!(forbidden("python3 -c 'import os'").contains("python3 -c: runs inline code"));
        assert!(forbidden("python -Bc 'x'").contains("-c"));
        assert!(forbidden("node -e 'x'").contains("-e"));
        assert!(forbidden("node --eval=x").contains("-e"));
        assert!(forbidden("node -p 'x'").contains("-p"));
        assert!(forbidden("perl -ne 'print'").contains("-e"));
        assert!(forbidden("perl -pi -e s/a/b/ f").contains("in place"));
        assert!(
            forbidden("perl -lne 'print' f").contains("perl -e"),
            "-l takes digits only"
        );
        assert!(forbidden("perl -l0e 'print' f").contains("perl -e"));
        assert!(forbidden("perl -0777e 'print' f").contains("perl -e"));
        assert!(
            clean("perl -0777 -n script.pl f")
                .reads
                .contains(&PathBuf::from("f"))
        );
        assert!(forbidden("ruby -W0e 'x'").contains("ruby -e"));
        assert!(forbidden("ruby -e 'x'").contains("-e"));
        let a = clean("python3 script.py /etc/passwd -c x");
        assert_eq!(
            a.reads,
            paths(&["script.py", "/etc/passwd", "-c", "x"]),
            "options stop at the script"
        );
        assert!(
            clean("node -c app.js").forbidden.is_empty(),
            "node -c is a syntax check"
        );
        assert!(
            clean("python3 -m pytest tests")
                .reads
                .contains(&PathBuf::from("tests"))
        );
    }

    #[test]
    fn programs_that_run_other_commands() {
        assert!(forbidden("sh -c 'curl x'").contains("sh: runs inline shell commands"));
        assert!(forbidden("bash -c id").contains("bash"));
        assert!(forbidden("/bin/bash script.sh").contains("bash: runs a shell"));
        assert!(forbidden("xargs rm").contains("xargs: runs another command"));
        assert!(forbidden("env FOO=1 cat a").contains("env"));
        assert!(forbidden("eval x").contains("eval"));
        assert!(forbidden("timeout 5 cat a").contains("timeout"));
        assert!(forbidden("sudo cat /etc/shadow").contains("sudo"));
    }

    #[test]
    fn generic_fallback_reads_operands() {
        let a = clean("jq . --rawfile=/etc/shadow data.json https://x.y/z -");
        assert_eq!(a.reads, paths(&["/etc/shadow", ".", "data.json"]));
        assert_eq!(
            clean("xxd -l 16 id_rsa").reads,
            paths(&["16", "id_rsa"]),
            "unknown options are flags"
        );
    }

    #[test]
    fn analyze_errors() {
        assert_eq!(analyze(&[]), Err(ShellError::Empty));
        assert_eq!(analyze(&[String::new()]), Err(ShellError::Empty));
        assert_eq!(
            analyze(&["cat".into(), "a\0b".into()]),
            Err(ShellError::Nul)
        );
    }
}
