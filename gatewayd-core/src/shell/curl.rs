//! curl: the URLs it connects to (the engine checks each host against the egress allowlist,
//! and a line that connects anywhere sends data out), the files it reads (`-T`, `@FILE` data,
//! `-F NAME=@FILE`, certificates) and writes (`-o`, `-O`, `-D`, `-c`, `--output-dir`). Only
//! `http://` and `https://` are accepted, written or implied (a bare `host/path` is http);
//! what would send a request elsewhere than its URL's host (a proxy, `--resolve`,
//! `--connect-to`, a Unix socket), read options from a file (`-K`), send stored credentials
//! (`-n`) or let the server name a written file (`-J`) is refused, and so is any option the
//! table does not know. URL globbing (`{a,b}`, `[1-9]`) is refused: the hosts it expands to
//! are not written on the line.
use std::path::{Path, PathBuf};

use super::{
    ShellError,
    findings::Findings,
    option_table::CurlData,
    options::{
        Effect, OptionTable,
        ValueSyntax::{Flag, Required},
        long_option, option, parse_options, short_option,
    },
};

/// Refused because the request would not go (only) to the URL's host.
const REROUTES: Effect = Effect::Forbid("sends the request somewhere other than the URL's host");

/// curl's options that agents use, typed; any other is refused as unknown.
pub(super) const CURL: OptionTable = OptionTable::gnu(&[
    option('s', "silent", Flag, Effect::None),
    option('S', "show-error", Flag, Effect::None),
    option('L', "location", Flag, Effect::None),
    option('f', "fail", Flag, Effect::None),
    long_option("fail-with-body", Flag, Effect::None),
    option('I', "head", Flag, Effect::None),
    option('i', "include", Flag, Effect::None),
    option('v', "verbose", Flag, Effect::None),
    option('k', "insecure", Flag, Effect::None),
    option('g', "globoff", Flag, Effect::None),
    option('G', "get", Flag, Effect::None),
    option('N', "no-buffer", Flag, Effect::None),
    option('#', "progress-bar", Flag, Effect::None),
    option('q', "disable", Flag, Effect::None),
    option('4', "ipv4", Flag, Effect::None),
    option('6', "ipv6", Flag, Effect::None),
    long_option("compressed", Flag, Effect::None),
    long_option("no-progress-meter", Flag, Effect::None),
    long_option("http1.1", Flag, Effect::None),
    long_option("http2", Flag, Effect::None),
    long_option("create-dirs", Flag, Effect::None),
    option('R', "remote-time", Flag, Effect::None),
    option('X', "request", Required, Effect::None),
    option('A', "user-agent", Required, Effect::None),
    option('e', "referer", Required, Effect::None),
    option('u', "user", Required, Effect::None),
    option('m', "max-time", Required, Effect::None),
    option('r', "range", Required, Effect::None),
    long_option("connect-timeout", Required, Effect::None),
    long_option("retry", Required, Effect::None),
    long_option("retry-delay", Required, Effect::None),
    long_option("retry-max-time", Required, Effect::None),
    long_option("max-redirs", Required, Effect::None),
    long_option("limit-rate", Required, Effect::None),
    long_option("data-raw", Required, Effect::None),
    long_option("form-string", Required, Effect::None),
    option('H', "header", Required, Effect::CurlData(CurlData::At)),
    option('d', "data", Required, Effect::CurlData(CurlData::At)),
    long_option("data-ascii", Required, Effect::CurlData(CurlData::At)),
    long_option("data-binary", Required, Effect::CurlData(CurlData::At)),
    long_option("json", Required, Effect::CurlData(CurlData::At)),
    long_option(
        "data-urlencode",
        Required,
        Effect::CurlData(CurlData::Urlencode),
    ),
    option('F', "form", Required, Effect::CurlData(CurlData::Form)),
    option(
        'b',
        "cookie",
        Required,
        Effect::CurlData(CurlData::CookieOrFile),
    ),
    option(
        'w',
        "write-out",
        Required,
        Effect::CurlData(CurlData::WriteOut),
    ),
    long_option("url", Required, Effect::Url),
    option('T', "upload-file", Required, Effect::Read),
    long_option("cacert", Required, Effect::Read),
    long_option("capath", Required, Effect::Read),
    option('E', "cert", Required, Effect::Read),
    long_option("key", Required, Effect::Read),
    option('o', "output", Required, Effect::Write),
    long_option("output-dir", Required, Effect::Write),
    option('D', "dump-header", Required, Effect::Write),
    option('c', "cookie-jar", Required, Effect::Write),
    long_option("trace", Required, Effect::Write),
    long_option("trace-ascii", Required, Effect::Write),
    long_option("stderr", Required, Effect::Write),
    long_option("libcurl", Required, Effect::Write),
    option('O', "remote-name", Flag, Effect::None),
    long_option("remote-name-all", Flag, Effect::None),
    option('x', "proxy", Required, REROUTES),
    long_option("preproxy", Required, REROUTES),
    long_option("socks5", Required, REROUTES),
    long_option("socks5-hostname", Required, REROUTES),
    long_option("resolve", Required, REROUTES),
    long_option("connect-to", Required, REROUTES),
    long_option("unix-socket", Required, REROUTES),
    long_option("abstract-unix-socket", Required, REROUTES),
    long_option("doh-url", Required, REROUTES),
    option(
        'K',
        "config",
        Required,
        Effect::Forbid("reads more options from a file, which cannot be checked"),
    ),
    option(
        'n',
        "netrc",
        Flag,
        Effect::Forbid("sends the credentials stored in ~/.netrc"),
    ),
    option(
        'J',
        "remote-header-name",
        Flag,
        Effect::Forbid("lets the server name the file it writes"),
    ),
    short_option(
        ':',
        Flag,
        Effect::Forbid("starts another request (`--next`)"),
    ),
    long_option(
        "next",
        Flag,
        Effect::Forbid("starts another request (`--next`)"),
    ),
]);

/// curl `args`: its URLs, and the file `-O` writes for each (the URL's last segment, in the
/// working directory; with `--output-dir`, in that directory, a write already).
pub(super) fn curl(args: &[String], findings: &mut Findings) -> Result<(), ShellError> {
    let parsed = parse_options(args, &CURL, findings)?;
    for operand in &parsed.operands {
        url_operand(operand.word, findings);
    }
    if args.iter().any(|a| names_remote_file(a)) {
        for operand in &parsed.operands {
            if let Some(name) = remote_file_name(operand.word) {
                findings.write(&Path::new(".").join(name));
            }
        }
    }
    Ok(())
}

/// Whether the word `a` is `-O`, `--remote-name(-all)` or a cluster holding `O` as a flag.
fn names_remote_file(a: &str) -> bool {
    if a == "--remote-name" || a == "--remote-name-all" {
        return true;
    }
    let Some(cluster) = a.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
        return false;
    };
    for c in cluster.chars() {
        if c == 'O' {
            return true;
        }
        // In a cluster (`-sSLo FILE`), the letters after an option that takes a value are
        // that value.
        if CURL
            .options
            .iter()
            .any(|o| o.short == c && o.value == Required)
        {
            return false;
        }
    }
    false
}

/// The last path segment of `url`, the file `-O` writes; `None` when it has none (curl
/// refuses to write then).
fn remote_file_name(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.split(['?', '#']).next()?;
    let (_, name) = path.rsplit_once('/')?;
    (!name.is_empty() && name != "." && name != "..").then(|| name.to_owned())
}

/// A URL curl connects to: normalised to `http://`/`https://` and recorded, or refused.
pub(super) fn url_operand(word: &str, findings: &mut Findings) {
    if word.contains(['{', '}', '[', ']']) {
        findings.forbid(
            word,
            "URL globbing (`{a,b}`, `[1-9]`) expands to hosts that are not written on the line",
        );
        return;
    }
    match word.split_once("://") {
        Some((scheme, _))
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
        {
            findings.url(word);
        }
        Some((scheme, _)) => findings.forbid(
            word,
            &format!(
                "the `{scheme}` scheme is not checked here: only http and https URLs are allowed"
            ),
        ),
        None => findings.url(&format!("http://{word}")),
    }
}

/// A data-like value of curl's (`form`) and the file it reads or writes, if any. `path` puts a
/// file name under the command's directory.
pub(super) fn data_value(
    form: CurlData,
    value: &str,
    path: &dyn Fn(&str) -> PathBuf,
    findings: &mut Findings,
) {
    let file = match form {
        CurlData::At => value.strip_prefix('@'),
        CurlData::Form => value
            .split_once('=')
            .and_then(|(_, v)| v.strip_prefix('@').or_else(|| v.strip_prefix('<')))
            .map(|f| f.split(';').next().unwrap_or(f)),
        CurlData::Urlencode => match value.split_once('@') {
            Some((name, file)) if !name.contains('=') => Some(file),
            _ => None,
        },
        CurlData::CookieOrFile => (!value.contains('=')).then_some(value),
        CurlData::WriteOut => {
            if value.contains("%output{") {
                findings.forbid("-w", "its `%output{FILE}` writes a file");
            }
            None
        }
    };
    if let Some(f) = file {
        findings.read(&path(f));
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::test_support::{clean, forbidden, paths, unknown_option};

    #[test]
    fn urls_are_recorded_with_their_scheme() {
        let a = clean("curl -fsSL https://api.github.com/repos/x/y");
        assert_eq!(a.urls, ["https://api.github.com/repos/x/y"]);
        assert!(a.reads.is_empty() && a.writes.is_empty());
        assert_eq!(clean("curl example.com/x").urls, ["http://example.com/x"]);
        assert_eq!(
            clean("curl --url https://a.test/ -s").urls,
            ["https://a.test/"]
        );
    }

    #[test]
    fn files_it_reads_and_writes() {
        let a = clean(
            "curl -d @body.json -F 'file=@report.txt;type=text/plain' -o out.html https://a.test/",
        );
        assert_eq!(a.reads, paths(&["body.json", "report.txt"]));
        assert_eq!(a.writes, paths(&["out.html"]));
        assert_eq!(
            clean("curl -T up.bin https://a.test/").reads,
            paths(&["up.bin"])
        );
        assert_eq!(
            clean("curl --data-urlencode q@query.txt https://a.test/").reads,
            paths(&["query.txt"])
        );
        assert!(clean("curl -d 'a=1&b=@x' https://a.test/").reads.is_empty());
        assert_eq!(
            clean("curl -LO https://github.com/o/r/releases/download/v1/tool.tar.gz").writes,
            paths(&["./tool.tar.gz"])
        );
        assert!(clean("curl -sSLoOUT https://a.test/x").writes == paths(&["OUT"]));
    }

    #[test]
    fn what_goes_elsewhere_or_cannot_be_checked_is_refused() {
        for line in [
            "curl -x http://proxy.test:3128 https://a.test/",
            "curl --resolve a.test:443:10.0.0.1 https://a.test/",
            "curl --connect-to a.test:443:evil.test:443 https://a.test/",
            "curl --unix-socket /var/run/docker.sock http://localhost/containers/json",
            "curl -K cfg https://a.test/",
            "curl -n https://a.test/",
            "curl -OJ https://a.test/x",
            "curl 'https://{a,b}.test/'",
            "curl ftp://a.test/x",
            "curl file:///etc/passwd",
            "curl -w '%output{/tmp/x}' https://a.test/",
        ] {
            assert!(!forbidden(line).is_empty(), "{line}");
        }
        assert_eq!(
            unknown_option("curl --frob https://a.test/"),
            ("curl".into(), "--frob".into())
        );
    }
}
