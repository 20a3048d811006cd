//! Programs that run the command after their own words and do nothing else to it that the
//! policy cares about: `timeout`, `nice`, `nohup`, `stdbuf`, and `env` with assignments. The
//! walk ([`super`]) checks the wrapper as a program (the exec allowlist) and the command as
//! a command of the line; `env`'s assignments are checked as an assignment before a command
//! is. Any option the reader does not know, or a wrapper with no command, leaves it to the
//! analysis, which refuses programs that run others. Also a shell given a `-c` body
//! ([`shell_body`]), whose body the walk reads as a line.
use super::{
    builtins::{SAFE_SHELL_OPTIONS, check_assignment},
    unanalysable,
    words::is_integer,
};
use crate::shell::ShellError;

/// A wrapped command: where in argv it starts, and what the wrapper sets for it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Wrapped {
    /// The index of the command's program in argv.
    pub(super) at: usize,
    /// The file the wrapper itself may write (`nohup.out`).
    pub(super) writes: Option<&'static str>,
}

/// The command `argv` wraps, if `argv` is a wrapper the reader understands with a command.
pub(super) fn wrapped(argv: &[String]) -> Result<Option<Wrapped>, ShellError> {
    let name = argv[0].rsplit('/').next().unwrap_or(&argv[0]);
    let args = &argv[1..];
    let at = match name {
        "timeout" => timeout(args),
        "nice" => nice(args),
        "stdbuf" => stdbuf(args),
        "env" => env(args)?,
        "nohup" => Some(0).filter(|_| args.first().is_some_and(|a| !a.starts_with('-'))),
        _ => None,
    };
    let Some(at) = at.map(|i| i + 1).filter(|&i| i < argv.len()) else {
        return Ok(None);
    };
    if is_builtin(&argv[at]) {
        return Err(unanalysable(format!(
            "`{name} {}`: the shell's builtin cannot run under a program",
            argv[at]
        )));
    }
    let writes = (name == "nohup").then_some("nohup.out");
    Ok(Some(Wrapped { at, writes }))
}

/// Whether `name` is one of the shell's own words ([`super::builtins::SHELL_WORDS`]):
/// under a wrapper they are not what runs.
pub(super) fn is_builtin(name: &str) -> bool {
    super::builtins::SHELL_WORDS.contains(&name)
}

/// `timeout [--preserve-status --foreground -v] [-k D] [-s SIG] DURATION COMMAND`.
fn timeout(args: &[String]) -> Option<usize> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--preserve-status" | "--foreground" | "-v" | "--verbose" => i += 1,
            "-k" | "-s" | "--kill-after" | "--signal" => i += 2,
            _ if a.starts_with("--kill-after=") || a.starts_with("--signal=") => i += 1,
            _ if (a.starts_with("-k") || a.starts_with("-s")) && a.len() > 2 => i += 1,
            _ if is_duration(a) => return Some(i + 1),
            _ => return None,
        }
    }
    None
}

/// `5`, `2.5`, `10s`, `3m`, `1h`, `1d`.
fn is_duration(word: &str) -> bool {
    let number = word.strip_suffix(['s', 'm', 'h', 'd']).unwrap_or(word);
    !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().any(|b| b.is_ascii_digit())
}

/// `nice [-n N | -N | --adjustment=N] COMMAND`.
fn nice(args: &[String]) -> Option<usize> {
    match args.first().map(String::as_str)? {
        "-n" | "--adjustment" => args.get(1).filter(|n| is_integer(n)).map(|_| 2),
        a if a.starts_with("--adjustment=") => Some(1),
        a if a.starts_with("-n") && is_integer(&a[2..]) => Some(1),
        a if a.starts_with('-') && is_integer(&a[1..]) => Some(1),
        a if a.starts_with('-') => None,
        _ => Some(0),
    }
}

/// `stdbuf [-i M] [-o M] [-e M] COMMAND` (also attached, `-oL`, and `--output=L`).
fn stdbuf(args: &[String]) -> Option<usize> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-i" | "-o" | "-e" | "--input" | "--output" | "--error" => i += 2,
            _ if ["--input=", "--output=", "--error="]
                .iter()
                .any(|p| a.starts_with(p)) =>
            {
                i += 1;
            }
            _ if ["-i", "-o", "-e"].iter().any(|p| a.starts_with(p)) => i += 1,
            _ if a.starts_with('-') => return None,
            _ => return (i > 0).then_some(i),
        }
    }
    None
}

/// `env [-i] [-u NAME] [NAME=VALUE]… COMMAND`; each assignment checked. `-S`, `-C` and the
/// other options are left to the analysis (refused).
fn env(args: &[String]) -> Result<Option<usize>, ShellError> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-i" | "--ignore-environment" | "-" => i += 1,
            "-u" | "--unset" => i += 2,
            _ if a.starts_with("--unset=") || (a.starts_with("-u") && a.len() > 2) => i += 1,
            _ if a.starts_with('-') => return Ok(None),
            _ => match a.split_once('=') {
                Some((name, value)) if !name.is_empty() => {
                    check_assignment(name, Some(value))?;
                    i += 1;
                }
                _ => return Ok(Some(i)),
            },
        }
    }
    Ok(None)
}

/// The body of `bash -c BODY` (`sh`, `dash`, `zsh`; options such as `-l`, `-e`, `-x`,
/// `-o pipefail`, `--login`, `--norc` before it); `None` for any other command.
pub(super) fn shell_body(argv: &[String]) -> Option<String> {
    let name = std::path::Path::new(&argv[0]).file_name()?.to_str()?;
    if !["bash", "sh", "dash", "zsh"].contains(&name) {
        return None;
    }
    let mut i = 1;
    let mut seen_c = false;
    while i < argv.len() {
        let a = argv[i].as_str();
        if seen_c {
            return Some(argv[i].clone());
        }
        match a {
            "--login" | "--norc" | "--noprofile" | "--posix" => {}
            // `-o noglob` and the like change what the body's words name.
            "-o" | "+o" => {
                i += 1;
                if !argv
                    .get(i)
                    .is_some_and(|o| SAFE_SHELL_OPTIONS.contains(&o.as_str()))
                {
                    return None;
                }
            }
            _ if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") => {
                if !a[1..].chars().all(|c| "lexuc".contains(c)) {
                    return None;
                }
                seen_c = a.contains('c');
            }
            _ => return None,
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{Wrapped, wrapped};

    fn at(line: &str) -> Option<usize> {
        let argv: Vec<String> = line.split(' ').map(str::to_owned).collect();
        wrapped(&argv)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .map(|w| w.at)
    }

    #[test]
    fn wrappers_are_read_up_to_their_command() {
        assert_eq!(at("timeout 60 cargo test"), Some(2));
        assert_eq!(at("timeout -k 5 -s KILL 2m make"), Some(6));
        assert_eq!(at("timeout --signal=INT 1.5 ls"), Some(3));
        assert_eq!(at("nice -n 10 make"), Some(3));
        assert_eq!(at("nice -5 make"), Some(2));
        assert_eq!(at("nice make"), Some(1));
        assert_eq!(at("nohup npm start"), Some(1));
        assert_eq!(at("stdbuf -oL -eL python3 app.py"), Some(3));
        assert_eq!(at("env RUST_LOG=debug cargo run"), Some(2));
        assert_eq!(at("env -u HOME -i X=1 ls"), Some(5));
        // No command, or what the reader does not know: left to the analysis.
        for line in [
            "timeout 60",
            "timeout --bogus 5 ls",
            "timeout 5x ls",
            "nice",
            "nice --bogus ls",
            "stdbuf ls",
            "env",
            "env -S 'ls -l'",
            "env -C /tmp ls",
            "nohup",
            "ls -l",
        ] {
            assert_eq!(at(line), None, "{line}");
        }
        let argv: Vec<String> = ["nohup", "npm", "start"].map(String::from).to_vec();
        assert_eq!(
            wrapped(&argv).ok().flatten(),
            Some(Wrapped {
                at: 1,
                writes: Some("nohup.out")
            })
        );
        // What a wrapper may not run, or may not set.
        for line in [
            "env PATH=/tmp ls",
            "env LD_PRELOAD=x.so ls",
            "timeout 5 cd /tmp",
        ] {
            let argv: Vec<String> = line.split(' ').map(str::to_owned).collect();
            assert!(wrapped(&argv).is_err(), "{line}");
        }
    }
}
