//! git: global options (`-C`, `-c`, `--git-dir`…), then a subcommand whose options are read
//! from one table for all subcommands. Configuration, hooks and transports that can run
//! commands are forbidden; every operand is taken as a read, and so is the path of
//! `REV:PATH`.
use std::path::{Path, PathBuf};

use super::{
    findings::Findings,
    options::{
        Effect, OptionTable, RUNS_ANOTHER_COMMAND,
        ValueSyntax::{AttachedOnly, Required},
        Words, long_option, option, parse_options, relative_to, short_option, split_attached,
    },
};

/// The options of git's subcommands, one table for all: the file-valued ones and those
/// that run a program.
const GIT_SUBCOMMAND: OptionTable = OptionTable::gnu(&[
    option('m', "message", Required, Effect::None),
    option('n', "max-count", Required, Effect::None),
    option('b', "branch", Required, Effect::None),
    short_option('B', Required, Effect::None),
    option('X', "strategy-option", Required, Effect::None),
    option('F', "file", Required, Effect::Read),
    option('o', "output-directory", Required, Effect::Write),
    long_option("output", Required, Effect::Write),
    long_option("pathspec-from-file", Required, Effect::Read),
    long_option("reference", Required, Effect::Read),
    long_option("separate-git-dir", Required, Effect::Write),
    long_option("template", Required, Effect::Read),
    long_option("upload-pack", Required, RUNS_ANOTHER_COMMAND),
    long_option("receive-pack", Required, RUNS_ANOTHER_COMMAND),
    long_option("exec", Required, RUNS_ANOTHER_COMMAND),
    long_option(
        "config",
        Required,
        Effect::Forbid("configuration can run commands"),
    ),
    long_option("author", Required, Effect::None),
    long_option("committer", Required, Effect::None),
    long_option("grep", Required, Effect::None),
    long_option("since", Required, Effect::None),
    long_option("until", Required, Effect::None),
    long_option("after", Required, Effect::None),
    long_option("before", Required, Effect::None),
    long_option("date", Required, Effect::None),
    long_option("depth", Required, Effect::None),
    long_option("origin", Required, Effect::None),
    long_option("onto", Required, Effect::None),
    long_option("strategy", Required, Effect::None),
    long_option("format", AttachedOnly, Effect::None),
    long_option("pretty", AttachedOnly, Effect::None),
    long_option("color", AttachedOnly, Effect::None),
    long_option("abbrev", AttachedOnly, Effect::None),
    long_option("decorate", AttachedOnly, Effect::None),
    long_option(
        "open-files-in-pager",
        AttachedOnly,
        Effect::Forbid("runs a pager command"),
    ),
]);

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

/// `git -c KEY=VALUE`: only keys that cannot name a command are allowed.
fn git_config_ok(kv: &str) -> bool {
    let key = kv
        .split_once('=')
        .map_or(kv, |(k, _)| k)
        .to_ascii_lowercase();
    key.starts_with("color.") || key.starts_with("advice.") || key == "core.quotepath"
}

/// `git [GLOBAL OPTIONS] SUBCOMMAND [ARGS]`: see the module documentation.
pub(super) fn git(args: &[String], findings: &mut Findings) {
    // The `-C` directory, which later relative paths are under.
    let mut dir: Option<PathBuf> = None;
    let mut words = Words::new(args);
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
            "--namespace" | "--super-prefix" | "--list-cmds" | "--attr-source" => {
                words.value(attached);
            }
            _ => {}
        }
    }
    let Some(subcommand) = words.next() else {
        return;
    };
    let rest = words.rest();
    forbid_what_runs_commands(subcommand, rest, findings);
    let parsed = parse_options(rest, &GIT_SUBCOMMAND, findings);
    if subcommand == "grep" && rest.iter().any(|a| a == "--no-index" || a == "--untracked") {
        findings.walk(dir.as_deref().unwrap_or(Path::new(".")));
    }
    for operand in &parsed.operands {
        let word = operand.word;
        if word.starts_with(":/") || word.contains("://") {
            continue;
        }
        findings.read(&relative_to(dir.as_deref(), word));
        // REV:PATH names a file (as of a revision).
        if let Some((_, path)) = word.split_once(':')
            && !path.is_empty()
        {
            findings.read(&relative_to(dir.as_deref(), path));
        }
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
            ]) && !rest.first().is_some_and(|a| a == "get" || a == "list") =>
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

    use crate::shell::test_support::{clean, forbidden};

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
}
