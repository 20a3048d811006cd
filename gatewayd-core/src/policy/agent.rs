//! The `agent` section: whom `gatewayd run` starts the agent as, which capabilities a root
//! agent keeps, and which socket families and netlink protocols it may open beyond the
//! defaults. Enforced by `gatewayd_kernel::agent_privileges`; reference: `docs/POLICY.md`, and
//! `docs/KERNEL.md` ("The agent's privileges") for what each choice gives up.
use serde::{Deserialize, Serialize};

use super::{JsonPath, ValidationError};
use crate::policy::names;

/// A user or group, by name or by number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Account {
    /// A number (uid or gid).
    Id(u32),
    /// A name, looked up in the system's user or group database.
    Name(String),
}

impl std::fmt::Display for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Account::Id(n) => write!(f, "{n}"),
            Account::Name(s) => f.write_str(s),
        }
    }
}

/// The agent's identity and the kernel surface it keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The user the agent runs as, unless `gatewayd run --user` names one (default: the
    /// user who ran `sudo`).
    #[serde(default)]
    pub user: Option<Account>,
    /// Its supplementary groups (default: the user's own groups).
    #[serde(default)]
    pub groups: Option<Vec<Account>>,
    /// Capabilities a root agent keeps (default: none). Only for uid 0.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Socket families beyond `unix`, `inet` and `inet6` (default: none).
    #[serde(default)]
    pub socket_families: Vec<String>,
    /// Netlink protocols the agent may open (default: `["route"]`; `[]`: none).
    #[serde(default)]
    pub netlink: Option<Vec<String>>,
    /// The session cgroup's `pids.max`: processes and threads the agent's session may hold
    /// at once (default: [`DEFAULT_MAX_PIDS`]).
    #[serde(default)]
    pub max_pids: Option<u64>,
    /// The session cgroup's `memory.max`, in MiB (default: three quarters of the host's
    /// memory). Above it, the kernel kills the whole session (`memory.oom.group`).
    #[serde(default)]
    pub max_memory_mib: Option<u64>,
    /// Variables `gatewayd run` sets in the agent's environment, over what it inherits
    /// (the starter points the package managers' caches into the session's own `/tmp`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// The default `agent.max_pids`: far above what a coding agent with its builds and test
/// runs holds, far below what exhausts a host (`pid_max` is 4 million on 64-bit kernels).
pub const DEFAULT_MAX_PIDS: u64 = 16_384;

impl Agent {
    /// The capability numbers the policy keeps (validated names).
    pub fn capability_numbers(&self) -> Vec<u32> {
        self.capabilities
            .iter()
            .filter_map(|c| names::capability(c))
            .collect()
    }

    /// The extra socket family numbers (validated names).
    pub fn socket_family_numbers(&self) -> Vec<u32> {
        self.socket_families
            .iter()
            .filter_map(|f| names::socket_family(f))
            .collect()
    }

    /// The allowed netlink protocol numbers (validated names; the default when unset).
    pub fn netlink_numbers(&self) -> Vec<u32> {
        match &self.netlink {
            Some(list) => list
                .iter()
                .filter_map(|p| names::netlink_protocol(p))
                .collect(),
            None => names::DEFAULT_NETLINK
                .iter()
                .filter_map(|p| names::netlink_protocol(p))
                .collect(),
        }
    }
}

/// Names in the `agent` section that this build does not know.
pub(super) fn validate(agent: &Agent) -> Result<(), ValidationError> {
    let at = JsonPath::root().key("agent");
    type Known = fn(&str) -> Option<u32>;
    let lists: [(&str, &[String], Known, &str); 3] = [
        (
            "capabilities",
            &agent.capabilities,
            names::capability,
            "a capability name such as CAP_NET_BIND_SERVICE",
        ),
        (
            "socket_families",
            &agent.socket_families,
            names::socket_family,
            "one of packet, vsock, bluetooth, can, alg, xdp, ... (docs/POLICY.md)",
        ),
        (
            "netlink",
            agent.netlink.as_deref().unwrap_or_default(),
            names::netlink_protocol,
            "a netlink protocol such as route, sock_diag, audit (docs/POLICY.md)",
        ),
    ];
    for (field, values, known, expected) in lists {
        for (i, v) in values.iter().enumerate() {
            if known(v).is_none() {
                return Err(ValidationError::value(
                    at.key(field).index(i),
                    format!("unknown name `{v}`: expected {expected}"),
                ));
            }
        }
    }
    if let Some(Account::Name(n)) = &agent.user
        && n.is_empty()
    {
        return Err(ValidationError::value(at.key("user"), "empty user name"));
    }
    validate_env(agent, &at)?;
    for (field, value) in [
        ("max_pids", agent.max_pids),
        ("max_memory_mib", agent.max_memory_mib),
    ] {
        if value == Some(0) {
            return Err(ValidationError::value(
                at.key(field),
                "0 would leave the agent nothing: give a limit of 1 or more, or leave the field out for the default",
            ));
        }
    }
    Ok(())
}

/// `agent.env`: shell variable names, values without NUL, and none of the dynamic loader's
/// variables (`LD_PRELOAD` would load code into every program the agent runs) or
/// gatewayd's own (`GATEWAYD_*`).
fn validate_env(agent: &Agent, at: &JsonPath) -> Result<(), ValidationError> {
    for (name, value) in &agent.env {
        let at = at.key("env").key(name);
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let refused = if !valid {
            Some("not a variable name (letters, digits and `_`, not starting with a digit)")
        } else if name.starts_with("LD_") {
            Some(
                "the dynamic loader's variables would load code into every program the agent runs: list the program instead",
            )
        } else if name.starts_with("GATEWAYD_") {
            Some("gatewayd's own variables are not the agent's to set")
        } else if value.contains('\0') {
            Some("a value holds a NUL byte")
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(ValidationError::value(at, why));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::policy::Policy;

    #[test]
    fn the_agents_environment_takes_plain_variables_only() {
        let p = Policy::parse(
            r#"{"version": 1, "agent": {"env": {"npm_config_cache": "/tmp/.npm", "X_1": ""}}}"#,
            Path::new("p.json"),
        )
        .expect("valid");
        assert_eq!(p.agent.env["npm_config_cache"], "/tmp/.npm");
        for (name, why) in [
            ("LD_PRELOAD", "loader"),
            ("GATEWAYD_DNS_SERVER", "gatewayd's own"),
            ("1X", "not a variable name"),
            ("A-B", "not a variable name"),
            ("", "not a variable name"),
        ] {
            let text = format!(r#"{{"version": 1, "agent": {{"env": {{"{name}": "x"}}}}}}"#);
            let e = Policy::parse(&text, Path::new("p.json")).expect_err(name);
            assert!(e.to_string().contains(why), "{name}: {e}");
        }
        let nul = r#"{"version": 1, "agent": {"env": {"A": "x\u0000y"}}}"#;
        let e = Policy::parse(nul, Path::new("p.json")).expect_err("NUL");
        assert!(e.to_string().contains("NUL"), "{e}");
    }

    #[test]
    fn a_zero_limit_is_refused() {
        for field in ["max_pids", "max_memory_mib"] {
            let text = format!(r#"{{"version": 1, "agent": {{"{field}": 0}}}}"#);
            let e = Policy::parse(&text, Path::new("p.json")).expect_err("refused");
            assert!(e.to_string().contains(field), "{e}");
        }
        let p = Policy::parse(
            r#"{"version": 1, "agent": {"max_pids": 64, "max_memory_mib": 128}}"#,
            Path::new("p.json"),
        )
        .expect("valid");
        assert_eq!(
            (p.agent.max_pids, p.agent.max_memory_mib),
            (Some(64), Some(128))
        );
    }

    #[test]
    fn agent_section_parses_and_unknown_names_are_refused() {
        let p = Policy::parse(
            r#"{"version": 1, "agent": {"user": "nobody", "groups": [100, "users"],
                "capabilities": ["CAP_NET_BIND_SERVICE"], "socket_families": ["vsock"],
                "netlink": []}}"#,
            Path::new("p.json"),
        )
        .unwrap();
        assert_eq!(p.agent.capability_numbers(), [10]);
        assert_eq!(p.agent.socket_family_numbers(), [40]);
        assert!(p.agent.netlink_numbers().is_empty());
        let d = Policy::parse(r#"{"version": 1}"#, Path::new("p.json")).unwrap();
        assert_eq!(d.agent.netlink_numbers(), [0], "route by default");
        for (bad, at) in [
            (r#"{"capabilities": ["CAP_FLY"]}"#, "agent.capabilities[0]"),
            (
                r#"{"socket_families": ["inet"]}"#,
                "agent.socket_families[0]",
            ),
            (r#"{"netlink": ["route", "x"]}"#, "agent.netlink[1]"),
        ] {
            let text = format!(r#"{{"version": 1, "agent": {bad}}}"#);
            let e = Policy::parse(&text, Path::new("p.json")).unwrap_err();
            assert!(e.to_string().contains(at), "{e}");
        }
    }
}
