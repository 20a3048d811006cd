//! `sandbox.private_tmp` and the host's `/tmp`: the paths a policy names there are bound at
//! the same place into the session's own `/tmp`, as systemd's `BindPaths=` and
//! `BindReadOnlyPaths=` beside `PrivateTmp=` (docs/KERNEL.md, "The agent's /tmp").
//!
//! A path is bound read-write when the policy lets the agent write it (it lies under a
//! `writable` path, or `writable` is empty: unrestricted), read-only otherwise. Read-only
//! matters: the session's `/tmp` is writable, and Landlock grants what a directory's rule
//! allows to everything mounted below it, so a read-only bind is what keeps a `readable` or
//! `exec` path of the host's `/tmp` unwritten at tier 2 (the VFS refuses, `EROFS`).
use std::path::{Component, Path, PathBuf};

use super::Sandbox;

/// One path of the host's `/tmp` that the agent sees in the session's `/tmp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpBind {
    /// Where the agent finds it: under `/tmp`, as the policy wrote it (or, for a path
    /// written elsewhere whose links lead into `/tmp`, where they lead).
    pub inside: PathBuf,
    /// The policy's path as written: the bind's source, resolved before `/tmp` is covered.
    pub source: PathBuf,
    /// Bound read-write (else read-only).
    pub writable: bool,
}

/// Lexical normalisation, without following links: of policy paths that do not exist (yet),
/// and of a path the kernel reached without a symlink (where `..` undoes the component
/// before it, so this is its real path).
pub(crate) fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Where the agent finds `p` in a `/tmp` of the session's own, when `p` lies strictly under
/// `/tmp` as written, or once its links are followed (`tmp`: `/tmp` resolved). `None` for a
/// path elsewhere and for `/tmp` itself (which names the session's own).
fn inside_tmp(p: &Path, tmp: &Path) -> Option<PathBuf> {
    let written = lexical(p);
    let inside = if written.starts_with("/tmp") {
        written
    } else {
        let real = std::fs::canonicalize(p).ok()?;
        Path::new("/tmp").join(real.strip_prefix(tmp).ok()?)
    };
    (inside != Path::new("/tmp")).then_some(inside)
}

/// `/tmp` with its links followed (it is itself a link on some hosts).
fn resolved_tmp() -> PathBuf {
    std::fs::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp"))
}

/// Each of `paths` that lies under `/tmp`, where the agent finds it in the session's own.
pub fn under_tmp<'p>(paths: impl IntoIterator<Item = &'p Path>) -> Vec<PathBuf> {
    let tmp = resolved_tmp();
    paths
        .into_iter()
        .filter_map(|p| inside_tmp(p, &tmp))
        .collect()
}

impl Sandbox {
    /// The binds of the host's `/tmp` paths that `root`, `readable`, `writable` and `exec`
    /// name, sorted so that a path comes after the paths it lies under. A path below one
    /// bound the same way is left out (the outer bind holds it).
    pub fn tmp_binds(&self) -> Vec<TmpBind> {
        let tmp = resolved_tmp();
        let writable = under_tmp(self.writable.iter().map(PathBuf::as_path));
        let mut all: Vec<TmpBind> = self
            .named_paths()
            .filter_map(|p| {
                let inside = inside_tmp(p, &tmp)?;
                let rw = self.writable.is_empty() || writable.iter().any(|w| inside.starts_with(w));
                Some(TmpBind {
                    inside,
                    source: p.to_owned(),
                    writable: rw,
                })
            })
            .collect();
        all.sort_by(|a, b| a.inside.cmp(&b.inside));
        let mut out: Vec<TmpBind> = Vec::new();
        for b in all {
            let holder = out.iter().rev().find(|o| b.inside.starts_with(&o.inside));
            if holder.is_none_or(|o| o.writable != b.writable) {
                out.push(b);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(v: serde_json::Value) -> Sandbox {
        serde_json::from_value(v).unwrap()
    }

    fn binds(v: serde_json::Value) -> Vec<(String, bool)> {
        sandbox(v)
            .tmp_binds()
            .into_iter()
            .map(|b| (b.inside.display().to_string(), b.writable))
            .collect()
    }

    #[test]
    fn paths_under_tmp_are_bound_read_write_only_where_the_policy_lets_the_agent_write() {
        let got = binds(serde_json::json!({
            "root": "/tmp/ws",
            "readable": ["/usr", "/tmp/tools/node_modules", "/tmp/ws/docs", "/tmp", "/tmp/a/../ref"],
            "writable": ["/tmp/ws", "/home/u"],
            "exec": ["/tmp/tools/bin/agent", "/tmp/tools/node_modules/x/cli.js"],
        }));
        assert_eq!(
            got,
            vec![
                ("/tmp/ref".to_owned(), false),
                ("/tmp/tools/bin/agent".to_owned(), false),
                ("/tmp/tools/node_modules".to_owned(), false),
                ("/tmp/ws".to_owned(), true),
            ],
            "/tmp itself names the session's own; a path below one bound alike is held by it"
        );
        let nested = binds(serde_json::json!({
            "readable": ["/tmp/ro"], "writable": ["/tmp/ro/out", "/w"]}));
        assert_eq!(
            nested,
            vec![
                ("/tmp/ro".to_owned(), false),
                ("/tmp/ro/out".to_owned(), true)
            ],
            "a writable path inside a read-only one is bound on top of it"
        );
        let unrestricted = binds(serde_json::json!({"readable": ["/tmp/ro"]}));
        assert_eq!(unrestricted, vec![("/tmp/ro".to_owned(), true)]);
        assert!(binds(serde_json::json!({"readable": ["/usr"], "writable": ["/w"]})).is_empty());
    }

    #[test]
    fn a_link_into_tmp_is_found_where_it_leads() {
        let tmp = resolved_tmp();
        let d = tempfile::Builder::new()
            .prefix("gw-tmpbind")
            .tempdir_in(&tmp)
            .unwrap();
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let link = outside.path().join("to-tmp");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        let inside = Path::new("/tmp").join(d.path().strip_prefix(&tmp).unwrap());
        assert_eq!(under_tmp([link.as_path()]), vec![inside]);
        assert!(under_tmp([outside.path()]).is_empty());
    }
}
