//! `ps`, `kill` and `ss`: the processes and sockets the line may see and signal. `ps` lists processes, their
//! command lines among them, but not their environments (the BSD `e` flag prints each
//! process's environment, which holds the agent host's keys: forbidden). `kill` signals the
//! line's own background jobs (`%1`, `%%`, `%+`, `%-`, and `$!`: [`super::LAST_JOB`]); a
//! process named by number may be any
//! of the user's (under `gatewayd run` the kernel keeps signals inside the session, but a
//! hook alone does not), so it is forbidden, and so is a process group. `ss` lists sockets
//! (its operands are a filter, not files); `-K` would close other processes' sockets.
use super::{
    ShellError,
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{Flag, Required},
        option, parse_options,
    },
};

/// ss's options (iproute2 6.1).
pub(super) const SS: OptionTable = OptionTable::gnu(&[
    option(
        'K',
        "kill",
        Flag,
        Effect::Forbid("closes sockets, which may be any of the user's processes'"),
    ),
    option('D', "diag", Required, Effect::Write),
    option('F', "filter", Required, Effect::Read),
])
.inert(
    "-h --help -V --version -n --numeric -r --resolve -a --all -l --listening -o --options \
     -e --extended -m --memory -p --processes -T --threads -i --info --tipcinfo -s \
     --summary --tos --cgroup -b --bpf -E --events -Z --context -z --contexts -N= --net= \
     -4 --ipv4 -6 --ipv6 -0 --packet -t --tcp -M --mptcp -S --sctp -u --udp -d --dccp -w \
     --raw -x --unix --tipc --vsock --xdp -f= --family= -H --no-header -O --oneline \
     --inet-sockopt -A= --query= --socket=",
);

/// ss: the sockets it lists; its operands are a filter (`state listening`, `sport = :80`).
pub(super) fn ss(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    parse_options(args, &SS, findings).map(|_| ())
}

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
    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn ss_lists_sockets_and_closes_none() {
        for line in [
            "ss -ltnp",
            "ss -tlpn state listening",
            "ss -o state established '( dport = :ssh )'",
            "ss -s",
        ] {
            assert!(clean(line).reads.is_empty(), "{line}");
        }
        assert_eq!(clean("ss -F filter.txt").reads, paths(&["filter.txt"]));
        assert_eq!(clean("ss --diag=dump.bin -t").writes, paths(&["dump.bin"]));
        for line in ["ss -K dst 10.0.0.1", "ss -tK", "ss --kill"] {
            assert!(forbidden(line).contains("closes sockets"), "{line}");
        }
    }

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
