//! Programs without an option table: build tools and package managers (`go cargo npm pip
//! make mvn`, formatters), and anything else a policy lists. Their options are not known,
//! so each operand, and each value an unknown option may carry (`--out=FILE`, `-o=FILE`,
//! `-oFILE`), may be a file they write as well as read: `go build -o .git/hooks/pre-commit`
//! writes the hook that the user's own `git commit` runs later. Each is checked as a read
//! and a write, except for the programs that only print ([`PRINTERS`]).
//!
//! Package managers also write outside the workspace by what a subcommand or flag says,
//! with no path on the line: a global install puts programs on the user's `PATH`
//! (`npm install -g`, `pip install --user`, `cargo install`, `go install`), and a
//! configuration change is read by the user's own later runs (`npm config set`,
//! `go env -w`, `pip config set`). Those are forbidden, each with what to run instead.
use super::{
    ShellError,
    coreutils_tables::READERS,
    findings::Findings,
    options::{OptionTable, parse_options},
};

/// Programs nobody has an option table for that write no file: their operands are reads.
pub(super) const PRINTERS: &[&str] = &[
    "jq", "tr", "seq", "date", "uname", "whoami", "id", "nproc", "df", "free", "uptime",
    "realpath", "readlink", "cksum", "b2sum", "column", "strings", "hexdump", "zcat", "lsof",
    "pgrep", "netstat", "which",
];

/// The reading of a command nobody knows: a short option is a flag, the value of
/// `--opt=value` (and what follows a short option in its word) an argument.
pub(super) const UNKNOWN: OptionTable = OptionTable::lenient();

/// Reads every operand of `command`, a reader with its table in [`READERS`] or a program
/// nobody knows; the latter's arguments are written too unless it is one of [`PRINTERS`].
pub(super) fn operands(
    command: &str,
    args: &[String],
    findings: &mut Findings,
) -> Result<(), ShellError> {
    if let Some((_, table)) = READERS.iter().find(|(names, _)| names.contains(&command)) {
        let parsed = parse_options(args, table, findings)?;
        for operand in &parsed.operands {
            findings.read(&operand.path());
        }
        return Ok(());
    }
    operands_but(command, args, None, findings)
}

/// The arguments of a program nobody knows ([`operands`]), less the word that is a
/// package manager's known subcommand (`build` of `go build`), which names no file.
fn operands_but(
    command: &str,
    args: &[String],
    subcommand: Option<&str>,
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let writes = !PRINTERS.contains(&command);
    let parsed = parse_options(args, &UNKNOWN, findings)?;
    let is_subcommand = |word: &str| subcommand.is_some_and(|sub| std::ptr::eq(sub, word));
    let words = parsed
        .operands
        .iter()
        .map(|o| o.word)
        .filter(|w| !is_subcommand(w))
        .chain(parsed.unknown_values);
    for word in words {
        let path = std::path::Path::new(word);
        if writes {
            findings.read_and_output_argument(word, path);
        } else {
            findings.read_argument(word, path);
        }
    }
    Ok(())
}

/// A package manager's subcommand, as far as the line shows it.
#[derive(Clone, Copy)]
enum Subcommand<'a> {
    /// The first word that is not an option, with only known flags before it (`npm -g
    /// install` → `install`).
    Known(&'a str),
    /// Another option comes first, whose value could be the first word (`npm --cache ls
    /// install -g`): any word may be the subcommand.
    Unknown,
    /// No word but options.
    None,
}

impl<'a> Subcommand<'a> {
    /// The subcommand's word, when known.
    fn word(self) -> Option<&'a str> {
        match self {
            Subcommand::Known(sub) => Some(sub),
            Subcommand::Unknown | Subcommand::None => None,
        }
    }

    /// The subcommand of `args`, the flags before it being `flags`.
    fn of(args: &'a [String], flags: &[&str]) -> Subcommand<'a> {
        let Some(first) = args.iter().position(|a| !a.starts_with('-')) else {
            return Subcommand::None;
        };
        if args[..first].iter().all(|a| flags.contains(&a.as_str())) {
            Subcommand::Known(args[first].as_str())
        } else {
            Subcommand::Unknown
        }
    }

    /// Which of `names` the subcommand may be: the one it is, or, when unknown, the first of
    /// `names` among the words of `args`.
    fn may_be(self, args: &'a [String], names: &[&str]) -> Option<&'a str> {
        match self {
            Subcommand::Known(sub) => names.contains(&sub).then_some(sub),
            Subcommand::Unknown => args.iter().map(String::as_str).find(|a| names.contains(a)),
            Subcommand::None => None,
        }
    }
}

/// npm's and pnpm's global flag, in any spelling npm's parser reads as it (a single-dash
/// word holding `g` is a cluster of short flags to it).
fn global_flag(args: &[String]) -> bool {
    args.iter().enumerate().any(|(i, a)| {
        let long = a.strip_prefix("--").unwrap_or("");
        let location_global = long == "location"
            && args
                .get(i + 1)
                .is_some_and(|v| v == "global" || v == "user");
        (!a.starts_with("--") && a.starts_with('-') && a.contains('g'))
            || long == "global"
            || (long.starts_with("global=") && long != "global=false")
            || long == "location=global"
            || long == "location=user"
            || location_global
    })
}

/// The subcommands of npm, pnpm and yarn that only read, which a global flag may go with
/// (`npm ls -g`).
const NODE_READS: &[&str] = &[
    "ls", "list", "ll", "la", "root", "prefix", "bin", "outdated", "view", "info", "show", "v",
    "search", "help", "explain", "why", "get", "doctor", "version",
];

/// The words that change a configuration after `config` (`npm config set`).
const CONFIG_WRITES: &[&str] = &["set", "delete", "rm", "edit", "fix", "unset"];

const NODE_GLOBAL: &str = "installs into the user's global prefix, whose programs the user's shell runs later; install into the workspace (without `-g`) and run it with `npx`";
const USER_CONFIG: &str = "changes the user's own configuration, which the user's later runs read; give the setting on this command line instead";
const LINKS_GLOBALLY: &str = "links a package into the user's global prefix, whose programs the user's shell runs later; add it to the workspace as a `file:` dependency";

/// Whether `args` change a configuration: `config` followed by one of [`CONFIG_WRITES`].
fn config_write(sub: Subcommand, args: &[String]) -> bool {
    sub.may_be(args, &["config", "c"]).is_some()
        && args
            .windows(2)
            .any(|w| (w[0] == "config" || w[0] == "c") && CONFIG_WRITES.contains(&w[1].as_str()))
}

/// npm, pnpm and yarn: every argument may be written ([`operands`]); a global install, a
/// configuration change and a global link are forbidden.
pub(super) fn node_packages(
    name: &str,
    args: &[String],
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let sub = Subcommand::of(args, &["-g", "--global", "-s", "--silent", "-q", "--quiet"]);
    let reads_only = matches!(sub, Subcommand::Known(s) if NODE_READS.contains(&s));
    if global_flag(args) && !reads_only {
        findings.forbid("-g", NODE_GLOBAL);
    }
    if config_write(sub, args) || sub.may_be(args, &["set", "delete"]).is_some() {
        findings.forbid("config", USER_CONFIG);
    }
    let credentials = ["login", "adduser", "add-user", "logout", "token"];
    if let Some(word) = sub.may_be(args, &credentials) {
        findings.forbid(word, "writes the user's registry credentials (`~/.npmrc`)");
    }
    if sub.may_be(args, &["link", "ln"]).is_some() {
        findings.forbid("link", LINKS_GLOBALLY);
    }
    let global_commands: &[&str] = match name {
        "yarn" => &["global"],
        "pnpm" => &["setup"],
        _ => &[],
    };
    if let Some(word) = sub.may_be(args, global_commands) {
        findings.forbid(word, NODE_GLOBAL);
    }
    operands_but(name, args, sub.word(), findings)
}

/// pip: an install into the user's site-packages (`--user`) and a configuration change are
/// forbidden; `--target`, `--prefix` and `--root` are paths written ([`operands`]).
pub(super) fn pip(name: &str, args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let sub = Subcommand::of(args, &["-q", "--quiet", "-v", "--verbose", "--isolated"]);
    if sub.may_be(args, &["install"]).is_some() && args.iter().any(|a| a == "--user") {
        findings.forbid(
            "--user",
            "installs into the user's own site-packages, which the user's Python loads later; install into a virtual environment in the workspace (`python3 -m venv .venv`)",
        );
    }
    if config_write(sub, args) {
        findings.forbid("config", USER_CONFIG);
    }
    operands_but(name, args, sub.word(), findings)
}

/// cargo: `install` (into `~/.cargo/bin`, unless `--root DIR` says where, a path written)
/// and `login`/`logout` (the registry token) are forbidden.
pub(super) fn cargo(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let args = match args.first() {
        Some(toolchain) if toolchain.starts_with('+') => &args[1..],
        _ => args,
    };
    let sub = Subcommand::of(
        args,
        &[
            "-q",
            "--quiet",
            "-v",
            "-vv",
            "--verbose",
            "--frozen",
            "--locked",
            "--offline",
        ],
    );
    let root_given = args
        .iter()
        .any(|a| a == "--root" || a.starts_with("--root="));
    // (`cargo binstall`, a plugin, installs as `cargo install` does.)
    if sub.may_be(args, &["install", "binstall"]).is_some() && !root_given {
        findings.forbid(
            "install",
            "installs into the user's `~/.cargo/bin`, whose programs the user's shell runs later; `cargo build --release` builds into the workspace, or give `--root DIR` in it",
        );
    }
    if let Some(word) = sub.may_be(args, &["login", "logout"]) {
        findings.forbid(word, "writes the user's registry token");
    }
    operands_but("cargo", args, sub.word(), findings)
}

/// go: `install` (into the user's `GOBIN`, `~/go/bin`) and `env -w`/`-u` (the user's own Go
/// settings, `go env GOENV`) are forbidden.
pub(super) fn go(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let sub = Subcommand::of(args, &[]);
    if sub.may_be(args, &["install"]).is_some() {
        findings.forbid(
            "install",
            "installs into the user's `GOBIN` (`~/go/bin`), whose programs the user's shell runs later; `go build -o bin/NAME` builds into the workspace",
        );
    }
    if sub.may_be(args, &["env"]).is_some() && args.iter().any(|a| a == "-w" || a == "-u") {
        findings.forbid("env", USER_CONFIG);
    }
    operands_but("go", args, sub.word(), findings)
}

/// Maven and Gradle: installing the build into a repository (the user's `~/.m2`, which the
/// user's other builds take, or a remote one) is forbidden.
pub(super) fn java_builds(
    name: &str,
    args: &[String],
    findings: &mut Findings,
) -> Result<(), ShellError> {
    let installs = |goal: &&String| {
        ["install", "deploy", "publishToMavenLocal"].contains(&goal.as_str())
            || goal.starts_with("install:")
            || goal.starts_with("deploy:")
    };
    if let Some(goal) = args.iter().find(installs) {
        findings.forbid(
            goal,
            "installs the build into a repository (the user's `~/.m2`, which the user's other builds take, or a remote one); `mvn verify` (or `gradle build`) builds and tests in the workspace",
        );
    }
    operands_but(name, args, None, findings)
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden, paths};

    #[test]
    fn a_program_nobody_knows_may_write_what_it_is_given() {
        for (line, touched) in [
            (
                "go build -o .git/hooks/pre-commit ./cmd/x",
                &[".git/hooks/pre-commit", "./cmd/x"][..],
            ),
            (
                "go build -o=.git/hooks/pre-commit .",
                &[".", ".git/hooks/pre-commit"],
            ),
            (
                "rustc -o.git/hooks/post-checkout x.rs",
                &["x.rs", ".git/hooks/post-checkout"],
            ),
            (
                "pip install --target=vendor requests",
                &["requests", "vendor"],
            ),
            ("black src", &["src"]),
        ] {
            let a = clean(line);
            let mut writes = a.writes.clone();
            writes.sort();
            let mut want = paths(touched);
            want.sort();
            assert_eq!(writes, want, "{line}");
        }
        // Programs that only print read what they are given.
        for line in [
            "jq . /etc/os-release",
            "readlink -f /usr/bin/python3",
            "lsof -i :3000",
        ] {
            let a = clean(line);
            assert!(a.writes.is_empty() && !a.reads.is_empty(), "{line}: {a:?}");
        }
    }

    #[test]
    fn package_managers_install_into_the_workspace_only() {
        for line in [
            "npm install",
            "npm install --save-dev jest",
            "npm ls -g --depth=0",
            "npm -g ls",
            "npm config get registry",
            "pnpm add -D vitest",
            "yarn add lodash",
            "pip install -r requirements.txt",
            "python3 -m pip install -r requirements.txt",
            "pip3 install -e .",
            "pip config list",
            "cargo build --release",
            "cargo +nightly fmt",
            "cargo install --path . --root dist",
            "go build -o bin/app ./cmd/app",
            "go env GOPATH",
            "mvn -q verify",
            "gradle build",
        ] {
            clean(line);
        }
        for (line, why) in [
            ("npm install -g typescript", "global prefix"),
            ("npm i --global=true x", "global prefix"),
            ("npm install --location global x", "global prefix"),
            ("npm --cache ls install -g x", "global prefix"),
            ("npm -gS install x", "global prefix"),
            ("pnpm add -g x", "global prefix"),
            ("yarn global add x", "global prefix"),
            ("npm config set script-shell ./evil.sh", "configuration"),
            ("npm set ignore-scripts false", "configuration"),
            ("npm link", "links a package"),
            ("npm login", "credentials"),
            ("pip install --user x", "site-packages"),
            ("python3 -m pip install --user x", "site-packages"),
            (
                "python3 -mpip config set global.index-url x",
                "configuration",
            ),
            ("pip3 config set global.index-url http://x", "configuration"),
            ("cargo install ripgrep", "cargo/bin"),
            ("cargo +stable install x", "cargo/bin"),
            ("cargo binstall ripgrep", "cargo/bin"),
            ("cargo login", "token"),
            ("go install golang.org/x/tools/gopls@latest", "GOBIN"),
            ("go env -w GOFLAGS=-toolexec=./x", "configuration"),
            ("mvn clean install", "`~/.m2`"),
            ("gradle publishToMavenLocal", "`~/.m2`"),
        ] {
            assert!(forbidden(line).contains(why), "{line}");
        }
    }
}
