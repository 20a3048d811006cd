//! `sandbox.private_tmp`: the agent's `/tmp` is a directory of the session's own
//! (docs/KERNEL.md, "The agent's /tmp").
//!
//! gatewayd makes `/tmp/gatewayd-SESSION/` (mode 0700, root's: no other user of the host
//! reaches in) holding `tmp` (mode 1777, as a `/tmp` is), before the session's roots are
//! resolved, so the kernel's write roots can name it at both tiers. The PID namespace's
//! init binds it onto `/tmp` (`nosuid`, `nodev`) in the agent's mount namespace
//! ([`super::surfaces::Surfaces::mount`]); the host's `/tmp`, and whatever is mounted below
//! it, is out of the agent's sight. The directory is removed when the session ends
//! ([`SessionTmp`]'s drop, after the agent's cgroup is empty).
use gatewayd_core::policy::{Sandbox, tmp_binds::TmpBind};
use serde_json::json;
use std::{
    io,
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

/// Why the session's `/tmp` could not be made; the agent was not started.
#[derive(Debug, thiserror::Error)]
pub enum PrivateTmpError {
    /// The directory could not be made.
    #[error("sandbox.private_tmp: cannot make the session's /tmp: {0}")]
    Create(#[from] io::Error),
}

/// With `sandbox.private_tmp`: the session's `/tmp`, with a mount point for each path of
/// the host's `/tmp` that the sandbox names and for the agent's `program` (as found on
/// `PATH`: it is run by that path) ([`Sandbox::tmp_binds`]), added to `sandbox`'s
/// kernel roots (to `writable` when it is listed, else to `readable` when that is: an empty
/// list stays unrestricted). A path that is not there is not bound (the kernel's roots reach
/// nothing there either, and `gatewayd run` warns of it); the record lists it.
pub fn for_sandbox(
    sandbox: &mut Sandbox,
    session: &str,
    program: Option<&Path>,
) -> Result<Option<SessionTmp>, PrivateTmpError> {
    if !sandbox.private_tmp {
        return Ok(None);
    }
    let tmp = std::fs::canonicalize("/tmp")?;
    let mut made = SessionTmp::create(&tmp, session)?;
    for b in sandbox.tmp_binds(program) {
        match (&b.link, clone_tree(&b.source)) {
            (Some(to), _) => made.link(&b.inside, to)?,
            (None, Ok(source)) => made.bind(b, source)?,
            (None, Err(_)) => made.not_bound.push(b.inside),
        }
    }
    if !sandbox.writable.is_empty() {
        sandbox.writable.push(made.dir().to_owned());
    } else if !sandbox.readable.is_empty() {
        sandbox.readable.push(made.dir().to_owned());
    }
    Ok(Some(made))
}

/// A detached copy of the mount tree at `path` (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`,
/// its links followed, as a bind would): what is bound is what was looked at now, whatever
/// takes its name in the host's `/tmp` before the agent starts. The init attaches it in the
/// agent's mount namespace (`move_mount`; a bind from a path of gatewayd's namespace would
/// be refused there, `EINVAL`).
fn clone_tree(path: &Path) -> io::Result<std::fs::File> {
    use std::os::{fd::FromRawFd as _, unix::ffi::OsStrExt as _};
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as u32;
    // SAFETY: a NUL-terminated path that outlives the call; the result is a new descriptor
    // or -1.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open_tree and is owned by nothing else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd as i32) })
}

/// A path of the host's `/tmp` bound into the session's, its mount point made.
#[derive(Debug)]
pub struct PlannedBind {
    /// The host's path (the policy's, as written).
    pub source: PathBuf,
    /// A detached copy of its mount tree, made at the start ([`clone_tree`]): the init
    /// attaches it, so a name swapped in since is not what the agent gets.
    pub tree: std::fs::File,
    /// Its mount point on the host, in the session's directory (reached, for a path below
    /// another bind, through that bind in the agent's mount namespace).
    pub target: PathBuf,
    /// Where the agent finds it: under `/tmp`.
    pub inside: PathBuf,
    /// Bound read-write (else read-only).
    pub writable: bool,
}

/// The session's `/tmp` on the host, removed on drop.
#[derive(Debug)]
pub struct SessionTmp {
    outer: PathBuf,
    dir: PathBuf,
    binds: Vec<PlannedBind>,
    /// The paths under the host's `/tmp` that the policy names but that were not there.
    not_bound: Vec<PathBuf>,
    /// The links under the host's `/tmp` made again in it.
    links: Vec<(PathBuf, PathBuf)>,
}

impl SessionTmp {
    /// Makes `/tmp/gatewayd-SESSION/tmp` (under `base`, normally `/tmp`). Fails when the
    /// outer directory exists already (never reused).
    pub fn create(base: &Path, session: &str) -> io::Result<SessionTmp> {
        let outer = base.join(format!("gatewayd-{session}"));
        std::fs::DirBuilder::new().mode(0o700).create(&outer)?;
        let made = SessionTmp {
            dir: outer.join("tmp"),
            outer,
            binds: Vec::new(),
            not_bound: Vec::new(),
            links: Vec::new(),
        };
        std::fs::DirBuilder::new().mode(0o700).create(&made.dir)?;
        // The mode a /tmp has, whatever the umask.
        std::fs::set_permissions(&made.dir, std::fs::Permissions::from_mode(0o1777))?;
        Ok(made)
    }

    /// Plans `b` (after the binds it may lie under: [`Sandbox::tmp_binds`]'s order) and
    /// makes its mount point unless an earlier bind holds it: its directories (root's, mode
    /// 0755) and itself, a directory or an empty file as `is_dir` says.
    fn bind(&mut self, b: TmpBind, tree: std::fs::File) -> io::Result<()> {
        let held = self.binds.iter().any(|o| b.inside.starts_with(&o.inside));
        let target = if held {
            self.dir
                .join(b.inside.strip_prefix("/tmp").unwrap_or(&b.inside))
        } else {
            let target = self.between(&b.inside)?;
            if tree.metadata()?.is_dir() {
                std::fs::DirBuilder::new().mode(0o755).create(&target)?;
            } else {
                let mut new = std::fs::OpenOptions::new();
                new.write(true).create_new(true).mode(0o644).open(&target)?;
            }
            target
        };
        self.binds.push(PlannedBind {
            source: b.source,
            tree,
            target,
            inside: b.inside,
            writable: b.writable,
        });
        Ok(())
    }

    /// Makes the symbolic link `inside` (under `/tmp`) again in the session's directory,
    /// leading to `to` as the host's does.
    fn link(&mut self, inside: &Path, to: &Path) -> io::Result<()> {
        let at = self.between(inside)?;
        std::os::unix::fs::symlink(to, &at)?;
        self.links.push((inside.to_owned(), to.to_owned()));
        Ok(())
    }

    /// Where `inside` (under `/tmp`) lies in the session's directory, with the directories
    /// between made: root's, 0755 whatever the umask, so any agent user passes. Nothing is
    /// made through a link (gatewayd's own, made again: [`Sandbox::tmp_binds`] plans no path
    /// below one).
    fn between(&self, inside: &Path) -> io::Result<PathBuf> {
        let below = inside.strip_prefix("/tmp").unwrap_or(inside);
        let mut at = self.dir.clone();
        for c in below.parent().into_iter().flat_map(Path::components) {
            at.push(c);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    let why = format!("{} is not a directory of its own", at.display());
                    return Err(io::Error::other(why));
                }
                Err(_) => {
                    std::fs::DirBuilder::new().mode(0o755).create(&at)?;
                    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755))?;
                }
            }
        }
        Ok(self.dir.join(below))
    }

    /// What the `session_start` record says of it (`kernel_interfaces.tmp`): the directory,
    /// the host's paths bound into it, those not there to bind, the links made again.
    pub fn describe(&self) -> serde_json::Value {
        let shown = |p: &Path| p.display().to_string();
        let bound: Vec<serde_json::Value> = self
            .binds
            .iter()
            .map(|b| {
                json!({"path": shown(&b.inside), "from": shown(&b.source),
                       "read_only": !b.writable})
            })
            .collect();
        let links: Vec<serde_json::Value> = self
            .links
            .iter()
            .map(|(at, to)| json!({"path": shown(at), "to": shown(to)}))
            .collect();
        let not_bound: Vec<String> = self.not_bound.iter().map(|p| shown(p)).collect();
        json!({"private": shown(&self.dir), "mount": "bound (nosuid, nodev), removed at the end",
               "bound": bound, "not_bound": not_bound, "links": links})
    }

    /// The directory the agent sees as `/tmp`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host's paths bound into it, outer before inner.
    pub fn binds(&self) -> &[PlannedBind] {
        &self.binds
    }

    /// The paths the policy names under the host's `/tmp` that were not there to bind.
    pub fn not_bound(&self) -> &[PathBuf] {
        &self.not_bound
    }
}

impl Drop for SessionTmp {
    fn drop(&mut self) {
        // std's remove_dir_all does not follow symbolic links the agent left.
        if let Err(e) = std::fs::remove_dir_all(&self.outer) {
            eprintln!(
                "gatewayd: the session's /tmp {} was not removed: {e}",
                self.outer.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(v: serde_json::Value) -> Sandbox {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn nothing_is_made_without_the_flag_and_a_missing_path_under_tmp_is_not_bound() {
        let mut off = sandbox(serde_json::json!({"writable": ["/tmp/w"]}));
        assert!(for_sandbox(&mut off, "t-off", None).unwrap().is_none());
        let missing = PathBuf::from(format!("/tmp/gw-not-there-{}", std::process::id()));
        let mut s = sandbox(serde_json::json!({"private_tmp": true, "writable": [missing]}));
        let t = for_sandbox(&mut s, &format!("t-gone-{}", std::process::id()), None)
            .unwrap()
            .unwrap();
        assert!(t.binds().is_empty());
        assert_eq!(t.not_bound(), [missing]);
    }

    #[test]
    fn a_mount_point_is_made_for_each_outer_bind_of_its_kind() {
        let host = tempfile::Builder::new()
            .prefix("gw-ptmp")
            .tempdir_in("/tmp")
            .unwrap();
        let name = host
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let (ro, out, file) = (
            host.path().join("ro"),
            host.path().join("ro/out"),
            host.path().join("f.sock"),
        );
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(&file, "").unwrap();
        let mut s = sandbox(serde_json::json!({"private_tmp": true,
            "readable": [ro, file], "writable": [out, "/w"]}));
        let t = for_sandbox(&mut s, &format!("t-mp-{}", std::process::id()), None)
            .unwrap()
            .unwrap();
        let got: Vec<(PathBuf, bool)> = t
            .binds()
            .iter()
            .map(|b| (b.inside.clone(), b.writable))
            .collect();
        let inside = |p: &str| Path::new("/tmp").join(&name).join(p);
        assert_eq!(
            got,
            vec![
                (inside("f.sock"), false),
                (inside("ro"), false),
                (inside("ro/out"), true)
            ]
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert!(t.dir().join(&name).join("f.sock").is_file());
        assert_eq!(mode(&t.dir().join(&name)), 0o755);
        assert!(t.dir().join(&name).join("ro").is_dir());
        assert!(
            !t.dir().join(&name).join("ro/out").exists(),
            "held by the bind of `ro`, not made"
        );
        assert_eq!(s.writable.last().map(PathBuf::as_path), Some(t.dir()));
    }

    #[test]
    fn the_dir_joins_the_listed_side_only() {
        let mut w = sandbox(
            serde_json::json!({"private_tmp": true, "writable": ["/w"], "readable": ["/r"]}),
        );
        let t = for_sandbox(&mut w, &format!("t-w-{}", std::process::id()), None)
            .unwrap()
            .unwrap();
        assert_eq!(w.writable.last().map(PathBuf::as_path), Some(t.dir()));
        assert_eq!(w.readable.len(), 1);
        let mut r = sandbox(serde_json::json!({"private_tmp": true, "readable": ["/r"]}));
        let t2 = for_sandbox(&mut r, &format!("t-r-{}", std::process::id()), None)
            .unwrap()
            .unwrap();
        assert_eq!(r.readable.last().map(PathBuf::as_path), Some(t2.dir()));
        assert!(
            r.writable.is_empty(),
            "an empty writable stays unrestricted"
        );
    }

    #[test]
    fn it_is_made_private_and_removed_with_what_it_holds() {
        let base = tempfile::tempdir().unwrap();
        let t = SessionTmp::create(base.path(), "run-1").unwrap();
        let outer = base.path().join("gatewayd-run-1");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&outer), 0o700);
        assert_eq!(mode(t.dir()), 0o1777);
        std::fs::write(t.dir().join("f"), "x").unwrap();
        std::os::unix::fs::symlink(base.path(), t.dir().join("link")).unwrap();
        assert!(
            SessionTmp::create(base.path(), "run-1").is_err(),
            "never reused"
        );
        drop(t);
        assert!(!outer.exists());
        assert!(base.path().exists(), "a link is removed, not followed");
    }
}
