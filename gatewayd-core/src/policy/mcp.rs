//! `mcp_servers`: what `gatewayd mcp --server NAME` runs a tool server with — the SHA-256 pin
//! of its program, and its own kernel profile (files, programs, egress), separate from the
//! agent's. Field reference: docs/POLICY.md (`mcp_servers`), docs/MCP.md.
use serde::{Deserialize, Serialize};

use super::{JsonPath, KernelMode, Network, Policy, Sandbox, ValidationError};

/// How a server's kernel profile is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKernel {
    /// Refuse to start the server unless every kernel piece its profile needs is in force.
    Require,
    /// Start it with what this kernel supports; the pieces in force are recorded.
    BestEffort,
    /// No cgroup and no kernel profile: the gateway layer only (recorded at start).
    Off,
}

/// One tool server the proxy may start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// SHA-256 (64 hex digits) of the program file the command names (symlinks followed,
    /// found on `$PATH` when bare): a different file is refused at start.
    #[serde(default)]
    pub command_sha256: Option<String>,
    /// Default: the policy's `kernel` (`require` or `best_effort`).
    #[serde(default)]
    pub kernel: Option<ServerKernel>,
    /// The server's own files and programs. `readable`/`writable`/`root` are an allowlist
    /// here (nothing else can be opened); `protected` is refused inside them; `exec` lists
    /// the only programs it may run (empty: any readable one).
    #[serde(default)]
    pub sandbox: Sandbox,
    /// The server's own egress allowlist (the kernel enforces its `cidr` entries).
    #[serde(default)]
    pub network: Network,
    /// URI schemes other than `file` whose resources the client may read or subscribe to
    /// (`resources/read`, `resources/subscribe`), lower-case, e.g. `["demo"]`. `file://`
    /// URIs are decided by the top-level sandbox; any other scheme not listed is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_schemes: Vec<String>,
    /// Seconds a request may wait for the server's answer (`--request-timeout-s` overrides
    /// it); default 120.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Largest message accepted from either side in bytes (`--max-message-bytes` overrides
    /// it); default 16 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<usize>,
    /// A remote server's Streamable HTTP endpoint (`http`/`https`): `gatewayd mcp --server
    /// NAME` with no command connects to it; `--url` must name this URL when it is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The environment variable of the proxy whose value is sent as the `Authorization`
    /// header to `url` (e.g. `Bearer TOKEN`): the credential stays with the proxy, the client
    /// never sees it. Needs `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_env: Option<String>,
}

/// Longest `timeout_s` a server may have (a day).
pub(crate) const MAX_TIMEOUT_S: u64 = 86_400;
/// Smallest and largest `max_message_bytes` (1 KiB, 1 GiB).
pub(crate) const MESSAGE_BYTES: std::ops::RangeInclusive<usize> = 1024..=(1 << 30);

/// A URI scheme as RFC 3986 spells it (a letter, then letters, digits, `+`, `-`, `.`),
/// lower-case.
fn valid_scheme(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_lowercase())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+-.".contains(&c))
}

impl McpServer {
    /// The kernel mode in force for this server.
    pub fn kernel_mode(&self, policy: &Policy) -> ServerKernel {
        self.kernel.unwrap_or(match policy.kernel {
            KernelMode::Require => ServerKernel::Require,
            KernelMode::BestEffort => ServerKernel::BestEffort,
        })
    }

    /// The server's profile as a policy of its own: its sandbox and network, under `kernel`
    /// (what `gatewayd mcp` confines it by, and what `policy suggest` weighs its refusals
    /// against).
    pub fn profile(&self, kernel: KernelMode) -> Policy {
        Policy {
            version: 1,
            kernel,
            sandbox: self.sandbox.clone(),
            network: self.network.clone(),
            ..Policy::default()
        }
    }

    /// Every tree the server may read (readable, writable, root).
    pub fn readable_trees(&self) -> Vec<std::path::PathBuf> {
        let mut v = self.sandbox.readable.clone();
        v.extend(self.sandbox.writable.iter().cloned());
        v.extend(self.sandbox.root.iter().cloned());
        v
    }
}

/// A valid server name: what `--server` accepts and cgroup names can carry.
pub(crate) fn valid_server_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.')
}

/// `resource_schemes`, `timeout_s` and `max_message_bytes` of one server.
fn limits(s: &McpServer, at: &JsonPath) -> Result<(), ValidationError> {
    for (i, scheme) in s.resource_schemes.iter().enumerate() {
        let at = at.key("resource_schemes").index(i);
        if scheme == "file" {
            return Err(ValidationError::value(
                at,
                "`file` URIs are decided by the top-level sandbox (readable, protected): leave `file` out",
            ));
        }
        if !valid_scheme(scheme) {
            return Err(ValidationError::value(
                at,
                format!(
                    "`{scheme}` is not a lower-case URI scheme (a letter, then letters, digits, + - .)"
                ),
            ));
        }
    }
    if s.timeout_s
        .is_some_and(|t| !(1..=MAX_TIMEOUT_S).contains(&t))
    {
        return Err(ValidationError::value(
            at.key("timeout_s"),
            format!("expected 1 to {MAX_TIMEOUT_S} seconds"),
        ));
    }
    remote(s, at)?;
    if s.max_message_bytes
        .is_some_and(|m| !MESSAGE_BYTES.contains(&m))
    {
        return Err(ValidationError::value(
            at.key("max_message_bytes"),
            format!(
                "expected {} to {} bytes",
                MESSAGE_BYTES.start(),
                MESSAGE_BYTES.end()
            ),
        ));
    }
    Ok(())
}

/// `url` and `authorization_env` of one server.
fn remote(s: &McpServer, at: &JsonPath) -> Result<(), ValidationError> {
    if let Some(u) = &s.url {
        let scheme = u.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(ValidationError::value(
                at.key("url"),
                format!("`{u}` is not an http:// or https:// URL"),
            ));
        }
        crate::engine::sandbox::parse_url(u)
            .map_err(|m| ValidationError::value(at.key("url"), m))?;
    }
    if let Some(v) = &s.authorization_env {
        if s.url.is_none() {
            return Err(ValidationError::value(
                at.key("authorization_env"),
                "a credential is bound to a URL: set `url` too",
            ));
        }
        let mut b = v.bytes();
        let ok = b
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
            && b.all(|c| c.is_ascii_alphanumeric() || c == b'_');
        if !ok {
            return Err(ValidationError::value(
                at.key("authorization_env"),
                format!("`{v}` is not an environment variable name (A-Z a-z 0-9 _)"),
            ));
        }
    }
    Ok(())
}

/// The checks of `mcp_servers` serde cannot express.
pub(super) fn validate(p: &Policy) -> Result<(), ValidationError> {
    for (name, s) in &p.mcp_servers {
        let at = JsonPath::root().key("mcp_servers").key(name);
        if !valid_server_name(name) {
            return Err(ValidationError::value(
                at,
                "a server name is 1 to 64 of A-Z a-z 0-9 - _ . (not starting with a dot)",
            ));
        }
        if let Some(h) = &s.command_sha256
            && (h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(ValidationError::value(
                at.key("command_sha256"),
                "expected 64 hex digits (the SHA-256 of the server's program file)",
            ));
        }
        limits(s, &at)?;
        let sb = &s.sandbox;
        for (field, paths) in [
            ("readable", &sb.readable),
            ("writable", &sb.writable),
            ("protected", &sb.protected),
            ("exec", &sb.exec),
        ] {
            for (i, path) in paths.iter().enumerate() {
                if !path.is_absolute() {
                    return Err(ValidationError::value(
                        at.key("sandbox").key(field).index(i),
                        format!("`{}` is not an absolute path", path.display()),
                    ));
                }
            }
        }
        if !sb.devices.is_empty() {
            return Err(ValidationError::value(
                at.key("sandbox").key("devices"),
                "a tool server keeps the host's /dev: `devices` is for the agent of `gatewayd run` (the top-level `sandbox`)",
            ));
        }
        if !sb.read_only.is_empty() {
            return Err(ValidationError::value(
                at.key("sandbox").key("read_only"),
                "a tool server's files are bounded by its `readable` and `writable`: `read_only` is for the agent of `gatewayd run` (the top-level `sandbox`)",
            ));
        }
        if sb.private_tmp {
            return Err(ValidationError::value(
                at.key("sandbox").key("private_tmp"),
                "a tool server keeps the host's /tmp: `private_tmp` is for the agent of `gatewayd run` (the top-level `sandbox`)",
            ));
        }
        if sb.root.as_ref().is_some_and(|r| !r.is_absolute()) {
            return Err(ValidationError::value(
                at.key("sandbox").key("root"),
                "not an absolute path",
            ));
        }
        for (i, e) in s.network.egress.iter().enumerate() {
            let at = at.key("network").key("egress").index(i);
            match (&e.cidr, &e.host) {
                (None, None) => return Err(ValidationError::value(at, "needs `cidr` or `host`")),
                (Some(c), _) => {
                    crate::net::Cidr::parse(c)
                        .map_err(|m| ValidationError::value(at.key("cidr"), m))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn err(extra: &str) -> String {
        let text = format!(r#"{{"version": 1, "mcp_servers": {extra}}}"#);
        Policy::parse(&text, Path::new("p.json"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn servers_are_validated() {
        assert!(err(r#"{"fs": {"command_sha256": "abc"}}"#).contains("64 hex digits"));
        assert!(err(r#"{"fs": {"sandbox": {"readable": ["rel"]}}}"#).contains("absolute"));
        assert!(err(r#"{"a b": {}}"#).contains("server name"));
        assert!(
            err(r#"{"fs": {"sandbox": {"devices": ["/dev/null"]}}}"#)
                .contains("keeps the host's /dev")
        );
        assert!(err(r#"{"fs": {"network": {"egress": [{}]}}}"#).contains("cidr"));
        assert!(err(r#"{"fs": {"kernal": "off"}}"#).contains("unknown field"));
        assert!(err(r#"{"fs": {"resource_schemes": ["file"]}}"#).contains("top-level sandbox"));
        assert!(err(r#"{"fs": {"resource_schemes": ["Demo"]}}"#).contains("URI scheme"));
        assert!(err(r#"{"fs": {"resource_schemes": ["1x"]}}"#).contains("URI scheme"));
        assert!(err(r#"{"fs": {"timeout_s": 0}}"#).contains("1 to 86400"));
        assert!(err(r#"{"fs": {"max_message_bytes": 10}}"#).contains("1024 to"));
        assert!(err(r#"{"r": {"url": "ftp://x/mcp"}}"#).contains("http:// or https://"));
        assert!(err(r#"{"r": {"authorization_env": "T"}}"#).contains("set `url`"));
        assert!(
            err(r#"{"r": {"url": "https://x/mcp", "authorization_env": "A-B"}}"#)
                .contains("environment variable")
        );
        let ok = r#"{"version": 1, "kernel": "best_effort", "mcp_servers": {"fs": {"sandbox": {"readable": ["/usr"]}}}}"#;
        let p = Policy::parse(ok, Path::new("p.json")).unwrap();
        let limited = r#"{"version": 1, "mcp_servers": {"e": {"resource_schemes": ["demo", "x-y.z+1"], "timeout_s": 5, "max_message_bytes": 4096}}}"#;
        let l = Policy::parse(limited, Path::new("p.json")).unwrap();
        assert_eq!(l.mcp_servers["e"].timeout_s, Some(5));
        assert_eq!(
            p.mcp_servers["fs"].kernel_mode(&p),
            ServerKernel::BestEffort
        );
    }

    #[test]
    fn schema_names_every_server_field() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../../policies/policy.schema.json")).unwrap();
        let mut want: Vec<String> = schema["$defs"]["mcp_server"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        want.sort();
        let v = serde_json::to_value(McpServer {
            resource_schemes: vec!["demo".into()],
            timeout_s: Some(1),
            max_message_bytes: Some(1024),
            url: Some("https://mcp.example/mcp".into()),
            authorization_env: Some("TOKEN".into()),
            ..McpServer::default()
        })
        .unwrap();
        let mut got: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        got.sort();
        assert_eq!(want, got);
    }
}
