//! A program an interpreter is given on the line: `python3 -c CODE`, `node -e CODE`, a
//! here-document to `python3 -`, `echo CODE | perl`. The gateway does not analyse programs
//! (a script file runs as it is, confined by the kernel under `gatewayd run`), but the call
//! shows this one's text, and that text is refused when it names, in plain sight:
//! 1. a word that starts processes, opens connections or loads code by a computed name
//!    ([`PROCESS_AND_NETWORK_WORDS`]; for perl and ruby also `open`, backquotes and `%x`);
//! 2. a URL whose host the egress allowlist does not allow, or an IPv4 address it does not;
//! 3. a path the sandbox protects or keeps read-only, by its path or by a secret's own name
//!    (`.env`, `.ssh`), or an existing file the agent may not read.
//!
//! A program that builds such a word or name from pieces is not caught (docs/LIMITS.md).
use std::{
    collections::HashSet,
    net::Ipv4Addr,
    path::{Path, PathBuf},
};

use super::{
    Reason,
    sandbox::{self, EgressView, SandboxView},
};
use crate::policy::{PathAccess, tmp_binds::lexical};

/// Words (compared without case) by which a program starts a process, opens a connection,
/// or reaches code or modules by a name it computes: python's, node's, perl's and ruby's.
const PROCESS_AND_NETWORK_WORDS: &[&str] = &[
    // Processes.
    "subprocess",
    "system",
    "popen",
    "popen2",
    "popen3",
    "open3",
    "spawn",
    "spawnsync",
    "spawnl",
    "spawnle",
    "spawnlp",
    "spawnlpe",
    "spawnv",
    "spawnve",
    "spawnvp",
    "spawnvpe",
    "posix_spawn",
    "posix_spawnp",
    "exec",
    "execv",
    "execve",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execvp",
    "execvpe",
    "execsync",
    "execfile",
    "execfilesync",
    "fork",
    "forkpty",
    "pty",
    "child_process",
    "worker_threads",
    "getoutput",
    "getstatusoutput",
    "check_output",
    "check_call",
    "startfile",
    "qx",
    "syscall",
    "multiprocessing",
    "create_subprocess_exec",
    "create_subprocess_shell",
    // Connections.
    "socket",
    "socketpair",
    "socketserver",
    "create_connection",
    "open_connection",
    "urllib",
    "urllib2",
    "urllib3",
    "urlopen",
    "requests",
    "httpx",
    "aiohttp",
    "http",
    "https",
    "http2",
    "httplib",
    "httplib2",
    "ftplib",
    "smtplib",
    "telnetlib",
    "poplib",
    "imaplib",
    "nntplib",
    "xmlrpc",
    "webbrowser",
    "paramiko",
    "pycurl",
    "websocket",
    "websockets",
    "fetch",
    "xmlhttprequest",
    "net",
    "dgram",
    "tls",
    "dns",
    "lwp",
    "curl",
    "wget",
    // Code and modules by a computed name, and native code.
    "eval",
    "__import__",
    "importlib",
    "getattr",
    "__builtins__",
    "builtins",
    "ctypes",
    "cffi",
    "dlopen",
    "binding",
    "__subclasses__",
    "__globals__",
    "instance_eval",
    "class_eval",
    "module_eval",
    "__send__",
    "public_send",
];

/// Checks the text of a program `program` is given on the line; `cwd` is where it runs
/// (relative paths start there) and `home_of` finds the session user's home (`~`), looked up
/// only when the text names one (the user database is slow to read). Err: the denial.
pub(crate) fn check(
    sb: &SandboxView,
    egress: &EgressView,
    name: &str,
    program: &str,
    text: &str,
    cwd: &Path,
    home_of: &dyn Fn() -> Option<PathBuf>,
) -> Result<(), (Reason, String)> {
    let refuse = |reason: Reason, what: &str, step: &str| {
        let what = format!(
            "`{name}`: `{program}` is given its program on the line, and that program {what}"
        );
        (reason, super::with_next(&what, step))
    };
    let text = urls(egress, text).map_err(|(url, why)| {
        refuse(
            Reason::Sandbox,
            &format!("names the URL `{url}`: {why}"),
            "fetch only from hosts the policy allows (`curl URL`), or ask the user to allow this one",
        )
    })?;
    if let Some(word) = process_or_network_word(program, &text) {
        return Err(refuse(
            Reason::Shell,
            &format!(
                "names `{word}`, by which a program starts processes, opens connections or loads code by name; the gateway does not analyse programs, so one given on the line may not"
            ),
            "do it with commands the policy allows (`curl` to an allowed host, `git`, the project's test runner), or ask the user",
        ));
    }
    let home = (text.contains('~') || text.contains("HOME"))
        .then(home_of)
        .flatten();
    let home = home.as_deref();
    let home_text = home.map(|h| h.to_string_lossy().into_owned());
    let text = match &home_text {
        Some(h) => text.replace("${HOME}", h).replace("$HOME", h),
        None => text,
    };
    let mut seen = HashSet::new();
    for token in text
        .split(|c: char| !(c.is_ascii_alphanumeric() || "._-/~+@%".contains(c)))
        .filter(|t| t.bytes().any(|b| b.is_ascii_alphanumeric()) && seen.insert(*t))
    {
        if let Ok(ip) = token.parse::<Ipv4Addr>()
            && !egress.allows_address(ip.into())
        {
            return Err(refuse(
                Reason::Sandbox,
                &format!("names the address {ip}, which is not in the network egress allowlist"),
                "reach only hosts the policy allows, or ask the user to allow this one",
            ));
        }
        path_named(sb, token, cwd, home).map_err(|why| {
            refuse(
                Reason::Sandbox,
                &format!("names `{token}`: {why}"),
                "leave it out: the gateway reads a program given on the line for the paths it names",
            )
        })?;
    }
    Ok(())
}

/// Checks each URL of `text` against the egress allowlist (`http`, `https`; a `file` URL
/// stays as its path) and returns the text without them. Err: the URL and why.
fn urls(egress: &EgressView, text: &str) -> Result<String, (String, String)> {
    let scheme_char = |c: char| c.is_ascii_alphanumeric() || "+.-".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !scheme_char(c))
            .map_or(0, |i| i + 1);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || "'\"`()<>;,\\".contains(c))
            .map_or(rest.len(), |i| at + i);
        let (url, scheme) = (&rest[start..end], rest[start..at].to_ascii_lowercase());
        out.push_str(&rest[..start]);
        match scheme.as_str() {
            // No scheme: no URL; what follows is read as the rest of the text.
            "" => {
                out.push_str("://");
                rest = &rest[at + 3..];
                continue;
            }
            "file" => out.push_str(&rest[at + 3..end]),
            "http" | "https" => {
                let d = sandbox::parse_url(url).map_err(|m| (url.to_owned(), m))?;
                if !egress.allows(&d) {
                    return Err((
                        url.to_owned(),
                        format!(
                            "{}:{} is not in the network egress allowlist",
                            d.host, d.port
                        ),
                    ));
                }
            }
            other => {
                return Err((
                    url.to_owned(),
                    format!(
                        "a `{other}:` URL, which the egress allowlist cannot allow (http and https only)"
                    ),
                ));
            }
        }
        out.push(' ');
        rest = &rest[end.max(at + 3)..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The first word of `text` by which a program starts processes or opens connections
/// ([`PROCESS_AND_NETWORK_WORDS`]); for perl and ruby, also `open` (a command, with `|`),
/// backquotes and `%x` (a command's output).
fn process_or_network_word(program: &str, text: &str) -> Option<String> {
    let name = program.rsplit('/').next().unwrap_or(program);
    let perl_or_ruby = name.starts_with("perl") || name.starts_with("ruby");
    if perl_or_ruby && (text.contains('`') || text.contains("%x")) {
        return Some(if text.contains('`') { "`" } else { "%x" }.to_owned());
    }
    // `platform.system()` names the operating system.
    let text = text.replace("platform.system", "platform.os_name");
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| {
            let w = w.to_ascii_lowercase();
            PROCESS_AND_NETWORK_WORDS.contains(&w.as_str()) || (perl_or_ruby && w == "open")
        })
        .map(str::to_owned)
}

/// Checks a word of a program's text that may be a path: refused when a component is a
/// secret's name, when it is or lies in a protected or read-only path (from `cwd`, `~` as
/// `home`), or when it names an existing file the agent may not read.
fn path_named(
    sb: &SandboxView,
    token: &str,
    cwd: &Path,
    home: Option<&Path>,
) -> Result<(), String> {
    if let Some(secret) = token.split('/').find(|c| sb.names_a_secret(c)) {
        return Err(format!("`{secret}` is the name of a protected file"));
    }
    let expanded: PathBuf = match (token.strip_prefix('~'), home) {
        (Some(""), Some(h)) => h.to_path_buf(),
        (Some(after), Some(h)) if after.starts_with('/') => h.join(&after[1..]),
        _ => PathBuf::from(token),
    };
    let path = lexical(&cwd.join(expanded));
    if let Some(x) = sb.protected_by_path(&path) {
        return Err(format!("it is protected path `{}`", x.display()));
    }
    if let Some(x) = sb.read_only_by_path(&path) {
        return Err(format!(
            "it lies in read-only path `{}`, which the agent may read but not change, and the gateway cannot tell which the program does",
            x.display()
        ));
    }
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(());
    }
    let raw = path.to_string_lossy();
    let real = sb.resolve_path(&raw)?;
    sb.check(&raw, &real, PathAccess::Read)
}

#[cfg(test)]
#[path = "inline_program_tests.rs"]
mod tests;
