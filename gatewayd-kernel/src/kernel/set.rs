//! One program set per host, pinned in bpffs, shared by every session.
//!
//! The first `gatewayd run` (or the daemon) loads gatewayd's programs once, attaches them
//! (BPF LSM globally, cgroup programs to the parent cgroup `<cgroup2>/gatewayd`) and pins
//! their links and maps under `/sys/fs/bpf/gatewayd/<tag>/`, `<tag>` naming the gatewayd
//! version and the object's hash. Later starts open the pins ([`SharedPrograms::open_or_load`]:
//! no program is loaded again) and add their session's map entries ([`super::session`]).
//!
//! Every change to the pins happens under one lock (`flock` on the parent cgroup's
//! directory, which exists before anything is pinned). Under it, bpffs is mounted at
//! `/sys/fs/bpf` when nothing is mounted there, and each start also:
//! - removes a set left half-made by a crash (`<tag>-new`);
//! - replaces a set of the same tag that cannot be adopted (pins missing, or made for a
//!   parent cgroup that no longer exists): renamed aside while it still has live sessions,
//!   removed otherwise;
//! - removes every other set (older gatewayd versions, renamed sets) once no populated cgroup
//!   under the parent is outside this set's sessions: their sessions keep their programs
//!   until they end, so there is no window without enforcement;
//! - kills and removes the `run-<pid>-<ms>` cgroups whose gatewayd is dead (one killed
//!   with SIGKILL, say: [`cgroup::sweep_orphans`]);
//! - removes this set's entries for sessions whose cgroup is gone, and for sessions whose
//!   owner died (killing what is left in their cgroup and removing it too). A session whose
//!   cgroup cannot be emptied or removed keeps its entries: fail closed.
use std::{
    collections::{HashMap as StdHashMap, HashSet},
    fs::{self, File},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use gateway_common::SessionInode;
use nix::fcntl::{Flock, FlockArg};

use super::{
    KernelError, KernelSpec, OBJECT, PieceStatus,
    loader::{self, Links},
    maps::{self, SetMaps},
    session::{self, Session},
    status::{read_status, write_status},
};
use crate::cgroup;

/// Where bpffs is mounted.
pub const BPFFS: &str = "/sys/fs/bpf";
/// The folder, in bpffs, holding every program set.
pub const PIN_BASE: &str = "/sys/fs/bpf/gatewayd";

/// How a set's folder is laid out; raised when what is pinned there changes (2: the
/// recorders pinned loaded, attached on demand), so a set pinned the old way is another
/// build's.
const PIN_LAYOUT: u32 = 2;

/// This build's tag: its version, its pin layout and the hash of its eBPF object (the first
/// 16 hex digits of its SHA-256, computed by `build.rs`). Sets of other tags are other
/// gatewayd builds'. (bpffs refuses names with a `.`.)
pub fn tag() -> String {
    let hex = &env!("GATEWAYD_OBJECT_SHA256")[..16];
    format!(
        "v{}-p{PIN_LAYOUT}-{hex}",
        env!("CARGO_PKG_VERSION").replace('.', "_")
    )
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> KernelError + 'a {
    move |source| KernelError::Pins {
        op,
        path: path.to_owned(),
        source,
    }
}

/// The lock every change to the pins is made under (released on drop).
pub struct SetLock(#[allow(dead_code)] Flock<File>);

impl SetLock {
    /// Locks the parent cgroup's directory, then makes sure bpffs is mounted and the pin
    /// base folder exists.
    pub fn acquire() -> Result<SetLock, KernelError> {
        let parent = cgroup::parent_dir()?;
        let dir = File::open(&parent).map_err(io("open", &parent))?;
        let lock = Flock::lock(dir, FlockArg::LockExclusive)
            .map(SetLock)
            .map_err(|(_, e)| io("flock", &parent)(e.into()))?;
        mount_bpffs()?;
        let base = Path::new(PIN_BASE);
        match fs::create_dir(base) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io("mkdir", base)(e)),
            _ => Ok(lock),
        }
    }
}

/// Mounts bpffs at [`BPFFS`] when something else (or nothing) is mounted there.
fn mount_bpffs() -> Result<(), KernelError> {
    let is_bpffs = || {
        nix::sys::statfs::statfs(BPFFS)
            .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::BPF_FS_MAGIC)
    };
    if is_bpffs() {
        return Ok(());
    }
    nix::mount::mount(
        Some("bpf"),
        BPFFS,
        Some("bpf"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        Some("mode=0700"),
    )
    .map_err(|e| KernelError::NoBpffs(e.into()))
}

/// The host's program set, opened (or loaded and pinned) by [`SharedPrograms::open_or_load`].
/// Sessions are added with [`SharedPrograms::add_session`]; a daemon keeps one of these for
/// its lifetime, `gatewayd run` without a daemon opens it for its one session.
pub struct SharedPrograms {
    dir: PathBuf,
    parent: PathBuf,
    status: Vec<PieceStatus>,
    adopted: bool,
    cleaned: Vec<u64>,
    phases: Vec<(&'static str, f64)>,
    maps: Arc<Mutex<SetMaps>>,
}

/// Milliseconds each step of [`SharedPrograms::open_or_load`] took, in order.
struct Phases(Vec<(&'static str, f64)>, std::time::Instant);

impl Phases {
    fn new() -> Phases {
        Phases(Vec::new(), std::time::Instant::now())
    }

    fn done(&mut self, phase: &'static str) {
        self.0
            .push((phase, self.1.elapsed().as_secs_f64() * 1000.0));
        self.1 = std::time::Instant::now();
    }
}

impl std::fmt::Debug for SharedPrograms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPrograms")
            .field("dir", &self.dir)
            .field("adopted", &self.adopted)
            .finish_non_exhaustive()
    }
}

impl SharedPrograms {
    /// Opens this build's program set, loading, attaching and pinning it first when the
    /// host has none that can be adopted; tidies the pins as the module says.
    pub fn open_or_load() -> Result<SharedPrograms, KernelError> {
        if OBJECT.is_empty() {
            return Err(KernelError::Stub);
        }
        let mut phases = Phases::new();
        let parent = cgroup::parent_dir()?;
        let parent_id = fs::metadata(&parent).map_err(io("stat", &parent))?.ino();
        let _lock = SetLock::acquire()?;
        phases.done("lock");
        cgroup::sweep_orphans(&parent);
        let base = Path::new(PIN_BASE);
        let tag = tag();
        let dir = base.join(&tag);

        let mut status = None;
        if dir.exists() {
            match read_status(&dir, parent_id) {
                Ok(s) => status = Some(s),
                Err(_) if has_sessions(&dir) => {
                    let aside = base.join(format!("{tag}-retired-{}", unique()));
                    fs::rename(&dir, &aside).map_err(io("rename", &dir))?;
                }
                Err(_) => remove_set(&dir)?,
            }
        }
        let adopted = status.is_some();
        phases.done("status");
        let status = match status {
            Some(s) => s,
            None => create(base, &dir, &parent, parent_id)?,
        };
        phases.done("load");
        let mut maps = SetMaps::open(&dir)?;
        phases.done("maps");
        let cleaned = clean_stale(&mut maps, &parent)?;
        phases.done("clean");
        sweep_other_sets(base, &tag, &maps, &parent)?;
        phases.done("sweep");
        Ok(SharedPrograms {
            dir,
            parent,
            status,
            adopted,
            cleaned,
            phases: phases.0,
            maps: Arc::new(Mutex::new(maps)),
        })
    }

    /// What each program of [`PROGRAMS`] did when the set was made, in order.
    pub fn status(&self) -> &[PieceStatus] {
        &self.status
    }

    /// Whether the set was already pinned (no program was loaded by this call).
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// Where the set is pinned.
    pub fn pin_dir(&self) -> &Path {
        &self.dir
    }

    /// How long each step of [`SharedPrograms::open_or_load`] took (ms): taking the lock,
    /// reading the set's status, loading it (when not adopted), opening its maps, removing
    /// stale sessions, removing other sets.
    pub fn phases(&self) -> &[(&'static str, f64)] {
        &self.phases
    }

    /// Session ids whose stale entries [`SharedPrograms::open_or_load`] removed.
    pub fn cleaned(&self) -> &[u64] {
        &self.cleaned
    }

    /// Ids (cgroup ids) of the sessions in the set now.
    pub fn session_ids(&self) -> Result<Vec<u64>, KernelError> {
        lock(&self.maps).session_ids()
    }

    /// Adds a session for `spec` (its cgroup must sit under the parent cgroup, directly or
    /// nested in another session's cgroup), owned by the process `owner_tgid`, whom its
    /// agent may not signal or trace. With `spec.require`, refuses when a program of the set
    /// that enforces is missing (the error names it and the kernel's answer).
    pub fn add_session(&self, spec: &KernelSpec, owner_tgid: u32) -> Result<Session, KernelError> {
        if spec.require
            && let Some(missing) = self
                .status
                .iter()
                .find(|s| s.result.is_err() && !s.program.records_only())
        {
            return Err(KernelError::Required {
                program: missing.program.name,
                answer: missing.state(),
            });
        }
        let place = session::Place::of(&spec.cgroup_dir, &self.parent)?;
        let _lock = SetLock::acquire()?;
        session::add(self.maps.clone(), spec, place, owner_tgid)
    }
}

pub(crate) fn lock(maps: &Mutex<SetMaps>) -> std::sync::MutexGuard<'_, SetMaps> {
    maps.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Loads the object, pins everything in `<tag>-new` and renames it to `dir`.
fn create(
    base: &Path,
    dir: &Path,
    parent: &Path,
    parent_id: u64,
) -> Result<Vec<PieceStatus>, KernelError> {
    let new = base.join(format!(
        "{}-new",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("set")
    ));
    if new.exists() {
        remove_set(&new)?;
    }
    fs::create_dir(&new).map_err(io("mkdir", &new))?;
    let made = (|| {
        let parent_file = File::open(parent).map_err(|source| KernelError::Cgroup {
            path: parent.to_owned(),
            source,
        })?;
        let mut loaded = loader::load(&parent_file, parent_id, Links::Taken)?;
        for name in maps::PINNED {
            let path = maps::pin_path(&new, name);
            maps::map_mut(&mut loaded.ebpf, name)?
                .pin(&path)
                .map_err(|source| KernelError::Pin { path, source })?;
        }
        for object in std::mem::take(&mut loaded.unattached) {
            let path = maps::prog_path(&new, object);
            loaded
                .program::<aya::programs::RawTracePoint>(object, object)?
                .pin(&path)
                .map_err(|source| KernelError::Pin { path, source })?;
        }
        for (object, link) in loaded.links.drain(..) {
            let path = maps::link_path(&new, object);
            link.pin(&path)
                .map_err(|source| KernelError::Pin { path, source })?;
        }
        write_status(&new, parent_id, &loaded.status)?;
        Ok(loaded.status)
    })();
    match made {
        Ok(status) => {
            fs::rename(&new, dir).map_err(io("rename", &new))?;
            Ok(status)
        }
        Err(e) => {
            let _ = remove_set(&new);
            Err(e)
        }
    }
}

/// Whether the set in `dir` (of this build's tag) has entries in its `SESSIONS` map; when
/// that cannot be read, it is assumed to (kept, not removed).
fn has_sessions(dir: &Path) -> bool {
    SetMaps::open(dir)
        .and_then(|m| m.session_ids())
        .map_or(true, |ids| !ids.is_empty())
}

/// Unpins everything in a set's folder (its links detach, its maps go with their last
/// user) and removes the folder.
fn remove_set(dir: &Path) -> Result<(), KernelError> {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            fs::remove_file(&p).map_err(io("unpin", &p))?;
        }
    }
    fs::remove_dir(dir).map_err(io("rmdir", dir))
}

/// Removes every other set once no populated cgroup under the parent lies outside this
/// set's sessions (those cgroups may be sessions of the other sets).
fn sweep_other_sets(
    base: &Path,
    tag: &str,
    maps: &SetMaps,
    parent: &Path,
) -> Result<(), KernelError> {
    let others: Vec<PathBuf> = fs::read_dir(base)
        .map_err(io("read", base))?
        .flatten()
        .filter(|e| e.file_name() != tag)
        .map(|e| e.path())
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let ours: HashSet<u64> = maps.session_ids()?.into_iter().collect();
    let foreign_live = cgroup::children(parent)
        .into_iter()
        .any(|(id, path)| !ours.contains(&id) && cgroup::populated(&path));
    for dir in others {
        let half_made = dir.to_string_lossy().ends_with("-new");
        if half_made || !foreign_live {
            remove_set(&dir)?;
        }
    }
    Ok(())
}

/// Removes the entries of sessions whose cgroup is gone, and of sessions whose owner is
/// dead (killing what is left in the cgroup and removing it as well). Returns their ids.
fn clean_stale(maps: &mut SetMaps, parent: &Path) -> Result<Vec<u64>, KernelError> {
    let ids = maps.session_ids()?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let dirs = find_cgroups(parent, &ids);
    let mut stale = Vec::new();
    for id in ids {
        match dirs.get(&id) {
            None => stale.push(id),
            Some(path) => {
                let owner = maps.sessions.get(&id, 0).map_or(0, |i| i.owner_tgid);
                if !pid_alive(owner)
                    && cgroup::kill_tree(path).is_ok()
                    && cgroup::remove_tree(path).is_ok()
                {
                    stale.push(id);
                }
            }
        }
    }
    if stale.is_empty() {
        return Ok(stale);
    }
    // Their inode entries are found by scanning (a session's own list died with its owner).
    let scan = |keys: aya::maps::MapKeys<'_, SessionInode>| -> Vec<SessionInode> {
        keys.flatten()
            .filter(|k| stale.contains(&k.session))
            .collect()
    };
    let (protected, exec) = (scan(maps.protected.keys()), scan(maps.exec.keys()));
    let roots = scan(maps.roots.keys());
    for id in &stale {
        let own = |keys: &[SessionInode]| -> Vec<SessionInode> {
            keys.iter().filter(|k| k.session == *id).copied().collect()
        };
        let unix = super::unix_sockets::UnixKeys::scan(maps, *id);
        let names = super::read_only_names::ReadOnlyNames::scan(maps, *id);
        session::remove_entries(
            maps,
            *id,
            &own(&protected),
            &own(&exec),
            &own(&roots),
            (&unix, &names),
        )?;
    }
    maps.after_removal()?;
    Ok(stale)
}

/// The paths of the cgroups `ids` below `parent` (down to [`session::MAX_DEPTH`] levels),
/// read one level at a time, and a level deeper only while some are not found: sessions
/// mostly sit right under the parent, and reading every cgroup's folder at every start cost
/// a tenth of a start in the QEMU guest.
fn find_cgroups(parent: &Path, ids: &[u64]) -> StdHashMap<u64, PathBuf> {
    let mut dirs = StdHashMap::new();
    let mut level = vec![parent.to_owned()];
    for _ in 0..session::MAX_DEPTH {
        if level.is_empty() || ids.iter().all(|id| dirs.contains_key(id)) {
            break;
        }
        let next: Vec<(u64, PathBuf)> = level.iter().flat_map(|d| cgroup::children(d)).collect();
        level = next.iter().map(|(_, p)| p.clone()).collect();
        dirs.extend(next);
    }
    dirs
}

/// Whether a process with this pid exists (0: no owner recorded).
fn pid_alive(pid: u32) -> bool {
    pid != 0
        && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok_or_eperm()
}

trait OkOrEperm {
    fn is_ok_or_eperm(&self) -> bool;
}

impl OkOrEperm for nix::Result<()> {
    fn is_ok_or_eperm(&self) -> bool {
        matches!(self, Ok(()) | Err(nix::errno::Errno::EPERM))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon shares the set between its tasks and moves sessions into them.
    #[test]
    fn the_api_a_daemon_owns_crosses_tasks() {
        fn shared<T: Send + Sync>() {}
        fn moved<T: Send>() {}
        shared::<SharedPrograms>();
        moved::<Session>();
    }

    #[test]
    fn the_tag_is_a_name_bpffs_accepts() {
        let t = tag();
        assert!(!t.contains('.') && !t.contains('/'), "{t}");
        assert!(t.starts_with(&format!(
            "v{}-",
            env!("CARGO_PKG_VERSION").replace('.', "_")
        )));
        assert_eq!(t, tag(), "the same build, the same tag");
    }

    #[test]
    fn the_tag_names_the_embedded_objects_hash() {
        use sha2::{Digest as _, Sha256};
        let hex: String = Sha256::digest(OBJECT)[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(tag().ends_with(&format!("-{hex}")), "{} vs {hex}", tag());
    }
}
