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
use gatewayd_core::policy::Sandbox;
use std::{
    io,
    os::unix::fs::{DirBuilderExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

/// Why the session's `/tmp` could not be made; the agent was not started.
#[derive(Debug, thiserror::Error)]
pub enum PrivateTmpError {
    /// A path of the sandbox lies under `/tmp`, which the session's own would cover.
    #[error(
        "sandbox.private_tmp: `{0}` lies under /tmp, which the session's own /tmp would hide from the agent; move it out of /tmp or drop private_tmp"
    )]
    UnderTmp(PathBuf),
    /// The directory could not be made.
    #[error("sandbox.private_tmp: cannot make the session's /tmp: {0}")]
    Create(#[from] io::Error),
}

/// With `sandbox.private_tmp`: the session's `/tmp`, added to `sandbox`'s kernel roots (to
/// `writable` when it is listed, else to `readable` when that is: an empty list stays
/// unrestricted). Refused when a root, readable, writable or exec path lies under `/tmp`.
pub fn for_sandbox(
    sandbox: &mut Sandbox,
    session: &str,
) -> Result<Option<SessionTmp>, PrivateTmpError> {
    if !sandbox.private_tmp {
        return Ok(None);
    }
    if let Some(p) = sandbox.first_under_tmp() {
        return Err(PrivateTmpError::UnderTmp(p.to_owned()));
    }
    let tmp = std::fs::canonicalize("/tmp")?;
    let made = SessionTmp::create(&tmp, session)?;
    if !sandbox.writable.is_empty() {
        sandbox.writable.push(made.dir().to_owned());
    } else if !sandbox.readable.is_empty() {
        sandbox.readable.push(made.dir().to_owned());
    }
    Ok(Some(made))
}

/// The session's `/tmp` on the host, removed on drop.
#[derive(Debug)]
pub struct SessionTmp {
    outer: PathBuf,
    dir: PathBuf,
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
        };
        std::fs::DirBuilder::new().mode(0o700).create(&made.dir)?;
        // The mode a /tmp has, whatever the umask.
        std::fs::set_permissions(&made.dir, std::fs::Permissions::from_mode(0o1777))?;
        Ok(made)
    }

    /// The directory the agent sees as `/tmp`.
    pub fn dir(&self) -> &Path {
        &self.dir
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
    fn a_sandbox_path_under_tmp_is_refused_and_nothing_is_made_without_the_flag() {
        let mut off = sandbox(serde_json::json!({"writable": ["/tmp/w"]}));
        assert!(for_sandbox(&mut off, "t-off").unwrap().is_none());
        for field in ["root", "readable", "writable", "exec"] {
            let v = if field == "root" {
                serde_json::json!({"private_tmp": true, field: "/tmp/ws"})
            } else {
                serde_json::json!({"private_tmp": true, field: ["/tmp/ws"]})
            };
            let e = for_sandbox(&mut sandbox(v), "t-under").unwrap_err();
            assert!(e.to_string().contains("/tmp/ws"), "{field}: {e}");
        }
        assert!(!Path::new("/tmp/gatewayd-t-under").exists());
    }

    #[test]
    fn the_dir_joins_the_listed_side_only() {
        let mut w = sandbox(
            serde_json::json!({"private_tmp": true, "writable": ["/w"], "readable": ["/r"]}),
        );
        let t = for_sandbox(&mut w, &format!("t-w-{}", std::process::id()))
            .unwrap()
            .unwrap();
        assert_eq!(w.writable.last().map(PathBuf::as_path), Some(t.dir()));
        assert_eq!(w.readable.len(), 1);
        let mut r = sandbox(serde_json::json!({"private_tmp": true, "readable": ["/r"]}));
        let t2 = for_sandbox(&mut r, &format!("t-r-{}", std::process::id()))
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
