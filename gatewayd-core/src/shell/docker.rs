//! docker: only what reads the Docker daemon's state. Its daemon runs as root on the host and
//! does what a client asks outside any sandbox of the agent's (a container that mounts `/`,
//! an image build that runs anything, a copy out of a container), so every subcommand that
//! changes something (`run`, `exec`, `build`, `cp`, `compose`, …) is refused, and so are
//! global options that pick another daemon or configuration (`-H`, `--context`, `--config`).
//! Allowed, with typed options (an unknown one is refused): `ps`, `images`, `logs`,
//! `inspect`, `top`, `port`, `version`, `info` and their `container`/`image` forms. Their
//! operands name containers and images, not files. `docker compose` is refused too: it reads
//! the project's `.env` to fill in its file.
use super::{
    ShellError,
    findings::Findings,
    options::{
        Effect, OptionTable,
        ValueSyntax::{Flag, Required},
        long_option, option, parse_options,
    },
};

/// Global options before the subcommand.
const GLOBAL: OptionTable = OptionTable::until_first_operand(&[
    option('D', "debug", Flag, Effect::None),
    option('l', "log-level", Required, Effect::None),
    option(
        'H',
        "host",
        Required,
        Effect::Forbid("talks to another Docker daemon"),
    ),
    option(
        'c',
        "context",
        Required,
        Effect::Forbid("talks to another Docker daemon"),
    ),
    long_option(
        "config",
        Required,
        Effect::Forbid("reads the client's configuration from elsewhere"),
    ),
]);

const PS: OptionTable = OptionTable::gnu(&[
    option('a', "all", Flag, Effect::None),
    option('f', "filter", Required, Effect::None),
    long_option("format", Required, Effect::None),
    option('n', "last", Required, Effect::None),
    option('l', "latest", Flag, Effect::None),
    long_option("no-trunc", Flag, Effect::None),
    option('q', "quiet", Flag, Effect::None),
    option('s', "size", Flag, Effect::None),
]);

const IMAGES: OptionTable = OptionTable::gnu(&[
    option('a', "all", Flag, Effect::None),
    long_option("digests", Flag, Effect::None),
    option('f', "filter", Required, Effect::None),
    long_option("format", Required, Effect::None),
    long_option("no-trunc", Flag, Effect::None),
    option('q', "quiet", Flag, Effect::None),
    long_option("tree", Flag, Effect::None),
]);

const LOGS: OptionTable = OptionTable::gnu(&[
    long_option("details", Flag, Effect::None),
    option('f', "follow", Flag, Effect::None),
    long_option("since", Required, Effect::None),
    option('n', "tail", Required, Effect::None),
    option('t', "timestamps", Flag, Effect::None),
    long_option("until", Required, Effect::None),
]);

const INSPECT: OptionTable = OptionTable::gnu(&[
    option('f', "format", Required, Effect::None),
    option('s', "size", Flag, Effect::None),
    long_option("type", Required, Effect::None),
]);

const HISTORY: OptionTable = OptionTable::gnu(&[
    option('H', "human", Flag, Effect::None),
    long_option("no-trunc", Flag, Effect::None),
    option('q', "quiet", Flag, Effect::None),
    long_option("format", Required, Effect::None),
]);

const FORMAT_ONLY: OptionTable = OptionTable::gnu(&[option('f', "format", Required, Effect::None)]);
const NONE: OptionTable = OptionTable::gnu(&[]);

/// The table of an allowed subcommand (`container` and `image` forms included).
fn table(sub: &str, verb: Option<&str>) -> Option<&'static OptionTable> {
    Some(match (sub, verb) {
        ("ps", _) | ("container", Some("ls" | "list" | "ps")) => &PS,
        ("images", _) | ("image", Some("ls" | "list")) => &IMAGES,
        ("logs", _) | ("container", Some("logs")) => &LOGS,
        ("inspect", _) | ("container" | "image", Some("inspect")) => &INSPECT,
        ("image", Some("history")) | ("history", _) => &HISTORY,
        ("version" | "info", _) => &FORMAT_ONLY,
        ("port", _) | ("container", Some("port")) => &NONE,
        _ => return None,
    })
}

/// docker `args`: global options, then an allowed subcommand and its options.
pub(super) fn docker(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    // The global table stops at the first operand: the subcommand, then every later word.
    let global = parse_options(args, &GLOBAL, findings)?;
    let words: Vec<String> = global.operands.iter().map(|o| o.word.to_owned()).collect();
    let Some((sub, rest)) = words.split_first() else {
        return Ok(());
    };
    let nested = matches!(sub.as_str(), "container" | "image");
    let (verb, rest) = match rest.split_first() {
        Some((v, r)) if nested => (Some(v.as_str()), r),
        _ => (None, rest),
    };
    // `top CONTAINER [ps OPTIONS]`: the words after the container are `ps`'s, read by nothing.
    if sub == "top" || verb == Some("top") {
        return Ok(());
    }
    if let Some(t) = table(sub, verb) {
        parse_options(rest, t, findings)?;
    } else {
        let what = format!("{sub} {}", verb.unwrap_or(""));
        findings.forbid(
            what.trim(),
            "changes what the Docker daemon runs or holds; the daemon is root on the host, \
             outside the agent's sandbox (only ps, images, logs, inspect, top, port, version \
             and info are allowed): ask the user to run it",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden, unknown_option};

    #[test]
    fn reading_the_daemons_state_passes_and_reads_no_file() {
        for line in [
            "docker ps -a",
            "docker ps --format '{{.Names}}'",
            "docker images -q",
            "docker logs --tail 50 web",
            "docker logs -n 100 -t web",
            "docker inspect -f '{{.State.Status}}' web",
            "docker container ls --all",
            "docker image inspect alpine",
            "docker version",
            "docker info --format '{{.ServerVersion}}'",
            "docker top web aux",
        ] {
            let a = clean(line);
            assert!(a.reads.is_empty() && a.writes.is_empty(), "{line}: {a:?}");
        }
    }

    #[test]
    fn what_changes_or_escapes_is_refused() {
        for line in [
            "docker run --rm -v /:/host alpine cat /host/etc/shadow",
            "docker exec web sh",
            "docker build -t x .",
            "docker cp web:/etc/passwd .",
            "docker compose up -d",
            "docker container rm web",
            "docker image rm alpine",
            "docker -H tcp://10.0.0.1:2375 ps",
            "docker --context remote ps",
        ] {
            assert!(!forbidden(line).is_empty(), "{line}");
        }
        assert_eq!(unknown_option("docker ps --frob").1, "--frob");
    }
}
