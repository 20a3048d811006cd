//! Programs that run code: interpreters (`python node perl ruby`), whose inline code and
//! in-place edits are forbidden and whose script and its arguments are reads; shells, always
//! forbidden; and programs that run another command (`xargs env sudo …`), always forbidden.
use super::{
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{AttachedDigits, AttachedOnly, Required},
        long_option, option, parse_options, short_option,
    },
};

/// The reason an interpreter's inline-code option is forbidden.
const RUNS_INLINE_CODE: Effect = Effect::Forbid("runs inline code");

/// python*: `-c` runs inline code; `-m` names a module.
pub(super) const PYTHON: OptionTable = OptionTable::until_first_operand(&[
    short_option('c', Required, RUNS_INLINE_CODE),
    short_option('m', Required, Effect::None),
    short_option('W', Required, Effect::None),
    short_option('X', Required, Effect::None),
    long_option("check-hash-based-pycs", Required, Effect::None),
]);

/// node: `-e` and `-p` run inline code (`-c` is a syntax check).
pub(super) const NODE: OptionTable = OptionTable::until_first_operand(&[
    option('e', "eval", Required, RUNS_INLINE_CODE),
    option('p', "print", Required, RUNS_INLINE_CODE),
    option('r', "require", Required, Effect::None),
    long_option("import", Required, Effect::None),
    long_option("env-file", Required, Effect::Read),
    long_option("input-type", Required, Effect::None),
    long_option("loader", Required, Effect::None),
    long_option("experimental-loader", Required, Effect::None),
    long_option("conditions", Required, Effect::None),
    long_option("title", Required, Effect::None),
]);

/// perl*: `-e -E` run inline code, `-i` edits in place; `-l -0 -C` take attached digits.
pub(super) const PERL: OptionTable = OptionTable::until_first_operand(&[
    short_option('e', Required, RUNS_INLINE_CODE),
    short_option('E', Required, RUNS_INLINE_CODE),
    short_option('I', Required, Effect::Read),
    short_option('i', AttachedOnly, Effect::InPlace),
    short_option('M', AttachedOnly, Effect::None),
    short_option('m', AttachedOnly, Effect::None),
    short_option('l', AttachedDigits, Effect::None),
    short_option('0', AttachedDigits, Effect::None),
    short_option('F', AttachedOnly, Effect::None),
    short_option('x', AttachedOnly, Effect::None),
    short_option('C', AttachedDigits, Effect::None),
    short_option('d', AttachedOnly, Effect::None),
    short_option('D', AttachedOnly, Effect::None),
]);

/// ruby: `-e` runs inline code, `-i` edits in place, `-C` changes directory.
pub(super) const RUBY: OptionTable = OptionTable::until_first_operand(&[
    short_option('e', Required, RUNS_INLINE_CODE),
    short_option('I', Required, Effect::Read),
    short_option('r', Required, Effect::None),
    short_option('C', Required, Effect::ChangeDir),
    option('E', "encoding", Required, Effect::None),
    short_option('i', AttachedOnly, Effect::InPlace),
    short_option('F', AttachedOnly, Effect::None),
    short_option('x', AttachedOnly, Effect::None),
    short_option('0', AttachedDigits, Effect::None),
    short_option('W', AttachedDigits, Effect::None),
    long_option("external-encoding", Required, Effect::None),
    long_option("internal-encoding", Required, Effect::None),
    long_option("enable", Required, Effect::None),
    long_option("disable", Required, Effect::None),
]);

/// Interpreters: options stop at the script; the script and its arguments are all reads
/// (and writes, with an in-place edit).
pub(super) fn interpreter(args: &[String], table: &OptionTable, findings: &mut Findings) {
    let parsed = parse_options(args, table, findings);
    for operand in &parsed.operands {
        findings.read(&operand.path());
        if parsed.in_place {
            findings.write(&operand.path());
        }
    }
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

/// A shell, with `-c` (inline commands) or without (a script or an interactive shell).
pub(super) fn shell(name: &str, args: &[String], findings: &mut Findings) {
    let why = if args.iter().any(|a| a == "-c") {
        "runs inline shell commands"
    } else {
        "runs a shell (commands the gateway cannot see)"
    };
    findings.forbid(name, why);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn interpreters_inline_code() {
        assert!(forbidden("python3 -c 'import os'").contains("python3 -c: runs inline code"));
        assert!(forbidden("python -Bc 'x'").contains("-c"));
        assert!(forbidden("node -e 'x'").contains("-e"));
        assert!(forbidden("node --eval=x").contains("-e"));
        assert!(forbidden("node -p 'x'").contains("-p"));
        assert!(forbidden("perl -ne 'print'").contains("-e"));
        assert!(forbidden("perl -pi -e s/a/b/ f").contains("in place"));
        assert!(
            forbidden("perl -lne 'print' f").contains("perl -e"),
            "-l takes digits only"
        );
        assert!(forbidden("perl -l0e 'print' f").contains("perl -e"));
        assert!(forbidden("perl -0777e 'print' f").contains("perl -e"));
        assert!(
            clean("perl -0777 -n script.pl f")
                .reads
                .contains(&PathBuf::from("f"))
        );
        assert!(forbidden("ruby -W0e 'x'").contains("ruby -e"));
        assert!(forbidden("ruby -e 'x'").contains("-e"));
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
        assert!(forbidden("/bin/bash script.sh").contains("bash: runs a shell"));
        assert!(forbidden("xargs rm").contains("xargs: runs another command"));
        assert!(forbidden("env FOO=1 cat a").contains("env"));
        assert!(forbidden("eval x").contains("eval"));
        assert!(forbidden("timeout 5 cat a").contains("timeout"));
        assert!(forbidden("sudo cat /etc/shadow").contains("sudo"));
    }
}
