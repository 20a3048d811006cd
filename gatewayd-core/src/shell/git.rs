//! git: global options (`-C`, `-c`, `--git-dir`…), then a subcommand the gateway knows, whose
//! options are read from its own table (`git_tables`, `git_verbs`, `git_shared`). Options,
//! configuration, hooks and transports that can run commands are forbidden; every operand
//! is taken as a read (a `file://` URL as its path, other URLs as no file), and so is the
//! path of `REV:PATH`; the paths `mv`, `rm`, `restore`, `init`, `clone` and `worktree add`
//! change are writes.
use std::path::{Path, PathBuf};

use super::{
    ShellError,
    findings::Findings,
    git_tables::{SUBCOMMANDS, Sub, Verbs},
    options::{
        Long, OptionTable, ParsedArgs,
        ValueSyntax::{Flag, Required},
        Words, parse_options, relative_to, split_attached,
    },
};

/// git's global options (git.c takes them only exactly as written, one per word). Those
/// that name a directory or configuration (`-C -c --config-env --exec-path= --git-dir
/// --work-tree`) are handled by [`global_options`] before the table is looked at.
pub(super) const GLOBAL: OptionTable = OptionTable::gnu(&[]).inert(
    "-C= -c= --config-env= --exec-path[=] --git-dir= --work-tree= -v --version -h --help \
     --html-path --man-path --info-path -p --paginate -P --no-pager \
     --no-replace-objects --no-lazy-fetch --no-optional-locks --no-advice --bare \
     --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs \
     --namespace= --super-prefix= --list-cmds= --attr-source=",
);

/// Why a subcommand (or a subcommand's verb) the gateway does not know is forbidden.
const UNKNOWN_SUBCOMMAND: &str = "is not a git subcommand the gateway knows (aliases and external \
     git-* programs run what the analysis cannot see)";

/// Subcommands that run other commands.
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

/// `git config [--global …] SECTION.KEY`: one key and no value, git's older form of
/// `git config get` (a verb has no dot; a value after the key would set it).
fn is_config_get(rest: &[String]) -> bool {
    const READ_ONLY: &[&str] = &[
        "--global",
        "--system",
        "--local",
        "--worktree",
        "--show-origin",
        "--show-scope",
        "--includes",
        "--no-includes",
        "-z",
        "--null",
        "--bool",
        "--int",
        "--path",
    ];
    let (options, operands): (Vec<&String>, Vec<&String>) =
        rest.iter().partition(|a| a.starts_with('-'));
    matches!(operands.as_slice(), [key] if key.contains('.'))
        && options
            .iter()
            .all(|o| READ_ONLY.contains(&o.as_str()) || o.strip_prefix("--type=").is_some())
}

/// `git -c KEY=VALUE`: only keys that cannot name a command are allowed.
fn git_config_ok(kv: &str) -> bool {
    let key = kv
        .split_once('=')
        .map_or(kv, |(k, _)| k)
        .to_ascii_lowercase();
    key.starts_with("color.") || key.starts_with("advice.") || key == "core.quotepath"
}

/// The refusal of an unknown global option.
fn unknown_global(word: &str) -> ShellError {
    ShellError::UnknownOption {
        command: "git".into(),
        option: word.split_once('=').map_or(word, |(name, _)| name).into(),
    }
}

/// The global options before the subcommand: returns the `-C` directory, under which later
/// relative paths are.
fn global_options(
    words: &mut Words,
    findings: &mut Findings,
) -> Result<Option<PathBuf>, ShellError> {
    let mut dir: Option<PathBuf> = None;
    while let Some(word) = words.peek().filter(|w| w.starts_with('-')) {
        words.next();
        let (name, attached) = split_attached(word);
        match name {
            "-C" => {
                if let Some(d) = words.value(attached) {
                    dir = Some(relative_to(dir.as_deref(), d));
                }
            }
            "-c" => {
                let allowed = words.value(attached).is_none_or(git_config_ok);
                if !allowed {
                    findings.forbid(
                        "-c",
                        "configuration can run commands (core.pager, core.sshCommand, alias.*, ...)",
                    );
                }
            }
            "--config-env" => {
                words.value(attached);
                findings.forbid("--config-env", "configuration can run commands");
            }
            "--exec-path" if attached.is_some() => {
                findings.forbid("--exec-path", "runs git commands from another directory");
            }
            "--git-dir" | "--work-tree" => {
                if let Some(d) = words.value(attached) {
                    findings.read(&relative_to(dir.as_deref(), d));
                }
            }
            _ => {
                let option = if let Some(long) = name.strip_prefix("--") {
                    match GLOBAL.long(long) {
                        Long::Known(o) if o.long == long => o,
                        _ => return Err(unknown_global(word)),
                    }
                } else {
                    let mut letters = name[1..].chars();
                    match (letters.next().and_then(|c| GLOBAL.short(c)), letters.next()) {
                        (Some(o), None) => o,
                        _ => return Err(unknown_global(word)),
                    }
                };
                if option.value == Required && attached.is_none() {
                    words.next();
                }
            }
        }
    }
    Ok(dir)
}

/// The index of a verb in `args`: the first word that is neither an option of `before` nor
/// the value of one.
fn verb_index(args: &[String], before: &OptionTable) -> usize {
    let mut i = 0;
    while let Some(word) = args.get(i).filter(|w| w.starts_with('-') && *w != "-") {
        if word == "--" {
            break;
        }
        let takes_next = match word.strip_prefix("--") {
            Some(body) => {
                let (name, attached) = split_attached(body);
                attached.is_none()
                    && matches!(before.long(name), Long::Known(o) if o.value == Required)
            }
            None => word[1..]
                .char_indices()
                .find_map(|(at, c)| {
                    let o = before.short(c)?;
                    (o.value != Flag)
                        .then(|| o.value == Required && at + c.len_utf8() == word.len() - 1)
                })
                .unwrap_or(false),
        };
        i += 1 + usize::from(takes_next);
    }
    i
}

/// The table and arguments of a subcommand with verbs: the options before the verb are
/// parsed with `verbs.before`; returns the verb (`None` when there is none) and the table
/// and arguments after it.
fn choose_verb<'a>(
    sub: &str,
    verbs: &'static Verbs,
    args: &'a [String],
    findings: &mut Findings,
) -> Result<(Option<&'a str>, &'static OptionTable, &'a [String]), ShellError> {
    let at = verb_index(args, verbs.before);
    parse_options(&args[..at], verbs.before, findings).map_err(|e| in_subcommand(e, sub))?;
    let rest = &args[at..];
    let known = |name: &str| verbs.verbs.iter().find(|(v, _)| *v == name);
    let first = rest.first().map(String::as_str).filter(|w| *w != "--");
    let default = verbs.default.and_then(known);
    match (first, first.and_then(known), default) {
        (_, Some((verb, table)), _) => Ok((Some(verb), table, &rest[1..])),
        (None, None, Some((_, table))) => Ok((None, table, rest)),
        (Some(_), None, Some((_, table))) if verbs.word_is_default_operand => {
            Ok((None, table, rest))
        }
        (None, None, None) => Ok((None, verbs.before, rest)),
        (Some(word), None, _) => {
            findings.forbid(&format!("{sub} {word}"), UNKNOWN_SUBCOMMAND);
            Ok((None, verbs.before, &rest[rest.len()..]))
        }
    }
}

/// `e`, an unknown option of subcommand `sub`, named `git SUB`.
fn in_subcommand(e: ShellError, sub: &str) -> ShellError {
    match e {
        ShellError::UnknownOption { command, option } => ShellError::UnknownOption {
            command: format!("{command} {sub}"),
            option,
        },
        other => other,
    }
}

/// Which operands a subcommand writes (changes, creates, removes), by position.
fn written_operands(sub: &str, verb: Option<&str>, count: usize) -> std::ops::Range<usize> {
    match (sub, verb) {
        ("mv" | "rm" | "restore" | "init", _) => 0..count,
        ("clone", _) => 1.min(count)..count.min(2),
        ("worktree", Some("add")) => 0..count.min(1),
        _ => 0..0,
    }
}

/// `git [GLOBAL OPTIONS] SUBCOMMAND [ARGS]`: see the module documentation.
pub(super) fn git(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let mut words = Words::new(args);
    let dir = global_options(&mut words, findings)?;
    let Some(subcommand) = words.next() else {
        return Ok(());
    };
    let rest = words.rest();
    forbid_what_runs_commands(subcommand, rest, findings);
    if GIT_FORBIDDEN_SUBCOMMANDS.contains(&subcommand) {
        return Ok(());
    }
    let Some((_, sub)) = SUBCOMMANDS.iter().find(|(name, _)| *name == subcommand) else {
        findings.forbid(subcommand, UNKNOWN_SUBCOMMAND);
        return Ok(());
    };
    let (verb, table, rest) = match sub {
        Sub::Table(table) => (None, *table, rest),
        Sub::Verbs(verbs) => choose_verb(subcommand, verbs, rest, findings)?,
    };
    let parsed = parse_options(rest, table, findings).map_err(|e| in_subcommand(e, subcommand))?;
    let here = dir.as_deref().unwrap_or(Path::new("."));
    if subcommand == "grep" && parsed.recursive {
        findings.walk(here); // grep --no-index/--untracked: the working directory
    }
    if subcommand == "apply" {
        applied_patches(&parsed, dir.as_deref(), findings);
    }
    let written = written_operands(subcommand, verb, parsed.operands.len());
    for (i, operand) in parsed.operands.iter().enumerate() {
        let word = operand.word;
        if word.starts_with(":/") {
            continue; // a commit by message, `:/fix`
        }
        let path = relative_to(dir.as_deref(), word);
        if written.contains(&i) {
            findings.read_argument(word, &path);
            findings.write(&path);
            continue;
        }
        if parsed.recursive {
            findings.walk(&path); // diff/grep --no-index
            continue;
        }
        if subcommand == "check-ignore" {
            findings.look_at_argument(word, &path); // matched by name against ignore rules
            continue;
        }
        findings.read_argument(word, &path);
        // REV:PATH names a file (as of a revision).
        if super::uri::scheme(word).is_none()
            && let Some((_, file)) = word.split_once(':')
            && !file.is_empty()
        {
            findings.read(&relative_to(dir.as_deref(), file));
        }
    }
    Ok(())
}

/// `git apply`: unless it only looks at its patches (`--stat`, `--numstat`, `--summary`,
/// `--check` without `--apply`) or changes the index alone (`--cached`), each patch's files
/// are written, named in the patch ([`super::AppliedPatch`]). A patch from the input is not
/// seen: forbidden.
fn applied_patches(parsed: &ParsedArgs, dir: Option<&Path>, findings: &mut Findings) {
    let looks_only = ["stat", "numstat", "summary", "check"]
        .iter()
        .any(|o| parsed.has('\0', o))
        && !parsed.has('\0', "apply");
    if looks_only || parsed.has('\0', "cached") {
        return;
    }
    let strip = parsed.value_of('p', "").map_or(Some(1), |n| n.parse().ok());
    let Some(strip) = strip else {
        findings.forbid("-p", "takes a number");
        return;
    };
    let patches: Vec<&str> = parsed
        .operands
        .iter()
        .map(|o| o.word)
        .filter(|w| *w != "-")
        .collect();
    if patches.len() < parsed.operands.len() || patches.is_empty() {
        findings.forbid(
            "apply",
            "applies a patch from its input, which the check does not read: give the patch file",
        );
    }
    for file in patches {
        findings.patches.push(super::AppliedPatch {
            file: relative_to(dir, file),
            runs_in: dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            strip,
            directory: parsed.value_of('\0', "directory").map(PathBuf::from),
        });
    }
}

/// The subcommands, and the subcommand arguments `rest`, that run other commands.
fn forbid_what_runs_commands(sub: &str, rest: &[String], findings: &mut Findings) {
    let has = |w: &[&str]| rest.iter().any(|a| w.contains(&a.as_str()));
    let starts = |w: &str| rest.iter().any(|a| a.starts_with(w));
    if GIT_FORBIDDEN_SUBCOMMANDS.contains(&sub) {
        findings.forbid(sub, "runs other commands");
    }
    match sub {
        "submodule" if has(&["foreach"]) => {
            findings.forbid("submodule foreach", "runs another command");
        }
        "bisect" if rest.first().is_some_and(|a| a == "run") => {
            findings.forbid("bisect run", "runs another command");
        }
        "rebase"
            if rest
                .iter()
                .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('x')) =>
        {
            findings.forbid("rebase -x", "runs another command");
        }
        "config"
            if !has(&[
                "--get",
                "--get-all",
                "--get-regexp",
                "--get-urlmatch",
                "--list",
                "-l",
            ]) && !rest.first().is_some_and(|a| a == "get" || a == "list")
                && !is_config_get(rest) =>
        {
            findings.forbid("config", "changes configuration, which can run commands");
        }
        "clone" | "fetch" | "pull" | "ls-remote" | "archive" if has(&["-u"]) => {
            findings.forbid(&format!("{sub} -u"), "runs another command (--upload-pack)");
        }
        "grep" if starts("-O") => {
            findings.forbid("grep -O", "runs a pager command");
        }
        _ => {}
    }
    if matches!(sub, "clone" | "init") && starts("--template") {
        findings.forbid(
            &format!("{sub} --template"),
            "installs hooks that run commands",
        );
    }
    if sub == "clone" && starts("-c") {
        findings.forbid("clone -c", "configuration can run commands");
    }
    if rest
        .iter()
        .any(|a| a.starts_with("ext::") || a.starts_with("fd::"))
    {
        findings.forbid(sub, "ext::/fd:: transport runs another command");
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, forbidden, named, unknown_option};

    #[test]
    fn git_apply_writes_what_its_patch_names() {
        let a = clean("git -C sub apply -p2 --directory=lib fix.diff");
        let patch = crate::shell::AppliedPatch {
            file: PathBuf::from("sub/fix.diff"),
            runs_in: PathBuf::from("sub"),
            strip: 2,
            directory: Some(PathBuf::from("lib")),
        };
        assert_eq!(a.patches, [patch]);
        for line in [
            "git apply --check fix.diff",
            "git apply --stat a.diff",
            "git apply --cached fix.diff",
        ] {
            assert!(clean(line).patches.is_empty(), "{line}");
        }
        assert_eq!(clean("git apply --check --apply fix.diff").patches.len(), 1);
        for line in ["git apply", "git apply -"] {
            assert!(forbidden(line).contains("from its input"), "{line}");
        }
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
        for read in [
            "git config user.name",
            "git config --global --type=bool core.bare",
        ] {
            assert!(clean(read).forbidden.is_empty(), "{read}");
        }
        for write in [
            "git config user.name x",
            "git config edit",
            "git config --unset user.name",
            "git config -e",
            "git config --add core.pager x",
        ] {
            assert!(forbidden(write).contains("config"), "{write}");
        }
        assert!(forbidden("git clone --template=/tmp/t r").contains("--template"));
        assert!(forbidden("git grep -Oevil x").contains("-O"));
        assert!(forbidden("git difftool").contains("difftool"));
        assert!(clean("git add -u").forbidden.is_empty());
    }

    #[test]
    fn git_subcommands_and_options_are_known_or_refused() {
        assert!(forbidden("git frobnicate").contains("git frobnicate: is not a git subcommand"));
        assert!(forbidden("git stash frob").contains("git stash frob: is not a git subcommand"));
        assert_eq!(unknown_option("git log --frob"), named("git log", "--frob"));
        assert_eq!(unknown_option("git --frob status"), named("git", "--frob"));
        assert_eq!(
            unknown_option("git --git-d=x status"),
            named("git", "--git-d")
        );
        assert_eq!(
            unknown_option("git remote add -Q o u"),
            named("git remote", "-Q")
        );
        for line in [
            "git log -3 --oneline --no-decorate --stat",
            "git log -n 2 --format=%H --since=yesterday",
            "git show --stat HEAD",
            "git status --porcelain=v2 -uno",
            "git commit --no-verify --no-edit -m msg",
            "git diff --cached --name-only",
            "git stash -p",
            "git stash list --oneline",
            "git stash show -p 'stash@{0}'",
            "git reflog -5",
            "git remote -v show origin",
            "git notes --ref=r add -m x",
            "git worktree list --porcelain",
            "git config --get user.name",
            "git rev-parse --show-toplevel --abbrev-ref HEAD",
        ] {
            clean(line);
        }
    }

    #[test]
    fn git_options_and_operands_that_touch_files() {
        let a = clean("git log -L 1,5:src/a.rs");
        assert!(a.reads.contains(&PathBuf::from("src/a.rs")));
        // git takes `--no-ind` for `--no-index` and `--untr` for `--untracked`.
        for line in [
            "git grep --no-ind x",
            "git grep --untr x",
            "git grep --no-index x",
        ] {
            let a = clean(line);
            assert!(
                a.recursive_roots.contains(&PathBuf::from(".")),
                "{line}: {a:?}"
            );
        }
        let a = clean("git diff --no-index a b");
        assert_eq!(a.recursive_roots, [PathBuf::from("a"), PathBuf::from("b")]);
        let a = clean("git mv a b");
        assert_eq!(a.writes, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(clean("git rm -r --cached d").writes, [PathBuf::from("d")]);
        assert_eq!(
            clean("git worktree add ../w main").writes,
            [PathBuf::from("../w")]
        );
        let a = clean("git clone file:///srv/r%20x dst");
        assert_eq!(a.reads, [PathBuf::from("/srv/r x"), PathBuf::from("dst")]);
        assert_eq!(a.writes, [PathBuf::from("dst")]);
        let a = clean("git clone https://example.test/r.git");
        assert!(a.reads.is_empty() && a.writes.is_empty(), "{a:?}");
        assert!(forbidden("git clone file://h/r d").contains("host `h`"));
        assert!(forbidden("git add --pathspec-from-file=list").contains("--pathspec-from-file"));
        assert!(forbidden("git apply --unsafe-paths p.diff").contains("--unsafe-paths"));
        assert!(forbidden("git help --web log").contains("-w/--web"));
        assert!(forbidden("git archive --exec=x HEAD").contains("--exec"));
        assert!(
            clean("git archive -o out.tar --add-file=extra HEAD")
                .writes
                .contains(&PathBuf::from("out.tar"))
        );
    }
}
