//! The option tables of the readers and text filters (`coreutils` uses them): every option
//! of the GNU tools (coreutils 9.1, diffutils 3.8 for `cmp` and `diff`, sed 4.9, file 5.44,
//! less 590, util-linux more, gawk and mawk), proven complete against their `--help` by
//! `help_check`. Options
//! that touch paths are typed; the rest are listed as inert words (see
//! [`OptionTable::inert`]).
use super::options::{
    Effect, OptionTable, RUNS_ANOTHER_COMMAND,
    ValueSyntax::{AttachedOnly, Flag, Required},
    long_option, option, short_option,
};

/// `--files0-from=F`: more operands from a file ([`Effect::NamesFrom`]).
const FILES0_FROM: super::options::OptionSpec =
    long_option("files0-from", Required, Effect::NamesFrom);

/// md5sum and the sha*sum family: `-c` reads a list of files to check.
const CHECKSUM: OptionTable = OptionTable::gnu(&[option(
    'c',
    "check",
    Flag,
    Effect::Forbid("checks the files a checksum list names, which cannot be checked"),
)])
.inert(
    "-b --binary --tag -t --text -z --zero --ignore-missing --quiet --status --strict -w --warn \
     --help --version",
);

/// Simple readers, by command name: every operand is read.
pub(super) const READERS: &[(&[&str], OptionTable)] = &[
    (
        &["cat"],
        OptionTable::gnu(&[]).inert(
            "-A --show-all -b --number-nonblank -e -E --show-ends -n --number -s \
             --squeeze-blank -t -T --show-tabs -u -v --show-nonprinting --help --version",
        ),
    ),
    (
        &["tac"],
        OptionTable::gnu(&[]).inert("-b --before -r --regex -s= --separator= --help --version"),
    ),
    (
        &["nl"],
        OptionTable::gnu(&[]).inert(
            "-b= --body-numbering= -d= --section-delimiter= -f= --footer-numbering= -h= \
             --header-numbering= -i= --line-increment= -l= --join-blank-lines= -n= \
             --number-format= -p --no-renumber -s= --number-separator= -v= \
             --starting-line-number= -w= --number-width= --help --version",
        ),
    ),
    (
        &["more"],
        OptionTable::gnu(&[])
            .inert(
                "-d --silent -f --logical -l --no-pause -c --print-over -p --clean-print -e \
                 --exit-on-eof -s --squeeze -u --plain -n= --lines= -h --help -V --version",
            )
            .numeric(),
    ),
    (
        &["paste"],
        OptionTable::gnu(&[])
            .inert("-d= --delimiters= -s --serial -z --zero-terminated --help --version"),
    ),
    (
        &["comm"],
        OptionTable::gnu(&[]).inert(
            "-1 -2 -3 --check-order --nocheck-order --output-delimiter= --total -z \
             --zero-terminated --help --version",
        ),
    ),
    (
        &["join"],
        OptionTable::gnu(&[]).inert(
            "-a= -e= -i --ignore-case -j= -o= -t= -v= -1= -2= --check-order --nocheck-order \
             --header -z --zero-terminated --help --version",
        ),
    ),
    (
        &["fold"],
        OptionTable::gnu(&[]).inert("-b --bytes -s --spaces -w= --width= --help --version"),
    ),
    (
        &["expand"],
        OptionTable::gnu(&[]).inert("-i --initial -t= --tabs= --help --version"),
    ),
    (
        &["unexpand"],
        OptionTable::gnu(&[]).inert("-a --all --first-only -t= --tabs= --help --version"),
    ),
    (
        &["cmp"],
        OptionTable::gnu(&[]).inert(
            "-b --print-bytes -i= --ignore-initial= -l --verbose -n= --bytes= -s --quiet \
             --silent --help -v --version",
        ),
    ),
    (
        &["head"],
        OptionTable::gnu(&[])
            .inert(
                "-c= --bytes= -n= --lines= -q --quiet --silent -v --verbose -z \
                 --zero-terminated --help --version",
            )
            .numeric(),
    ),
    (
        &["tail"],
        OptionTable::gnu(&[])
            .inert(
                "-c= --bytes= -f --follow[=] -F -n= --lines= --max-unchanged-stats= --pid= -q \
                 --quiet --silent --retry -s= --sleep-interval= -v --verbose -z \
                 --zero-terminated --help --version",
            )
            .numeric(),
    ),
    (
        &["wc"],
        OptionTable::gnu(&[FILES0_FROM]).inert(
            "-c --bytes -m --chars -l --lines -L --max-line-length -w --words --total= \
             --help --version",
        ),
    ),
    (
        &["od"],
        OptionTable::gnu(&[]).inert(
            "-A= --address-radix= --endian= -j= --skip-bytes= -N= --read-bytes= -S= \
             --strings[=] -t= --format= -v --output-duplicates -w[=] --width[=] --traditional \
             -a -b -c -d -f -i -l -o -s -x --help --version",
        ),
    ),
    (
        &["base64"],
        OptionTable::gnu(&[]).inert("-d --decode -i --ignore-garbage -w= --wrap= --help --version"),
    ),
    (&["md5sum"], CHECKSUM),
    (&["sha1sum"], CHECKSUM),
    (&["sha256sum"], CHECKSUM),
    (&["sha512sum"], CHECKSUM),
    (
        &["sort"],
        OptionTable::gnu(&[
            option('o', "output", Required, Effect::Write),
            // Temporary files are written there.
            option('T', "temporary-directory", Required, Effect::Write),
            FILES0_FROM,
            long_option("compress-program", Required, RUNS_ANOTHER_COMMAND),
            long_option("random-source", Required, Effect::Read),
        ])
        .inert(
            "-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g \
             --general-numeric-sort -i --ignore-nonprinting -M --month-sort -h \
             --human-numeric-sort -n --numeric-sort -R --random-sort -r --reverse --sort= -V \
             --version-sort --batch-size= -c --check[=] -C --debug -k= --key= -m --merge -s \
             --stable -S= --buffer-size= -t= --field-separator= --parallel= -u --unique -z \
             --zero-terminated --help --version",
        ),
    ),
    (
        &["cut"],
        OptionTable::gnu(&[]).inert(
            "-b= --bytes= -c= --characters= -d= --delimiter= -f= --fields= -n --complement -s \
             --only-delimited --output-delimiter= -z --zero-terminated --help --version",
        ),
    ),
    (
        &["stat"],
        OptionTable::gnu(&[]).inert(
            "-L --dereference -f --file-system --cached= -c= --format= --printf= -t --terse \
             --help --version",
        ),
    ),
    (
        &["file"],
        OptionTable::gnu(&[
            option('m', "magic-file", Required, Effect::Read),
            option('f', "files-from", Required, Effect::NamesFrom),
            option(
                'C',
                "compile",
                Flag,
                Effect::Forbid("writes a compiled magic file"),
            ),
        ])
        .inert(
            "--help -v --version -z --uncompress -Z --uncompress-noreport -b --brief -c \
             --checking-printout -e= --exclude= --exclude-quiet= -F= --separator= -i --mime \
             --apple --extension --mime-type --mime-encoding -k --keep-going -l --list -L \
             --dereference -h --no-dereference -n --no-buffer -N --no-pad -0 --print0 -p \
             --preserve-date -P= --parameter= -r --raw -s --special-files -S --no-sandbox -d \
             --debug",
        ),
    ),
];

/// less: the log file options write, the lesskey and tag files are read.
pub(super) const LESS: OptionTable = OptionTable::gnu(&[
    option('k', "lesskey-file", Required, Effect::Read),
    option('o', "log-file", Required, Effect::Write),
    option('O', "LOG-FILE", Required, Effect::Write),
    option('T', "tag-file", Required, Effect::Read),
])
.inert(
    "-? --help -a --search-skip-screen -A --SEARCH-SKIP-SCREEN -b= --buffers= -B \
     --auto-buffers -c --clear-screen -d --dumb -D= --color= -e -E --quit-at-eof \
     --QUIT-AT-EOF -f --force -F --quit-if-one-screen -g --hilite-search -G --HILITE-SEARCH \
     -h= --max-back-scroll= -i --ignore-case -I --IGNORE-CASE -j= --jump-target= -J \
     --status-column -K --quit-on-intr -L --no-lessopen -m -M --long-prompt --LONG-PROMPT -n \
     -N --line-numbers --LINE-NUMBERS -p= --pattern= -P= --prompt= -q -Q --quiet --QUIET \
     --silent --SILENT -r -R --raw-control-chars --RAW-CONTROL-CHARS -s \
     --squeeze-blank-lines -S --chop-long-lines -t= --tag= -u -U --underline-special \
     --UNDERLINE-SPECIAL -V --version -w --hilite-unread -W --HILITE-UNREAD -x= --tabs= -X \
     --no-init -y= --max-forw-scroll= -z= --window= -\"= --quotes= -~ --tilde -#= --shift= \
     --file-size --follow-name --incsearch --line-num-width= --mouse --no-keypad \
     --no-histdups --rscroll= --save-marks --status-col-width= --use-backslash --use-color \
     --wheel-lines=",
);

/// uniq: no option touches a path (the OUTPUT operand is written).
pub(super) const UNIQ: OptionTable = OptionTable::gnu(&[])
    .inert(
        "-c --count -d --repeated -D --all-repeated[=] -f= --skip-fields= --group[=] -i \
         --ignore-case -s= --skip-chars= -u --unique -z --zero-terminated -w= --check-chars= \
         --help --version",
    )
    .numeric();

/// diff: `-r` walks the operands; `--diff-program` (diff3, sdiff) runs one.
pub(super) const DIFF: OptionTable = OptionTable::gnu(&[
    option('X', "exclude-from", Required, Effect::Read),
    option('r', "recursive", Flag, Effect::Recursive),
    long_option("from-file", Required, Effect::Read),
    long_option("to-file", Required, Effect::Read),
    long_option("diff-program", Required, RUNS_ANOTHER_COMMAND),
])
.inert(
    "--normal -q --brief -s --report-identical-files -c -C= --context[=] -u -U= --unified[=] \
     -e --ed -n --rcs -y --side-by-side -W= --width= --left-column --suppress-common-lines -p \
     --show-c-function -F= --show-function-line= --label= -t --expand-tabs -T --initial-tab \
     --tabsize= --suppress-blank-empty -l --paginate --no-dereference -N --new-file \
     --unidirectional-new-file --ignore-file-name-case --no-ignore-file-name-case -x= \
     --exclude= -S= --starting-file= -i --ignore-case -E --ignore-tab-expansion -Z \
     --ignore-trailing-space -b --ignore-space-change -w --ignore-all-space -B \
     --ignore-blank-lines -I= --ignore-matching-lines= -a --text --strip-trailing-cr -D= \
     --ifdef= --old-group-format= --new-group-format= --unchanged-group-format= \
     --changed-group-format= --line-format= --old-line-format= --new-line-format= \
     --unchanged-line-format= -d --minimal --horizon-lines= --speed-large-files --color[=] \
     --palette= --help -v --version",
);

/// sed: `-e` gives the script, `-f` reads it; `-i` edits in place (its files written).
pub(super) const SED: OptionTable = OptionTable::gnu(&[
    option('e', "expression", Required, Effect::Pattern),
    option('f', "file", Required, Effect::PatternFile),
    option('i', "in-place", AttachedOnly, Effect::InPlace),
])
.inert(
    "-n --quiet --silent --debug --follow-symlinks -l= --line-length= --posix -E -r \
     --regexp-extended -s --separate --sandbox -u --unbuffered -z --null-data --help \
     --version",
);

/// awk (gawk's options and mawk's): `-f/-E` read the program, `-i` a library, `-o -p -d`
/// write; `-l` loads a shared library, `-D` runs the debugger; `-W` takes mawk's words.
pub(super) const AWK: OptionTable = OptionTable::gnu(&[
    option('f', "file", Required, Effect::PatternFile),
    option('E', "exec", Required, Effect::PatternFile),
    option('e', "source", Required, Effect::Pattern),
    option(
        'i',
        "include",
        Required,
        Effect::Forbid("loads awk source from a file, which is not analysed"),
    ),
    option(
        'l',
        "load",
        Required,
        Effect::Forbid("loads a shared library"),
    ),
    option(
        'D',
        "debug",
        AttachedOnly,
        Effect::Forbid("runs the debugger"),
    ),
    short_option('W', Required, Effect::AwkW),
    option('o', "pretty-print", AttachedOnly, Effect::Write),
    option('p', "profile", AttachedOnly, Effect::Write),
    option('d', "dump-variables", AttachedOnly, Effect::Write),
])
.inert(
    "-v= --assign= -F= --field-separator= -b --characters-as-bytes -c --traditional -C \
     --copyright -g --gen-pot -h --help -I --trace -k --csv -L[=] --lint[=] -M --bignum -N \
     --use-lc-numeric -n --non-decimal-data -O --optimize -P --posix -r --re-interval -s \
     --no-optimize -S --sandbox -t --lint-old -V --version -Y --parsedebug --dump --usage \
     --interactive --posix_space --random= --sprintf=",
);

/// The `-W` words of mawk (and gawk's `-W` forms of its flags) that touch no file. Any other
/// word (`exec`, gawk's `-W file=…`, an abbreviation) is forbidden: it may name a program
/// file the analysis would not see.
const AWK_W_WORDS: &[&str] = &[
    "version",
    "dump",
    "help",
    "usage",
    "interactive",
    "posix_space",
    "random",
    "sprintf",
    "traditional",
    "compat",
    "posix",
    "lint",
    "lint-old",
    "copyright",
    "copyleft",
    "characters-as-bytes",
    "re-interval",
    "use-lc-numeric",
    "non-decimal-data",
    "optimize",
    "no-optimize",
    "sandbox",
];

/// Whether every comma-separated word of awk's `-W` value is one of [`AWK_W_WORDS`]
/// (`random=` and `sprintf=` with their number).
pub(super) fn awk_w_is_inert(value: &str) -> bool {
    value.split(',').all(|word| {
        let name = word.split_once('=').map_or(word, |(n, _)| n);
        AWK_W_WORDS.contains(&name)
    })
}
