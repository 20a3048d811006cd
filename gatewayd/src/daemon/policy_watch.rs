//! What starts a policy reload ([`super::reload`]): SIGHUP, and a change of the policy file
//! seen by inotify. The watch is on the file's directory, not the file: an editor that saves
//! by renaming a new file over the old, `ln -sf`, and Kubernetes, which swaps a `ConfigMap` by
//! renaming its `..data` symlink, all replace the directory entry the daemon named. An
//! event counts when it names the file or the first hop of a symlink chain from it that
//! stays in the directory (`policy.json -> ..data/policy.json`: `..data`); writes in place
//! count when the writer closes the file. Events that arrive together are taken as one
//! change ([`SETTLE`]).
use std::{
    ffi::{OsStr, OsString},
    io,
    path::{Component, Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent};
use tokio::{io::unix::AsyncFd, signal::unix::Signal};

use super::gateway::Gateway;
use crate::shutdown::Shutdown;

/// What reloads the policy of `gatewayd serve`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReloadOptions {
    /// Reload on SIGHUP.
    pub sighup: bool,
    /// Reload when the policy file changes (inotify on its directory).
    pub watch: bool,
}

/// How long the watch waits for the events of one change to stop arriving.
pub(crate) const SETTLE: Duration = Duration::from_millis(20);

/// The longest the watch waits for a directory that never quiets down.
const MAX_SETTLE: Duration = Duration::from_secs(1);

/// Symlinks followed from the policy file to find the names that matter.
const MAX_HOPS: usize = 8;

/// Reloads `gw`'s policy from `path` on each trigger of `opts`, until `shutdown`, on a task
/// of its own. The signal handler and the inotify watch are in place when this returns, so
/// a change made after it (once the agent runs, or once the daemon says it is ready) is seen.
pub(crate) fn spawn(
    gw: Arc<Gateway>,
    path: PathBuf,
    opts: ReloadOptions,
    mut shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    let mut hup = opts.sighup.then(sighup).flatten();
    let mut watch = if opts.watch {
        match DirWatch::new(&path) {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!(
                    "gatewayd: cannot watch {} ({e}); the policy is reloaded on SIGHUP only",
                    path.display()
                );
                None
            }
        }
    } else {
        None
    };
    tokio::spawn(async move {
        loop {
            let trigger = tokio::select! {
                () = shutdown.recv() => return,
                Some(()) = next_signal(&mut hup) => "sighup",
                Some(()) = next_change(&mut watch) => "file",
            };
            gw.reload_policy(&path, trigger).await;
        }
    })
}

fn sighup() -> Option<Signal> {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("gatewayd: no SIGHUP handler ({e}): the policy is not reloaded on SIGHUP");
            None
        }
    }
}

async fn next_signal(hup: &mut Option<Signal>) -> Option<()> {
    match hup {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_change(watch: &mut Option<DirWatch>) -> Option<()> {
    let Some(w) = watch else {
        return std::future::pending().await;
    };
    match w.changed().await {
        Ok(()) => Some(()),
        Err(e) => {
            eprintln!(
                "gatewayd: the watch of {} failed ({e}); the policy is reloaded on SIGHUP only",
                w.file.display()
            );
            *watch = None;
            None
        }
    }
}

/// nix's [`Inotify`] with the descriptor tokio registers.
struct InotifyFd(Inotify);

impl std::os::fd::AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

/// An inotify watch on the policy file's directory.
struct DirWatch {
    fd: AsyncFd<InotifyFd>,
    /// The policy file as named.
    file: PathBuf,
}

impl DirWatch {
    fn new(file: &Path) -> io::Result<DirWatch> {
        let dir = directory(file);
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        inotify.add_watch(
            &dir,
            // Not removals: a file removed and made again (`install`) is read once it is
            // closed, never while it is missing.
            AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE,
        )?;
        // SAFETY: the descriptor is owned by the `Inotify` the `AsyncFd` owns: it stays open
        // and the same until the `AsyncFd` is dropped.
        let fd = unsafe {
            AsyncFd::register_with_interest(InotifyFd(inotify), tokio::io::Interest::READABLE)
        }
        .map_err(io::Error::from)?;
        Ok(DirWatch {
            fd,
            file: file.to_owned(),
        })
    }

    /// Waits for a change of what the file reads, then for its events to settle.
    async fn changed(&mut self) -> io::Result<()> {
        loop {
            let events = self.read().await?;
            if events.iter().any(|e| self.concerns(e)) {
                break;
            }
        }
        // The rest of the same change (a rename after a write, the second hop of a swap),
        // for a second at most when the directory never quiets down.
        let until = tokio::time::Instant::now() + MAX_SETTLE;
        while tokio::time::Instant::now() < until {
            match tokio::time::timeout(SETTLE, self.read()).await {
                Ok(more) => drop(more?),
                Err(_quiet) => break,
            }
        }
        Ok(())
    }

    async fn read(&self) -> io::Result<Vec<InotifyEvent>> {
        loop {
            let mut guard = self.fd.readable().await?;
            if let Ok(res) =
                guard.try_io(|fd| fd.get_ref().0.read_events().map_err(io::Error::from))
            {
                return res;
            }
        }
    }

    /// Whether `e` may change what the policy file reads: it names the file or a hop of
    /// its symlink chain, and is not the creation of a regular file (a write in place
    /// counts when it is closed, not half-written).
    fn concerns(&self, e: &InotifyEvent) -> bool {
        let Some(name) = &e.name else {
            return false;
        };
        if !self.names().iter().any(|n| n == name) {
            return false;
        }
        if e.mask.contains(AddWatchFlags::IN_CREATE) {
            let entry = directory(&self.file).join(name);
            return std::fs::symlink_metadata(entry).is_ok_and(|m| m.file_type().is_symlink());
        }
        true
    }

    /// The file's name and the first component of each relative symlink target on the way
    /// from it, while they stay in the directory.
    fn names(&self) -> Vec<OsString> {
        let dir = directory(&self.file);
        let mut names: Vec<OsString> = self
            .file
            .file_name()
            .map(OsStr::to_owned)
            .into_iter()
            .collect();
        let mut at = self.file.clone();
        for _ in 0..MAX_HOPS {
            let Ok(target) = std::fs::read_link(&at) else {
                break;
            };
            let Some(Component::Normal(first)) = target.components().next() else {
                break;
            };
            if target.is_absolute() {
                break;
            }
            names.push(first.to_owned());
            at = dir.join(&target);
            if directory(&at) != dir {
                // `..data/policy.json`: its first hop is what gets swapped.
                break;
            }
        }
        names
    }
}

fn directory(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}
