//! What one refusal record asks of the policy: a path to read, write or run, a destination,
//! a socket, a tool; or why no allowlist entry is the answer. Reads the record alone (reason
//! code and detail, the gateway's `sandbox` refusals by their message as `explain` does).
use std::{net::IpAddr, path::PathBuf};

use serde_json::Value;

use super::Rule;
use crate::audit::explain;

/// What a record asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ask {
    /// A file or directory to read (`sandbox.readable`).
    Read(PathBuf),
    /// One to write (`sandbox.writable`).
    Write(PathBuf),
    /// A program to run (`sandbox.exec`).
    Exec(PathBuf),
    /// A destination: a host name or an address, and the port.
    Egress { host: String, port: Option<u16> },
    /// A Unix socket: a path or `@name`.
    Unix(String),
    /// A tool the gateway did not know, and its arguments' names.
    Tool { name: String, args: Vec<String> },
    /// Not proposed: the rule, and why.
    Never(Rule, String),
}

fn text<'a>(detail: &'a Value, key: &str) -> Option<&'a str> {
    detail.get(key).and_then(Value::as_str)
}

/// The absolute path a record names: the directory of a name made, removed or renamed (what
/// the kernel judges such a call by), the kernel's resolved path, its path (Landlock,
/// fanotify, a socket), the gateway's resolved path in its message.
fn path_of(detail: &Value) -> Option<PathBuf> {
    let message = text(detail, "message").unwrap_or("");
    let from_message = message
        .split_once("resolves to `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(p, _)| p);
    [
        text(detail, "directory"),
        text(detail, "resolved_path"),
        text(detail, "resolved"),
        text(detail, "path"),
        from_message,
    ]
    .into_iter()
    .flatten()
    .map(PathBuf::from)
    .find(|p| p.is_absolute())
}

/// The destination of a kernel record (`addr`, `port`) or a gateway message
/// (`destination HOST:PORT is not ...`, `would connect to HOST:PORT, which ...`).
fn destination(detail: &Value) -> Option<(String, Option<u16>)> {
    // The egress proxy's records name the host the connection was for, beside its address
    // and port: the name is what the policy lists. (The resolver's refusals name a host
    // without a port: the connection that follows, if any, has its own record.)
    let named = text(detail, "host").filter(|_| detail["port"].is_u64());
    if let Some(a) = named.or_else(|| text(detail, "addr")) {
        let port = detail["port"].as_u64().and_then(|p| u16::try_from(p).ok());
        return Some((a.to_owned(), port.filter(|p| *p != 0)));
    }
    let message = text(detail, "message")?;
    let rest = ["destination ", "would connect to "]
        .iter()
        .find_map(|m| message.split_once(m).map(|(_, r)| r))?;
    let token = rest.split([' ', ',']).next()?;
    let (host, port) = token.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_owned(), port.parse().ok()))
}

fn no_object(what: &str) -> Ask {
    Ask::Never(
        Rule::NoObject,
        format!(
            "the record names no {what} (the kernel saw an inode only, or the name was cut): run `gatewayd explain` and add the entry by hand"
        ),
    )
}

/// What `record` (a refusal) asks for.
pub(super) fn ask(record: &Value) -> Ask {
    let detail = &record["detail"];
    let reason = record["reason"].as_str().unwrap_or("unknown");
    let kind = explain::sandbox_kind(reason, text(detail, "message").unwrap_or(""));
    let never = |rule, why: &str| Ask::Never(rule, why.to_owned());
    match kind {
        "protected_path" => never(
            Rule::ProtectedPath,
            "a protected path (sandbox.protected): a secret stays closed; open it by hand only if the agent must have it",
        ),
        "protected_name" => never(
            Rule::ProtectedName,
            "a protected name (sandbox.protected_names): a secret by its name stays closed",
        ),
        "secret_egress" => never(
            Rule::Secret,
            "a secret was about to leave: no policy change is proposed for that",
        ),
        "egress_lockdown" | "trifecta" => never(
            Rule::RuleOfTwo,
            "the Rule of Two closed the session's egress after untrusted input and private data met: start a new session for work that sends data out",
        ),
        "self_protection"
        | "signal_outside_session"
        | "exec_unlinked"
        | "unresolvable"
        | "inbound_not_allowed" => never(
            Rule::SelfProtection,
            "gatewayd refuses this to every agent to protect itself and the host",
        ),
        "read_only_path" | "read_only_name" | "exec_listed" => never(
            Rule::ReadOnly,
            "read-only by design, so the user's own tools never run what the agent wrote: change sandbox.read_only by hand if you must",
        ),
        "outside_readable" => path_of(detail).map_or_else(|| no_object("path"), Ask::Read),
        "outside_writable" => path_of(detail).map_or_else(|| no_object("path"), Ask::Write),
        "exec_not_allowed" => path_of(detail).map_or_else(|| no_object("program path"), Ask::Exec),
        "egress_not_allowed" => destination(detail).map_or_else(
            || no_object("destination"),
            |(host, port)| Ask::Egress { host, port },
        ),
        "unix_connect" => unix(detail),
        "not_allowlisted" => match record["tool"].as_str() {
            Some(t) => Ask::Tool {
                name: t.to_owned(),
                args: detail["arg_names"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            None => no_object("tool"),
        },
        _ => Ask::Never(Rule::NotAnAllowlist, explain::explain(record).change),
    }
}

/// A socket: its path, or an abstract name the record holds whole.
fn unix(detail: &Value) -> Ask {
    match (text(detail, "path"), text(detail, "name")) {
        (Some(p), _) if p.starts_with('/') => Ask::Unix(p.to_owned()),
        (_, Some(n)) if n.starts_with('@') && !n.ends_with('…') => Ask::Unix(n.to_owned()),
        _ => no_object("socket path or whole abstract name"),
    }
}

/// Whether `host` is an address (an egress entry then names it as a `cidr`).
pub(super) fn is_address(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gw(reason: &str, message: &str) -> Value {
        json!({"source": "gateway", "decision": "deny", "reason": reason, "tool": "t",
               "detail": {"message": message, "arg_names": ["path"]}})
    }

    #[test]
    fn gateway_messages_and_kernel_details_give_the_object() {
        let r = gw(
            "sandbox",
            "`url`: destination evil.example:443 is not in the network egress allowlist",
        );
        assert_eq!(
            ask(&r),
            Ask::Egress {
                host: "evil.example".into(),
                port: Some(443)
            }
        );
        let r = gw(
            "sandbox",
            "`path`: path `x` resolves to `/home/u/x`, outside every writable root of the sandbox",
        );
        assert_eq!(ask(&r), Ask::Write("/home/u/x".into()));
        let r = json!({"source": "kernel", "reason": "egress_not_allowed",
                       "detail": {"addr": "203.0.113.9", "port": 443}});
        assert_eq!(
            ask(&r),
            Ask::Egress {
                host: "203.0.113.9".into(),
                port: Some(443)
            }
        );
        // The egress proxy's record: the name it decided, not the address beside it.
        let r = json!({"source": "gateway", "decision": "would_deny", "reason": "egress_not_allowed",
                       "detail": {"addr": "192.0.2.31", "port": 8443, "host": "api.example", "via": "egress_proxy"}});
        assert_eq!(
            ask(&r),
            Ask::Egress {
                host: "api.example".into(),
                port: Some(8443)
            }
        );
        let r = json!({"source": "kernel", "hook": "landlock", "reason": "outside_readable",
                       "detail": {"path": "/etc/ssl/openssl.cnf"}});
        assert_eq!(ask(&r), Ask::Read("/etc/ssl/openssl.cnf".into()));
        let r = json!({"source": "kernel", "reason": "exec_not_allowed", "detail": {"dev": "8:1", "ino": 5}});
        assert!(matches!(ask(&r), Ask::Never(Rule::NoObject, _)));
        let r = json!({"source": "kernel", "reason": "unix_connect", "detail": {"name": "@a-rather-long-ab…"}});
        assert!(matches!(ask(&r), Ask::Never(Rule::NoObject, _)));
        let r = gw("not_allowlisted", "not in the registry");
        assert_eq!(
            ask(&r),
            Ask::Tool {
                name: "t".into(),
                args: vec!["path".into()]
            }
        );
    }

    #[test]
    fn secrets_self_protection_and_the_rule_of_two_are_never_asked_for() {
        for (reason, rule) in [
            ("protected_path", Rule::ProtectedPath),
            ("protected_name", Rule::ProtectedName),
            ("secret_egress", Rule::Secret),
            ("self_protection", Rule::SelfProtection),
            ("egress_lockdown", Rule::RuleOfTwo),
            ("trifecta", Rule::RuleOfTwo),
            ("read_only_path", Rule::ReadOnly),
            ("rate_limit", Rule::NotAnAllowlist),
        ] {
            let r = json!({"source": "kernel", "reason": reason, "detail": {"path": "/x/y"}});
            assert!(
                matches!(ask(&r), Ask::Never(got, _) if got == rule),
                "{reason}"
            );
        }
        let r = gw(
            "sandbox",
            "`path`: path `a` resolves to `/w/.env`, whose name matches protected name `.env` (sandbox.protected_names)",
        );
        assert!(matches!(ask(&r), Ask::Never(Rule::ProtectedName, _)));
    }
}
