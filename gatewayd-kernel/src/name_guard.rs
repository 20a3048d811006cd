//! Tier 2: protection by name (`sandbox.protected_names`) where BPF LSM is missing, with
//! fanotify permission events (`docs/KERNEL.md`, "Tier 2").
//!
//! Landlock grants trees, and the hiding mounts cover paths that exist when the session
//! starts; neither can refuse a `.env` made later. So:
//!
//! 1. gatewayd opens a fanotify group of the content class ([`NameGuard::open`]) and looks
//!    under the roots (`sandbox.root` and the writable roots) for files of a protected name
//!    that exist now, keeping their identities (a bounded walk);
//! 2. the agent's init, in the agent's own mount namespace, binds each root onto itself
//!    (with everything mounted below it) and marks that mount for `FAN_OPEN_PERM`
//!    ([`crate::agent_privileges::name_marks`]): only opens through the agent's namespace
//!    reach the group, never the host's;
//! 3. for each open, a thread of gatewayd ([`NameGuard::serve`]) refuses it when the opened
//!    file's name matches a pattern, or when the file is one seen under a protected name
//!    (at start, or refused since): a rename does not free it. Everything else is allowed.
//!
//! Hard links are refused to the agent at this tier by its seccomp filter (a link is not an
//! open, and would give a protected file a free name). A protected-name file made after the
//! start by another process and renamed by the agent before it was ever opened under its
//! name is not caught: the limits are in docs/LIMITS.md.
use std::{
    collections::HashMap,
    ffi::OsStr,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
        unix::fs::MetadataExt,
    },
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use nix::sys::fanotify::{EventFFlags, Fanotify, FanotifyResponse, InitFlags, MaskFlags, Response};

use gatewayd_core::policy::protected_names::ProtectedNames;

/// How many directory entries the start-up walk looks at, at most, under all roots.
pub const SCAN_LIMIT: usize = 50_000;

/// Why the guard could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NameGuardError {
    /// `fanotify_init` failed (no `CONFIG_FANOTIFY_ACCESS_PERMISSIONS`, or not root).
    #[error(
        "fanotify permission events are not available ({0}); protected names cannot be enforced at tier 2 on this kernel"
    )]
    Init(nix::Error),
    /// The reader thread could not be started.
    #[error("starting the protected-names thread: {0}")]
    Thread(std::io::Error),
}

/// One refused open, for the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameDenial {
    /// The opening process (as gatewayd's PID namespace sees it).
    pub pid: i32,
    /// The opened file's path, as the kernel names it.
    pub path: PathBuf,
    /// The pattern, as written, that protects it.
    pub pattern: String,
    /// Whether it was refused by its own name, or as a file seen under a protected name.
    pub by_name: bool,
}

/// The names, and the files seen under them.
#[derive(Debug, Default)]
pub struct Verdicts {
    names: ProtectedNames,
    /// `(st_dev, st_ino)` of files seen under a protected name, with the pattern.
    seen: HashMap<(u64, u64), String>,
    /// Whether the start-up walk stopped at [`SCAN_LIMIT`].
    pub scan_truncated: bool,
}

impl Verdicts {
    /// The names, and the files of those names under `roots` now (at most [`SCAN_LIMIT`]
    /// entries looked at; symbolic links are not followed).
    pub fn scan(names: ProtectedNames, roots: &[PathBuf]) -> Verdicts {
        let mut v = Verdicts {
            names,
            ..Verdicts::default()
        };
        let mut stack: Vec<PathBuf> = roots.to_vec();
        let mut looked = 0usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                looked += 1;
                if looked > SCAN_LIMIT {
                    v.scan_truncated = true;
                    return v;
                }
                let Ok(m) = e.metadata() else { continue };
                if let Some(p) = v.names.matching(&e.file_name()) {
                    v.seen.insert((m.dev(), m.ino()), p.to_owned());
                }
                if m.is_dir() {
                    stack.push(e.path());
                }
            }
        }
        v
    }

    /// The pattern that refuses opening a file of this name and identity, and whether by
    /// its name; a file refused by name is remembered.
    pub fn verdict(&mut self, name: &OsStr, id: (u64, u64)) -> Option<(String, bool)> {
        if let Some(p) = self.names.matching(name) {
            let p = p.to_owned();
            self.seen.insert(id, p.clone());
            return Some((p, true));
        }
        self.seen.get(&id).map(|p| (p.clone(), false))
    }

    /// How many files are known by identity.
    pub fn known(&self) -> usize {
        self.seen.len()
    }
}

/// The fanotify group and what it decides with.
pub struct NameGuard {
    fanotify: Fanotify,
    verdicts: Verdicts,
    roots: Vec<PathBuf>,
    /// Whether allowed files are remembered by the kernel ([`NameGuard::skip_next_time`]);
    /// off after the first refusal (a kernel before 5.19 has no evictable marks).
    remember: bool,
}

/// The running thread.
pub struct Serving {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// Whether fanotify permission events are available here (`gatewayd doctor`): a group of the
/// content class is opened and closed. Fails without `CONFIG_FANOTIFY_ACCESS_PERMISSIONS`
/// (`EINVAL`) or without root (`EPERM`).
pub fn probe() -> Result<(), NameGuardError> {
    Fanotify::init(
        InitFlags::FAN_CLASS_CONTENT | InitFlags::FAN_CLOEXEC,
        EventFFlags::O_RDONLY | EventFFlags::O_CLOEXEC,
    )
    .map(drop)
    .map_err(NameGuardError::Init)
}

impl NameGuard {
    /// Opens the group and walks the roots (step 1 of the module).
    pub fn open(names: ProtectedNames, roots: Vec<PathBuf>) -> Result<NameGuard, NameGuardError> {
        let fanotify = Fanotify::init(
            InitFlags::FAN_CLASS_CONTENT
                | InitFlags::FAN_CLOEXEC
                | InitFlags::FAN_NONBLOCK
                | InitFlags::FAN_UNLIMITED_QUEUE,
            EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC,
        )
        .map_err(NameGuardError::Init)?;
        let verdicts = Verdicts::scan(names, &roots);
        Ok(NameGuard {
            fanotify,
            verdicts,
            roots,
            remember: true,
        })
    }

    /// The group's descriptor and the roots, for the agent's init to mark (step 2).
    pub fn marks(&self) -> (RawFd, &[PathBuf]) {
        (self.fanotify.as_raw_fd(), &self.roots)
    }

    /// What the `session_start` record says.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "channel": "fanotify permission events on the roots' mounts in the agent's namespace",
            "roots": self.roots,
            "known_at_start": self.verdicts.known(),
            "start_walk": if self.verdicts.scan_truncated {
                format!("stopped after {SCAN_LIMIT} entries: files of a protected name beyond it are refused by name only")
            } else {
                "complete".into()
            },
            "hard_links": "refused to the agent (seccomp)",
        })
    }

    /// Decides every open until stopped (step 3); each refusal goes to `denied`.
    pub fn serve(
        self,
        mut denied: impl FnMut(NameDenial) + Send + 'static,
    ) -> Result<Serving, NameGuardError> {
        Serving::spawn("protected-names", self, move |guard| {
            guard.answer(&mut denied)
        })
        .map_err(NameGuardError::Thread)
    }

    /// Answers every queued event. Err: the group cannot be read or answered (the agent's
    /// opens would hang: the caller ends the thread, which closes the group; see the docs).
    fn answer(&mut self, denied: &mut impl FnMut(NameDenial)) -> nix::Result<()> {
        for ev in queued(&self.fanotify)? {
            let Some(fd) = ev.fd() else { continue };
            if !ev.mask().contains(MaskFlags::FAN_OPEN_PERM) {
                continue;
            }
            let (path, id) = opened(fd);
            let name = path.file_name().unwrap_or(OsStr::new(""));
            let verdict = self.verdicts.verdict(name, id);
            let response = if verdict.is_some() {
                Response::FAN_DENY
            } else {
                Response::FAN_ALLOW
            };
            self.fanotify
                .write_response(FanotifyResponse::new(fd, response))?;
            if verdict.is_none() && self.remember {
                self.remember = ignore_inode(
                    self.fanotify.as_raw_fd(),
                    fd.as_raw_fd(),
                    libc::FAN_OPEN_PERM,
                    0,
                );
            }
            if let Some((pattern, by_name)) = verdict {
                denied(NameDenial {
                    pid: ev.pid(),
                    path,
                    pattern,
                    by_name,
                });
            }
        }
        Ok(())
    }
}

impl AsFd for NameGuard {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fanotify.as_fd()
    }
}

/// After an event of `mask` on `file`: an evictable ignore mark on its inode in `group`, so
/// its next events of `mask` do not come to gatewayd; `flags` may add
/// `FAN_MARK_IGNORED_SURV_MODIFY`. Without it a change to the file clears the mark; a rename
/// does not, which lets a file the agent has already read, unchanged since, be opened again
/// under a protected name it was given later: its content is no secret to the agent. The
/// kernel may drop the mark under memory pressure (then the file asks again). False: the
/// kernel refused (before 5.19 it has no evictable marks): stop asking.
pub(crate) fn ignore_inode(group: RawFd, file: RawFd, mask: u64, flags: libc::c_uint) -> bool {
    // SAFETY: both descriptors are open; a null path marks `file`'s own inode.
    let rc = unsafe {
        libc::fanotify_mark(
            group,
            libc::FAN_MARK_ADD | libc::FAN_MARK_IGNORED_MASK | libc::FAN_MARK_EVICTABLE | flags,
            mask,
            file,
            std::ptr::null(),
        )
    };
    rc == 0
}

impl Serving {
    /// A thread named `name` that calls `answer` whenever `group` has events queued, until
    /// [`Serving::finish`] or until `answer` fails (which ends the thread, and with it the
    /// group).
    pub(crate) fn spawn<G: AsFd + Send + 'static>(
        name: &str,
        group: G,
        mut answer: impl FnMut(&mut G) -> nix::Result<()> + Send + 'static,
    ) -> std::io::Result<Serving> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut group = group;
                while !flag.load(Ordering::Relaxed) {
                    if !ready(group.as_fd(), Duration::from_millis(200)) {
                        continue;
                    }
                    if let Err(e) = answer(&mut group) {
                        eprintln!("gatewayd: {label}: {e}");
                        return;
                    }
                }
            })?;
        Ok(Serving { stop, thread })
    }

    /// Ends the thread (after the agent is gone), which closes the group.
    pub fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.thread.join().is_err() {
            eprintln!("gatewayd: a fanotify thread failed");
        }
    }
}

/// The events queued on `group` (none when it has none ready).
pub(crate) fn queued(group: &Fanotify) -> nix::Result<Vec<nix::sys::fanotify::FanotifyEvent>> {
    match group.read_events() {
        Err(nix::errno::Errno::EAGAIN) => Ok(Vec::new()),
        other => other,
    }
}

/// Whether `group` has events ready within `timeout`.
fn ready(group: BorrowedFd<'_>, timeout: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(group, PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    matches!(poll(&mut fds, ms), Ok(n) if n > 0)
}

/// The path (as the kernel names the event's file) and identity of an event's descriptor:
/// the identity from the descriptor itself (`fstat`), not by a second lookup of the path.
pub(crate) fn opened(fd: BorrowedFd<'_>) -> (PathBuf, (u64, u64)) {
    let link = Path::new("/proc/self/fd").join(fd.as_raw_fd().to_string());
    let path = std::fs::read_link(&link).unwrap_or_default();
    let id = nix::sys::stat::fstat(fd).map_or((0, 0), |st| (st.st_dev, st.st_ino));
    (path, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> ProtectedNames {
        let v: Vec<String> = list.iter().map(ToString::to_string).collect();
        ProtectedNames::parse(&v).unwrap()
    }

    /// The kernel's word-wise form (tier 1) decides as the gateway's matcher does, for
    /// names shorter and longer than its 32-byte windows.
    #[test]
    fn the_kernel_layout_matches_as_the_gateway_does() {
        let patterns = [
            ".env",
            ".env.*",
            "*.pem",
            "id_*",
            "credentials*",
            "a*a",
            "x*",
        ];
        let long = "k".repeat(70);
        let names = [
            ".env",
            ".env.local",
            ".env.",
            "x.env",
            "server.pem",
            ".pem",
            "pem",
            "id_ed25519",
            "valid_id",
            "credentials",
            "credentials.json",
            "aa",
            "a",
            "aba",
            "x",
            &format!("{long}.pem"),
            &format!(".env.{long}"),
            &format!("{long}.pemx"),
            "",
        ];
        for pattern in patterns {
            let core = gatewayd_core::policy::protected_names::NamePattern::parse(pattern).unwrap();
            let kernel =
                gateway_common::NamePattern::new(&core.prefix, &core.suffix, core.wildcard)
                    .unwrap();
            for name in names {
                let (head, tail, len) = gateway_common::name_words(name.as_bytes());
                assert_eq!(
                    kernel.matches(&head, &tail, len),
                    core.matches(name.as_bytes()),
                    "{pattern} against {name:?}"
                );
            }
        }
    }

    #[test]
    fn files_seen_under_a_protected_name_stay_refused_under_another() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("svc")).unwrap();
        std::fs::write(d.path().join("svc/.env"), "K=v").unwrap();
        std::fs::write(d.path().join("notes.txt"), "n").unwrap();
        let mut v = Verdicts::scan(names(&[".env", "*.pem"]), &[d.path().to_owned()]);
        assert_eq!(v.known(), 1);
        let id = |p: &str| {
            let m = std::fs::metadata(d.path().join(p)).unwrap();
            (m.dev(), m.ino())
        };
        let env = id("svc/.env");
        std::fs::rename(d.path().join("svc/.env"), d.path().join("svc/moved")).unwrap();
        assert_eq!(
            v.verdict(OsStr::new("moved"), env),
            Some((".env".into(), false)),
            "a rename does not free a file seen at start"
        );
        assert_eq!(v.verdict(OsStr::new("notes.txt"), id("notes.txt")), None);
        // Made later: refused by name, then remembered.
        assert_eq!(
            v.verdict(OsStr::new("key.pem"), (1, 2)),
            Some(("*.pem".into(), true))
        );
        assert_eq!(
            v.verdict(OsStr::new("renamed"), (1, 2)),
            Some(("*.pem".into(), false))
        );
    }
}
