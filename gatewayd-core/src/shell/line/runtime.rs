//! Where a word whose value is known only when the line runs (a command substitution's,
//! `"$(…)"`, or an environment variable's that holds no secret, `$PATH`) may stand: only where the command takes it as text, whatever it turns out to
//! be. Its inner line is analysed as commands of their own ([`super`]); what it prints
//! is not known, so it must not become a file, an option, a program or a URL.
//!
//! Allowed:
//! - the operands of `echo` and `printf`, which print their words, and of `basename` and
//!   `dirname`, which print parts of them;
//! - in one word (inside double quotes), the value of git's `-m`/`--message` (a commit's,
//!   a tag's, a merge's or a stash's message; a parent's number for `cherry-pick` and
//!   `revert`): `git commit -m "$(cat <<'EOF' … EOF)"`, as Claude Code writes commits. The
//!   option takes the next word whatever it is, and git's own analysis must show it did: run
//!   with [`RUNTIME_STAND_IN`] in that place, it finds the stand-in in no path, URL or
//!   forbidden option (so `git am -m "$(…)"`, where `-m` is a flag and the word a path, is
//!   refused).
//!
//! - the count of processors (`$(nproc)`, [`prints_a_number`]) attached to an option
//!   (`make -j$(nproc)`, `--jobs=$(nproc)`): a number there is a count to any program, and
//!   names no file the check must see;
//! - `$!` (or a variable set to it alone, `PID=$!`) alone as a word of `kill`, which takes
//!   it as the job it is ([`LAST_JOB`]): `python3 -m http.server & …; kill $!`.
//!
//! Everything else is refused with the reason a substitution had before: `cat "$(…)"`,
//! `cd "$(…)"`, `$(…) args`, `git commit -m $(…)` (outside quotes bash splits the value into
//! words), a redirection to `"$(…)"`, an assignment's value. One exception is the walk's
//! ([`super::found`]): a word that is only a substitution, outside quotes, whose line is a
//! list of paths (`wc -l $(git ls-files)`) stands for the files below the list's roots.
use super::{unanalysable, words::RUNTIME_STAND_IN};
use crate::shell::{LAST_JOB, ShellError, analyze};

/// Programs whose operands are text, not files: a value known only when the line runs may
/// be one of them, and xargs may give them any input (`seq 3 | xargs -I{} echo item {}`).
pub(super) const TEXT_PROGRAMS: [&str; 4] = ["echo", "printf", "basename", "dirname"];

/// A word of a command's argv that holds a command substitution.
#[derive(Debug, Clone)]
pub(super) struct RuntimeWord {
    /// Its place in argv.
    pub(super) index: usize,
    /// Outside double quotes: bash may make several words of it.
    pub(super) splits: bool,
    /// Why it is known only when the line runs (the refusal's reason).
    pub(super) why: String,
    /// Each value in it is a command substitution that prints a number
    /// ([`prints_a_number`]).
    pub(super) numbers_only: bool,
}

/// Whether the command substitution of `line` prints a number and nothing else: the count
/// of processors (`nproc`, `getconf _NPROCESSORS_ONLN`).
pub(super) fn prints_a_number(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    matches!(
        words.as_slice(),
        ["nproc"] | ["nproc", "--all"] | ["getconf", "_NPROCESSORS_ONLN" | "_NPROCESSORS_CONF"]
    )
}

/// Whether `word` is an option with its value attached after its name (`-j…`, `--jobs=…`),
/// the value holding every stand-in: a number there is a count, whatever the program.
fn attached_option_value(word: &str) -> bool {
    let Some(body) = word.strip_prefix('-') else {
        return false;
    };
    let value_at = match body.strip_prefix('-') {
        Some(long) => long.find('=').map(|i| i + 2),
        None => body.chars().next().map(|c| c.len_utf8() + 1),
    };
    // The option's name is written out: no part of it comes from a value (each stand-in
    // starts with its marker).
    let marker = &RUNTIME_STAND_IN[..1];
    value_at.is_some_and(|at| at < word.len() && !word[..at].contains(marker))
}

/// Refuses `argv` unless each of its `runtime` words stands where its command takes text.
pub(super) fn check(argv: &[String], runtime: &[RuntimeWord]) -> Result<(), ShellError> {
    if runtime.is_empty() {
        return Ok(());
    }
    let refused = || Err(unanalysable(runtime[0].why.clone()));
    let Some(program) = argv.first() else {
        return refused();
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    if runtime.iter().any(|w| w.index == 0) {
        return refused();
    }
    let counts = runtime
        .iter()
        .all(|w| w.numbers_only && attached_option_value(&argv[w.index]));
    match name {
        _ if TEXT_PROGRAMS.contains(&name) => Ok(()),
        _ if counts => Ok(()),
        "kill" if runtime.iter().all(|w| argv[w.index] == LAST_JOB) => Ok(()),
        "git" => {
            let messages = runtime
                .iter()
                .all(|w| !w.splits && is_message_value(argv, w.index));
            if messages && git_ignores_the_stand_in(argv)? {
                Ok(())
            } else {
                refused()
            }
        }
        _ => refused(),
    }
}

/// Whether `argv[i]` is written as the value of `-m`/`--message`: after `-m`, `--message` or
/// a cluster of short options that ends in `m` (`-am`), or attached (`-mTEXT`,
/// `--message=TEXT`).
fn is_message_value(argv: &[String], i: usize) -> bool {
    let word = argv[i].as_str();
    let before = argv[i - 1].as_str();
    let after_option = before == "--message"
        || before
            .strip_prefix('-')
            .and_then(|cluster| cluster.strip_suffix('m'))
            .is_some_and(|flags| flags.bytes().all(|b| b.is_ascii_alphabetic()));
    after_option || word.starts_with("-m") || word.starts_with("--message=")
}

/// Whether git's analysis of `argv` consumes every stand-in as an option's value: none in a
/// path, a URL or a finding, and nothing forbidden.
fn git_ignores_the_stand_in(argv: &[String]) -> Result<bool, ShellError> {
    let a = analyze(argv)?;
    let holds = |s: &str| s.contains(RUNTIME_STAND_IN);
    let in_paths = a
        .reads
        .iter()
        .chain(&a.writes)
        .chain(&a.recursive_roots)
        .any(|p| holds(&p.to_string_lossy()));
    Ok(a.forbidden.is_empty() && !in_paths && !a.urls.iter().any(|u| holds(u)))
}
