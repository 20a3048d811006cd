//! `ps` and `kill`: the processes the line may see and signal. `ps` lists processes, their
//! command lines among them, but not their environments (the BSD `e` flag prints each
//! process's environment, which holds the agent host's keys: forbidden). `kill` signals the
//! line's own background jobs (`%1`, `%%`, `%+`, `%-`, and `$!`: [`super::LAST_JOB`]); a
//! process named by number may be any
//! of the user's (under `gatewayd run` the kernel keeps signals inside the session, but a
//! hook alone does not), so it is forbidden, and so is a process group.
use super::findings::Findings;

/// ps's UNIX options (`-o FORMAT`) and long options (`--sort KEY`) whose value is the next
/// word when not attached.
const PS_UNIX_VALUES: &[&str] = &[
    "-o", "-O", "-p", "-q", "-u", "-U", "-g", "-G", "-C", "-t", "-s",
];
const PS_LONG_VALUES: &[&str] = &[
    "--format",
    "--sort",
    "--pid",
    "--ppid",
    "--quick-pid",
    "--user",
    "--User",
    "--group",
    "--Group",
    "--tty",
    "--sid",
    "--cols",
    "--columns",
    "--width",
    "--lines",
    "--rows",
];

/// BSD option letters of ps whose value follows (`ps axo pid,comm`, `ps p 42`).
const PS_BSD_VALUES: &str = "oOpUtkq";

/// ps: forbidden when a BSD option word holds `e` (the environment of each process).
pub(super) fn ps(args: &[String], findings: &mut Findings) {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let w = word.as_str();
        if w.starts_with("--") {
            if PS_LONG_VALUES.contains(&w) {
                words.next();
            }
        } else if w.starts_with('-') {
            if PS_UNIX_VALUES.contains(&w) {
                words.next();
            }
        } else {
            for (i, c) in w.char_indices() {
                if c == 'e' {
                    findings.forbid(
                        w,
                        "prints each process's environment, which may hold keys; `ps aux` lists them without it",
                    );
                    break;
                }
                if PS_BSD_VALUES.contains(c) {
                    if i + 1 == w.len() {
                        words.next();
                    }
                    break;
                }
            }
        }
    }
}

/// kill (bash's builtin): one option first (`-9`, `-TERM`, `-s TERM`, `-n 9`; `-l` lists
/// signals), then the targets: only job specifications.
pub(super) fn kill(args: &[String], findings: &mut Findings) {
    let mut targets = match args.first().map(String::as_str) {
        Some("-l" | "-L") => return,
        Some("-s" | "-n") => args.get(2..).unwrap_or_default(),
        Some(w) if w.len() > 1 && w.starts_with('-') && w != "--" => &args[1..],
        _ => args,
    };
    if targets.first().is_some_and(|w| w == "--") {
        targets = &targets[1..];
    }
    for target in targets
        .iter()
        .filter(|w| !w.starts_with('%') && *w != super::LAST_JOB)
    {
        findings.forbid(
            target,
            "signals a process by number, which may be any of the user's; `kill %1` signals the line's own background job",
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden};

    #[test]
    fn ps_lists_processes_but_not_their_environments() {
        for line in [
            "ps",
            "ps aux",
            "ps -ef",
            "ps axo pid,etime,comm",
            "ps -o pid,user,etime -p 1",
            "ps --sort=-pcpu aux",
        ] {
            clean(line);
        }
        for line in ["ps e", "ps auxe", "ps eww 42", "ps axeo pid"] {
            assert!(forbidden(line).contains("environment"), "{line}");
        }
    }

    #[test]
    fn kill_signals_the_lines_own_jobs_only() {
        for line in [
            "kill %1",
            "kill -9 %1",
            "kill -s TERM %%",
            "kill -l",
            "kill -TERM %+ %-",
        ] {
            clean(line);
        }
        for line in [
            "kill 1234",
            "kill -9 1234",
            "kill -s KILL 1",
            "kill -- -1",
            "kill -9 -1",
            "kill %1 42",
        ] {
            assert!(forbidden(line).contains("by number"), "{line}");
        }
    }
}
