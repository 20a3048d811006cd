//! The program set's maps, as userspace holds them: opened from their pins in bpffs (or
//! taken from a freshly loaded object before pinning), with the error a full map gives.
use std::path::{Path, PathBuf};

use aya::{
    Ebpf,
    maps::{Array, ArrayOfMaps, HashMap, Map, MapData, MapError, PerCpuArray},
};
use gateway_common::{DirName, MAX_ROOTS_TOTAL, MAX_UNIX_TOTAL, NamePatterns, UnixName};
use gateway_common::{
    EgressPolicy, InodeKey, MAX_EXEC_TOTAL, MAX_PROTECTED_TOTAL, MAX_SESSIONS, SessionInfo,
    SessionInode,
};
use gateway_common::{OriginalDst, ProxyPorts};

use super::KernelError;

/// Every map of the object that the set pins (the programs' `.rodata` is not: nothing in
/// userspace reads it back). `PARENT` holds the parent cgroup for the BPF LSM programs.
pub(crate) const PINNED: [&str; 18] = [
    "PARENT",
    "SESSIONS",
    "PROTECTED",
    "EXEC",
    "EGRESS",
    "EVENTS",
    "DROPPED",
    "TREE",
    "FILE_WALK",
    "EVERY_OPEN",
    "LEARNING",
    "UNIX_PATHS",
    "UNIX_NAMES",
    "ROOTS",
    "READ_ONLY_NAMES",
    "NAMES",
    "PROXY",
    "ORIGINAL",
];

/// The map `map` of the loaded object, or [`KernelError::MapMissing`].
pub(crate) fn map_mut<'a>(
    ebpf: &'a mut Ebpf,
    map: &'static str,
) -> Result<&'a mut Map, KernelError> {
    ebpf.map_mut(map).ok_or(KernelError::MapMissing { map })
}

/// Wraps aya's error for the map `map` as [`KernelError::Map`].
pub(crate) fn map_err(map: &'static str) -> impl Fn(MapError) -> KernelError {
    move |source| KernelError::Map { map, source }
}

/// For an insert: a full map (`E2BIG`) is [`KernelError::MapFull`], with its stated limit.
pub(crate) fn insert_err(map: &'static str, capacity: u32) -> impl Fn(MapError) -> KernelError {
    move |source| match &source {
        MapError::SyscallError(e) if e.io_error.raw_os_error() == Some(libc::E2BIG) => {
            KernelError::MapFull { map, capacity }
        }
        _ => KernelError::Map { map, source },
    }
}

/// Where the map `name` of the set in `dir` is pinned.
pub(crate) fn pin_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("map-{name}"))
}

/// Where the set in `dir` pins the link of program `object` while it is attached.
pub(crate) fn link_path(dir: &Path, object: &str) -> PathBuf {
    dir.join(format!("link-{object}"))
}

/// Where the set in `dir` pins the loaded program `object` that it attaches on demand (a
/// recorder: `super::recorders`).
pub(crate) fn prog_path(dir: &Path, object: &str) -> PathBuf {
    dir.join(format!("prog-{object}"))
}

/// The maps sessions are added to and removed from.
pub(crate) struct SetMaps {
    /// `SESSIONS`: live sessions by cgroup id.
    pub sessions: HashMap<MapData, u64, SessionInfo>,
    /// `PROTECTED`: protected inodes, per session; the value is the inode number of the
    /// protected path each lies under (its own for a protected path).
    pub protected: HashMap<MapData, SessionInode, u64>,
    /// `EXEC`: inodes of the binaries a session's agent may execute.
    pub exec: HashMap<MapData, SessionInode, u32>,
    /// `EGRESS`: each session's egress allowlist and lockdown switch, by cgroup id.
    pub egress: HashMap<MapData, u64, EgressPolicy>,
    /// `EVENTS`: one ring buffer per session slot.
    pub events: ArrayOfMaps<MapData>,
    /// `DROPPED`: per session slot and CPU, the events that did not fit in its ring buffer.
    pub dropped: PerCpuArray<MapData, u64>,
    /// `TREE`: host-wide, the directories of the indexed protected trees and the inodes the
    /// programs marked in them.
    pub tree: HashMap<MapData, InodeKey, u32>,
    /// `FILE_WALK`: slot 0 non-zero makes every session's file checks walk.
    pub file_walk: Array<MapData, u32>,
    /// `EVERY_OPEN`: slot 0 non-zero while a live session enforces roots or walks, which
    /// turns `file_open`'s fast exit off ([`SetMaps::refresh_every_open`]).
    pub every_open: Array<MapData, u32>,
    /// `LEARNING`: slot 0 non-zero while a live session learns, which has `sys_exit` look
    /// at the calls that succeeded ([`SetMaps::refresh_every_open`]).
    pub learning: Array<MapData, u32>,
    /// `UNIX_PATHS`: socket files of the Unix sockets a session's agent may reach.
    pub unix_paths: HashMap<MapData, SessionInode, u32>,
    /// `UNIX_NAMES`: abstract Unix socket names a session's agent may reach.
    pub unix_names: HashMap<MapData, UnixName, u32>,
    /// `ROOTS`: a session's readable and writable roots (and the mount points under them),
    /// with their rights.
    pub roots: HashMap<MapData, SessionInode, u32>,
    /// `READ_ONLY_NAMES`: names a session's agent may not make in a directory, with the
    /// index of the read-only path each is for.
    pub read_only_names: HashMap<MapData, DirName, u32>,
    /// `NAMES`: each session's `sandbox.protected_names` patterns, by cgroup id.
    pub names: HashMap<MapData, u64, NamePatterns>,
    /// `PROXY`: the loopback ports of a session's egress proxy, by cgroup id.
    pub proxy: HashMap<MapData, u64, ProxyPorts>,
    /// `ORIGINAL`: where each socket sent to a session's proxy meant to go, by socket cookie.
    pub original: HashMap<MapData, u64, OriginalDst>,
    /// The set's folder in bpffs (its recorders are attached and detached there).
    pub dir: std::path::PathBuf,
}

// Stated capacities, for [`insert_err`].

/// Capacity of `PROTECTED`, shared by all live sessions.
pub(crate) const PROTECTED_CAPACITY: u32 = MAX_PROTECTED_TOTAL;
/// Capacity of `EXEC`, shared by all live sessions.
pub(crate) const EXEC_CAPACITY: u32 = MAX_EXEC_TOTAL;
/// Capacity of `ROOTS`, shared by all live sessions.
pub(crate) const ROOTS_CAPACITY: u32 = MAX_ROOTS_TOTAL;
/// Capacity of `UNIX_PATHS` and of `UNIX_NAMES`, each shared by all live sessions.
pub(crate) const UNIX_CAPACITY: u32 = MAX_UNIX_TOTAL;

impl SetMaps {
    /// Opens the maps of the set pinned in `dir`.
    pub(crate) fn open(dir: &Path) -> Result<SetMaps, KernelError> {
        let open = |name: &'static str| -> Result<Map, KernelError> {
            let data = MapData::from_pin(pin_path(dir, name)).map_err(map_err(name))?;
            Map::from_map_data(data).map_err(map_err(name))
        };
        Ok(SetMaps {
            sessions: HashMap::try_from(open("SESSIONS")?).map_err(map_err("SESSIONS"))?,
            protected: HashMap::try_from(open("PROTECTED")?).map_err(map_err("PROTECTED"))?,
            exec: HashMap::try_from(open("EXEC")?).map_err(map_err("EXEC"))?,
            egress: HashMap::try_from(open("EGRESS")?).map_err(map_err("EGRESS"))?,
            events: ArrayOfMaps::try_from(open("EVENTS")?).map_err(map_err("EVENTS"))?,
            dropped: PerCpuArray::try_from(open("DROPPED")?).map_err(map_err("DROPPED"))?,
            tree: HashMap::try_from(open("TREE")?).map_err(map_err("TREE"))?,
            file_walk: Array::try_from(open("FILE_WALK")?).map_err(map_err("FILE_WALK"))?,
            every_open: Array::try_from(open("EVERY_OPEN")?).map_err(map_err("EVERY_OPEN"))?,
            learning: Array::try_from(open("LEARNING")?).map_err(map_err("LEARNING"))?,
            unix_paths: HashMap::try_from(open("UNIX_PATHS")?).map_err(map_err("UNIX_PATHS"))?,
            unix_names: HashMap::try_from(open("UNIX_NAMES")?).map_err(map_err("UNIX_NAMES"))?,
            roots: HashMap::try_from(open("ROOTS")?).map_err(map_err("ROOTS"))?,
            read_only_names: HashMap::try_from(open("READ_ONLY_NAMES")?)
                .map_err(map_err("READ_ONLY_NAMES"))?,
            names: HashMap::try_from(open("NAMES")?).map_err(map_err("NAMES"))?,
            proxy: HashMap::try_from(open("PROXY")?).map_err(map_err("PROXY"))?,
            original: HashMap::try_from(open("ORIGINAL")?).map_err(map_err("ORIGINAL"))?,
            dir: dir.to_owned(),
        })
    }

    /// Sets `EVERY_OPEN` and `LEARNING` from `SESSIONS`: the first non-zero while a live
    /// session enforces roots, protects names or is not indexed (it walks), the second while
    /// one learns. Called under the set lock after sessions are removed; a session that needs
    /// either sets it before its own `SESSIONS` entry goes in.
    pub(crate) fn refresh_every_open(&mut self) -> Result<(), KernelError> {
        let (mut every_open, mut learning) = (false, false);
        for entry in &self.sessions {
            let (_, info) = entry.map_err(map_err("SESSIONS"))?;
            every_open |= info.needs_every_open();
            learning |= info.learn != 0;
        }
        self.learning
            .set(0, u32::from(learning), 0)
            .map_err(map_err("LEARNING"))?;
        self.every_open
            .set(0, u32::from(every_open), 0)
            .map_err(map_err("EVERY_OPEN"))
    }

    /// After sessions are removed: [`SetMaps::refresh_every_open`], and with no session
    /// left, empties `TREE`, clears `FILE_WALK` and detaches the recorders: the marks and the
    /// directories of ended sessions' trees only slow file checks down, and a recorder every
    /// system call. Every step is tried; the first failure is the error.
    pub(crate) fn after_removal(&mut self) -> Result<(), KernelError> {
        let refreshed = self.refresh_every_open();
        if !self.session_ids()?.is_empty() {
            return refreshed;
        }
        let keys: Vec<InodeKey> = self.tree.keys().flatten().collect();
        let mut first = None;
        for k in &keys {
            if let Err(e) = self.tree.remove(k)
                && first.is_none()
            {
                first = Some(map_err("TREE")(e));
            }
        }
        if let Err(e) = self.file_walk.set(0, 0, 0)
            && first.is_none()
        {
            first = Some(map_err("FILE_WALK")(e));
        }
        if let Err(e) = super::recorders::detach(&self.dir)
            && first.is_none()
        {
            first = Some(e);
        }
        refreshed.and(first.map_or(Ok(()), Err))
    }

    /// Session ids (cgroup ids) in `SESSIONS`.
    pub(crate) fn session_ids(&self) -> Result<Vec<u64>, KernelError> {
        self.sessions
            .keys()
            .collect::<Result<_, _>>()
            .map_err(map_err("SESSIONS"))
    }

    /// The lowest slot no live session holds.
    pub(crate) fn free_slot(&self) -> Result<u32, KernelError> {
        let mut used = vec![false; MAX_SESSIONS as usize];
        for entry in &self.sessions {
            let (_, info) = entry.map_err(map_err("SESSIONS"))?;
            if let Some(u) = used.get_mut(info.slot as usize) {
                *u = true;
            }
        }
        used.iter()
            .position(|u| !u)
            .map(|s| s as u32)
            .ok_or(KernelError::MapFull {
                map: "SESSIONS",
                capacity: MAX_SESSIONS,
            })
    }
}
