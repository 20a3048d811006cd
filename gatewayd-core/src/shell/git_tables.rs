//! The option tables of the git subcommands the gateway knows (git 2.47, and 2.39's), one per
//! subcommand, from `git SUB -h` and, where `-h` does not list everything (log, show, diff,
//! rev-list, format-patch, shortlog, blame, rev-parse), the manual pages; `help_check` proves
//! them against both. Options that read, write or run are typed; the rest are inert words.
//! The subcommands with verbs (`stash push`, `remote add`, …) are in `git_verbs`.
use super::{
    git_shared::{DIFF, MERGE_DIFF, REV},
    git_verbs::{BISECT, CONFIG, NOTES, REFLOG, REMOTE, STASH, SUBMODULE, WORKTREE},
    options::{
        Effect, OptionSpec, OptionTable, RUNS_ANOTHER_COMMAND,
        ValueSyntax::{AttachedOnly, Flag, Required},
        long_option, option, short_option,
    },
};

/// How a subcommand's arguments are read.
pub(super) enum Sub {
    /// One table for every argument.
    Table(&'static OptionTable),
    /// A verb chooses the table (`git stash push`, `git remote add`).
    Verbs(&'static Verbs),
}

/// A subcommand whose first operand is a verb with its own options (`verbs.verbs` reads as
/// git's own word for them).
#[allow(clippy::struct_field_names)]
pub(super) struct Verbs {
    /// Options allowed before the verb (`git remote -v show`, `git notes --ref R add`).
    pub(super) before: &'static OptionTable,
    /// The verbs and their tables.
    pub(super) verbs: &'static [(&'static str, &'static OptionTable)],
    /// The verb meant when none is written (`git stash -p` is `push`, `git reflog` is
    /// `show`).
    pub(super) default: Option<&'static str>,
    /// Whether a first word that is no verb is an operand of the default verb (`git reflog
    /// HEAD`); otherwise it is refused (`git stash frob`, as git does).
    pub(super) word_is_default_operand: bool,
}

/// `--pathspec-from-file=F`: paths from a file, which cannot be checked.
pub(super) const PATHSPEC_FROM_FILE: OptionSpec =
    long_option("pathspec-from-file", Required, Effect::NamesFrom);

/// Every subcommand the gateway knows. Any other is refused (aliases and `git-*` programs
/// on the PATH run what the gateway cannot see); the subcommands that run commands are
/// forbidden by `git::forbid_what_runs_commands` before their options are read.
pub(super) const SUBCOMMANDS: &[(&str, Sub)] = &[
    ("add", Sub::Table(&ADD)),
    ("am", Sub::Table(&AM)),
    ("apply", Sub::Table(&APPLY)),
    ("archive", Sub::Table(&ARCHIVE)),
    ("bisect", Sub::Table(&BISECT)),
    ("blame", Sub::Table(&BLAME)),
    ("branch", Sub::Table(&BRANCH)),
    ("cat-file", Sub::Table(&CAT_FILE)),
    ("check-ignore", Sub::Table(&CHECK_IGNORE)),
    ("checkout", Sub::Table(&CHECKOUT)),
    ("cherry-pick", Sub::Table(&CHERRY_PICK)),
    ("clean", Sub::Table(&CLEAN)),
    ("clone", Sub::Table(&CLONE)),
    ("commit", Sub::Table(&COMMIT)),
    ("config", Sub::Table(&CONFIG)),
    ("describe", Sub::Table(&DESCRIBE)),
    ("diff", Sub::Table(&DIFF_COMMAND)),
    ("fetch", Sub::Table(&FETCH)),
    ("for-each-ref", Sub::Table(&FOR_EACH_REF)),
    ("format-patch", Sub::Table(&FORMAT_PATCH)),
    ("grep", Sub::Table(&GREP)),
    ("help", Sub::Table(&HELP)),
    ("init", Sub::Table(&INIT)),
    ("log", Sub::Table(&LOG)),
    ("ls-files", Sub::Table(&LS_FILES)),
    ("ls-remote", Sub::Table(&LS_REMOTE)),
    ("ls-tree", Sub::Table(&LS_TREE)),
    ("merge", Sub::Table(&MERGE)),
    ("merge-base", Sub::Table(&MERGE_BASE)),
    ("mv", Sub::Table(&MV)),
    ("notes", Sub::Verbs(&NOTES)),
    ("pull", Sub::Table(&PULL)),
    ("push", Sub::Table(&PUSH)),
    ("rebase", Sub::Table(&REBASE)),
    ("reflog", Sub::Verbs(&REFLOG)),
    ("remote", Sub::Verbs(&REMOTE)),
    ("reset", Sub::Table(&RESET)),
    ("restore", Sub::Table(&RESTORE)),
    ("rev-list", Sub::Table(&REV_LIST)),
    ("rev-parse", Sub::Table(&REV_PARSE)),
    ("revert", Sub::Table(&REVERT)),
    ("rm", Sub::Table(&RM)),
    ("shortlog", Sub::Table(&SHORTLOG)),
    ("show", Sub::Table(&LOG)),
    ("show-ref", Sub::Table(&SHOW_REF)),
    ("stash", Sub::Verbs(&STASH)),
    ("status", Sub::Table(&STATUS)),
    ("submodule", Sub::Table(&SUBMODULE)),
    ("switch", Sub::Table(&SWITCH)),
    ("tag", Sub::Table(&TAG)),
    ("version", Sub::Table(&VERSION)),
    ("worktree", Sub::Verbs(&WORKTREE)),
];

const ADD: OptionTable = OptionTable::git(&[PATHSPEC_FROM_FILE]).inert(
    "-n --dry-run -v --verbose -i --interactive -p --patch -e --edit -f --force -u --update \
     --renormalize -N --intent-to-add -A --all --ignore-removal --refresh --ignore-errors \
     --ignore-missing --sparse --chmod= --pathspec-file-nul",
);

const AM: OptionTable = OptionTable::git(&[]).inert(
    "-i --interactive -n --no-verify --verify -3 --3way -q --quiet -s --signoff -u --utf8 -k \
     --keep --keep-non-patch -m --message-id --keep-cr -c --scissors --quoted-cr= \
     --whitespace= --ignore-space-change --ignore-whitespace --directory= --exclude= \
     --include= -C= -p= --patch-format= --reject --resolvemsg= --continue -r --resolved \
     --skip --abort --quit --show-current-patch[=] --retry --allow-empty \
     --committer-date-is-author-date --ignore-date --rerere-autoupdate -S[=] --gpg-sign[=] \
     --empty=",
);

const APPLY: OptionTable = OptionTable::git(&[
    long_option(
        "unsafe-paths",
        Flag,
        Effect::Forbid("writes outside the work tree"),
    ),
    long_option("build-fake-ancestor", Required, Effect::Write),
])
.inert(
    "--exclude= --include= -p= --no-add --add --stat --numstat --summary --check --index -N \
     --intent-to-add --cached --apply -3 --3way --ours --theirs --union -z -C= --whitespace= \
     --ignore-space-change --ignore-whitespace -R --reverse --unidiff-zero --reject \
     --allow-overlap -v --verbose -q --quiet --inaccurate-eof --recount --directory= \
     --allow-empty",
);

const ARCHIVE: OptionTable = OptionTable::git(&[
    long_option("add-file", Required, Effect::Read),
    option('o', "output", Required, Effect::Write),
    long_option("exec", Required, RUNS_ANOTHER_COMMAND),
])
.inert(
    "--format= --prefix= --add-virtual-file= --worktree-attributes -v --verbose --mtime= -N -l \
     --list --remote=",
)
.numeric();

const BLAME: OptionTable = OptionTable::git(&[
    long_option("ignore-revs-file", Required, Effect::Read),
    short_option('S', Required, Effect::Read),
    long_option("contents", Required, Effect::Read),
])
.inert(
    "--incremental -b --root --show-stats --progress --score-debug -f --show-name -n \
     --show-number -p --porcelain --line-porcelain -c -t -l -s -e --show-email -w \
     --ignore-rev= --color-lines --color-by-age --minimal -C[=] -M[=] -L= --abbrev[=] -h",
)
.with(&[&REV]);

const BRANCH: OptionTable = OptionTable::git(&[]).inert(
    "-v --verbose -q --quiet -t[=] --track[=] -u= --set-upstream-to= --unset-upstream \
     --color[=] -r --remotes --contains= --no-contains= --abbrev[=] -a --all -d --delete -D -m \
     --move -M --omit-empty -c --copy -C -l --list --show-current --create-reflog \
     --edit-description -f --force --merged= --no-merged= --column[=] --sort= --points-at= -i \
     --ignore-case --recurse-submodules --format=",
);

const CAT_FILE: OptionTable = OptionTable::git(&[]).inert(
    "-e -p -t -s --allow-unknown-type --use-mailmap --mailmap --batch[=] --batch-check[=] -z -Z \
     --batch-command[=] --batch-all-objects --buffer --follow-symlinks --unordered \
     --textconv --filters --path=",
);

const CHECK_IGNORE: OptionTable = OptionTable::git(&[])
    .inert("-q --quiet -v --verbose --stdin -z -n --non-matching --no-index --index");

const CHECKOUT: OptionTable = OptionTable::git(&[PATHSPEC_FROM_FILE]).inert(
    "-b= -B= -l --guess --overlay -q --quiet --recurse-submodules[=] --progress -m --merge \
     --conflict= -d --detach -t[=] --track[=] -f --force --orphan= --overwrite-ignore \
     --ignore-other-worktrees -2 --ours -3 --theirs -p --patch --ignore-skip-worktree-bits \
     --pathspec-file-nul",
);

const CHERRY_PICK: OptionTable = OptionTable::git(&[]).inert(
    "--quit --continue --abort --skip --cleanup= -n --no-commit --commit -e --edit -s \
     --signoff -m= --mainline= --rerere-autoupdate --strategy= -X= --strategy-option= -S[=] \
     --gpg-sign[=] -x --ff --allow-empty --allow-empty-message --keep-redundant-commits \
     --empty=",
);

const CLEAN: OptionTable = OptionTable::git(&[])
    .inert("-q --quiet -n --dry-run -f --force -i --interactive -d -e= --exclude= -x -X");

/// The reason a template directory is forbidden.
pub(super) const INSTALLS_HOOKS: Effect = Effect::Forbid("installs hooks that run commands");

const CLONE: OptionTable = OptionTable::git(&[
    long_option("template", Required, INSTALLS_HOOKS),
    option('u', "upload-pack", Required, RUNS_ANOTHER_COMMAND),
    option(
        'c',
        "config",
        Required,
        Effect::Forbid("configuration can run commands"),
    ),
    long_option("reference", Required, Effect::Read),
    long_option("reference-if-able", Required, Effect::Read),
    long_option("separate-git-dir", Required, Effect::Write),
])
.inert(
    "-v --verbose -q --quiet --progress --reject-shallow -n --no-checkout --checkout --bare \
     --mirror -l --local --no-hardlinks --hardlinks -s --shared --recurse-submodules[=] \
     --recursive[=] -j= --jobs= --dissociate -o= --origin= -b= --branch= --depth= \
     --shallow-since= --shallow-exclude= --single-branch --no-tags --tags \
     --shallow-submodules --ref-format= --server-option= -4 --ipv4 -6 --ipv6 --filter= \
     --also-filter-submodules --remote-submodules --sparse --bundle-uri=",
);

const COMMIT: OptionTable = OptionTable::git(&[
    option('F', "file", Required, Effect::Read),
    option('t', "template", Required, Effect::Read),
    PATHSPEC_FROM_FILE,
])
.inert(
    "-q --quiet -v --verbose --author= --date= -m= --message= -c= --reedit-message= -C= \
     --reuse-message= --fixup= --squash= --reset-author --trailer= -s --signoff -e --edit \
     --cleanup= --status -S[=] --gpg-sign[=] -a --all -i --include --interactive -p --patch \
     -o --only -n --no-verify --verify --dry-run --short --branch --ahead-behind --porcelain \
     --long -z --null --amend --no-post-rewrite --post-rewrite -u[=] --untracked-files[=] \
     --pathspec-file-nul --allow-empty --allow-empty-message",
);

const DESCRIBE: OptionTable = OptionTable::git(&[]).inert(
    "--contains --debug --all --tags --long --first-parent --abbrev[=] --exact-match \
     --candidates= --match= --exclude= --always --dirty[=] --broken[=]",
);

/// `git diff`: the diff options, and `--no-index`, which compares (walks) two paths
/// outside any repository.
const DIFF_COMMAND: OptionTable =
    OptionTable::git(&[long_option("no-index", Flag, Effect::Recursive)])
        .inert("--cached --staged --merge-base -0 -1 --base -2 --ours -3 --theirs -c --cc")
        .with(&[&DIFF]);

const FETCH: OptionTable =
    OptionTable::git(&[long_option("upload-pack", Required, RUNS_ANOTHER_COMMAND)]).inert(
        "-v --verbose -q --quiet --all --set-upstream -a --append --atomic -f --force -m \
     --multiple -t --tags -n -j= --jobs= --prefetch -p --prune -P --prune-tags \
     --recurse-submodules[=] --dry-run --porcelain --write-fetch-head -k --keep -u \
     --update-head-ok --progress --depth= --shallow-since= --shallow-exclude= --deepen= \
     --unshallow --refetch --update-shallow --refmap= -o= --server-option= -4 --ipv4 -6 \
     --ipv6 --negotiation-tip= --negotiate-only --filter= --auto-maintenance --auto-gc \
     --show-forced-updates --write-commit-graph --stdin",
    );

const FOR_EACH_REF: OptionTable = OptionTable::git(&[]).inert(
    "-s --shell -p --perl --python --tcl --omit-empty --count= --format= --color[=] \
     --exclude= --sort= --points-at= --merged= --no-merged= --contains= --no-contains= \
     --ignore-case --stdin --include-root-refs",
);

const FORMAT_PATCH: OptionTable = OptionTable::git(&[
    option('o', "output-directory", Required, Effect::Write),
    long_option("description-file", Required, Effect::Read),
    long_option("signature-file", Required, Effect::Read),
])
.inert(
    "-n --numbered -N --no-numbered -s --signoff --stdout --cover-letter --numbered-files \
     --suffix= --start-number= -v= --reroll-count= --filename-max-length= --rfc[=] \
     --cover-from-description= --subject-prefix= -k --keep-subject --no-binary --binary \
     --zero-commit --ignore-if-in-upstream -p --no-stat --add-header= --to= --cc= --from[=] \
     --in-reply-to= --attach[=] --inline[=] --thread[=] --signature= --base= -q --quiet \
     --progress --interdiff= --range-diff= --creation-factor= --force-in-body-from \
     --always --encode-email-headers --root",
)
.with(&[&DIFF, &REV])
.numeric();

/// `git grep`: `-f` reads patterns, `-O` runs a pager on the files; `--no-index` and
/// `--untracked` search files git does not track: they walk the operands and the working
/// directory (`git::git`).
const GREP: OptionTable = OptionTable::git(&[
    short_option('f', Required, Effect::Read),
    long_option("no-index", Flag, Effect::Recursive),
    long_option("untracked", Flag, Effect::Recursive),
    option(
        'O',
        "open-files-in-pager",
        AttachedOnly,
        Effect::Forbid("runs a pager command"),
    ),
])
.inert(
    "--cached --index --exclude-standard --recurse-submodules -v \
     --invert-match -i --ignore-case -w --word-regexp -a --text -I --textconv -r --recursive \
     --max-depth= -E --extended-regexp -G --basic-regexp -F --fixed-strings -P --perl-regexp \
     -n --line-number --column -h -H --full-name -l --files-with-matches --name-only -L \
     --files-without-match -z --null -o --only-matching -c --count --color[=] --break \
     --heading -C= --context= -B= --before-context= -A= --after-context= --threads= -p \
     --show-function -W --function-context -e= --and --or --not -q --quiet --all-match \
     --ext-grep -m= --max-count=",
)
.numeric();

const HELP: OptionTable = OptionTable::git(&[
    option('w', "web", Flag, Effect::Forbid("runs a web browser")),
    option('i', "info", Flag, Effect::Forbid("runs the info viewer")),
])
.inert(
    "-a --all --external-commands --aliases -m --man -v --verbose -g --guides \
     --user-interfaces --developer-interfaces -c --config",
);

const INIT: OptionTable = OptionTable::git(&[
    long_option("template", Required, INSTALLS_HOOKS),
    long_option("separate-git-dir", Required, Effect::Write),
])
.inert("--bare --shared[=] -q --quiet -b= --initial-branch= --object-format= --ref-format=");

/// `git log` and `git show`: the revision and diff options, and `-L RANGE:FILE`, which
/// reads FILE's history.
pub(super) const LOG: OptionTable =
    OptionTable::git(&[short_option('L', Required, Effect::ReadAfterColon)])
        .inert(
            "-q --quiet --source --use-mailmap --mailmap --clear-decorations --decorate-refs= \
             --decorate-refs-exclude= --decorate[=] --no-decorate --follow --full-diff \
             --log-size",
        )
        .with(&[&REV, &DIFF, &MERGE_DIFF])
        .numeric();

const LS_FILES: OptionTable =
    OptionTable::git(&[option('X', "exclude-from", Required, Effect::Read)]).inert(
        "-z -t -v -f -c --cached -d --deleted -m --modified -o --others -i --ignored -s \
         --stage -k --killed --directory --eol --empty-directory -u --unmerged --resolve-undo \
         -x= --exclude= --exclude-per-directory= --exclude-standard --full-name \
         --recurse-submodules --error-unmatch --with-tree= --abbrev[=] --debug --deduplicate \
         --sparse --format=",
    );

const LS_REMOTE: OptionTable =
    OptionTable::git(&[long_option("upload-pack", Required, RUNS_ANOTHER_COMMAND)]).inert(
        "-q --quiet -t --tags -b --branches -h --heads --refs --get-url --sort= --exit-code \
     --symref -o= --server-option=",
    );

const LS_TREE: OptionTable = OptionTable::git(&[]).inert(
    "-d -r -t -z -l --long --name-only --name-status --object-only --full-name --full-tree \
     --format= --abbrev[=]",
);

const MERGE: OptionTable = OptionTable::git(&[option('F', "file", Required, Effect::Read)]).inert(
    "-n --stat --summary --log[=] --squash --commit -e --edit --cleanup= --ff --ff-only \
         --rerere-autoupdate --verify-signatures -s= --strategy= -X= --strategy-option= -m= \
         --message= --into-name= -v --verbose -q --quiet --abort --quit --continue \
         --allow-unrelated-histories --progress -S[=] --gpg-sign[=] --autostash \
         --overwrite-ignore --signoff --no-verify --verify",
);

const MERGE_BASE: OptionTable =
    OptionTable::git(&[]).inert("-a --all --octopus --independent --is-ancestor --fork-point");

const MV: OptionTable =
    OptionTable::git(&[]).inert("-v --verbose -n --dry-run -f --force -k --sparse");

const PULL: OptionTable =
    OptionTable::git(&[long_option("upload-pack", Required, RUNS_ANOTHER_COMMAND)]).inert(
        "-v --verbose -q --quiet --progress --recurse-submodules[=] -r[=] --rebase[=] -n --stat \
     --log[=] --signoff[=] --squash --commit --edit --cleanup= --ff --ff-only --verify \
     --verify-signatures --autostash -s= --strategy= -X= --strategy-option= -S[=] \
     --gpg-sign[=] --allow-unrelated-histories --all -a --append -f --force -t --tags -p \
     --prune -j[=] --jobs[=] --dry-run -k --keep --depth= --shallow-since= --shallow-exclude= \
     --deepen= --unshallow --update-shallow --refmap= -o= --server-option= -4 --ipv4 -6 \
     --ipv6 --negotiation-tip= --show-forced-updates --set-upstream",
    );

const PUSH: OptionTable = OptionTable::git(&[
    long_option("receive-pack", Required, RUNS_ANOTHER_COMMAND),
    long_option("exec", Required, RUNS_ANOTHER_COMMAND),
])
.inert(
    "-v --verbose -q --quiet --repo= --all --branches --mirror -d --delete --tags -n \
     --dry-run --porcelain -f --force --force-with-lease[=] --force-if-includes \
     --recurse-submodules= --thin -u --set-upstream --progress --prune --no-verify --verify \
     --follow-tags --signed[=] --atomic -o= --push-option= -4 --ipv4 -6 --ipv6",
);

const REBASE: OptionTable =
    OptionTable::git(&[option('x', "exec", Required, RUNS_ANOTHER_COMMAND)]).inert(
        "--onto= --keep-base --no-verify --verify -q --quiet -v --verbose -n --no-stat --stat \
         --signoff --committer-date-is-author-date --reset-author-date -C= \
         --ignore-whitespace --whitespace= -f --force-rebase --no-ff --ff --continue --skip \
         --abort --quit --edit-todo --show-current-patch --apply -m --merge -i --interactive \
         --rerere-autoupdate --empty= --autosquash --update-refs -S[=] --gpg-sign[=] \
         --autostash -r[=] --rebase-merges[=] --fork-point -s= --strategy= -X= \
         --strategy-option= --root --reschedule-failed-exec --reapply-cherry-picks",
    );

const RESET: OptionTable = OptionTable::git(&[PATHSPEC_FROM_FILE]).inert(
    "-q --quiet --no-refresh --refresh --mixed --soft --hard --merge --keep \
     --recurse-submodules[=] -p --patch -N --intent-to-add --pathspec-file-nul",
);

const RESTORE: OptionTable = OptionTable::git(&[PATHSPEC_FROM_FILE]).inert(
    "-s= --source= -S --staged -W --worktree --ignore-unmerged --overlay -q --quiet \
     --recurse-submodules[=] --progress -m --merge --conflict= -2 --ours -3 --theirs -p \
     --patch --ignore-skip-worktree-bits --pathspec-file-nul",
);

const REV_LIST: OptionTable = OptionTable::git(&[])
    .inert(
        "--quiet --disk-usage[=] --use-bitmap-index --progress= --bisect-vars --bisect-all \
         --objects --in-commit-order --objects-edge --objects-edge-aggressive \
         --indexed-objects --unpacked --object-names --filter= --filter-provided-objects \
         --filter-print-omitted --missing= --exclude-promisor-objects --header \
         --commit-header --timestamp --count --abbrev=",
    )
    .with(&[&REV])
    .numeric();

/// `git rev-parse` (from its manual: it has no `-h` list); `--resolve-git-dir` reads a path.
const REV_PARSE: OptionTable =
    OptionTable::git(&[long_option("resolve-git-dir", Required, Effect::Read)]).inert(
        "--parseopt --sq-quote --keep-dashdash --stop-at-non-option --stuck-long --revs-only \
     --no-revs --flags --no-flags --default= --prefix= --verify -q --quiet --sq --short[=] \
     --not --abbrev-ref[=] --symbolic --symbolic-full-name --all --branches[=] --tags[=] \
     --remotes[=] --glob= --exclude= --exclude-hidden= --disambiguate= --local-env-vars \
     --path-format= --git-dir --git-common-dir --git-path= --show-toplevel \
     --show-superproject-working-tree --shared-index-path --absolute-git-dir \
     --is-inside-git-dir --is-inside-work-tree --is-bare-repository --is-shallow-repository \
     --show-cdup --show-prefix --show-object-format[=] --show-ref-format --since= --after= \
     --until= --before= --end-of-options",
    );

const REVERT: OptionTable = OptionTable::git(&[]).inert(
    "--quit --continue --abort --skip --cleanup= -n --no-commit --commit -e --edit -s \
     --signoff -m= --mainline= --rerere-autoupdate --strategy= -X= --strategy-option= -S[=] \
     --gpg-sign[=] --reference",
);

const RM: OptionTable = OptionTable::git(&[PATHSPEC_FROM_FILE]).inert(
    "-n --dry-run -q --quiet --cached -f --force -r --ignore-unmatch --sparse \
     --pathspec-file-nul",
);

const SHORTLOG: OptionTable = OptionTable::git(&[])
    .inert("-c --committer -n --numbered -s --summary -e --email -w[=] --group= --format[=]")
    .with(&[&REV])
    .numeric();

const SHOW_REF: OptionTable = OptionTable::git(&[]).inert(
    "--tags --branches --heads --exists --verify --head -d --dereference -s[=] --hash[=] \
     --abbrev[=] -q --quiet --exclude-existing[=]",
);

const STATUS: OptionTable = OptionTable::git(&[]).inert(
    "-v --verbose -s --short -b --branch --show-stash --ahead-behind --porcelain[=] --long -z \
     --null -u[=] --untracked-files[=] --ignored[=] --ignore-submodules[=] --column[=] \
     --no-renames --renames -M[=] --find-renames[=]",
);

const SWITCH: OptionTable = OptionTable::git(&[]).inert(
    "-c= --create= -C= --force-create= --guess --discard-changes -q --quiet \
     --recurse-submodules[=] --progress -m --merge --conflict= -d --detach -t[=] --track[=] \
     -f --force --orphan= --overwrite-ignore --ignore-other-worktrees",
);

const TAG: OptionTable = OptionTable::git(&[option('F', "file", Required, Effect::Read)]).inert(
    "-l --list -n[=] -d --delete -v --verify -a --annotate -m= --message= --trailer= -e \
         --edit -s --sign --cleanup= -u= --local-user= -f --force --create-reflog --column[=] \
         --contains= --no-contains= --merged= --no-merged= --omit-empty --sort= --points-at= \
         --format= --color[=] -i --ignore-case",
);

const VERSION: OptionTable = OptionTable::git(&[]).inert("--build-options");
