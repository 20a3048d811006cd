//! URL destinations against the policy's `network` section: the egress allowlist, parsed once.
use std::net::IpAddr;

use crate::{net::Cidr, policy::Network};

/// A URL's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dest {
    /// Host name or address literal, lowercased, without a trailing dot or IPv6 brackets.
    pub host: String,
    /// Port, the scheme's default when absent.
    pub port: u16,
}

/// Parses an `http`/`https` URL's destination. User info, percent signs in the host and
/// other schemes are refused.
pub fn parse_url(s: &str) -> Result<Dest, String> {
    let s = s.trim();
    // Parsers disagree about backslashes, spaces and control characters (is `\\@` part of
    // the user info or the start of the path?): such URLs are refused, not interpreted.
    if let Some(c) = s.chars().find(|c| !c.is_ascii_graphic() || *c == '\\') {
        return Err(format!(
            "URL contains {c:?}, which parsers read differently; refused"
        ));
    }
    let (scheme, rest) = s
        .split_once("://")
        .ok_or_else(|| format!("`{s}` is not an absolute URL"))?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        other => {
            return Err(format!(
                "URL scheme `{other}` is not allowed (http, https only)"
            ));
        }
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let auth = &rest[..end];
    if auth.contains('@') {
        return Err("URLs with user info (`user@host`) are refused".into());
    }
    let (host, port) = split_authority(auth).ok_or("unterminated IPv6 literal")?;
    let port = match port {
        None => default_port,
        Some(p) => p.parse::<u16>().map_err(|_| format!("bad port `{p}`"))?,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'))
    {
        return Err(format!(
            "URL host `{host}` is empty or has characters a host name cannot have"
        ));
    }
    Ok(Dest { host, port })
}

/// An authority's host and port text: `host[:port]` or `[v6][:port]` (the brackets
/// removed); `None` for an unterminated `[`.
pub fn split_authority(auth: &str) -> Option<(&str, Option<&str>)> {
    if let Some(r) = auth.strip_prefix('[') {
        let (h, after) = r.split_once(']')?;
        return Some((h, after.strip_prefix(':')));
    }
    Some(match auth.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (auth, None),
    })
}

/// The egress allowlist, parsed once.
#[derive(Debug, Default)]
pub struct EgressView {
    entries: Vec<(Option<Cidr>, Option<String>, Option<u16>)>,
    /// Loopback destinations are the kernel's to judge ([`EgressView::leave_loopback_to_kernel`]).
    loopback_by_kernel: bool,
}

impl EgressView {
    /// Parses the egress entries; a `cidr` that does not parse matches nothing.
    pub fn new(n: &Network) -> EgressView {
        EgressView {
            entries: n
                .egress
                .iter()
                .map(|e| {
                    (
                        e.cidr.as_deref().and_then(|c| Cidr::parse(c).ok()),
                        e.host
                            .as_ref()
                            .map(|h| h.trim_end_matches('.').to_ascii_lowercase()),
                        e.port,
                    )
                })
                .collect(),
            loopback_by_kernel: false,
        }
    }

    /// Leaves loopback destinations (`localhost`, `127.0.0.0/8`, `::1`) to the kernel layer,
    /// for a session whose connect programs judge them: there the agent reaches the servers
    /// its own session listens on, and nothing else on loopback the allowlist does not list
    /// (docs/KERNEL.md, "The session's own servers").
    pub fn leave_loopback_to_kernel(&mut self) {
        self.loopback_by_kernel = true;
    }

    /// Whether the allowlist lets the gateway reach `d`. Host entries match the host name
    /// exactly, or any subdomain with a leading `*.`; cidr entries match literal IP hosts.
    /// A loopback destination, when the kernel judges it, is allowed here.
    pub fn allows(&self, d: &Dest) -> bool {
        (self.loopback_by_kernel && is_loopback(&d.host)) || self.allowing(d).next().is_some()
    }

    /// The indexes (in `network.egress`) of the entries that let the gateway reach `d`.
    pub fn allowing<'a>(&'a self, d: &'a Dest) -> impl Iterator<Item = usize> + 'a {
        let ip: Option<IpAddr> = d.host.parse().ok();
        self.entries
            .iter()
            .enumerate()
            .filter(move |(_, (cidr, host, port))| {
                if port.is_some_and(|p| p != d.port) {
                    return false;
                }
                let by_ip = matches!((cidr, ip), (Some(c), Some(a)) if c.contains(a));
                let by_host = host.as_deref().is_some_and(|h| host_matches(h, &d.host));
                by_ip || by_host
            })
            .map(|(i, _)| i)
    }

    /// What the model may do about a refused destination `d`: `otherwise`, or for a server
    /// on this host's loopback, the entry that would let the agent reach it.
    pub fn next_step(&self, d: &Dest, otherwise: &str) -> String {
        if !is_loopback(&d.host) {
            return otherwise.to_owned();
        }
        // The gateway matches a name by `host` entries, an address by `cidr` entries.
        let entry = match d.host.parse::<IpAddr>() {
            Ok(ip) => format!("\"cidr\": \"{ip}/{}\"", if ip.is_ipv6() { 128 } else { 32 }),
            Err(_) => format!("\"host\": \"{}\"", d.host),
        };
        format!(
            "this is a server on this host: ask the user to add {{{entry}, \"port\": {}}} to network.egress, or to run the agent under `gatewayd run`, where it reaches the servers it starts itself",
            d.port
        )
    }

    /// Whether some entry lets the agent reach address `ip`, on any port: a `cidr` entry
    /// that holds it, or a `host` entry that is its text.
    pub fn allows_address(&self, ip: IpAddr) -> bool {
        if self.loopback_by_kernel && ip.is_loopback() {
            return true;
        }
        let text = ip.to_string();
        self.entries.iter().any(|(cidr, host, _)| {
            cidr.as_ref().is_some_and(|c| c.contains(ip)) || host.as_deref() == Some(&text)
        })
    }

    /// Whether some `host` entry names `host` (exactly, or as a subdomain of a `*.domain`
    /// entry), on any port: a name the session's resolver may answer.
    pub fn names(&self, host: &str) -> bool {
        self.entries
            .iter()
            .any(|(_, h, _)| h.as_deref().is_some_and(|h| host_matches(h, host)))
    }
}

/// A `host` entry (`name` or `*.domain`, lowercased) against a lowercased host name.
pub fn host_matches(entry: &str, host: &str) -> bool {
    match entry.strip_prefix("*.") {
        Some(base) => {
            host.len() > base.len() + 1
                && host.ends_with(base)
                && host.as_bytes()[host.len() - base.len() - 1] == b'.'
        }
        None => entry == host,
    }
}

/// Whether `host` (as [`parse_url`] gives it: lowercased, no trailing dot, an IPv6 address
/// without its brackets) names this host's loopback: `localhost`, an address in
/// `127.0.0.0/8`, `::1`.
fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
