//! Who is calling: the kernel's word for it (`SO_PEERCRED`: pid, uid, gid at connect time),
//! the peer's supplementary groups and its cgroup v2 path (`/proc/PID/status`,
//! `/proc/PID/cgroup`, read from the host's cgroup root when the daemon has a cgroup
//! namespace of its own), read once when the connection is accepted.
use std::{fs, io, sync::OnceLock};

use serde::Serialize;

/// One connection's caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Peer {
    /// Process id at connect time (0 when the kernel did not give one).
    pub pid: i32,
    /// Effective uid at connect time.
    pub uid: u32,
    /// Effective gid at connect time.
    pub gid: u32,
    /// Supplementary groups (empty when they could not be read).
    #[serde(skip)]
    pub groups: Vec<u32>,
    /// The cgroup v2 path (the `0::` line of `/proc/PID/cgroup`); None when it could not be
    /// read (the peer is then refused everything that needs it).
    pub cgroup: Option<String>,
}

impl Peer {
    /// Identifies the peer of a connected Unix socket.
    pub fn of(stream: &tokio::net::UnixStream) -> io::Result<Peer> {
        let cred = stream.peer_cred()?;
        let pid = cred.pid().unwrap_or(0);
        Ok(Peer::from_parts(pid, cred.uid(), cred.gid()))
    }

    /// A peer from its credentials, reading its groups and cgroup from `/proc` (pid 0: the
    /// peer is in a pid namespace we cannot see; nothing more is known).
    pub fn from_parts(pid: i32, uid: u32, gid: u32) -> Peer {
        let (groups, cgroup) = if pid > 0 {
            (
                fs::read_to_string(format!("/proc/{pid}/status"))
                    .map(|s| parse_groups(&s))
                    .unwrap_or_default(),
                fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .ok()
                    .and_then(|s| parse_cgroup(&s))
                    .map(|p| match cgroup_namespace_root() {
                        Some(root) => gatewayd_kernel::cgroup::absolute(root, &p),
                        None => p,
                    }),
            )
        } else {
            (Vec::new(), None)
        };
        Peer {
            pid,
            uid,
            gid,
            groups,
            cgroup,
        }
    }

    /// Root, or a member (primary or supplementary) of `gid`.
    pub fn is_root_or_member(&self, gid: u32) -> bool {
        self.uid == 0 || self.gid == gid || self.groups.contains(&gid)
    }
}

/// The root of this process's cgroup namespace as a path of the cgroup2 mount, when the two
/// differ (a daemon in a Kubernetes pod, with the node's cgroupfs mounted): callers' paths in
/// `/proc/PID/cgroup` read relative to it, and are read from it. Found once.
pub fn cgroup_namespace_root() -> Option<&'static str> {
    static ROOT: OnceLock<Option<String>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mount = gatewayd_kernel::cgroup::cgroup2_mount().ok()?;
        let own = parse_cgroup(&fs::read_to_string("/proc/self/cgroup").ok()?)?;
        gatewayd_kernel::cgroup::namespace_root(&mount, &own, std::process::id())
    })
    .as_deref()
}

/// The environment a process started with (`/proc/PID/environ`: `NAME=VALUE`, NUL
/// separated); None when it cannot be read (pid 0, gone, another user's without privilege).
pub fn environ(pid: i32) -> Option<Vec<(String, String)>> {
    if pid <= 0 {
        return None;
    }
    let bytes = fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(parse_environ(&bytes))
}

fn parse_environ(bytes: &[u8]) -> Vec<(String, String)> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// The path on the `0::` (cgroup v2) line.
pub fn parse_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_owned())
        .filter(|p| p.starts_with('/'))
}

fn parse_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `path` is `root` or inside it (`/a/b` is inside `/a`, `/ab` is not).
pub fn is_within(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    root.is_empty()
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v2_line_is_found_in_hybrid_and_unified_files() {
        let hybrid = "9:name=systemd:/x\n4:memory:/m\n0::/gatewayd/agent-1\n";
        assert_eq!(parse_cgroup(hybrid).as_deref(), Some("/gatewayd/agent-1"));
        assert_eq!(parse_cgroup("0::/\n").as_deref(), Some("/"));
        assert_eq!(parse_cgroup("4:memory:/m\n"), None);
    }

    #[test]
    fn groups_are_read_from_status() {
        let s = "Name:\tx\nGroups:\t4 24 27 \nNSpid:\t1\n";
        assert_eq!(parse_groups(s), vec![4, 24, 27]);
        assert!(parse_groups("Name: x\n").is_empty());
    }

    #[test]
    fn environ_is_split_on_nul() {
        let env = parse_environ(b"A=1\0GITHUB_TOKEN=x=y\0=odd\0noequals\0");
        assert_eq!(
            env,
            vec![
                ("A".to_owned(), "1".to_owned()),
                ("GITHUB_TOKEN".to_owned(), "x=y".to_owned())
            ]
        );
        let own = environ(std::process::id() as i32).unwrap();
        assert!(own.iter().any(|(k, _)| k == "PATH") || own.is_empty());
        assert_eq!(environ(0), None);
    }

    #[test]
    fn within_is_by_path_component() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a/"));
        assert!(!is_within("/ab", "/a"));
        assert!(is_within("/anything", "/"));
    }

    #[tokio::test]
    async fn a_socket_pair_names_this_process() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let p = Peer::of(&a).unwrap();
        assert_eq!(p.pid, std::process::id() as i32);
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        assert_eq!(p.cgroup, parse_cgroup(&own));
    }
}
