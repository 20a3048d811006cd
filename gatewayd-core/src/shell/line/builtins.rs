//! The shell's own builtins, as the walk of a line ([`super`]) meets them (but `cd`,
//! `pushd` and `popd`, which are the walk's, `flow`): those that change the variables the
//! next commands see (`export`, `read`, `printf -v`, …), those that run nothing, and those
//! that run code not on the line (refused). Also the rule for the names a line may set ([`check_assignment`]).
use brush_parser::ast;

use super::{
    Context, unanalysable,
    words::{RUNTIME_STAND_IN, is_integer},
};
use crate::shell::ShellError;
use crate::shell::split::is_name;

/// The words of the shell's own that the walk reads where a command starts, and no program
/// of that name runs: [`Context::builtin`]'s, `cd`, `source` and `.`, `time`, `command` and
/// `exec`. A line of one of them alone is walked as a line, not checked as a program; under
/// a wrapper (`timeout 5 cd x`) they are not what runs, and are refused.
pub(super) const SHELL_WORDS: &[&str] = &[
    "cd",
    "exec",
    "source",
    ".",
    "time",
    "command",
    "wait",
    "exit",
    "return",
    ":",
    "break",
    "continue",
    "type",
    "ulimit",
    "umask",
    "jobs",
    "set",
    "unset",
    "eval",
    "alias",
    "pushd",
    "popd",
    "trap",
    "enable",
    "shopt",
    "let",
    "hash",
    "builtin",
    "coproc",
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "read",
    "mapfile",
    "readarray",
    "getopts",
];

impl Context {
    /// Walks `argv` if it is a builtin (`true`); `false` for a program.
    pub(super) fn builtin(&mut self, argv: &[String]) -> Result<bool, ShellError> {
        let args = &argv[1..];
        match argv[0].as_str() {
            // Builtins that run nothing and open no file. (`break` and `continue` leave a
            // loop early; the walk goes on, over what might run.)
            // (`type NAME` and `command -v NAME` say what a name is and run nothing.)
            // (`ulimit` and `umask` print or set limits of this shell and what it starts.)
            // (`jobs` lists this shell's background jobs.)
            "wait" | "exit" | "return" | ":" | "break" | "continue" | "type" | "ulimit"
            | "umask" | "jobs" => {}
            "set" => check_set(args)?,
            "command" if matches!(args.first().map(String::as_str), Some("-v" | "-V")) => {}
            "unset" => {
                no_array_element(args)?;
                for name in args {
                    self.unset_var(name);
                }
            }
            "eval" | "alias" | "trap" | "enable" | "shopt" | "let" | "hash" | "builtin"
            | "coproc" | "exec" => {
                return Err(unanalysable(format!(
                    "`{}` runs code or changes the shell in ways not on the line",
                    argv[0]
                )));
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => self.declare(args)?,
            // They set variables to what they read: each name must be one a line may set,
            // and its value is known only when the line runs (text, where a substitution's
            // value may stand: `while read -r l; do echo "$l"; done < f`). mapfile's are
            // arrays, which are refused where used.
            "read" | "mapfile" | "readarray" | "getopts" => {
                no_array_element(args)?;
                for word in args.iter().filter(|w| is_name(w)) {
                    check_assignment(word, None)?;
                    if argv[0] == "read" || argv[0] == "getopts" {
                        self.set_var(word, RUNTIME_STAND_IN.to_owned());
                    } else {
                        self.unset_var(word);
                    }
                }
            }
            // bash's own `test -v 'a[EXPR]'` evaluates EXPR: after `-v`/`-R`, a plain name.
            "test" | "[" => {
                let after = args.windows(2).filter(|w| w[0] == "-v" || w[0] == "-R");
                if let Some(w) = after.map(|w| &w[1]).find(|n| !is_name(n)) {
                    return Err(unanalysable(format!(
                        "`-v {w}` (bash evaluates an array subscript as an expression, which can run commands)"
                    )));
                }
                return Ok(false);
            }
            // bash's own `printf` sets NAME with `-v NAME`; it is still analysed as a program.
            "printf" => {
                self.printf_var(args)?;
                return Ok(false);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The variable `printf -v NAME` sets (bash's `printf` takes no other option), checked
    /// and forgotten.
    fn printf_var(&mut self, args: &[String]) -> Result<(), ShellError> {
        let name = match args.first().map(String::as_str) {
            Some("-v") => args.get(1).map(String::as_str),
            Some(first) => first.strip_prefix("-v").filter(|n| !n.is_empty()),
            None => None,
        };
        if let Some(name) = name {
            no_array_element(&[name.to_owned()])?;
            if !is_name(name) {
                return Err(unanalysable(format!(
                    "`printf -v` with `{name}`, which is not a variable's name before the line runs"
                )));
            }
            check_assignment(name, None)?;
            self.unset_var(name);
        }
        Ok(())
    }

    /// `export NAME=value …` and the like: each name checked; a value only without options
    /// (`declare -i` computes, `-n` makes a reference to another variable), not an array.
    fn declare(&mut self, args: &[String]) -> Result<(), ShellError> {
        let options = args.iter().any(|a| a.starts_with(['-', '+']));
        if args
            .iter()
            .any(|a| a.starts_with(['-', '+']) && a.contains('n'))
        {
            return Err(unanalysable(
                "a reference to another variable (`declare -n`), or an option that unexports one",
            ));
        }
        for a in args {
            let (name, value) = match a.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (a.as_str(), None),
            };
            check_assignment(name, value)?;
            no_array_element(std::slice::from_ref(&name.to_owned()))?;
            // `declare -i X=EXPR` and `declare 'X=([EXPR]=…)'` evaluate EXPR as arithmetic,
            // which can run commands (`a[$(…)]`).
            if value.is_some_and(|v| options || v.starts_with('(')) {
                return Err(unanalysable(format!(
                    "`{a}` with options or as an array (bash may evaluate its value as an expression, which can run commands)"
                )));
            }
            match value {
                Some(value) => self.set_var(name, value.to_owned()),
                None if options => self.unset_var(name),
                None => {}
            }
        }
        Ok(())
    }
}

impl Context {
    /// `[[ … ]]`: it runs nothing and opens no file, once its words are known before the
    /// line runs (no substitution; bound variables only). An arithmetic comparison (`-eq`,
    /// `-lt`, …) evaluates its operands as expressions, which can run commands (`a[$(…)]`
    /// in a quoted word): each must be a plain integer.
    pub(super) fn extended_test(&self, e: &ast::ExtendedTestExpr) -> Result<(), ShellError> {
        use ast::{BinaryPredicate as B, ExtendedTestExpr as E};
        match e {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a)?;
                self.extended_test(b)
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a),
            E::UnaryTest(p, w) => {
                let text = self.static_text(&w.value)?;
                // `-v 'a[EXPR]'` evaluates EXPR as arithmetic: only a plain name.
                let names_a_variable = matches!(
                    p,
                    ast::UnaryPredicate::ShellVariableIsSetAndAssigned
                        | ast::UnaryPredicate::ShellVariableIsSetAndNameRef
                );
                if names_a_variable && !is_name(&text) {
                    return Err(unanalysable(format!(
                        "`-v {text}` in `[[ … ]]` (bash evaluates an array subscript as an expression, which can run commands)"
                    )));
                }
                Ok(())
            }
            E::BinaryTest(p, a, b) => {
                let arithmetic = matches!(
                    p,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                );
                for w in [a, b] {
                    let text = self.static_text(&w.value)?;
                    if arithmetic && !is_integer(&text) {
                        return Err(unanalysable(format!(
                            "the arithmetic comparison of `{text}` in `[[ … ]]` (bash evaluates it as an expression, which can run commands)"
                        )));
                    }
                }
                Ok(())
            }
        }
    }
}

/// Refuses a word that names an array element (`unset 'a[EXPR]'`, `read 'a[EXPR]'`): bash
/// evaluates the subscript as arithmetic, which can run commands (`a[$(…)]`).
fn no_array_element(words: &[String]) -> Result<(), ShellError> {
    match words
        .iter()
        .find(|w| !w.starts_with('-') && w.contains('['))
    {
        Some(w) => Err(unanalysable(format!(
            "`{w}`, an array element (bash evaluates its subscript as an expression, which can run commands)"
        ))),
        None => Ok(()),
    }
}

/// The `set -o` options that change nothing the walk reads (also `bash -o NAME -c …`).
pub(super) const SAFE_SHELL_OPTIONS: &[&str] = &[
    "errexit",
    "nounset",
    "xtrace",
    "verbose",
    "pipefail",
    "errtrace",
    "functrace",
    "noclobber",
    "hashall",
    "allexport",
    "notify",
    "monitor",
];

/// `set`'s options that change nothing the walk reads: `-e -u -x -o pipefail` and the like.
/// Refused: those that change how words become paths (`-f`/`noglob`, `+B`), where `cd`
/// goes (`-P`/`physical`), what is an assignment (`-k`), and any other.
fn check_set(args: &[String]) -> Result<(), ShellError> {
    const FLAGS: &str = "euxvETChmab";
    const NAMES: &[&str] = SAFE_SHELL_OPTIONS;
    let refused = |what: &str| {
        Err(unanalysable(format!(
            "`set {what}` (it may change how the line's words become paths, or where `cd` goes)"
        )))
    };
    let mut words = args.iter();
    while let Some(a) = words.next() {
        match a.as_str() {
            "--" | "-" => break,
            _ => match a.strip_prefix(['-', '+']) {
                // `-euo pipefail`: flags, then `o` and its option's name.
                Some(flags) => {
                    let (flags, named) = match flags.strip_suffix('o') {
                        Some(before) => (before, true),
                        None => (flags, false),
                    };
                    if !flags.chars().all(|c| FLAGS.contains(c)) {
                        return refused(a);
                    }
                    if named {
                        match words.next() {
                            Some(name) if !NAMES.contains(&name.as_str()) => {
                                return refused(&format!("{a} {name}"));
                            }
                            _ => {}
                        }
                    }
                }
                // The positional parameters (refused where used).
                None => break,
            },
        }
    }
    Ok(())
}

/// Assignments that choose what a program runs or loads, or where the shell and the tools
/// the analysis reads find and put their files: refused, as their value decides what the
/// line does and the analysis cannot follow it. Of git's variables only those that name
/// the author, the committer and the prompt are allowed (`GIT_TRACE=/path`,
/// `GIT_INDEX_FILE` and the like write or read files of their own).
pub(super) fn check_assignment(name: &str, value: Option<&str>) -> Result<(), ShellError> {
    const NAMES: [&str; 40] = [
        "PATH",
        // Where programs make their temporary files, which the analysis takes to be /tmp
        // (`mktemp`).
        "TMPDIR",
        "BASH_ENV",
        "ENV",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "HOME",
        // The shell's own view of directories and globs: `$PWD`, `cd`'s search, dotglob.
        "PWD",
        "OLDPWD",
        "CDPATH",
        "GLOBIGNORE",
        "EXECIGNORE",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "XDG_CONFIG_HOME",
        "LESSOPEN",
        "LESSCLOSE",
        // Configuration and destinations of the tools the analysis reads: rg's options
        // file, less's options and keys, tar's options, curl's .curlrc and TLS key log,
        // docker's daemon, grep's and perl's older variables.
        "RIPGREP_CONFIG_PATH",
        "LESS",
        "LESSKEY",
        "LESSKEYIN",
        "LESSEDIT",
        "TAR_OPTIONS",
        "CURL_HOME",
        "SSLKEYLOGFILE",
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_CONFIG",
        "GREP_OPTIONS",
        "PERLLIB",
    ];
    const GIT_ALLOWED: [&str; 8] = [
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_TERMINAL_PROMPT",
        "GIT_PAGER",
    ];
    // Where package managers and build tools install, and how they are configured: a
    // global install (`npm_config_global=true`, `PIP_USER=1`), an install root, default
    // flags (`GOFLAGS=-o=FILE`), a wrapper run around the compiler. (`GOPATH` only moves
    // Go's module cache: `go install`, which would write its `bin`, is refused.)
    const PACKAGE_SETTINGS: [&str; 16] = [
        "GOBIN",
        "GOFLAGS",
        "GOENV",
        "CARGO_HOME",
        "CARGO_INSTALL_ROOT",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC",
        "PNPM_HOME",
        "MAVEN_OPTS",
        "MAVEN_ARGS",
        "GRADLE_OPTS",
        "GRADLE_USER_HOME",
    ];
    const PIP_ALLOWED: [&str; 5] = [
        "PIP_DISABLE_PIP_VERSION_CHECK",
        "PIP_NO_INPUT",
        "PIP_QUIET",
        "PIP_PROGRESS_BAR",
        "PIP_NO_CACHE_DIR",
    ];
    let package_setting = PACKAGE_SETTINGS.contains(&name)
        || name.to_ascii_lowercase().starts_with("npm_config_")
        || name.starts_with("YARN_")
        || (name.starts_with("PIP_") && !PIP_ALLOWED.contains(&name));
    let pager_ok = value.is_none_or(|v| ["", "cat", "less", "more"].contains(&v));
    // A proxy sends a request elsewhere than the URL's host (curl, git, pip, npm).
    let proxy =
        name.to_ascii_lowercase().ends_with("_proxy") && !name.eq_ignore_ascii_case("no_proxy");
    let refused = NAMES.contains(&name)
        || package_setting
        || proxy
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || (name.starts_with("GIT_") && !GIT_ALLOWED.contains(&name))
        || name.ends_with("_COMMAND")
        || name.ends_with("_ASKPASS")
        || name.ends_with("EDITOR")
        || name == "VISUAL"
        || (name.ends_with("PAGER") && !pager_ok);
    if refused {
        return Err(unanalysable(format!(
            "the assignment `{name}=…` (it chooses what a program runs or loads, or where the shell or a tool finds or puts its files)"
        )));
    }
    Ok(())
}

/// `source FILE [ARGS]` (or `. FILE`): the shell runs FILE's code itself, as `bash FILE`
/// would, so it is analysed as that command (FILE is read, and a script of the workspace
/// runs under the kernel layer as any script does). What FILE's code does to this shell
/// (its directory, variables, functions) is not followed: like a script's own commands, it
/// is code the line does not show. FILE must name a path (`./env.sh`): bash looks a bare
/// name up on `PATH` first.
pub(super) fn sourced(argv: &[String]) -> Result<Option<Vec<String>>, ShellError> {
    if argv[0] != "source" && argv[0] != "." {
        return Ok(None);
    }
    match argv.get(1) {
        Some(file) if file.contains('/') => {
            let mut script = vec!["bash".to_owned()];
            script.extend(argv[1..].iter().cloned());
            Ok(Some(script))
        }
        Some(file) => Err(unanalysable(format!(
            "`{} {file}`, which bash looks up on `PATH` before the working directory (write `./{file}`)",
            argv[0]
        ))),
        None => Err(unanalysable(format!("`{}` without a file", argv[0]))),
    }
}
