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
    /// A symbolic link (as written, under `/tmp`) is made again in the session's `/tmp`
    /// with this target, not bound.
    pub link: Option<PathBuf>,
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
    /// name, with `program` (the agent's, as found on `PATH`), sorted so that a path comes
    /// after the paths it lies under. A path below one bound the same way is left out (the
    /// outer bind holds it), and so is a link below any bind and a path below a link.
    ///
    /// A path written under `/tmp` that is itself a symbolic link is made again as the same
    /// link (a bind would put its target's contents at its name, and a script run through a
    /// link finds its files from where the link leads), and its target is bound.
    pub fn tmp_binds(&self, program: Option<&Path>) -> Vec<TmpBind> {
        let tmp = resolved_tmp();
        let writable = under_tmp(self.writable.iter().map(PathBuf::as_path));
        let entry = |p: &Path| -> Option<TmpBind> {
            let inside = inside_tmp(p, &tmp)?;
            let may_write = writable.iter().any(|w| inside.starts_with(w));
            let link = (inside == lexical(p)).then(|| std::fs::read_link(p).ok());
            Some(TmpBind {
                writable: self.writable.is_empty() || may_write,
                source: p.to_owned(),
                link: link.flatten(),
                inside,
            })
        };
        let mut all: Vec<TmpBind> = Vec::new();
        for p in self.named_paths().chain(program) {
            let Some(b) = entry(p) else { continue };
            if b.link.is_some() {
                let target = std::fs::canonicalize(p).ok();
                all.extend(target.and_then(|t| entry(&t)));
            }
            all.push(b);
        }
        all.sort_by(|a, b| a.inside.cmp(&b.inside));
        let mut out: Vec<TmpBind> = Vec::new();
        for b in all {
            let holder = out
                .iter()
                .rev()
                .filter(|o| o.link.is_none())
                .find(|o| b.inside.starts_with(&o.inside));
            let held = holder.is_some_and(|o| b.link.is_some() || o.writable == b.writable);
            // At or below a link made again: that link leads there (to its target, bound
            // or outside /tmp), and no mount point is ever made through a link.
            let reached = out.iter().any(|o| {
                b.inside.starts_with(&o.inside) && (o.inside == b.inside || o.link.is_some())
            });
            if !held && !reached {
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
            .tmp_binds(None)
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

    #[test]
    fn a_link_under_tmp_is_made_again_and_its_target_bound() {
        let d = tempfile::Builder::new()
            .prefix("gw-tmplink")
            .tempdir_in(resolved_tmp())
            .unwrap();
        let inside = |p: &Path| Path::new("/tmp").join(p.strip_prefix(resolved_tmp()).unwrap());
        let (pkg, bin) = (d.path().join("pkg"), d.path().join("bin"));
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(pkg.join("cli.js"), "").unwrap();
        std::os::unix::fs::symlink("../pkg/cli.js", bin.join("tool")).unwrap();
        let program = inside(&bin.join("tool"));
        let s = sandbox(serde_json::json!({"readable": ["/usr"], "writable": ["/w"]}));
        let got = s.tmp_binds(Some(&program));
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].inside, program);
        assert_eq!(got[0].link.as_deref(), Some(Path::new("../pkg/cli.js")));
        assert_eq!(got[1].inside, inside(&pkg.join("cli.js")));
        assert!(got[1].link.is_none() && !got[1].writable, "{got:?}");
        // Below the link, its target leads on.
        let below = inside(&bin.join("tool/x"));
        let s2 = sandbox(serde_json::json!({"readable": [below], "writable": ["/w"]}));
        let got2 = s2.tmp_binds(Some(&program));
        assert!(got2.iter().all(|b| b.inside != below), "{got2:?}");
        assert_eq!(got2.len(), 2, "{got2:?}");
        // Below a bind, a link is there already.
        let held = sandbox(serde_json::json!({"readable": [inside(d.path())], "writable": ["/w"]}));
        let got = held.tmp_binds(Some(&program));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].inside, inside(d.path()));
    }
}
