//! The option groups several git subcommands share: the diff options (`git diff`, `log`,
//! `show`, `format-patch`, `stash show`), the combined-diff options of merges (`log`, `show`),
//! and the revision options (`log`, `show`, `rev-list`, `shortlog`, `format-patch`, `blame`).
//! From `git diff -h` (git 2.47) and the manual pages of git-diff, git-log and git-rev-list;
//! `help_check` proves them against both.
use super::options::{Effect, OptionTable, ValueSyntax::Required, long_option, short_option};

/// The diff options: `--output` writes, `-O` reads an order file; the rest only shape the
/// output.
pub(super) const DIFF: OptionTable = OptionTable::git(&[
    long_option("output", Required, Effect::Write),
    short_option('O', Required, Effect::Read),
])
.inert(
    "-p --patch -s --no-patch -u -U[=] --unified[=] -W --function-context --raw \
     --patch-with-raw --patch-with-stat --numstat --shortstat -X[=] --dirstat[=] --cumulative \
     --dirstat-by-file[=] --check --summary --name-only --name-status --stat[=] \
     --stat-width= --stat-name-width= --stat-graph-width= --stat-count= --compact-summary \
     --binary --full-index --color[=] --ws-error-highlight= -z --abbrev[=] --src-prefix= \
     --dst-prefix= --line-prefix= --no-prefix --default-prefix --inter-hunk-context= \
     --output-indicator-new= --output-indicator-old= --output-indicator-context= -B[=] \
     --break-rewrites[=] -M[=] --find-renames[=] -D --irreversible-delete -C[=] \
     --find-copies[=] --find-copies-harder --no-renames --rename-empty --follow -l= \
     --minimal -w --ignore-all-space -b --ignore-space-change --ignore-space-at-eol \
     --ignore-cr-at-eol --ignore-blank-lines -I= --ignore-matching-lines= \
     --indent-heuristic --patience --histogram --diff-algorithm= --anchored= --word-diff[=] \
     --word-diff-regex= --color-words[=] --color-moved[=] --color-moved-ws= --relative[=] -a \
     --text -R --exit-code --quiet --ext-diff --textconv --ignore-submodules[=] \
     --submodule[=] --ita-invisible-in-index --ita-visible-in-index -S= -G= --pickaxe-all \
     --pickaxe-regex --rotate-to= --skip-to= --find-object= --diff-filter=",
);

/// How `log` and `show` diff merges (`-m -c --cc --remerge-diff`), and `-t -r` of the raw
/// output.
pub(super) const MERGE_DIFF: OptionTable = OptionTable::git(&[]).inert(
    "-m -c --cc --dd --remerge-diff --diff-merges= --no-diff-merges --combined-all-paths -t \
     -r",
);

/// The revision options: commit limiting, history simplification, ordering, and commit
/// formatting. None touches a file (`--stdin` reads revisions from standard input); the
/// tables that share them accept `-NUM` (`.numeric()`).
pub(super) const REV: OptionTable = OptionTable::git(&[]).inert(
    "-n= --max-count= --skip= --since= --after= --since-as-filter= --until= --before= \
     --max-age= --min-age= --author= --committer= --grep-reflog= --grep= --all-match \
     --invert-grep -i --regexp-ignore-case --basic-regexp -E --extended-regexp -F \
     --fixed-strings -P --perl-regexp --remove-empty --merges --no-merges --min-parents= \
     --max-parents= --no-min-parents --no-max-parents --first-parent \
     --exclude-first-parent-only --not --all --branches[=] --tags[=] --remotes[=] --glob= \
     --exclude= --exclude-hidden= --reflog --alternate-refs --single-worktree \
     --ignore-missing --bisect --stdin --cherry-mark --cherry-pick --left-only --right-only \
     --cherry -g --walk-reflogs --merge --boundary --simplify-by-decoration --show-pulls \
     --full-history --dense --sparse --simplify-merges --ancestry-path[=] --date-order \
     --author-date-order --topo-order --reverse --no-walk[=] --do-walk --pretty[=] --format= \
     --abbrev-commit --oneline --encoding= --expand-tabs[=] --notes[=] --show-notes[=] \
     --standard-notes --show-signature --relative-date --date= --parents --children \
     --left-right --graph --show-linear-break[=]",
);
