//! Programs that run code: interpreters (`python node perl ruby`), whose in-place edits are
//! forbidden, whose script and its arguments are reads, and whose program given on the line
//! (`-c`, `-e`) the engine reads (`engine::inline_program`); shells, always forbidden; and
//! programs that run another command (`xargs env sudo …`), always forbidden.
use super::{
    ShellError,
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{AttachedDigits, AttachedOnly, Flag, Required},
        long_option, option, parse_options, short_option,
    },
};

/// An option whose value is the program (`-c CODE`, `-e CODE`), for the engine to read
/// ([`Effect::InlineProgram`]).
const INLINE_PROGRAM: Effect = Effect::InlineProgram(false);

/// python* (`CPython` 3.11 to 3.13): `-c` gives the program, and the words after it are its
/// arguments; `-m` names a module, and the words after it are the module's.
pub(super) const PYTHON: OptionTable = OptionTable::until_first_operand(&[
    short_option('c', Required, Effect::InlineProgram(true)),
    short_option('m', Required, Effect::EndsOptions),
])
.inert(
    "-b -B -d -E -h -? --help -i -I -O -P -q -R -s -S -u -v -V --version -W= -x -X= \
     --check-hash-based-pycs= --help-env --help-xoptions --help-all",
);

/// The reason node's inspector options are forbidden.
const OPENS_A_DEBUGGER: Effect =
    Effect::Forbid("opens a debugger port, through which whoever connects runs code");

/// The reason node's options that write files in the working directory are forbidden.
const WRITES_DIAGNOSTICS: Effect =
    Effect::Forbid("writes profiles or snapshots in the working directory");

/// node (20): `-e` and `-p` give the program (`-c` is a syntax check); the inspector opens a
/// port; profilers, reports and logs write files. Boolean options have `--no-` forms.
pub(super) const NODE: OptionTable = OptionTable::until_first_operand(&[
    option('e', "eval", Required, INLINE_PROGRAM),
    option('p', "print", Required, INLINE_PROGRAM),
    option('r', "require", Required, Effect::Read),
    long_option("import", Required, Effect::Read),
    long_option("loader", Required, Effect::Read),
    long_option("experimental-loader", Required, Effect::Read),
    long_option("env-file", Required, Effect::Read),
    long_option("env-file-if-exists", Required, Effect::Read),
    long_option("experimental-policy", Required, Effect::Read),
    long_option("icu-data-dir", Required, Effect::Read),
    long_option("openssl-config", Required, Effect::Read),
    long_option("snapshot-blob", Required, Effect::Read),
    long_option("watch-path", Required, Effect::Read),
    long_option("inspect", AttachedOnly, OPENS_A_DEBUGGER),
    long_option("inspect-brk", AttachedOnly, OPENS_A_DEBUGGER),
    long_option("inspect-wait", AttachedOnly, OPENS_A_DEBUGGER),
    long_option("inspect-port", Required, OPENS_A_DEBUGGER),
    long_option("debug-port", Required, OPENS_A_DEBUGGER),
    long_option("build-snapshot", Flag, WRITES_DIAGNOSTICS),
    long_option("build-snapshot-config", Required, WRITES_DIAGNOSTICS),
    long_option("experimental-sea-config", Required, WRITES_DIAGNOSTICS),
    long_option("cpu-prof", Flag, WRITES_DIAGNOSTICS),
    long_option("heap-prof", Flag, WRITES_DIAGNOSTICS),
    long_option("prof", Flag, WRITES_DIAGNOSTICS),
    long_option("heapsnapshot-near-heap-limit", Required, WRITES_DIAGNOSTICS),
    long_option("heapsnapshot-signal", Required, WRITES_DIAGNOSTICS),
    long_option("cpu-prof-dir", Required, Effect::Write),
    long_option("cpu-prof-name", Required, Effect::Write),
    long_option("heap-prof-dir", Required, Effect::Write),
    long_option("heap-prof-name", Required, Effect::Write),
    long_option("diagnostic-dir", Required, Effect::Write),
    long_option("report-directory", Required, Effect::Write),
    long_option("report-dir", Required, Effect::Write),
    long_option("report-filename", Required, Effect::Write),
    long_option("redirect-warnings", Required, Effect::Write),
    long_option("tls-keylog", Required, Effect::Write),
    long_option("trace-event-file-pattern", Required, Effect::Write),
    long_option("test-reporter-destination", Required, Effect::Write),
])
.inert(
    "--abort-on-uncaught-exception --allow-addons --allow-child-process --allow-fs-read= \
     --allow-fs-write= --allow-wasi --allow-worker -c --check --completion-bash -C= \
     --conditions= --cpu-prof-interval= --disable-proto= --disable-warning= \
     --disable-wasm-trap-handler --disallow-code-generation-from-strings \
     --dns-result-order= --enable-etw-stack-walking --enable-fips --enable-source-maps \
     --experimental-default-type= --experimental-eventsource \
     --experimental-import-meta-resolve --experimental-network-imports \
     --experimental-network-inspection --experimental-permission \
     --experimental-print-required-tla --experimental-test-coverage \
     --experimental-test-module-mocks --experimental-vm-modules \
     --experimental-wasm-modules --experimental-websocket --expose-gc --force-context-aware \
     --force-fips --force-node-api-uncaught-exceptions-policy --frozen-intrinsics \
     --heap-prof-interval= -h --help --huge-max-old-generation-size --input-type= \
     --insecure-http-parser --inspect-publish-uid= -i --interactive \
     --interpreted-frames-native-stack --jitless --max-http-header-size= \
     --network-family-autoselection-attempt-timeout= --no-addons --no-deprecation \
     --no-experimental-detect-module --no-experimental-fetch \
     --no-experimental-global-customevent --no-experimental-global-webcrypto \
     --no-experimental-repl-await --no-experimental-require-module \
     --no-extra-info-on-fatal-exception --no-force-async-hooks-checks \
     --no-global-search-paths --enable-network-family-autoselection \
     --no-network-family-autoselection --no-warnings --node-memory-debug \
     --openssl-legacy-provider --openssl-shared-config --pending-deprecation \
     --policy-integrity= --preserve-symlinks --preserve-symlinks-main --prof-process \
     --report-compact --report-exclude-network --report-on-fatalerror --report-on-signal \
     --report-signal= --report-uncaught-exception --secure-heap= --secure-heap-min= --test \
     --test-concurrency= --test-force-exit --test-name-pattern= --test-only \
     --test-reporter= --test-shard= --test-timeout= --throw-deprecation --title= \
     --tls-cipher-list= --tls-max-v1.2 --tls-max-v1.3 --tls-min-v1.0 --tls-min-v1.1 \
     --tls-min-v1.2 --tls-min-v1.3 --trace-atomics-wait --trace-deprecation \
     --trace-event-categories= --trace-exit --trace-promises --trace-require-module= \
     --trace-sigint --trace-sync-io --trace-tls --trace-uncaught --trace-warnings \
     --track-heap-objects --unhandled-rejections= --use-bundled-ca --use-largepages= \
     --use-openssl-ca --v8-options --v8-pool-size= -v --version --watch \
     --watch-preserve-output --zero-fill-buffers",
)
.negatable();

/// perl* (5.36): `-e -E` give the program (a line each), `-i` edits in place; `-l -0` take attached digits,
/// `-C -D -d -V -x -F -m -M` the rest of their word.
pub(super) const PERL: OptionTable = OptionTable::until_first_operand(&[
    short_option('e', Required, INLINE_PROGRAM),
    short_option('E', Required, INLINE_PROGRAM),
    short_option('I', Required, Effect::Read),
    short_option('i', AttachedOnly, Effect::InPlace),
    short_option('l', AttachedDigits, Effect::None),
    short_option('0', AttachedDigits, Effect::None),
    short_option('C', AttachedOnly, Effect::None),
])
.inert(
    "-a -c -d[=] -D[=] -f -F[=] -m[=] -M[=] -n -p -s -S -t -T -u -U -v -V[=] -w -W -x[=] -X \
     -h --help --version",
);

/// ruby (3.x; not installed here, taken from `ruby --help`): `-e` gives the program, `-i`
/// edits in place, `-C` changes directory.
pub(super) const RUBY: OptionTable = OptionTable::until_first_operand(&[
    short_option('e', Required, INLINE_PROGRAM),
    short_option('I', Required, Effect::Read),
    short_option('C', Required, Effect::ChangeDir),
    short_option('i', AttachedOnly, Effect::InPlace),
    short_option('0', AttachedDigits, Effect::None),
    short_option('W', AttachedDigits, Effect::None),
])
.inert(
    "-r= -E= --encoding= -F[=] -x[=] -a -c -d --debug -h --help -l -n -p -s -S -v --verbose \
     -w -y --yydebug --copyright --version --external-encoding= --internal-encoding= \
     --enable= --disable= --dump= --backtrace-limit= --crash-report= --parser= --jit --yjit \
     --rjit",
);

/// An interpreter: its options, and the words after which it runs no program from its input
/// (it prints and exits, or finds its program elsewhere: `python3 -m pytest`; a program
/// given on the line, `-c CODE`, is [`Findings::inline_programs`]).
pub(super) struct Interpreter {
    table: &'static OptionTable,
    no_program_from_input: &'static [&'static str],
}

pub(super) const PYTHON_RUNS: Interpreter = Interpreter {
    table: &PYTHON,
    no_program_from_input: &[
        "-h",
        "-?",
        "--help",
        "-V",
        "--version",
        "--help-env",
        "--help-xoptions",
        "--help-all",
        "-m",
    ],
};
pub(super) const NODE_RUNS: Interpreter = Interpreter {
    table: &NODE,
    no_program_from_input: &[
        "-h",
        "--help",
        "-v",
        "--version",
        "--test",
        "--v8-options",
        "--completion-bash",
        "-c",
        "--check",
    ],
};
pub(super) const PERL_RUNS: Interpreter = Interpreter {
    table: &PERL,
    no_program_from_input: &["-h", "--help", "-v", "-V", "--version"],
};
pub(super) const RUBY_RUNS: Interpreter = Interpreter {
    table: &RUBY,
    no_program_from_input: &["-h", "--help", "-v", "--version", "--copyright"],
};

/// Interpreters: options stop at the script; the script and its arguments are all reads
/// (and writes, with an in-place edit). An argument may be a URI for the script. With no
/// script (or `-`), the program is read from the input ([`Findings::program_from_input`]).
pub(super) fn interpreter(
    args: &[String],
    which: &Interpreter,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let parsed = parse_options(args, which.table, findings)?;
    // The words before the script: options and their values (`-W ignore --version`).
    let script_at = parsed.operands.first().and_then(|script| {
        args.iter()
            .position(|a| std::ptr::eq(a.as_str(), script.word))
    });
    let mut before_script = args[..script_at.unwrap_or(args.len())]
        .iter()
        .filter(|a| a.starts_with('-') && *a != "-");
    // `--version`, `--eval=CODE`, and a short option with its value attached (`-mpytest`).
    let names = |a: &String, w: &&str| {
        a.split('=').next() == Some(*w) || (w.len() == 2 && a.starts_with(*w))
    };
    let elsewhere = !findings.inline_programs.is_empty()
        || before_script.any(|a| which.no_program_from_input.iter().any(|w| names(a, w)));
    findings.program_from_input = !elsewhere
        && parsed.operands.first().is_none_or(|script| {
            script.word == "-" || super::findings::is_standard_device(script.word)
        });
    // `python3 -m pip …` is pip: its installs and configuration are checked as pip's.
    if findings.command().starts_with("python") && parsed.value_of('m', "") == Some("pip") {
        let pip_args: Vec<String> = parsed.operands.iter().map(|o| o.word.to_owned()).collect();
        super::builders::pip("pip", &pip_args, findings)?;
    }
    if parsed.in_place {
        let what = format!("{} -i", findings.command());
        findings.forbid(&what, "edits files in place");
    }
    for operand in &parsed.operands {
        if parsed.in_place {
            findings.read(&operand.path());
            findings.write(&operand.path());
        } else {
            findings.read_argument(operand.word, &operand.path());
        }
    }
    Ok(())
}

/// Shells: they run commands the gateway cannot see, whatever their arguments.
pub(super) const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
];

/// Programs whose job is to run another command (given in their arguments).
pub(super) const COMMAND_RUNNERS: &[&str] = &[
    "xargs", "env", "eval", "exec", "nohup", "timeout", "nice", "ionice", "stdbuf", "setsid",
    "chroot", "sudo", "su", "doas", "runuser", "unshare", "nsenter", "watch", "time", "command",
    "builtin", "strace", "ltrace", "script", "parallel", "flock",
];

/// Shells that run a script file as `sh SCRIPT ARGS`, as an interpreter runs one.
pub(crate) const SCRIPT_SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh"];

/// A shell. `sh [-eux…] SCRIPT ARGS` runs a script, as `python3 SCRIPT` does: the script and
/// its arguments are reads, its commands are not analysed. With `-c` here (a line not
/// parsed as a shell's: `bash -c` bodies are checked by [`super::line`]), with other
/// options, or without a script (commands from its input, an interactive shell): refused.
pub(super) fn shell(name: &str, args: &[String], findings: &mut Findings) {
    let flags = args.iter().take_while(|a| is_script_flag(a)).count();
    let runs_a_script = SCRIPT_SHELLS.contains(&name)
        && args
            .get(flags)
            // `+o NAME`, `+x`: options too, to the shells.
            .is_some_and(|script| !script.starts_with(['-', '+']));
    // `bash /dev/stdin`: the script is the shell's input, commands the line may not show.
    let script_is_input = args
        .get(flags)
        .is_some_and(|script| super::findings::is_standard_device(script));
    if runs_a_script && !script_is_input {
        for a in &args[flags..] {
            findings.read_argument(a, std::path::Path::new(a));
        }
        return;
    }
    let why = if script_is_input {
        "runs the commands of its input (a device as its script)"
    } else if args.iter().any(|a| a == "-c") {
        "runs inline shell commands"
    } else {
        "runs a shell on its input or with options the gateway does not know (commands it cannot see; run a script file with `sh SCRIPT`)"
    };
    findings.forbid(name, why);
}

/// `-e`, `-u`, `-x`, `-v` and their clusters: options that change no file a shell reads.
fn is_script_flag(arg: &str) -> bool {
    arg.strip_prefix('-')
        .is_some_and(|f| !f.is_empty() && f.chars().all(|c| "euxv".contains(c)))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, forbidden, named, paths, unknown_option};

    #[test]
    fn an_interpreter_with_no_script_reads_its_program_from_its_input() {
        use crate::shell::test_support::analyze_line;
        for line in [
            "python3",
            "python3 -",
            "python3 -q -u",
            "node",
            "node -i",
            "perl -w",
            "python3 /dev/stdin",
            "node /dev/fd/0",
        ] {
            assert!(analyze_line(line).program_from_input, "{line}");
        }
        for line in ["bash /dev/stdin", "sh -e /dev/fd/0 arg"] {
            assert!(
                crate::shell::test_support::forbidden(line).contains("commands of its input"),
                "{line}"
            );
        }
        for line in [
            "python3 x.py",
            "python3 -m pytest -q",
            "python3 -mpytest",
            "python3 --version",
            "python3 -V",
            "python3 -W ignore --version",
            "python3 -X dev -m pytest",
            "node --test",
            "node -v",
            "node app.js",
            "perl -v",
        ] {
            assert!(!analyze_line(line).program_from_input, "{line}");
        }
    }

    #[test]
    fn interpreters_programs_given_on_the_line() {
        use crate::shell::test_support::analyze_line;
        let program = |line: &str| {
            let a = analyze_line(line);
            assert!(a.forbidden.is_empty(), "{line}: {:?}", a.forbidden);
            assert!(!a.program_from_input, "{line}");
            a.inline_programs
        };
        assert_eq!(program("python3 -c 'import os'"), ["import os"]);
        assert_eq!(program("python -Bc 'x'"), ["x"]);
        assert_eq!(program("python3 -cx"), ["x"]);
        assert_eq!(program("node -e 'x'"), ["x"]);
        assert_eq!(program("node --eval=x"), ["x"]);
        assert_eq!(program("node -p 'x'"), ["x"]);
        assert_eq!(program("perl -ne 'print'"), ["print"]);
        assert_eq!(program("perl -e a -E b"), ["a", "b"]);
        assert_eq!(
            program("perl -lne 'print' f"),
            ["print"],
            "-l takes digits only"
        );
        assert_eq!(program("perl -l0e 'print' f"), ["print"]);
        assert_eq!(program("perl -0777e 'print' f"), ["print"]);
        assert_eq!(program("ruby -W0e 'x'"), ["x"]);
        assert!(program("python3 x.py -c y").is_empty());
        // After `-c CODE`, python's words are the program's arguments, not options.
        let a = analyze_line("python3 -c 'x' --inspect f");
        assert!(a.forbidden.is_empty(), "{:?}", a.forbidden);
        assert_eq!(a.reads, paths(&["--inspect", "f"]));
        assert!(forbidden("perl -pi -e s/a/b/ f").contains("in place"));
        assert!(
            clean("perl -0777 -n script.pl f")
                .reads
                .contains(&PathBuf::from("f"))
        );
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
        // A script runs as an interpreter's does: the script and its arguments are reads.
        assert_eq!(
            clean("/bin/bash script.sh a.txt").reads,
            paths(&["script.sh", "a.txt"])
        );
        assert_eq!(clean("sh -eu build.sh").reads, paths(&["build.sh"]));
        assert!(forbidden("bash").contains("bash: runs a shell"));
        assert!(forbidden("bash -s x").contains("bash: runs a shell"));
        assert!(forbidden("bash --rcfile x s.sh").contains("bash: runs a shell"));
        assert!(forbidden("busybox rm -rf x").contains("busybox: runs a shell"));
        assert!(forbidden("xargs rm").contains("xargs: runs another command"));
        assert!(forbidden("env FOO=1 cat a").contains("env"));
        assert!(forbidden("eval x").contains("eval"));
        assert!(forbidden("timeout 5 cat a").contains("timeout"));
        assert!(forbidden("sudo cat /etc/shadow").contains("sudo"));
    }

    #[test]
    fn interpreter_options_are_known_or_refused() {
        assert_eq!(unknown_option("python3 -Z x.py"), named("python3", "-Z"));
        assert_eq!(
            unknown_option("node --frob app.js"),
            named("node", "--frob")
        );
        assert_eq!(unknown_option("perl -Q x.pl"), named("perl", "-Q"));
        // After `-m MODULE` the words are the module's.
        let a = clean("python3 -B -m pytest -k name --frob tests");
        assert!(a.reads.contains(&PathBuf::from("tests")));
        assert!(
            clean("node --no-warnings --enable-source-maps app.js")
                .forbidden
                .is_empty()
        );
        assert!(forbidden("node --inspect=0.0.0.0:9229 app.js").contains("--inspect"));
        assert!(forbidden("node --cpu-prof app.js").contains("--cpu-prof"));
        assert_eq!(
            clean("perl -CSD -e 1").inline_programs,
            ["1"],
            "-C takes its word"
        );
        let a = clean("python3 file:///srv/t.py file://localhost/x");
        assert_eq!(a.reads, paths(&["/srv/t.py", "/x"]));
    }
}
