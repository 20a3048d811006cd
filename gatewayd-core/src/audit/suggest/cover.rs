//! The grouping rule of `gatewayd policy suggest`: for a refused file, the smallest directory
//! that covers it and the files like it sensibly, never `/` and never the home directory as a
//! whole.
//!
//! In order, the first that applies:
//! - a path with a `node_modules` component: the first `node_modules` directory (an npm
//!   install and its dependencies, as `policy init --host` lists it);
//! - under the home (`/root`, `/home/USER`): `~/.config/APP`, `~/.local/share/APP`,
//!   `~/.local/state/APP`, `~/.cache/APP`; a runtime's own version (`~/.nvm/versions/node/V`,
//!   `~/.rustup/toolchains/T`, `~/.pyenv/versions/V`) or its directory (`~/.cargo`, `~/.bun`,
//!   `~/.deno`, `~/.volta`, `~/.npm`, ...); any other dot directory `~/.APP`; a file directly in
//!   the home (`~/.gitconfig`) is itself; elsewhere in the home two levels (`~/src/project`);
//! - `/etc/NAME` (`/etc/ssl`, `/etc/hosts`), `/opt/NAME`, `/usr/X/NAME` (`/usr/share/zoneinfo`),
//!   `/usr/local/X/NAME`, `/var/X/NAME`, `/run/NAME`, `/nix/store/NAME`, `/snap/NAME`;
//! - anything else: its first two levels (`/srv/data`).
//!
//! A path shorter than the level is itself (a file directly in `/etc` is that file).
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

/// Where a proposed entry belongs in the grouped list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// The host's (and other programs') configuration and state in the home.
    HostConfig,
    /// A runtime's or a program's installed files (`node_modules`, a Node.js, a toolchain).
    Runtime,
    /// The system's files (`/etc`, `/usr`, `/var`, the private `/tmp`).
    System,
    /// Other readable and writable roots (projects, data).
    Roots,
    /// Programs the agent may execute.
    Exec,
    /// Network destinations, by name or address.
    Egress,
    /// Unix sockets outside the session.
    Unix,
    /// Tools the gateway did not know.
    Tools,
}

impl Group {
    /// The heading of the group in the human-readable list.
    pub fn title(self) -> &'static str {
        match self {
            Group::HostConfig => "the host's config dirs",
            Group::Runtime => "the runtime's files",
            Group::System => "the system's files",
            Group::Roots => "readable and writable roots",
            Group::Exec => "exec programs",
            Group::Egress => "egress names and addresses",
            Group::Unix => "unix sockets",
            Group::Tools => "tools",
        }
    }
}

/// Dot directories of a home that hold a runtime, with how many levels below them make one
/// install (0: the directory itself).
const RUNTIME_HOMES: &[(&str, usize)] = &[
    (".nvm", 3),
    (".rustup", 2),
    (".pyenv", 2),
    (".cargo", 0),
    (".bun", 0),
    (".deno", 0),
    (".volta", 0),
    (".npm", 0),
    (".yarn", 0),
    (".gradle", 0),
    (".m2", 0),
    (".sdkman", 0),
];

/// Directories of a home whose child is one program's (XDG).
const PER_APP: &[&str] = &[".config", ".local/share", ".local/state", ".cache"];

/// The names of `p`'s normal components.
fn names(p: &Path) -> Vec<&str> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect()
}

/// `/` joined with the first `n` names (all of them when there are fewer).
fn first(names: &[&str], n: usize) -> PathBuf {
    let mut p = PathBuf::from("/");
    for c in names.iter().take(n.max(1)) {
        p.push(c);
    }
    p
}

/// The home directory `p` lies under, as the number of its names (`/root`: 1,
/// `/home/u`: 2), if any.
pub(super) fn home_depth(p: &Path) -> Option<usize> {
    match names(p).as_slice() {
        ["root", ..] => Some(1),
        ["home", _, ..] => Some(2),
        _ => None,
    }
}

/// The home directory `p` lies under.
pub(super) fn home_of(p: &Path) -> Option<PathBuf> {
    home_depth(p).map(|d| first(&names(p), d))
}

/// The directory to propose for the refused `path` (absolute), and its group.
pub(super) fn cover(path: &Path) -> (PathBuf, Group) {
    let n = names(path);
    if let Some(i) = n.iter().position(|c| *c == "node_modules") {
        return (first(&n, i + 1), Group::Runtime);
    }
    if let Some(h) = home_depth(path) {
        let (depth, group) = in_home(&n[h..]);
        return (first(&n, h + depth), group);
    }
    let (depth, group) = match n.as_slice() {
        ["etc" | "run", ..] => (2, Group::System),
        ["opt" | "snap", ..] => (2, Group::Runtime),
        ["nix", "store", ..] => (3, Group::Runtime),
        ["usr", "local", ..] => (4, Group::Runtime),
        ["usr" | "var", ..] => (3, Group::System),
        _ => (2, Group::Roots),
    };
    (first(&n, depth), group)
}

/// How many names below the home the cover of `rel` (a path's names below it) keeps.
fn in_home(rel: &[&str]) -> (usize, Group) {
    for app in PER_APP {
        let base: Vec<&str> = app.split('/').collect();
        if rel.len() > base.len() && rel.starts_with(&base) {
            return (base.len() + 1, Group::HostConfig);
        }
    }
    let Some(top) = rel.first() else {
        return (0, Group::Roots);
    };
    if let Some((_, below)) = RUNTIME_HOMES.iter().find(|(d, _)| d == top) {
        return (1 + below, Group::Runtime);
    }
    if top.starts_with('.') {
        return (1, Group::HostConfig);
    }
    (2, Group::Roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &str) -> (String, Group) {
        let (d, g) = cover(Path::new(p));
        (d.display().to_string(), g)
    }

    #[test]
    fn a_file_is_covered_by_its_app_runtime_or_system_directory() {
        use Group::*;
        for (path, want, group) in [
            (
                "/home/u/.config/gh-dash/config.yml",
                "/home/u/.config/gh-dash",
                HostConfig,
            ),
            ("/root/.config/app/a/b", "/root/.config/app", HostConfig),
            (
                "/home/u/.local/share/claude/versions/1",
                "/home/u/.local/share/claude",
                HostConfig,
            ),
            (
                "/home/u/.claude/projects/x.jsonl",
                "/home/u/.claude",
                HostConfig,
            ),
            ("/home/u/.gitconfig", "/home/u/.gitconfig", HostConfig),
            (
                "/home/u/.nvm/versions/node/v20.1.0/bin/node",
                "/home/u/.nvm/versions/node/v20.1.0",
                Runtime,
            ),
            (
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
                "/usr/lib/node_modules",
                Runtime,
            ),
            (
                "/home/u/.rustup/toolchains/stable-x/lib/a.so",
                "/home/u/.rustup/toolchains/stable-x",
                Runtime,
            ),
            ("/etc/ssl/openssl.cnf", "/etc/ssl", System),
            ("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl", System),
            ("/etc/hosts", "/etc/hosts", System),
            ("/usr/share/zoneinfo/UTC", "/usr/share/zoneinfo", System),
            (
                "/usr/local/lib/python3/x.py",
                "/usr/local/lib/python3",
                Runtime,
            ),
            ("/opt/google/chrome/chrome", "/opt/google", Runtime),
            ("/home/u/src/project/a/b.rs", "/home/u/src/project", Roots),
            ("/srv/data/x/y", "/srv/data", Roots),
        ] {
            assert_eq!(c(path), (want.to_owned(), group), "{path}");
        }
    }

    #[test]
    fn never_the_root_nor_a_whole_home() {
        for p in [
            "/x",
            "/home/u/notes.txt",
            "/home/u/a/b/c/d",
            "/root/.profile",
            "/home/u/.config/x",
            "/etc/a",
        ] {
            let (d, _) = cover(Path::new(p));
            assert_ne!(d, Path::new("/"), "{p}");
            let home = home_of(Path::new(p));
            assert!(home.is_none_or(|h| d != h), "{p}: {}", d.display());
            assert!(Path::new(p).starts_with(&d), "{p} under {}", d.display());
        }
    }
}
