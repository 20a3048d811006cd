//! Tier 2 learn mode for files (`gatewayd run --learn`; docs/KERNEL.md, "Learn mode").
//!
//! Landlock has no permissive mode: a ruleset refuses or allows. So in a learning session
//! the ruleset leaves the roots and the exec allowlist out (`confinement::Plan::learn`), and
//! this module watches what the agent opens instead, with fanotify notification events
//! (they report, they never block):
//!
//! 1. gatewayd opens a group of the notification class ([`FsLearn::open`]);
//! 2. the agent's init, once its mount namespace is set up (the hiding mounts, the private
//!    `/tmp`, the read-only binds), marks every mount of that namespace but `/proc`, `/sys`
//!    and `/dev` for `FAN_OPEN` (of directories too), `FAN_OPEN_EXEC` and `FAN_CLOSE_WRITE`
//!    ([`crate::agent_privileges::learn_marks`]): these mounts are the agent's own copies,
//!    so the host's opens never reach the group;
//! 3. a thread ([`FsLearn::serve`]) names each event's file and judges it as the ruleset
//!    would have ([`Scope::judge`]): a read outside the readable side, a file written (closed
//!    after an open for writing) outside the writable side, an executed file outside the
//!    exec allowlist. Each is a `would_deny` with the reason code the kernel gives at tier 1
//!    (`outside_readable`, `outside_writable`, `exec_not_allowed`). A file inside the
//!    protected paths is never one: the mounts that hide them stay, and refuse.
//!
//! After the first event of a kind on a file, an ignore mark on its inode keeps its later
//! events of that kind away (one syscall per file): a record counts files, not opens.
//!
//! A mount mark reports no name made, removed or renamed (those events need a filesystem
//! mark, which would see the host's too): `raw_tp/sys_exit` records a learning session's
//! successful calls of that kind, and [`Scope::judge_name`] judges them by their directory
//! (`crate::kernel::call_events`).
use std::{
    os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
    path::{Path, PathBuf},
};

use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MaskFlags};

use gateway_common::Reason;
use gatewayd_core::policy::Sandbox;

use crate::{
    fs_roots::FsRoots,
    name_guard::{Serving, ignore_inode, opened, queued},
};

/// The events the agent's mounts are marked for: a directory's open too (`FAN_ONDIR`), for
/// a listing outside the readable roots.
pub const MASK: u64 =
    libc::FAN_OPEN | libc::FAN_OPEN_EXEC | libc::FAN_CLOSE_WRITE | libc::FAN_ONDIR;

/// Why learning could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FsLearnError {
    /// `fanotify_init` failed (not root, or no fanotify in this kernel).
    #[error(
        "fanotify is not available ({0}): the kernel layer cannot learn files at tier 2 on this host"
    )]
    Init(nix::Error),
    /// The reader thread could not be started.
    #[error("starting the learn thread: {0}")]
    Thread(std::io::Error),
}

/// What the agent did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Opened it (to read, or to write: an open is an open).
    Read,
    /// Closed it after opening it for writing.
    Write,
    /// Executed it (or the kernel opened it as the ELF interpreter).
    Exec,
}

impl Access {
    /// The word of the audit record.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Exec => "exec",
        }
    }
}

/// One access the policy would have refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learned {
    /// The process (as gatewayd's PID namespace sees it).
    pub pid: i32,
    /// The file, as the kernel names it in the agent's namespace.
    pub path: PathBuf,
    /// What was done.
    pub access: Access,
    /// The refusal the kernel would have given.
    pub reason: Reason,
}

impl Learned {
    /// Its audit entry in `session`: a kernel `would_deny` (not a denial: no count, no
    /// suspicion), which `policy suggest` reads.
    pub fn into_entry(self, session: &str) -> gatewayd_core::audit::Entry {
        let what = match self.access {
            Access::Read => "reading outside the policy's readable roots",
            Access::Write => "writing outside the policy's writable roots",
            Access::Exec => "executing a program outside sandbox.exec",
        };
        let message = format!(
            "learn mode let this through (recorded, not refused); without --learn the kernel refuses {what}. Next: `gatewayd policy suggest AUDIT --policy P` proposes the entry"
        );
        let detail = serde_json::json!({
            "pid": self.pid, "path": self.path, "access": self.access.as_str(),
            "channel": "fanotify", "message": message,
        });
        let mut e = gatewayd_core::audit::Entry::kernel(
            session,
            "fanotify/learn",
            self.reason.name(),
            detail,
        );
        e.decision = gatewayd_core::audit::Decision::WouldDeny;
        e
    }
}

/// What the ruleset would have allowed: each side `None` when it is not restricted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    read: Option<Vec<PathBuf>>,
    write: Option<Vec<PathBuf>>,
    exec: Option<Vec<PathBuf>>,
    /// Never learned: the protected paths and gatewayd's own files (hidden, so refused).
    never: Vec<PathBuf>,
}

/// What the ruleset always allows below the roots: devices, `/proc` and `/sys`.
const KERNEL_FS: &[&str] = &["/dev", "/proc", "/sys"];

impl Scope {
    /// The scope of `sandbox` (as the session uses it: the private `/tmp` added) for the
    /// agent's `program`, with gatewayd's `own` files never learned.
    pub fn of(sandbox: &Sandbox, program: Option<&Path>, own: &[PathBuf]) -> Scope {
        let roots = FsRoots::of(sandbox);
        let canonical = |v: Vec<PathBuf>| -> Vec<PathBuf> {
            let mut out: Vec<PathBuf> = v
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect();
            out.extend(KERNEL_FS.iter().map(PathBuf::from));
            if sandbox.private_tmp {
                out.push("/tmp".into());
            }
            out
        };
        let mut read = roots.read.map(canonical);
        if let (Some(r), Some(p), true) = (&mut read, program, sandbox.exec.is_empty()) {
            r.extend(std::fs::canonicalize(p).ok());
        }
        let exec = (!sandbox.exec.is_empty()).then(|| {
            crate::landlock::with_interpreters(&sandbox.exec)
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect()
        });
        let mut never: Vec<PathBuf> = sandbox.protected.iter().chain(own).cloned().collect();
        never.extend(
            never
                .clone()
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok()),
        );
        Scope {
            read,
            write: roots.write.map(canonical),
            exec,
            never,
        }
    }

    /// The scope of a tool server's Landlock allowlist (`gatewayd mcp`; see
    /// `Ruleset::build_allowlist`): read within `readable`, `writable` and `root`, write
    /// within `writable`, exec of `exec` when listed; nothing implied, not even the library
    /// trees, so what is learned makes the allowlist whole. The kernel filesystems are not
    /// marked, so not learned: a server that needs `/proc` or `/dev` lists them.
    pub fn of_allowlist(sandbox: &Sandbox, own: &[PathBuf]) -> Scope {
        let canonical = |v: &mut dyn Iterator<Item = &PathBuf>| -> Vec<PathBuf> {
            v.map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect()
        };
        let read = canonical(
            &mut sandbox
                .readable
                .iter()
                .chain(&sandbox.writable)
                .chain(&sandbox.root),
        );
        let mut scope = Scope::of(sandbox, None, own);
        scope.read = Some(read);
        scope.write = Some(canonical(&mut sandbox.writable.iter()));
        scope
    }

    /// The refusal the ruleset would have given `access` to `path`, if any.
    pub fn judge(&self, access: Access, path: &Path) -> Option<Reason> {
        if !path.is_absolute() || self.never.iter().any(|p| path.starts_with(p)) {
            return None;
        }
        let under = |roots: &Option<Vec<PathBuf>>| {
            roots
                .as_ref()
                .is_none_or(|r| r.iter().any(|root| path.starts_with(root)))
        };
        match access {
            Access::Read => (!under(&self.read)).then_some(Reason::OutsideReadable),
            Access::Write => (!under(&self.write)).then_some(Reason::OutsideWritable),
            Access::Exec => self
                .exec
                .as_ref()
                .is_some_and(|e| !e.iter().any(|b| b == path))
                .then_some(Reason::ExecNotAllowed),
        }
    }

    /// The directory of a name made, removed or renamed (`path`, absolute) when the ruleset
    /// would have refused that: Landlock (and the file programs at tier 1) judge such a call
    /// by the directory the name is in, against the writable side.
    pub fn judge_name(&self, path: &Path) -> Option<PathBuf> {
        let dir = path.parent()?;
        self.judge(Access::Write, dir).map(|_| dir.to_owned())
    }

    /// Whether anything is restricted (else nothing can be learned of files).
    pub fn restricts(&self) -> bool {
        self.read.is_some() || self.write.is_some() || self.exec.is_some()
    }
}

/// The group and the scope it judges by.
pub struct FsLearn {
    fanotify: Fanotify,
    scope: Scope,
    /// Whether seen files get an ignore mark (off after the kernel refused one).
    remember: bool,
}

impl AsFd for FsLearn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fanotify.as_fd()
    }
}

impl FsLearn {
    /// Opens the group (step 1 of the module). Event descriptors are opened non-blocking,
    /// so a FIFO the agent opened does not hold the thread.
    pub fn open(scope: Scope) -> Result<FsLearn, FsLearnError> {
        let fanotify = Fanotify::init(
            InitFlags::FAN_CLASS_NOTIF
                | InitFlags::FAN_CLOEXEC
                | InitFlags::FAN_NONBLOCK
                | InitFlags::FAN_UNLIMITED_QUEUE,
            EventFFlags::O_RDONLY
                | EventFFlags::O_LARGEFILE
                | EventFFlags::O_CLOEXEC
                | EventFFlags::O_NONBLOCK,
        )
        .map_err(FsLearnError::Init)?;
        Ok(FsLearn {
            fanotify,
            scope,
            remember: true,
        })
    }

    /// The group's descriptor, for the agent's init to mark its mounts (step 2).
    pub fn fd(&self) -> RawFd {
        self.fanotify.as_raw_fd()
    }

    /// What the `session_start` record says.
    pub fn describe(&self) -> serde_json::Value {
        let side = |s: &Option<Vec<PathBuf>>| s.is_some();
        serde_json::json!({
            "channel": "fanotify notification events (open, exec, close after write) on every mount of the agent's namespace but /proc, /sys and /dev",
            "learns": {
                "read": side(&self.scope.read),
                "write": side(&self.scope.write),
                "exec": side(&self.scope.exec),
            },
            "counted": "the first open of each kind per file",
        })
    }

    /// Judges every event until stopped (step 3); each access the policy would have refused
    /// goes to `learned`.
    pub fn serve(
        self,
        mut learned: impl FnMut(Learned) + Send + 'static,
    ) -> Result<Serving, FsLearnError> {
        Serving::spawn("learn-files", self, move |g| g.answer(&mut learned))
            .map_err(FsLearnError::Thread)
    }

    fn answer(&mut self, learned: &mut impl FnMut(Learned)) -> nix::Result<()> {
        for ev in queued(&self.fanotify)? {
            let Some(fd) = ev.fd() else { continue };
            let path = live_name(opened(fd).0);
            let mask = ev.mask();
            for (bit, access) in [
                (MaskFlags::FAN_OPEN, Access::Read),
                (MaskFlags::FAN_CLOSE_WRITE, Access::Write),
                (MaskFlags::FAN_OPEN_EXEC, Access::Exec),
            ] {
                if !mask.contains(bit) {
                    continue;
                }
                if let Some(reason) = self.scope.judge(access, &path) {
                    learned(Learned {
                        pid: ev.pid(),
                        path: path.clone(),
                        access,
                        reason,
                    });
                }
            }
            if self.remember {
                self.remember = ignore_inode(
                    self.fanotify.as_raw_fd(),
                    fd.as_raw_fd(),
                    // An inode mark's ignore mask of the legacy kind ignores its own
                    // events, a directory's included, and takes no `FAN_ONDIR`.
                    mask.bits() & MASK & !libc::FAN_ONDIR,
                    libc::FAN_MARK_IGNORED_SURV_MODIFY,
                );
            }
        }
        Ok(())
    }
}

/// A file's name as the kernel gave it, without the ` (deleted)` it adds for a file removed
/// since (a temporary file renamed away): the name it was opened by.
fn live_name(path: PathBuf) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    match path.as_os_str().as_bytes().strip_suffix(b" (deleted)") {
        Some(name) => PathBuf::from(std::ffi::OsString::from_vec(name.to_vec())),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(json: serde_json::Value) -> Sandbox {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn judges_as_the_ruleset_would() {
        let d = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(d.path()).unwrap();
        let exe = std::env::current_exe().unwrap();
        let s = Scope::of(
            &sandbox(serde_json::json!({
                "root": w, "readable": [w], "writable": [w.join("out")], "exec": [exe],
                "protected": ["/etc/shadow"]})),
            None,
            &[PathBuf::from("/var/log/gatewayd/audit.log")],
        );
        assert!(s.restricts());
        assert_eq!(s.judge(Access::Read, &w.join("a")), None);
        assert_eq!(
            s.judge(Access::Read, Path::new("/srv/data/x")),
            Some(Reason::OutsideReadable)
        );
        assert_eq!(s.judge(Access::Read, Path::new("/proc/self/status")), None);
        assert_eq!(s.judge(Access::Write, &w.join("out/f")), None);
        assert_eq!(
            s.judge(Access::Write, &w.join("f")),
            Some(Reason::OutsideWritable)
        );
        let exe = std::fs::canonicalize(exe).unwrap();
        assert_eq!(s.judge(Access::Exec, &exe), None);
        assert_eq!(
            s.judge(Access::Exec, Path::new("/usr/bin/true")),
            Some(Reason::ExecNotAllowed)
        );
        for never in ["/etc/shadow", "/var/log/gatewayd/audit.log"] {
            assert_eq!(s.judge(Access::Read, Path::new(never)), None, "{never}");
        }
    }

    /// A tool server's allowlist implies nothing: the library trees the agent's roots add
    /// are learned for a server, so its drafted profile can run it.
    #[test]
    fn a_servers_allowlist_scope_implies_no_library_tree() {
        let d = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(d.path()).unwrap();
        let sb = sandbox(serde_json::json!({"readable": [w], "writable": [w]}));
        let lib = Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
        let agent = Scope::of(&sb, None, &[]);
        let server = Scope::of_allowlist(&sb, &[]);
        assert_eq!(agent.judge(Access::Read, lib), None);
        assert_eq!(
            server.judge(Access::Read, lib),
            Some(Reason::OutsideReadable)
        );
        assert_eq!(server.judge(Access::Write, &w.join("f")), None);
        assert_eq!(server.judge(Access::Read, &w.join("f")), None);
    }

    #[test]
    fn a_removed_file_is_named_as_it_was_opened() {
        assert_eq!(
            live_name("/h/.claude.json.tmp.1 (deleted)".into()),
            Path::new("/h/.claude.json.tmp.1")
        );
        assert_eq!(live_name("/h/a".into()), Path::new("/h/a"));
    }

    #[test]
    fn an_empty_list_leaves_its_side_unlearned() {
        let s = Scope::of(&sandbox(serde_json::json!({"root": "/w"})), None, &[]);
        assert!(!s.restricts());
        for a in [Access::Read, Access::Write, Access::Exec] {
            assert_eq!(s.judge(a, Path::new("/srv/x")), None);
        }
        let s = Scope::of(
            &sandbox(serde_json::json!({"writable": ["/w"], "private_tmp": true})),
            None,
            &[],
        );
        assert_eq!(s.judge(Access::Read, Path::new("/srv/x")), None);
        assert_eq!(s.judge(Access::Write, Path::new("/tmp/x")), None);
    }
}
