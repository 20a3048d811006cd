//! Tier 2: the path-named Unix sockets bound on the host when the session starts, to be
//! covered in the agent's mount namespace ([`super::hide`]).
//!
//! Landlock (up to ABI 7) has no right for connecting to a path-named socket, so without BPF
//! LSM nothing in the kernel stops the agent from reaching a local service its user may
//! write to: the user's D-Bus session bus (whose systemd user manager starts any command,
//! outside the agent's cgroup and sandbox), an ssh-agent, a container engine's socket. The
//! kernel lists every bound Unix socket of the network namespace, with the path it was bound
//! to, in `/proc/net/unix`; the agent shares that namespace. Each one that is still a
//! socket file when the session starts, and is neither listed in `network.unix` nor the
//! session's own gateway socket, gets `/dev/null` bound over it (as a protected file does):
//! `connect()` and `sendto()` to it fail with `ECONNREFUSED` (the name is no longer a
//! socket), whatever way the agent spells the path. A socket bound after the session started
//! is not covered (`docs/KERNEL.md`, Known limits).
use std::{
    os::unix::fs::FileTypeExt as _,
    path::{Path, PathBuf},
};

/// Where the kernel lists the Unix sockets of this network namespace.
const PROC_NET_UNIX: &str = "/proc/net/unix";

/// The absolute paths of `/proc/net/unix`'s entries (sorted, without duplicates: a listening
/// socket's accepted connections carry its path too). Columns: `Num RefCount Protocol Flags
/// Type St Inode Path`; the path, when there is one, is the rest of the line (it may hold
/// spaces); an abstract name starts with `@` and an unbound socket has none.
fn bound_paths(table: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut rest = l.trim_start();
            for _ in 0..7 {
                let (_, tail) = rest.split_once(char::is_whitespace)?;
                rest = tail.trim_start();
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The sockets to cover: the bound paths that are socket files now, minus those `allowed`
/// (compared once both are made canonical) and those under a directory in `covered`
/// (already hidden). Returns the sockets and how many entries the kernel listed.
pub(crate) fn to_cover(allowed: &[PathBuf], covered: &[PathBuf]) -> (Vec<PathBuf>, usize) {
    let table = std::fs::read_to_string(PROC_NET_UNIX).unwrap_or_default();
    let bound = bound_paths(&table);
    let listed = bound.len();
    let allowed: Vec<PathBuf> = allowed
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let mut out: Vec<PathBuf> = bound
        .iter()
        .filter(|p| is_socket(p))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| !allowed.contains(p) && !covered.iter().any(|c| p.starts_with(c)))
        .collect();
    out.sort();
    out.dedup();
    (out, listed)
}

fn is_socket(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_the_kernels_table() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path
0000000075d0dc7e: 00000003 00000000 00000000 0001 03   130
00000000b9fc4ea5: 00000002 00000000 00010000 0001 01 21240 /run/user/1000/bus
0000000035592c59: 00000002 00000000 00000000 0002 01   129 /run/systemd/journal/dev-log
000000007b4c9f15: 00000003 00000000 00000000 0001 03 21232 /run/user/1000/bus
000000007b4c9f16: 00000002 00000000 00010000 0001 01 21233 @/tmp/.X11-unix/X0
000000007b4c9f17: 00000002 00000000 00010000 0001 01 21234 /tmp/a dir/with space.sock
";
        assert_eq!(
            bound_paths(table),
            [
                "/run/systemd/journal/dev-log",
                "/run/user/1000/bus",
                "/tmp/a dir/with space.sock"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn listed_and_already_hidden_sockets_are_not_covered() {
        let dir = std::env::temp_dir().join(format!("gw-host-sockets-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("hidden")).unwrap();
        let names = ["a.sock", "listed.sock", "hidden/h.sock"];
        let _bound: Vec<_> = names
            .iter()
            .map(|n| std::os::unix::net::UnixListener::bind(dir.join(n)).unwrap())
            .collect();
        let dir = std::fs::canonicalize(&dir).unwrap();
        let (cover, listed) = to_cover(&[dir.join("listed.sock")], &[dir.join("hidden")]);
        let mine: Vec<&PathBuf> = cover.iter().filter(|p| p.starts_with(&dir)).collect();
        assert_eq!(mine, [&dir.join("a.sock")]);
        assert!(listed >= 3, "{listed}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
