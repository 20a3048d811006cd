//! Shell command lines parsed to argv without a shell, and what a command touches.
//!
//! Pure parsing and command knowledge, no policy: [`split()`] turns a line into argv the way
//! POSIX `sh` would for a simple command (refusing everything a shell would interpret beyond
//! quoting when the line will run through one), and [`analyze`] says which files the command
//! reads and writes, which trees it walks, and which of its arguments are forbidden because
//! they run another command or write where a reader should not. The engine resolves every
//! path (they stay as written: relative paths are relative to the command's working dir) and
//! checks them against the sandbox.
//!
//! # Module map
//! - `mod.rs` (here): the public API ([`split()`], [`analyze`], [`CommandAnalysis`],
//!   [`ShellError`], [`MAX_ARGS`]) and the table that sends each command to its family.
//! - `split`: the tokeniser, a line to argv the way `sh` would, refusing what a shell would
//!   interpret.
//! - [`line`]: a line of several commands (lists, pipelines, redirections, `cd`, globs,
//!   variables the line sets, `for` loops, command substitutions, `bash -c`), parsed by
//!   brush's bash parser into simple commands, each analysed as above.
//! - `option_table`: the option tables' vocabulary (how an option takes its value, what it
//!   does to paths) and the lookup of an option as written; `options`: the getopt-like
//!   parser that reads a command's words with its table.
//! - `findings`: what the analysis has found so far (reads, writes, walks, forbidden).
//! - [`uri`]: which words are URIs, and the path a `file://` URI names (shared with the
//!   sandbox's `path` arguments).
//! - One file per command family, each with its tests: `coreutils` (readers such as `cat
//!   head sort less uniq diff`, the text filters `sed awk`, and the reading of unknown
//!   commands, `xxd hostname`; tables in `coreutils_tables`), `grep` (`grep rg`), `walk`
//!   (`find ls du tree`), `tar`, `file_ops` (`cp mv rm rmdir ln mkdir touch chmod chown
//!   chgrp`), `git` (tables in `git_tables`, `git_verbs`, `git_shared`), `interpreters`
//!   (`python node perl ruby`, shells, and programs that run another command), `compilers`
//!   (`cc gcc g++ clang javac java`), `compress` (`gzip gunzip`), `processes` (`ps kill ss`),
//!   `builders` (programs with no table: build tools, package managers, anything else),
//!   `sqlite` (`sqlite3`),
//!   `patch` (Codex's
//!   `apply_patch`).
//! - Tests only: `help_check` proves the tables complete against the installed tools' own
//!   help, read by `help_columns` and `help_formats`.
//!
//! # Option syntax
//! Short options may be combined (`-rf .env`, `-Rn`); an option's value may be attached
//! (`-fF`) or the next word (`-f F`); long options take `--opt=value` or `--opt value` and may
//! be abbreviated to a unique prefix, as GNU getopt allows; options may follow operands (GNU
//! permutation) except for interpreters, which stop at the script (python also at `-m
//! MODULE`); `--` ends options. `-NUM` is a count where the tool takes one (`head -5`, `grep
//! -2`, `git log -3`); git and node accept `--no-NAME` for a known `--NAME` (and `--NAME` for
//! a known `--no-NAME`), as a flag without effect.
//!
//! **A known command's table is complete and strict**: it lists every option of the tool
//! (GNU coreutils 9.1, grep 3.8, findutils 4.9, tar 1.34, diffutils 3.8, sed 4.9, file 5.44,
//! less 590, util-linux more, mawk 1.3.4, git 2.39 and 2.47 for the subcommands it lists,
//! python 3.11, perl 5.36, node 20; gawk 5, rg 14, tree 2 and ruby 3 from their
//! documentation), with its value syntax, and an option the table does not know is refused
//! ([`ShellError::UnknownOption`], naming the command and the option): a table that meets an
//! option it does not know does not guess what it reads, writes or runs. An abbreviation of
//! several options that differ is refused by the tool itself (getopt: ambiguous), unless
//! the tool knows fewer options than the table: the analysis applies every candidate's
//! effect, with the attached value only (the cautious reading). For git, an abbreviation of
//! a real name comes before one of a negation (`--no-ind` is `--no-index`, as git reads it). Commands nobody knows keep the cautious
//! reading of every option: a short option is a flag (so the next word stays an operand),
//! the value of `--opt=value` and what follows a short option in its word (`-o=F`, `-oF`)
//! an argument, which they may read and, unless they only print, write (`builders`).
//!
//! # URIs
//! A word `scheme://…` (RFC 3986 scheme) where a command takes a path is forbidden: the
//! command would open it as a relative path, not the file it names (`cat file:///etc/passwd`
//! opens `./file:/etc/passwd`). Where a program may take a URI (operands of commands nobody
//! knows and of interpreters, git's operands), a local `file://` URI (no host, or
//! `localhost`) is read as its percent-decoded path, `file://host/…` is forbidden, and any
//! other URI is no file.
//!
//! # Command knowledge
//! Commands are known by the file name of argv\[0\] (`/usr/bin/grep` is `grep`).
//!
//! | command | reads | recursive roots | writes | forbidden |
//! |---|---|---|---|---|
//! | `cat tac nl more wc head tail less paste comm join fold expand unexpand cmp` and `sort uniq cut stat file md5sum sha1sum sha256sum sha512sum` | operands; `less -k/-T` files, `sort --random-source`, `file -m` | — | `less -o/-O/--log-file`, `sort -o`, `sort -T` (temporary files), `uniq IN OUT`'s OUT | `--files0-from` (`wc sort`), `file -f` (names from a file), `md5sum… -c` (checks the files a list names), `file -C` (writes a compiled magic file), `sort --compress-program`, `less +CMD` (start-up commands, `!` runs a shell) |
//! | `grep egrep fgrep rgrep` | files after the PATTERN (first operand unless `-e`/`-f`); `-f/--file`, `--exclude-from` | with `-r -R --recursive --dereference-recursive -d recurse`, or `rgrep`: the files, default `.`, less what `--include --exclude --exclude-dir` skip (`walk_filter`) | — | — |
//! | `rg` | `-f/--file`, `--ignore-file` | always: operands after the pattern (all of them with `--files`), default `.` | — | `--pre`, `--hostname-bin` (run a program) |
//! | `find` | `-newer -anewer -cnewer -samefile -newerXY` (Y≠t) files; with `-maxdepth 0` or `1`: the start points | each start point, default `.` (none with `-maxdepth 0` or `1`) | — | `-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls -files0-from` (in a line, `-exec` and `-delete` are read by `line::found`) |
//! | `ls` | operands, default `.` | with `-R`: operands, default `.` | — | — |
//! | `du tree` | `du -X/--exclude-from`; `tree --gitfile --infofile --hintro --houtro` | always: operands, default `.` (`tree --fromfile/--fromtabfile`: none) | `tree -o` | `du --files0-from`, `tree -R` (writes a file in every directory) |
//! | `diff` | operands, `-X/--exclude-from`, `--from-file/--to-file` | with `-r`: operands (following links unless `--no-dereference`) | — | `--diff-program` |
//! | `sed` | files after the SCRIPT (first operand unless `-e`/`-f`); `-f` | — | with `-i`: the files, and `FILE`+SUFFIX with `-iSUFFIX` | `-f`; a script that writes, reads or runs (below); `-i` with a backup pattern (`*`, `/`) |
//! | `awk gawk mawk nawk` | files after the PROGRAM (unless `-f/-e/-E`); `-f -E -i` files | — | `-o -p -d` files | `-l/--load` (shared library), `-D/--debug`, `-W` words other than mawk's `version dump help usage interactive posix_space random= sprintf=` and gawk's flags |
//! | `tar` (also old style `tar xf a`) | `-f` archive unless creating; `-X`, `--owner-map --group-map`; `-c/-r/-u` operands and `--add-file` (under `-C`) | `-c/-r/-u` operands unless `--no-recursion`; `-d` the dir | `-c/-r/-u/--delete` archive; `-x` (not `-O`): the members of a local archive (`CommandAnalysis::extractions`, read by the engine), else the dir (`-C` or `.`); `--one-top-level`, `--index-file`, `-g`, `--volno-file` | `--to-command --checkpoint-action -I/--use-compress-program -F/--info-script/--new-volume-script --rsh-command --rmt-command -T/--files-from --remove-files`, `-x -P`, remote archive `host:file` |
//! | `cp` | sources | sources with `-r -R -a` | destination (last operand or `-t DIR`) | — |
//! | `mv` | sources | — | sources and destination | — |
//! | `rm` | — | operands with `-r -R` | operands | — |
//! | `rmdir` | — | — | operands, and with `-p` each parent written in them | — |
//! | `ln` | — | — | each link (the last operand, in it when a directory, or `-t DIR`), and each TARGET (a symbolic link's relative one from the link's directory) | — |
//! | `chmod chown chgrp` | `--reference` file | operands with `-R` | operands after MODE/OWNER | — |
//! | `gzip gunzip` | operands | with `-r`: operands | each operand (unless `-k`) and its copy (`FILE.gz`, or without its suffix with `-d`); nothing with `-c -l -t` | `-N` when decompressing (a name the file holds) |
//! | `xxd` | the first operand | — | the second | — |
//! | `cc gcc g++ c++ clang clang++` (and `gcc-12`…) | sources, `-include -imacros -T` files | — | `-o FILE`, else `a.out` or each source's `.o`/`.s` (`-c`/`-S`), `-MF`, `.d` with `-MD` | `-wrapper -B -fplugin -specs -Xclang -load -Wl, -Xlinker -Wa, -Xassembler -Wp, -Xpreprocessor -save-temps -fdump-*`, `@FILE`, `--` options but `--std= --target= --version --help --verbose`, an option whose value is a path |
//! | `javac` / `java` | sources / `-jar` JAR or a `.java` file, then the program's arguments | — | `-d DIR`, `-s`, `-h`, else each source's `.class` / — | `-J -Xplugin @FILE` / `-javaagent -agentlib -agentpath @FILE` |
//! | `ps` / `kill` | — | — | — | a BSD word with `e` (environments) / a target that is not a job (`%1`, `$!`) |
//! | `printenv NAME…` / `hostname` | — | — | — | a name that may hold a key (not in `TEXT_VARIABLES`, `HOME`, `PWD`) / an operand (sets the name) |
//! | `git` | every operand (a `file://` URL as its path, other URLs none; the path of `REV:PATH`), `--git-dir --work-tree`, the file options (`commit -F/-t`, `log -L RANGE:FILE`, `blame --contents -S`, `clone --reference`, `ls-files -X`, `diff -O`, …); relative to `-C` | `grep --no-index/--untracked`: `.`; `diff --no-index`: the operands | `--output`, `format-patch -o`, `archive -o`, `clone/init --separate-git-dir`; the operands of `mv rm restore init`, `clone`'s directory, `worktree add`'s path | subcommands it does not list (aliases, `git-*` programs), `-c KEY=V` (except `color.*`, `core.quotepath`, `advice.*`), `--config-env`, `--exec-path=`, `--upload-pack -u --receive-pack --exec`, `rebase -x`, `clone/init --template`, `clone -c/--config`, `grep -O`, `apply --unsafe-paths`, `help --web/--info`, `--pathspec-from-file`, `ext::`/`fd::` URLs, `config` except reads (`--get…`, `--list`, `get`, `list`, a key alone), subcommands `filter-branch daemon instaweb shell mergetool difftool send-email`, `submodule foreach`, `bisect run` |
//! | `python* node nodejs perl* ruby` | every operand (script and its arguments; after `-c CODE`, the program's arguments), the program given on the line (`python -c`, `node -e/-p`, `perl -e/-E`, `ruby -e`) read by the engine for what it names; `perl/ruby -I`, node's module and config files (`-r --import --env-file …`) | — | node's report, profile and log files (`--cpu-prof-dir --redirect-warnings …`) | in-place edits (`perl/ruby -i`), node's inspector (`--inspect*`) and files written in the working directory (`--cpu-prof --heap-prof --prof --build-snapshot …`) |
//! | shells `sh bash dash zsh ksh mksh fish csh tcsh busybox` | `sh bash dash zsh ksh mksh` with a script (after `-e -u -x -v` alone): the script and its arguments | — | — | otherwise (runs commands the gateway cannot see: `-c` outside a parsed line, its input, other options, `fish csh tcsh busybox`) |
//! | `xargs env eval exec nohup timeout nice ionice stdbuf setsid chroot sudo su doas runuser unshare nsenter watch time command builtin strace ltrace script parallel flock` | — | — | — | always ("runs another command"; in a line through a shell, `timeout nice nohup stdbuf env` with a command they are read first, `line::wrappers`, and `xargs` after a list of paths, `line::found`) |
//! | `apply_patch applypatch` (Codex's) | — | — | every file its patch adds, updates, deletes or moves to: the patch is its one operand, or its input, which the line must give as a here-document | more than one operand; a patch that names no file |
//! | `ss` | `-F` file | — | `-D` file | `-K` (closes sockets) |
//! | `zip` | the archive; each name (walked with `-r`) | with `-r` | the archive | `-r` without `-y` (follows links), an option but `-r -q -v -j -y -D -X -u -f -0…-9 -x -i` (unknown: `-m` deletes the files, `-T` runs unzip, `-@` reads names from the input, …); no name |
//! | `unzip` | the archive (and `ARCHIVE.zip`) | — | extracting (not `-l -v -t -z -p -c -Z`): the members of the archive (`CommandAnalysis::extractions`, read by the engine), else (a wildcard archive name) the dir (`-d` or `.`) | `-:` |
//! | `sqlite3` | the database | — | the database and its `-journal`, `-wal`, `-shm` | `-init -A -nonce -vfs`, a `file:` URI, no SQL argument (SQL from its input), a dot command but those that print (`.tables .schema .mode .headers .dump …`), SQL naming `attach vacuum readfile writefile edit load_extension fsdir zipfile sqlar fts3_tokenizer` |
//! | `npm pnpm yarn pip pip3 cargo go mvn gradle` (`builders`) | as anything else | — | as anything else | a global install (`-g`, `--global`, `--location=global`, `yarn global`, `pnpm setup`, `link`), `pip install --user`, `cargo install` without `--root`, `go install`, a configuration change (`config set`, `npm set`, `go env -w/-u`), `npm login/adduser/logout/token`, `cargo login/logout`, `mvn install/deploy`, `gradle publishToMavenLocal` |
//! | anything else (`builders`) | every operand, `--opt=value` value and what follows a short option in its word (`-o=F`, `-oF`), except `-` and URLs | — | the same, as outputs (`CommandAnalysis::outputs`), unless the program only prints (`builders::PRINTERS`) | — |
//!
//! git's subcommands are those of `git_tables::SUBCOMMANDS`: `add am apply archive bisect
//! blame branch cat-file check-ignore checkout cherry-pick clean clone commit config
//! describe diff fetch for-each-ref format-patch grep help init log ls-files ls-remote
//! ls-tree merge merge-base mv notes pull push rebase reflog remote reset restore rev-list
//! rev-parse revert rm shortlog show show-ref stash status submodule switch tag version
//! worktree`; `notes reflog remote stash worktree` read the options of their verb.
//!
//! A directory in `writes` (tar's extraction dir, cp's target dir) means anything below it
//! may be written. `follows_symlinks` is set for `grep -R`, `rg -L`, `find -L/-follow`,
//! `ls/du/cp -L`, `tree -l`, `tar -h`, `chmod/chown -L`, `chown --dereference`, `diff -r`: a
//! walk that may leave its root.
//!
//! # Limits
//! - No shell runs, so aliases, functions and `$PATH` lookups do not exist here; the engine
//!   checks argv\[0\] against the exec allowlist.
//! - The tables are complete for the versions above, as `help_check` proves on a machine
//!   that has them; another version's new options are refused until added (a false block,
//!   never a guess), and an option another version dropped is still known. gawk, rg, tree
//!   and ruby are not checked (not installed where the check runs); options no help prints
//!   (hidden git options, V8's options to node) are refused.
//! - Unknown commands get the generic reading above: an option we do not know that takes a
//!   value makes that value look like an operand (over-reading, never under-reading, unless an
//!   option is wrongly listed as taking a value). Their outputs are the paths given, not
//!   what a program names itself inside a directory it is given (`go build -o DIR PKG`
//!   writes DIR/PKG's name).
//! - Programs inside arguments are not analysed: `sed` scripts (`e`, `w`, `r` commands), `awk`
//!   programs (`system()`, `getline`, `>`), interpreter scripts, `less`'s interactive `!cmd`,
//!   git hooks and repository config (`core.fsmonitor`, `core.pager`, diff drivers in
//!   `.git/config`). The allowlist and the sandbox (protecting `.git/config` and hooks) must
//!   cover these.
//! - `git` operands are all taken as reads, revisions included (harmless relative names);
//!   subcommands that rewrite the work tree (`checkout switch reset merge pull rebase stash
//!   clean am cherry-pick revert`) write files the analysis does not list (`apply`'s are the
//!   files its patch names: `CommandAnalysis::patches`, read by the engine); `git config
//!   KEY` (an implicit get) is forbidden like a set.
use std::path::PathBuf;

/// The text a value known only when a line runs stands as in the words the line analysis
/// reads (`line`'s `RUNTIME_STAND_IN`; [`LAST_JOB`] is made of it).
macro_rules! runtime_stand_in {
    () => {
        "\u{1}value-of-a-command-substitution\u{1}"
    };
}

mod awk;
mod builders;
mod compilers;
mod compress;
mod coreutils;
mod coreutils_tables;
mod curl;
mod docker;
mod file_ops;
mod findings;
mod git;
pub(crate) mod git_repo;
mod git_shared;
mod git_tables;
mod git_verbs;
mod grep;
#[cfg(test)]
mod help_check;
#[cfg(test)]
mod help_columns;
#[cfg(test)]
mod help_formats;
pub(crate) mod interpreters;
pub mod line;
mod option_table;
mod options;
mod patch;
mod processes;
mod sed;
mod split;
mod sqlite;
mod tar;
#[cfg(test)]
mod test_support;
mod unzip;
pub(crate) mod uri;
mod walk;
mod walk_filter;

pub use patch::{below_home, patch_files};
pub use split::split;
pub use walk_filter::{FileRule, Matcher, RipgrepRules, WalkFilter};

use findings::Findings;

/// Why a line or argv cannot be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellError {
    /// A character a shell would interpret, in a line that runs through one.
    #[error("`{ch}` at byte {pos} {what}: refused because the line runs through a shell")]
    Metachar {
        /// The character.
        ch: char,
        /// Its byte offset in the line.
        pos: usize,
        /// What a shell would do with it (`separates commands`, `is a glob pattern`, …).
        what: &'static str,
    },
    /// A quote that is never closed.
    #[error("unterminated {quote} quote starting at byte {pos}")]
    Unterminated {
        /// `single` or `double`.
        quote: &'static str,
        /// Byte offset of the opening quote.
        pos: usize,
    },
    /// A lone backslash ends the line (it would escape nothing).
    #[error("backslash at the end of the line")]
    TrailingBackslash,
    /// A leading `NAME=value` word, which a shell takes as a variable for the command.
    #[error(
        "`{0}=` before the command sets a variable for it: refused because the line runs \
         through a shell"
    )]
    Assignment(String),
    /// A NUL byte, which no argv can hold.
    #[error("NUL byte in the command")]
    Nul,
    /// Something on the line whose effect is known only when it runs ([`line`]).
    #[error("{0} cannot be analysed before it runs")]
    Unanalysable(String),
    /// The line is not valid shell syntax.
    #[error("the line is not valid shell syntax: {0}")]
    Syntax(String),
    /// No program to run.
    #[error("empty command")]
    Empty,
    /// More than [`MAX_ARGS`] words.
    #[error("{0} arguments: more than the {MAX_ARGS} a command may have here")]
    TooManyArgs(usize),
    /// An option that the table of a known command does not know.
    #[error(
        "`{command}` has no option `{option}` that the gateway knows: refused, because what an \
         unknown option reads, writes or runs cannot be checked (use the options `{command} \
         --help` lists)"
    )]
    UnknownOption {
        /// The command (`cat`, `git log`).
        command: String,
        /// The option as written, without its value (`--unknown`, `-Z`).
        option: String,
    },
}

/// The most arguments [`analyze`] looks at; a longer command is refused (the analysis is
/// quadratic in the number of file operands, and no tool call needs thousands).
pub const MAX_ARGS: usize = 1024;

/// What a command touches, as far as the policy cares. Paths are as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandAnalysis {
    /// argv\[0\] as written.
    pub program: String,
    /// File operands and file-valued options the command reads. Every recursive root is
    /// listed here too.
    pub reads: Vec<PathBuf>,
    /// Of `reads`, those the command only looks at: their names and metadata, no file
    /// opened for its contents (`ls` of a file, `stat`, `test -f`). A protected file is
    /// looked at as a directory listing shows it.
    pub looked_at: Vec<PathBuf>,
    /// Files the command writes, deletes or changes (a directory: anything below it).
    pub writes: Vec<PathBuf>,
    /// Of `writes`, those that an argument of a program with no option table names, which
    /// may be its output (`go build -o FILE`, `pip install --target DIR`): the path itself
    /// is written, or new entries in it when it is a directory, by names the program chooses
    /// and the analysis does not see; what a directory already holds is not taken to be
    /// rewritten (`black .`, `npx eslint --fix .`).
    pub outputs: Vec<PathBuf>,
    /// Of `writes`, those that are written into when they are a directory: there each of
    /// the names is written, the directory itself is not replaced (`cp a b dir`, `mv a .`).
    /// When one is not a directory, it is itself the write.
    pub written_into: Vec<WrittenInto>,
    /// Archives extracted whose members are the writes, named by the archive itself (`tar
    /// -xf A -C DIR`): the engine reads each member's name when the call is decided. An
    /// extraction the engine cannot read that way writes its whole directory.
    pub extractions: Vec<Extraction>,
    /// Patches `git apply` applies to the work tree, whose files are the writes: the engine
    /// reads the names each patch holds when the call is decided.
    pub patches: Vec<AppliedPatch>,
    /// Directories walked recursively.
    pub recursive_roots: Vec<PathBuf>,
    /// URLs the command connects to (curl's), each `http://` or `https://`: the engine checks
    /// their hosts against the egress allowlist, and a line with any sends data out.
    pub urls: Vec<String>,
    /// Forbidden options or programs found, each as `what: why`.
    pub forbidden: Vec<String>,
    /// The walk follows symbolic links, so it may leave its roots.
    pub follows_symlinks: bool,
    /// Its walks list names and metadata and open no file for reading (`find` without
    /// `-exec`, `ls -R`, `du`, `tree`): a protected file below a root is listed, not read.
    pub walks_names_only: bool,
    /// Its walks skip hidden files and directories, those whose name starts with `.`
    /// (ripgrep without `--hidden`, `-.` or `-uu`): a protected path below a root that is
    /// hidden, or lies under a hidden directory, is not reached.
    pub walks_skip_hidden: bool,
    /// The files and directories its walks skip by name (`grep --include`, `--exclude`,
    /// `--exclude-dir`): a protected path below a root that the filter skips is not reached.
    pub walk_filter: WalkFilter,
    /// An interpreter with no script: it reads its program from its input (`python3`,
    /// `node -i`, `python3 -`), which is where the line sends it (a here-document, a file, a
    /// pipe) or, left to the host, what the host writes to it later.
    pub program_from_input: bool,
    /// Codex's `apply_patch` with no argument: it reads its patch from its input, which the
    /// line must give (a here-document); the files that patch names are its writes.
    pub patch_from_input: bool,
    /// The programs an interpreter is given as an option's value (`python3 -c CODE`,
    /// `node -e CODE`, `perl -e CODE`): not analysed, as a script file is not; the engine
    /// reads their text for what they name (`engine::inline_program`).
    pub inline_programs: Vec<String>,
}

/// A tar or zip archive extracted below a directory ([`CommandAnalysis::extractions`]): what it
/// writes is the archive's members, which the engine reads when the call is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extraction {
    /// The archive, as written.
    pub archive: PathBuf,
    /// The directory the members are written below (`-C`, else where tar runs).
    pub into: PathBuf,
    /// Leading components taken off each member's name (`--strip-components`).
    pub strip_components: usize,
    /// Each member is written by its last name alone, directly in `into` (`unzip -j`).
    pub junk_paths: bool,
}

/// A patch `git apply` applies to the work tree ([`CommandAnalysis::patches`]): what it
/// writes is each file the patch names, which the engine reads when the call is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedPatch {
    /// The patch file, as written.
    pub file: PathBuf,
    /// Where git runs (`-C`, else `.`): the names are below it, or below the top of the
    /// work tree it is in.
    pub runs_in: PathBuf,
    /// Leading components taken off each name of a `diff`, `---` and `+++` line (`-p`, 1 by
    /// default).
    pub strip: usize,
    /// The directory put before each name (`--directory`).
    pub directory: Option<PathBuf>,
}

/// A destination that receives entries by name when it is a directory
/// ([`CommandAnalysis::written_into`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenInto {
    /// The destination, as `writes` lists it.
    pub dir: PathBuf,
    /// The names its entries take there (each source's last component).
    pub names: Vec<PathBuf>,
}

/// Variables of the environment that hold no secret, whose value may stand as text (`echo
/// $PATH`: like a substitution's, it is known only when the line runs) or be printed
/// (`printenv PATH`).
pub(crate) const TEXT_VARIABLES: &[&str] = &[
    "PATH", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TERM", "HOSTNAME", "TMPDIR",
];

/// What `$!` (the process id of the shell's last background job) is taken as in a line's
/// words: a value known only when the line runs (it holds `line`'s stand-in for one, so a
/// variable set to it is one too: `PID=$!`), which `kill` alone takes, as that job
/// (`processes`).
pub(crate) const LAST_JOB: &str = concat!(runtime_stand_in!(), "%+");

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
    let mut findings = Findings::new(name);
    let found = &mut findings;
    match name {
        "grep" | "egrep" | "fgrep" => grep::grep(args, false, found)?,
        "rgrep" => grep::grep(args, true, found)?,
        "rg" => grep::ripgrep(args, found)?,
        "find" => {
            walk::find(args, found)?;
            found.names_only = true;
        }
        "ls" => {
            walk::ls(args, found)?;
            found.names_only = true;
        }
        "stat" | "test" | "[" => coreutils::look_at_operands(name, args, found)?,
        "du" | "tree" => {
            let table = if name == "du" { &walk::DU } else { &walk::TREE };
            walk::walk_operands(args, table, found)?;
            found.names_only = true;
        }
        "diff" => coreutils::diff(args, found)?,
        "curl" => curl::curl(args, found)?,
        "docker" => docker::docker(args, found)?,
        "sed" => sed::sed(args, found)?,
        "awk" | "gawk" | "mawk" | "nawk" => awk::awk(args, found)?,
        "tar" => tar::tar(args, found)?,
        "cp" => file_ops::copy_or_move(args, file_ops::Transfer::Copy, found)?,
        "mv" => file_ops::copy_or_move(args, file_ops::Transfer::Move, found)?,
        "rm" => file_ops::rm(args, found)?,
        "mkdir" => file_ops::make(args, &file_ops::MKDIR, found)?,
        "rmdir" => file_ops::rmdir(args, found)?,
        "ln" => file_ops::ln(args, found)?,
        "mktemp" => file_ops::mktemp(args, found)?,
        "touch" => file_ops::make(args, &file_ops::TOUCH, found)?,
        "tee" => file_ops::make(args, &file_ops::TEE, found)?,
        // Their operands are words, not files.
        "echo" | "printf" | "sleep" | "true" | "false" | "pwd" | "basename" | "dirname" | "yes" => {
        }
        "chmod" | "chown" | "chgrp" => file_ops::change_attributes(args, name == "chmod", found)?,
        "uniq" => coreutils::input_then_output(args, &coreutils_tables::UNIQ, found)?,
        "less" => coreutils::less(args, found)?,
        "git" => git::git(args, found)?,
        "apply_patch" | "applypatch" => patch::apply_patch(args, found),
        "node" | "nodejs" => interpreters::interpreter(args, &interpreters::NODE_RUNS, found)?,
        "ruby" => interpreters::interpreter(args, &interpreters::RUBY_RUNS, found)?,
        n if n.starts_with("python") => {
            interpreters::interpreter(args, &interpreters::PYTHON_RUNS, found)?;
        }
        n if n.starts_with("perl") => {
            interpreters::interpreter(args, &interpreters::PERL_RUNS, found)?;
        }
        n if interpreters::SHELLS.contains(&n) => interpreters::shell(n, args, found),
        // `env` (or `printenv`) with no command prints the environment, which holds the
        // agent host's own keys (`ANTHROPIC_API_KEY`, …).
        "env" | "printenv" if args.iter().all(|a| a.starts_with('-') || a.contains('=')) => {
            found.forbid(
                name,
                "prints the environment, which may hold keys; `echo \"$PATH\"` prints one variable that holds none",
            );
        }
        // `printenv NAME…` prints those variables: only the ones that hold no key.
        "printenv" => {
            for name in args.iter().filter(|a| !a.starts_with('-')) {
                if !TEXT_VARIABLES.contains(&name.as_str()) && name != "HOME" && name != "PWD" {
                    found.forbid(
                        name,
                        "is a variable that may hold a key; `printenv PATH` prints one that holds none",
                    );
                }
            }
        }
        "xxd" => coreutils::input_then_output(args, &coreutils::XXD, found)?,
        "gzip" | "gunzip" => compress::gzip(args, name == "gunzip", found)?,
        "ps" => processes::ps(args, found),
        "kill" => processes::kill(args, found),
        "ss" => processes::ss(args, found)?,
        "sqlite3" => sqlite::sqlite3(args, found)?,
        "unzip" => unzip::unzip(args, found)?,
        "zip" => unzip::zip(args, found)?,
        n if compilers::is_c_driver(n) => compilers::c_driver(args, found),
        "javac" => compilers::javac(args, found),
        "java" => compilers::java(args, found),
        "hostname" => coreutils::hostname(args, found)?,
        n if interpreters::COMMAND_RUNNERS.contains(&n) => {
            found.forbid(n, "runs another command");
        }
        "npm" | "pnpm" | "yarn" => builders::node_packages(name, args, found)?,
        n if names_program(n, "pip") => builders::pip(n, args, found)?,
        "cargo" => builders::cargo(args, found)?,
        "go" => builders::go(args, found)?,
        "mvn" | "gradle" | "gradlew" => builders::java_builds(name, args, found)?,
        n => builders::operands(n, args, found)?,
    }
    Ok(findings.into_analysis(program))
}

/// Whether a file named `file` is the program `listed` names: the same name, or that name
/// with a version after it (`python3.11`, `pip3.11` for `python3`, `pip3`; `node-20`).
pub(crate) fn names_program(file: &str, listed: &str) -> bool {
    let Some(rest) = file.strip_prefix(listed) else {
        return false;
    };
    let version = rest.strip_prefix(['.', '-']).unwrap_or(rest);
    rest.is_empty()
        || (version.starts_with(|c: char| c.is_ascii_digit())
            && version.chars().all(|c| c.is_ascii_digit() || c == '.'))
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

    #[test]
    fn the_environment_printed_is_refused_with_why() {
        for line in ["env", "env -0", "env -i A=b", "printenv"] {
            let a = test_support::analyze_line(line);
            assert!(
                a.forbidden
                    .iter()
                    .any(|f| f.contains("prints the environment")),
                "{line}: {a:?}"
            );
        }
        let a = test_support::analyze_line("env A=b cargo test");
        assert!(
            a.forbidden
                .iter()
                .any(|f| f.contains("runs another command"))
        );
    }

    #[test]
    fn printenv_prints_only_variables_that_hold_no_key() {
        assert!(test_support::clean("printenv PATH HOME").reads.is_empty());
        for line in [
            "printenv ANTHROPIC_API_KEY",
            "printenv PATH AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(
                test_support::forbidden(line).contains("may hold a key"),
                "{line}"
            );
        }
        test_support::clean("yes n");
    }

    #[test]
    fn a_listed_name_with_a_version_after_it_is_that_program() {
        for (file, listed) in [
            ("python3", "python3"),
            ("python3.11", "python3"),
            ("python3.11", "python"),
            ("pip3.11", "pip3"),
            ("node-20", "node"),
        ] {
            assert!(names_program(file, listed), "{file} for {listed}");
        }
        for (file, listed) in [
            ("python3-config", "python3"),
            ("pythonista", "python"),
            ("lsblk", "ls"),
            ("ls.", "ls"),
            ("sh", "bash"),
        ] {
            assert!(!names_program(file, listed), "{file} for {listed}");
        }
    }

    #[test]
    fn the_standard_devices_are_no_files_to_check() {
        for line in [
            "head -c 32 /dev/urandom",
            "tee /dev/stderr",
            "cp /dev/null empty.txt",
            "od -An -N4 /dev/random",
        ] {
            let a = test_support::clean(line);
            assert!(a.reads.is_empty(), "{line}: {a:?}");
        }
        let a = test_support::clean("head -c 512 /dev/sda /dev/./zero");
        assert_eq!(a.reads, test_support::paths(&["/dev/sda", "/dev/./zero"]));
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
