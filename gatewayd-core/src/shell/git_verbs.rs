//! The git subcommands that take a verb (`git stash push`, `git remote add`, …): a table
//! per verb, from `git SUB VERB -h` (git 2.47); and those whose verbs share one table
//! (`bisect`, `config`, `submodule`: from their manual pages, as `-h` lists no options).
use super::{
    git_shared::DIFF,
    git_tables::{LOG, PATHSPEC_FROM_FILE, Verbs},
    options::{Effect, OptionTable, ValueSyntax::Required, option},
};

/// No option at all.
const NONE: OptionTable = OptionTable::git(&[]);

/// `-q --quiet`, the only option of several verbs.
const QUIET: OptionTable = OptionTable::git(&[]).inert("-q --quiet");

/// `git bisect VERB`: one table for every verb (`bisect run` is forbidden apart).
pub(super) const BISECT: OptionTable = OptionTable::git(&[])
    .inert("--term-old= --term-new= --term-good[=] --term-bad[=] --no-checkout --first-parent");

/// `git config`: its verbs (`get`, `list`, …) and its older `--get`-style options share one
/// table; everything but reading is forbidden by `git::forbid_what_runs_commands`.
pub(super) const CONFIG: OptionTable =
    OptionTable::git(&[option('f', "file", Required, Effect::Read)]).inert(
        "--global --system --local --worktree --blob= --all --regexp --value= --fixed-value \
         --url= -z --null --name-only --show-origin --show-scope --show-names -t= --type= \
         --no-type --bool --int --bool-or-int --bool-or-str --path --expiry-date --includes \
         --default= --comment= --append --replace-all --add --get --get-all --get-regexp \
         --get-urlmatch --remove-section --rename-section --unset --unset-all -l --list \
         --get-colorbool --get-color -e --edit",
    );

/// `git notes add/append/edit`: `-F` reads the message.
const NOTES_MESSAGE: OptionTable = OptionTable::git(&[option('F', "file", Required, Effect::Read)])
    .inert(
        "-m= --message= -c= --reedit-message= -C= --reuse-message= --allow-empty -f --force \
         --separator[=] --stripspace",
    );

/// `git notes [--ref R] VERB`.
pub(super) const NOTES: Verbs = Verbs {
    before: &OptionTable::git(&[]).inert("--ref="),
    verbs: &[
        ("list", &NONE),
        ("add", &NOTES_MESSAGE),
        (
            "copy",
            &OptionTable::git(&[]).inert("-f --force --stdin --for-rewrite="),
        ),
        ("append", &NOTES_MESSAGE),
        ("edit", &NOTES_MESSAGE),
        ("show", &NONE),
        (
            "merge",
            &OptionTable::git(&[])
                .inert("-v --verbose -q --quiet -s= --strategy= --commit --abort"),
        ),
        (
            "remove",
            &OptionTable::git(&[]).inert("--ignore-missing --stdin"),
        ),
        (
            "prune",
            &OptionTable::git(&[]).inert("-n --dry-run -v --verbose"),
        ),
        ("get-ref", &NONE),
    ],
    default: None,
    word_is_default_operand: false,
};

/// `git reflog [show] …` takes the log options; `expire`, `delete` their own.
pub(super) const REFLOG: Verbs = Verbs {
    before: &LOG,
    verbs: &[
        ("show", &LOG),
        ("list", &NONE),
        (
            "expire",
            &OptionTable::git(&[]).inert(
                "-n --dry-run --rewrite --updateref --verbose --expire= --expire-unreachable= \
                 --stale-fix --all --single-worktree",
            ),
        ),
        (
            "delete",
            &OptionTable::git(&[]).inert("-n --dry-run --rewrite --updateref --verbose"),
        ),
        ("exists", &NONE),
    ],
    default: Some("show"),
    word_is_default_operand: true,
};

/// `git remote [-v] VERB`.
pub(super) const REMOTE: Verbs = Verbs {
    before: &OptionTable::git(&[]).inert("-v --verbose"),
    verbs: &[
        (
            "add",
            &OptionTable::git(&[])
                .inert("-f --fetch --tags -t= --track= -m= --master= --mirror[=]"),
        ),
        ("rename", &OptionTable::git(&[]).inert("--progress")),
        ("remove", &NONE),
        ("rm", &NONE),
        (
            "set-head",
            &OptionTable::git(&[]).inert("-a --auto -d --delete"),
        ),
        ("show", &OptionTable::git(&[]).inert("-n")),
        ("prune", &OptionTable::git(&[]).inert("-n --dry-run")),
        ("update", &OptionTable::git(&[]).inert("-p --prune")),
        ("set-branches", &OptionTable::git(&[]).inert("--add")),
        ("get-url", &OptionTable::git(&[]).inert("--push --all")),
        (
            "set-url",
            &OptionTable::git(&[]).inert("--push --add --delete"),
        ),
    ],
    default: None,
    word_is_default_operand: false,
};

/// `git stash push` (and the older `save`): `--pathspec-from-file` takes unseen paths.
const STASH_PUSH: OptionTable = OptionTable::git(&[PATHSPEC_FROM_FILE]).inert(
    "-k --keep-index -S --staged -p --patch -q --quiet -u --include-untracked -a --all -m= \
     --message= --pathspec-file-nul",
);

/// `git stash [VERB]`: without a verb, or with options first, it is `push`; `list` takes
/// the log options, `show` the diff options.
pub(super) const STASH: Verbs = Verbs {
    before: &STASH_PUSH,
    verbs: &[
        ("push", &STASH_PUSH),
        ("save", &STASH_PUSH),
        ("list", &LOG),
        (
            "show",
            &OptionTable::git(&[])
                .inert("-u --include-untracked --only-untracked")
                .with(&[&DIFF]),
        ),
        ("pop", &OptionTable::git(&[]).inert("-q --quiet --index")),
        ("apply", &OptionTable::git(&[]).inert("-q --quiet --index")),
        ("drop", &QUIET),
        ("branch", &NONE),
        ("clear", &NONE),
        ("create", &NONE),
        (
            "store",
            &OptionTable::git(&[]).inert("-q --quiet -m= --message="),
        ),
    ],
    default: Some("push"),
    word_is_default_operand: false,
};

/// `git submodule [--quiet] VERB`: one table for every verb (`foreach` is forbidden apart);
/// `--reference` reads a repository.
pub(super) const SUBMODULE: OptionTable =
    OptionTable::git(&[option('\0', "reference", Required, Effect::Read)]).inert(
        "-q --quiet --progress --all -b= --branch= -f --force --cached --files -n \
         --summary-limit= --remote -N --no-fetch --checkout --merge --rebase --init --name= \
         --dissociate --recursive --depth= --recommend-shallow -j= --jobs= --single-branch \
         --default --filter=",
    );

/// `git worktree VERB`: `add PATH` writes PATH (`git::git`).
pub(super) const WORKTREE: Verbs = Verbs {
    before: &NONE,
    verbs: &[
        (
            "add",
            &OptionTable::git(&[]).inert(
                "-f --force -b= -B= --orphan -d --detach --checkout --lock --reason= -q \
                 --quiet --track --guess-remote --relative-paths",
            ),
        ),
        (
            "list",
            &OptionTable::git(&[]).inert("--porcelain -v --verbose --expire= -z"),
        ),
        ("lock", &OptionTable::git(&[]).inert("--reason=")),
        ("move", &OptionTable::git(&[]).inert("-f --force")),
        (
            "prune",
            &OptionTable::git(&[]).inert("-n --dry-run -v --verbose --expire="),
        ),
        ("remove", &OptionTable::git(&[]).inert("-f --force")),
        ("repair", &OptionTable::git(&[]).inert("--relative-paths")),
        ("unlock", &NONE),
    ],
    default: None,
    word_is_default_operand: false,
};
