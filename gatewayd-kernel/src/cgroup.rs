//! The agent's cgroup v2: found, created, entered by the child before it execs, killed and
//! removed. A cgroup's id, as `bpf_get_current_cgroup_id()` sees it, is the inode number of
//! its directory. Every session's cgroup sits under one parent, `<cgroup2>/gatewayd`, to
//! which the shared program set attaches its cgroup programs.
use std::{
    ffi::CString,
    fs,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Path, PathBuf},
    time::Duration,
};

/// Why an agent cgroup could not be found, created or removed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// `/proc/self/mountinfo` lists no cgroup2 mount.
    #[error("no cgroup v2 hierarchy is mounted (looked in /proc/self/mountinfo)")]
    NoCgroup2,
    /// A file operation on a cgroup path failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, e.g. `mkdir`.
        op: &'static str,
        /// The path it was done on.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Processes were still in the cgroup after it was killed; carries its path.
    #[error("cgroup {0} still has processes after kill")]
    Busy(PathBuf),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Where cgroup v2 is mounted: `/sys/fs/cgroup` on unified systems, `/sys/fs/cgroup/unified`
/// on hybrid ones.
pub fn cgroup2_mount() -> Result<PathBuf, CgroupError> {
    let info = fs::read_to_string("/proc/self/mountinfo")
        .map_err(io("read", Path::new("/proc/self/mountinfo")))?;
    info.lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next() == Some("cgroup2"))
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))
                .flatten()
        })
        .ok_or(CgroupError::NoCgroup2)
}

/// The root of the calling process's cgroup namespace as a path of the cgroup2 mount (`/`
/// being the mount's root), when the two differ; None when they are the same. Under a cgroup
/// namespace of its own (a Kubernetes pod's: the runtime gives each container one, rooted at
/// its cgroup) with the node's cgroupfs mounted, `/proc/PID/cgroup` reads relative to the
/// namespace's root (`/../../gatewayd/...`) while the mount shows the node's whole tree:
/// this is what to put before such a path ([`absolute`]). Found by looking for the process
/// (`pid`, as it sees pids) in the `cgroup.procs` files of the mount: first where
/// `/proc/self/cgroup` (`own`) says, then through the tree.
pub fn namespace_root(mount: &Path, own: &str, pid: u32) -> Option<String> {
    let lists = |dir: &Path| {
        fs::read_to_string(dir.join("cgroup.procs"))
            .is_ok_and(|t| t.lines().any(|l| l.trim() == pid.to_string()))
    };
    if lists(&mount.join(own.trim_start_matches('/'))) {
        return None;
    }
    let found = find_cgroup(mount, &lists, 16)?;
    let found = format!("/{}", found.strip_prefix(mount).ok()?.to_str()?);
    let root = found.strip_suffix(own.trim_end_matches('/'))?;
    Some(if root.is_empty() {
        "/".into()
    } else {
        root.into()
    })
}

/// The first cgroup at or below `dir` (down to `depth` levels) that `holds`.
fn find_cgroup(dir: &Path, holds: &dyn Fn(&Path) -> bool, depth: usize) -> Option<PathBuf> {
    if holds(dir) {
        return Some(dir.to_owned());
    }
    if depth == 0 {
        return None;
    }
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_cgroup(&e.path(), holds, depth - 1))
}

/// A path of `/proc/PID/cgroup` read in a namespace rooted at `root` ([`namespace_root`]),
/// as a path of the mount: `/a/b` and `/../c` under `/a/pod` are `/a/pod/a/b` and `/a/c`.
pub fn absolute(root: &str, path: &str) -> String {
    let mut parts: Vec<&str> = root.split('/').filter(|p| !p.is_empty()).collect();
    for p in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if p == ".." {
            parts.pop();
        } else {
            parts.push(p);
        }
    }
    format!("/{}", parts.join("/"))
}

/// gatewayd's parent cgroup, `<cgroup2 mount>/gatewayd`, created when missing.
pub fn parent_dir() -> Result<PathBuf, CgroupError> {
    let parent = cgroup2_mount()?.join("gatewayd");
    match fs::create_dir(&parent) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io("mkdir", &parent)(e)),
        _ => Ok(parent),
    }
}

/// The cgroups directly under `dir`: (cgroup id, path).
pub fn children(dir: &Path) -> Vec<(u64, PathBuf)> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| (std::os::unix::fs::DirEntryExt::ino(&e), e.path()))
                .collect()
        })
        .unwrap_or_default()
}

/// The cgroups below `dir`, down to `depth` levels: (cgroup id, path).
pub fn descendants(dir: &Path, depth: usize) -> Vec<(u64, PathBuf)> {
    let mut out = Vec::new();
    let mut level = vec![dir.to_owned()];
    for _ in 0..depth {
        let next: Vec<(u64, PathBuf)> = level.iter().flat_map(|d| children(d)).collect();
        level = next.iter().map(|(_, p)| p.clone()).collect();
        out.extend(next);
    }
    out
}

/// Whether a process runs in the cgroup at `path` or below it (`cgroup.events`); a cgroup
/// that cannot be read counts as populated.
pub fn populated(path: &Path) -> bool {
    fs::read_to_string(path.join("cgroup.events"))
        .map_or(true, |s| !s.lines().any(|l| l.trim() == "populated 0"))
}

/// One agent cgroup, owned by gatewayd: removed (after killing what is left in it) on drop.
#[derive(Debug)]
pub struct AgentCgroup {
    path: PathBuf,
    id: u64,
    procs: CString,
}

impl AgentCgroup {
    /// Creates `<cgroup2 mount>/gatewayd/<name>`. Refuses an existing directory, so two
    /// sessions never share a cgroup.
    pub fn create(name: &str) -> Result<AgentCgroup, CgroupError> {
        AgentCgroup::create_in(&parent_dir()?, name)
    }

    /// Creates `<dir>/<name>` (for a session nested in another session's cgroup `dir`).
    pub fn create_in(dir: &Path, name: &str) -> Result<AgentCgroup, CgroupError> {
        let path = dir.join(name);
        fs::create_dir(&path).map_err(io("mkdir", &path))?;
        let id = fs::metadata(&path).map_err(io("stat", &path))?.ino();
        let procs =
            CString::new(path.join("cgroup.procs").as_os_str().as_bytes()).map_err(|_| {
                CgroupError::Io {
                    op: "path",
                    path: path.clone(),
                    source: std::io::ErrorKind::InvalidInput.into(),
                }
            })?;
        Ok(AgentCgroup { path, id, procs })
    }

    /// The cgroup's directory (absolute, under the cgroup2 mount).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup id the kernel programs compare against.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A closure for `Command::pre_exec` that moves the forked child into this cgroup. Only
    /// async-signal-safe calls (open, write, close), so it may run between fork and exec.
    pub fn enter_fn(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let procs = self.procs.clone();
        move || enter(&procs)
    }

    /// Pids currently in the cgroup (not its children).
    pub fn pids(&self) -> Vec<i32> {
        fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Kills every process in the cgroup and its descendants (`cgroup.kill`, kernel >= 5.14;
    /// SIGKILL to each listed pid otherwise), then waits for it to empty.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        kill_tree(&self.path)
    }

    /// Kills what is left and removes the directory (children first).
    pub fn remove(self) -> Result<(), CgroupError> {
        let r = self.cleanup();
        std::mem::forget(self);
        r
    }

    fn cleanup(&self) -> Result<(), CgroupError> {
        self.kill_all()?;
        remove_tree(&self.path)
    }
}

/// Kills every process in the cgroup `dir` and below it (`cgroup.kill`, kernel >= 5.14;
/// SIGKILL to each pid listed in `cgroup.procs`, level by level, otherwise), then waits up
/// to two seconds for it to empty.
pub fn kill_tree(dir: &Path) -> Result<(), CgroupError> {
    signal_kill_tree(dir);
    for _ in 0..200 {
        if !populated(dir) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(CgroupError::Busy(dir.to_owned()))
}

/// Sends SIGKILL to every process in the cgroup `dir` and below it (`cgroup.kill`, or each
/// listed pid), without waiting: for a caller that must not block (an async task whose
/// runtime reaps the killed processes' parent).
pub fn signal_kill_tree(dir: &Path) {
    if fs::write(dir.join("cgroup.kill"), "1").is_err() {
        let mut dirs = vec![(0, dir.to_owned())];
        dirs.extend(descendants(dir, 32));
        for (_, d) in dirs {
            let procs = fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse().ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Session cgroups of `gatewayd run` (`run-<pid>-<ms>`, right under `parent`) whose
/// gatewayd is gone (killed with SIGKILL, say): what is left in them is killed and they are
/// removed. Returns their paths. A cgroup that cannot be emptied or removed stays (its
/// session's entries then stay too: fail closed).
pub fn sweep_orphans(parent: &Path) -> Vec<PathBuf> {
    children(parent)
        .into_iter()
        .filter(|(_, path)| {
            run_owner(path).is_some_and(|pid| !pid_alive(pid))
                && kill_tree(path).is_ok()
                && remove_tree(path).is_ok()
        })
        .map(|(_, path)| path)
        .collect()
}

/// The gatewayd that made a `run-<pid>-<ms>` cgroup.
fn run_owner(path: &Path) -> Option<i32> {
    let name = path.file_name()?.to_str()?;
    let (pid, ms) = name.strip_prefix("run-")?.split_once('-')?;
    ms.parse::<u64>().ok()?;
    pid.parse().ok().filter(|p| *p > 0)
}

/// Whether a process with this pid exists.
fn pid_alive(pid: i32) -> bool {
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Ok(()) | Err(nix::errno::Errno::EPERM)
    )
}

/// Removes the cgroup `dir` and every cgroup below it (they must have no processes).
pub fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path())?;
            }
        }
    }
    let mut last = None;
    for _ in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(CgroupError::Io {
        op: "rmdir",
        path: dir.to_owned(),
        source: last.unwrap_or_else(|| std::io::ErrorKind::Other.into()),
    })
}

/// Writes "0" (the writing process itself) to a `cgroup.procs` file.
fn enter(procs: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: plain syscalls on a NUL-terminated path prepared before fork.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if n != 1 {
            return Err(err);
        }
    }
    Ok(())
}

impl Drop for AgentCgroup {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_namespace_relative_path_is_read_from_the_namespace_root() {
        assert_eq!(absolute("/a/pod", "/"), "/a/pod");
        assert_eq!(absolute("/a/pod", "/x/y"), "/a/pod/x/y");
        assert_eq!(
            absolute("/a/pod", "/../../gatewayd/run-1"),
            "/gatewayd/run-1"
        );
        assert_eq!(absolute("/a/pod", "/../../../.."), "/");
    }

    #[test]
    fn the_namespace_root_is_where_the_process_is_found() {
        let mount = tempfile::tempdir().unwrap();
        let pod = mount.path().join("kubepods/pod-1");
        std::fs::create_dir_all(&pod).unwrap();
        std::fs::write(mount.path().join("cgroup.procs"), "1\n").unwrap();
        std::fs::write(pod.join("cgroup.procs"), "7\n42\n").unwrap();
        // Seen from inside: at its namespace's root, or one level below it.
        assert_eq!(
            namespace_root(mount.path(), "/", 42).as_deref(),
            Some("/kubepods/pod-1")
        );
        std::fs::create_dir(pod.join("inner")).unwrap();
        std::fs::write(pod.join("cgroup.procs"), "").unwrap();
        std::fs::write(pod.join("inner/cgroup.procs"), "42\n").unwrap();
        assert_eq!(
            namespace_root(mount.path(), "/inner", 42).as_deref(),
            Some("/kubepods/pod-1")
        );
        // Where the process says it is: no namespace of its own.
        assert_eq!(
            namespace_root(mount.path(), "/kubepods/pod-1/inner", 42),
            None
        );
        assert_eq!(namespace_root(mount.path(), "/", 1), None);
    }

    use super::*;

    #[test]
    fn only_run_cgroups_name_an_owner() {
        assert_eq!(
            run_owner(Path::new("/x/gatewayd/run-42-1700000000000")),
            Some(42)
        );
        for other in ["doctor-42", "run-42", "run-x-1", "run-0-1", "mcp-run-42-1"] {
            assert_eq!(run_owner(&Path::new("/x").join(other)), None, "{other}");
        }
    }
}
