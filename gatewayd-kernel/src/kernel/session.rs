//! One session in the shared program set: its map entries, added when it starts and removed
//! when it ends, its own ring buffer of denials, its drop counter and its lockdown switch.
//!
//! A session is keyed by its cgroup's id. Its entries go in before its `SESSIONS` entry (the
//! one the programs look up first), so the programs never see half a session; on removal
//! `SESSIONS` goes first.
use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use aya::maps::{Map, MapData, PerCpuValues, RingBuf};
use gateway_common::{
    EXEC_MAP_ONLY, EXEC_RUN, EgressPolicy, EgressRule, InodeKey, MAX_EGRESS_RULES, MAX_EXEC,
    MAX_INDEXED, MAX_NAME_PATTERNS, MAX_PROTECTED, MAX_ROOTS, MAX_SESSION_NESTING, MAX_SESSIONS,
    NamePattern, NamePatterns, SESSION_EVENTS_BYTES, SessionInfo, SessionInode, TREE_INDEXED,
    TREE_PROTECTED,
};
use gatewayd_core::policy::protected_names::ProtectedNames;

use super::{
    KernelError, KernelSpec,
    index::{NotIndexed, index_trees},
    maps::{EXEC_CAPACITY, PROTECTED_CAPACITY, ROOTS_CAPACITY, SetMaps, insert_err, map_err},
    read_only_names::ReadOnlyNames,
    set::{SetLock, lock},
    unix_sockets::UnixKeys,
};

/// How many levels below the parent cgroup a session's cgroup may sit: 1 for a session of
/// its own, up to `1 + MAX_SESSION_NESTING` for one nested in another session's cgroup.
pub(crate) const MAX_DEPTH: usize = 1 + MAX_SESSION_NESTING as usize;

/// Where a session's cgroup sits below the parent cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// The session's cgroup id.
    pub id: u64,
    /// Levels below the parent (1: a session of its own).
    pub depth: usize,
    /// The cgroup id of the parent's child it lies in (itself when `depth` is 1): the
    /// session whose `nested` count a nested session raises.
    pub top: u64,
}

impl Place {
    /// Finds `cgroup` below `parent` (both paths as this process sees them: the depth
    /// between them is the same in every cgroup namespace).
    pub(crate) fn of(cgroup: &Path, parent: &Path) -> Result<Place, KernelError> {
        let not_under = || KernelError::NotUnderParent {
            cgroup: cgroup.to_owned(),
            parent: parent.to_owned(),
        };
        let rel = cgroup.strip_prefix(parent).map_err(|_| not_under())?;
        let first = rel.components().next().ok_or_else(not_under)?;
        let depth = rel.components().count();
        if depth > MAX_DEPTH {
            return Err(KernelError::NestedTooDeep {
                cgroup: cgroup.to_owned(),
                max: MAX_SESSION_NESTING,
            });
        }
        let ino = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .map_err(|source| KernelError::Cgroup {
                    path: p.to_owned(),
                    source,
                })
        };
        Ok(Place {
            id: ino(cgroup)?,
            depth,
            top: ino(&parent.join(first))?,
        })
    }
}

/// A live session. Remove it with [`Session::remove`] once nothing runs in its cgroup;
/// dropped without that, its entries stay (enforcing) until a later start finds its cgroup
/// gone or its owner dead and its cgroup empty.
pub struct Session {
    place: Place,
    slot: u32,
    protected: Vec<SessionInode>,
    exec: Vec<SessionInode>,
    roots: Vec<SessionInode>,
    index: Result<usize, NotIndexed>,
    unix: UnixKeys,
    names: ReadOnlyNames,
    /// The policy's own (`cidr`) egress rules: resolved host rules go after them.
    egress: Vec<EgressRule>,
    /// The resolved host rules last set ([`Session::set_resolved`]).
    resolved: Vec<EgressRule>,
    maps: Arc<Mutex<SetMaps>>,
    events: Option<RingBuf<MapData>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

fn entries(id: u64, keys: &[InodeKey]) -> Vec<SessionInode> {
    keys.iter()
        .map(|k| SessionInode {
            session: id,
            dev: k.dev,
            ino: k.ino,
        })
        .collect()
}

/// The per-session limits ([`MAX_PROTECTED`], [`MAX_EXEC`], [`MAX_EGRESS_RULES`],
/// [`MAX_ROOTS`]).
fn check_limits(spec: &KernelSpec) -> Result<(), KernelError> {
    for (what, count, limit) in [
        ("protected paths", spec.protected.len(), MAX_PROTECTED),
        (
            "exec allowlist entries, library trees and interpreters",
            spec.exec.len() + spec.exec_map.len(),
            MAX_EXEC,
        ),
        (
            "egress rules with a cidr",
            spec.egress.len(),
            MAX_EGRESS_RULES,
        ),
        (
            "readable and writable roots (with the mount points under them)",
            spec.roots.len(),
            MAX_ROOTS,
        ),
    ] {
        if count > limit as usize {
            return Err(KernelError::TooMany { what, count, limit });
        }
    }
    Ok(())
}

/// The ring buffer of `slot`: the one its earlier sessions used, emptied of what they left
/// unread, or a new one (put in `EVENTS` once: replacing an inner map makes the kernel wait
/// for an RCU grace period, reusing it does not).
fn slot_ring(m: &mut SetMaps, slot: u32) -> Result<RingBuf<MapData>, KernelError> {
    use aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF;
    let data = if let Ok(data) = m.events.get(&slot, 0) {
        data
    } else {
        let obj = aya_obj::Map::new_from_params(
            BPF_MAP_TYPE_RINGBUF as u32,
            0,
            0,
            SESSION_EVENTS_BYTES,
            0,
        );
        let data = MapData::create(obj, "gw_events", None)
            .map_err(map_err("EVENTS (a session's ring buffer)"))?;
        m.events.set(slot, &data, 0).map_err(map_err("EVENTS"))?;
        data
    };
    let mut ring = RingBuf::try_from(Map::from_map_data(data).map_err(map_err("EVENTS"))?)
        .map_err(map_err("EVENTS"))?;
    while ring.next().is_some() {}
    Ok(ring)
}

/// Adds the session's entries (under the set lock, held by the caller).
pub(crate) fn add(
    maps: Arc<Mutex<SetMaps>>,
    spec: &KernelSpec,
    place: Place,
    owner_tgid: u32,
) -> Result<Session, KernelError> {
    check_limits(spec)?;
    let id = place.id;
    let wanted = Wanted::of(id, spec)?;
    let zeros = zeros_per_cpu()?;
    let mut m = lock(&maps);
    let slot = m.free_slot()?;
    let events = slot_ring(&mut m, slot)?;
    let (mut indexed, mut index) = index_protected(&mut m, id, spec);
    let mut raised = false;
    let result = (|| {
        // The recorders run while the set has a session; one that cannot be attached costs
        // records, not enforcement: refused only where the policy requires every piece.
        if let Err(e) = super::recorders::attach(&m.dir)
            && spec.require
        {
            return Err(e);
        }
        raised = raise_enclosing(&mut m, &place, spec)?;
        m.dropped.set(slot, zeros, 0).map_err(map_err("DROPPED"))?;
        m.egress
            .insert(id, wanted.egress, 0)
            .map_err(insert_err("SESSIONS", MAX_SESSIONS))?;
        insert_protected(&mut m, &wanted.protected, &mut indexed, &mut index)?;
        wanted.insert_exec_and_roots(&mut m)?;
        let info = session_info(spec, owner_tgid, slot, index.is_err());
        // Before the session is live: its file checks need more than `TREE`.
        if info.needs_every_open() {
            m.every_open.set(0, 1, 0).map_err(map_err("EVERY_OPEN"))?;
        }
        if info.learn != 0 {
            m.learning.set(0, 1, 0).map_err(map_err("LEARNING"))?;
        }
        m.sessions
            .insert(id, info, 0)
            .map_err(insert_err("SESSIONS", MAX_SESSIONS))
    })();
    let Wanted {
        mut protected,
        run,
        map_only,
        file_roots,
        unix,
        names,
        ..
    } = wanted;
    protected.extend(indexed.iter().map(|(k, _)| *k));
    let exec = [run, map_only].concat();
    let roots: Vec<SessionInode> = file_roots.into_iter().map(|(k, _)| k).collect();
    if let Err(e) = result {
        let _ = remove_entries(&mut m, id, &protected, &exec, &roots, (&unix, &names));
        let _ = m.after_removal();
        if raised {
            lower_nested(&mut m, place.top);
        }
        return Err(e);
    }
    drop(m);
    Ok(Session {
        place,
        slot,
        protected,
        exec,
        roots,
        index,
        unix,
        names,
        egress: spec.egress.clone(),
        resolved: Vec::new(),
        maps,
        events: Some(events),
    })
}

/// The session's `SESSIONS` value: `walks` when its protected paths are not indexed (its
/// file checks walk every path).
fn session_info(spec: &KernelSpec, owner_tgid: u32, slot: u32, walks: bool) -> SessionInfo {
    SessionInfo {
        owner_tgid,
        exec_enforced: u32::from(spec.exec_enforced),
        nested: 0,
        slot,
        file_walk: u32::from(walks),
        roots: spec.roots_enforced,
        names: spec.protected_names.patterns.len() as u32,
        learn: u32::from(spec.learn),
    }
}

/// What one session puts in the shared maps, derived from its spec before the maps' lock is
/// taken.
struct Wanted {
    /// The session's cgroup id.
    id: u64,
    protected: Vec<SessionInode>,
    run: Vec<SessionInode>,
    map_only: Vec<SessionInode>,
    file_roots: Vec<(SessionInode, u32)>,
    unix: UnixKeys,
    names: ReadOnlyNames,
    egress: EgressPolicy,
    /// `sandbox.protected_names` in the kernel's layout; `None` without any.
    name_patterns: Option<NamePatterns>,
}

/// A zero per CPU: a session's `DROPPED` counter when it starts.
fn zeros_per_cpu() -> Result<PerCpuValues<u64>, KernelError> {
    aya::util::nr_cpus()
        .map_err(|(_, e)| e)
        .and_then(|n| PerCpuValues::try_from(vec![0u64; n]))
        .map_err(|source| KernelError::Pins {
            op: "count CPUs",
            path: "/sys/devices/system/cpu/possible".into(),
            source,
        })
}

impl Wanted {
    fn of(id: u64, spec: &KernelSpec) -> Result<Wanted, KernelError> {
        let file_roots = (spec.root_keys().iter())
            .map(|(k, rights)| (entries(id, &[*k])[0], *rights))
            .collect();
        let mut egress = EgressPolicy::EMPTY;
        egress.rules[..spec.egress.len()].copy_from_slice(&spec.egress);
        egress.count = spec.egress.len() as u32;
        Ok(Wanted {
            id,
            protected: entries(id, &spec.protected_keys()),
            run: entries(id, &spec.exec_keys()),
            map_only: entries(id, &spec.exec_map_keys()),
            file_roots,
            unix: UnixKeys::of(id, spec)?,
            names: ReadOnlyNames::of(id, spec),
            egress,
            name_patterns: name_patterns(&spec.protected_names),
        })
    }

    /// The exec allowlist's entries, the file roots, the listed sockets and the read-only
    /// names.
    fn insert_exec_and_roots(&self, m: &mut SetMaps) -> Result<(), KernelError> {
        for (keys, value) in [(&self.run, EXEC_RUN), (&self.map_only, EXEC_MAP_ONLY)] {
            for k in keys {
                m.exec
                    .insert(k, value, 0)
                    .map_err(insert_err("EXEC", EXEC_CAPACITY))?;
            }
        }
        for (k, rights) in &self.file_roots {
            m.roots
                .insert(k, rights, 0)
                .map_err(insert_err("ROOTS", ROOTS_CAPACITY))?;
        }
        if let Some(p) = &self.name_patterns {
            m.names
                .insert(self.id, p, 0)
                .map_err(insert_err("NAMES", MAX_SESSIONS))?;
        }
        self.unix.insert(m)?;
        self.names.insert(m)
    }
}

/// The kernel's form of the policy's protected names (at most [`MAX_NAME_PATTERNS`], each
/// part at most [`gateway_common::NAME_PART_MAX`] bytes: checked when the policy loaded).
fn name_patterns(names: &ProtectedNames) -> Option<NamePatterns> {
    if names.is_empty() {
        return None;
    }
    let mut out = NamePatterns {
        count: 0,
        pad: 0,
        patterns: [NamePattern::default(); MAX_NAME_PATTERNS as usize],
    };
    for (slot, (_, p)) in out.patterns.iter_mut().zip(&names.patterns) {
        *slot = NamePattern::new(&p.prefix, &p.suffix, p.wildcard)?;
        out.count += 1;
    }
    Some(out)
}

/// Indexes the protected trees: each directory goes in `TREE` before it is listed (the
/// kernel marks what comes into it from then on). Returns the indexed entries (each with the
/// inode number of its protected path, for the audit record) and how many, or why not.
fn index_protected(
    m: &mut SetMaps,
    id: u64,
    spec: &KernelSpec,
) -> (Vec<(SessionInode, u64)>, Result<usize, NotIndexed>) {
    let roots: Vec<&Path> = spec.protected.iter().map(|p| p.path.as_path()).collect();
    let index = {
        let tree = &mut m.tree;
        index_trees(&roots, MAX_INDEXED as usize, |k| {
            tree.insert(k, TREE_INDEXED, 0).map_err(|_| ())
        })
    };
    let own = spec.protected_keys();
    let indexed = match &index {
        Ok(keys) => keys
            .iter()
            .filter(|(k, _)| !own.contains(k))
            .map(|(k, root)| (entries(id, &[*k])[0], *root))
            .collect(),
        Err(_) => Vec::new(),
    };
    (indexed, index.map(|keys| keys.len()))
}

/// A nested session raises the `nested` count of the session it lies in (its top); true
/// when it did, so a failure lowers it again.
fn raise_enclosing(m: &mut SetMaps, place: &Place, spec: &KernelSpec) -> Result<bool, KernelError> {
    if place.depth <= 1 {
        return Ok(false);
    }
    let mut top = m
        .sessions
        .get(&place.top, 0)
        .map_err(|_| KernelError::NoEnclosingSession {
            cgroup: spec.cgroup_dir.clone(),
        })?;
    top.nested += 1;
    m.sessions
        .insert(place.top, top, 0)
        .map_err(insert_err("SESSIONS", MAX_SESSIONS))?;
    Ok(true)
}

/// The protected entries and the index in `PROTECTED`, and each in `TREE`. The index is a
/// speed-up: without room for it in `PROTECTED` the session walks (`index` says why), and
/// without room in `TREE` (the file check looks `PROTECTED` up only for an inode `TREE`
/// holds) it looks every inode up and walks.
fn insert_protected(
    m: &mut SetMaps,
    protected: &[SessionInode],
    indexed: &mut Vec<(SessionInode, u64)>,
    index: &mut Result<usize, NotIndexed>,
) -> Result<(), KernelError> {
    for k in protected {
        m.protected
            .insert(k, k.ino, 0)
            .map_err(insert_err("PROTECTED", PROTECTED_CAPACITY))?;
    }
    if let Some(at) = indexed
        .iter()
        .position(|(k, root)| m.protected.insert(k, *root, 0).is_err())
    {
        for (k, _) in &indexed[..at] {
            let _ = m.protected.remove(k);
        }
        indexed.clear();
        *index = Err(NotIndexed::MapFull);
    }
    let tree_room = protected
        .iter()
        .chain(indexed.iter().map(|(k, _)| k))
        .all(|k| tree_protected(&mut m.tree, k));
    if !tree_room && index.is_ok() {
        *index = Err(NotIndexed::Refused);
    }
    Ok(())
}

/// Enters a protected inode in `TREE` as `TREE_PROTECTED`, unless `TREE` holds it already
/// (an indexed directory, a marked inode, another session's); false when there is no room.
fn tree_protected(tree: &mut aya::maps::HashMap<MapData, InodeKey, u32>, k: &SessionInode) -> bool {
    const BPF_NOEXIST: u64 = 1;
    let key = InodeKey {
        dev: k.dev,
        ino: k.ino,
    };
    match tree.insert(key, TREE_PROTECTED, BPF_NOEXIST) {
        Ok(()) => true,
        Err(aya::maps::MapError::SyscallError(e)) => {
            e.io_error.raw_os_error() == Some(libc::EEXIST)
        }
        Err(_) => false,
    }
}

/// The policy's rules, then as many resolved ones as fit; and how many did not.
fn egress_rules(own: &[EgressRule], resolved: &[EgressRule]) -> (Vec<EgressRule>, usize) {
    let room = (MAX_EGRESS_RULES as usize).saturating_sub(own.len());
    let taken = resolved.len().min(room);
    let mut rules = own.to_vec();
    rules.extend_from_slice(&resolved[..taken]);
    (rules, resolved.len() - taken)
}

fn lower_nested(m: &mut SetMaps, top: u64) {
    if let Ok(mut info) = m.sessions.get(&top, 0) {
        info.nested = info.nested.saturating_sub(1);
        let _ = m.sessions.insert(top, info, 0);
    }
}

/// Removes a session's entries, `SESSIONS` first (which frees its slot); every removal is tried. The first failure
/// other than a missing entry is the error.
pub(crate) fn remove_entries(
    m: &mut SetMaps,
    id: u64,
    protected: &[SessionInode],
    exec: &[SessionInode],
    roots: &[SessionInode],
    (unix, names): (&UnixKeys, &ReadOnlyNames),
) -> Result<(), KernelError> {
    let mut first = None;
    let mut note = |map: &'static str, r: Result<(), aya::maps::MapError>| {
        if let Err(e) = r
            && !matches!(e, aya::maps::MapError::KeyNotFound)
            && !matches!(&e, aya::maps::MapError::SyscallError(s) if s.io_error.raw_os_error() == Some(libc::ENOENT))
            && first.is_none()
        {
            first = Some(map_err(map)(e));
        }
    };
    note("SESSIONS", m.sessions.remove(&id));
    for k in protected {
        note("PROTECTED", m.protected.remove(k));
    }
    for k in exec {
        note("EXEC", m.exec.remove(k));
    }
    for k in roots {
        note("ROOTS", m.roots.remove(k));
    }
    unix.remove(m, &mut note);
    names.remove(m, &mut note);
    note("EGRESS", m.egress.remove(&id));
    note("NAMES", m.names.remove(&id));
    note("PROXY", m.proxy.remove(&id));
    first.map_or(Ok(()), Err)
}

impl Session {
    /// The session's cgroup id (its key in every map; `Event::session_id`).
    pub fn id(&self) -> u64 {
        self.place.id
    }

    /// The session's ring buffer, for the one task that reads it.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>, KernelError> {
        self.events.take().ok_or(KernelError::MapMissing {
            map: "EVENTS (already taken)",
        })
    }

    /// The session's entries for its egress proxy.
    pub fn proxy_maps(&self) -> super::egress_proxy::ProxyMaps {
        super::egress_proxy::ProxyMaps::new(self.maps.clone(), self.place.id)
    }

    /// Turns all egress of the session off (the Rule of Two tripped) or back on.
    pub fn set_lockdown(&self, on: bool) -> Result<(), KernelError> {
        let mut m = lock(&self.maps);
        let id = self.place.id;
        let mut policy = m.egress.get(&id, 0).map_err(map_err("EGRESS"))?;
        policy.lockdown = u32::from(on);
        m.egress.insert(id, policy, 0).map_err(map_err("EGRESS"))
    }

    /// Sets the rules of the policy's resolved host names (after its `cidr` rules, as many
    /// as fit in [`MAX_EGRESS_RULES`]), keeping the lockdown switch as it is. Returns how many
    /// did not fit. Under the set lock: a lockdown set meanwhile by another process (the
    /// daemon, `kernel::enclosing`) is never overwritten.
    pub fn set_resolved(&mut self, resolved: &[EgressRule]) -> Result<usize, KernelError> {
        self.resolved = resolved.to_vec();
        self.write_egress()
    }

    /// Replaces the policy's own (`cidr`) rules (a policy reload), keeping the resolved host
    /// rules after them and the lockdown switch as it is; returns how many did not fit.
    pub fn set_egress(&mut self, own: &[EgressRule]) -> Result<usize, KernelError> {
        self.egress = own.to_vec();
        self.write_egress()
    }

    /// Writes the session's `EGRESS` entry from its own and resolved rules, under the set
    /// lock: a lockdown set meanwhile by another process (the daemon, `kernel::enclosing`)
    /// is never overwritten.
    fn write_egress(&self) -> Result<usize, KernelError> {
        let _lock = SetLock::acquire()?;
        let mut m = lock(&self.maps);
        let id = self.place.id;
        let mut policy = m.egress.get(&id, 0).map_err(map_err("EGRESS"))?;
        let (rules, dropped) = egress_rules(&self.egress, &self.resolved);
        policy.rules = EgressPolicy::EMPTY.rules;
        policy.rules[..rules.len()].copy_from_slice(&rules);
        policy.count = rules.len() as u32;
        m.egress.insert(id, policy, 0).map_err(map_err("EGRESS"))?;
        Ok(dropped)
    }

    /// Events of this session that did not fit in its ring buffer, summed over CPUs.
    pub fn dropped(&self) -> u64 {
        lock(&self.maps)
            .dropped
            .get(&self.slot, 0)
            .map_or(0, |v| v.iter().sum())
    }

    /// Removes the session's entries. Call it once nothing runs in its cgroup and its ring
    /// buffer has been read to the end and dropped: the slot, with its ring buffer, passes
    /// to the next session.
    pub fn remove(self) -> Result<(), KernelError> {
        let _lock = SetLock::acquire()?;
        let mut m = lock(&self.maps);
        let r = remove_entries(
            &mut m,
            self.place.id,
            &self.protected,
            &self.exec,
            &self.roots,
            (&self.unix, &self.names),
        );
        if self.place.depth > 1 {
            lower_nested(&mut m, self.place.top);
        }
        r.and(m.after_removal())
    }

    /// Whether the session's protected directories are indexed (`Ok`: how many inodes), or
    /// why not (its file checks then walk up the dentry parents).
    pub fn file_index(&self) -> Result<usize, &NotIndexed> {
        self.index.as_ref().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(protected: usize, exec: usize, egress: usize) -> KernelSpec {
        let inode = |i: usize| super::super::spec::ProtectedInode {
            path: format!("/p{i}").into(),
            key: InodeKey {
                dev: 1,
                ino: i as u64,
            },
        };
        KernelSpec {
            cgroup_dir: "/x".into(),
            protected: (0..protected).map(inode).collect(),
            exec: (0..exec).map(inode).collect(),
            exec_enforced: exec > 0,
            exec_map: vec![],
            egress: vec![gateway_common::EgressRule::default(); egress],
            unix_paths: vec![],
            unix_names: vec![],
            read_only_names: vec![],
            roots_enforced: 0,
            roots: vec![],
            protected_names: gatewayd_core::policy::protected_names::ProtectedNames::default(),
            require: false,
            learn: false,
            landlock_refusals: false,
            learn_names: None,
        }
    }

    #[test]
    fn one_session_may_not_exceed_its_stated_limits() {
        assert!(check_limits(&spec(MAX_PROTECTED as usize, MAX_EXEC as usize, 64)).is_ok());
        let e = check_limits(&spec(MAX_PROTECTED as usize + 1, 0, 0)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the policy has 4097 protected paths; one session may have at most 4096 (docs/KERNEL.md, \"Limits\")"
        );
        assert!(matches!(
            check_limits(&spec(0, MAX_EXEC as usize + 1, 0)),
            Err(KernelError::TooMany { limit: 1024, .. })
        ));
        assert!(matches!(
            check_limits(&spec(0, 0, MAX_EGRESS_RULES as usize + 1)),
            Err(KernelError::TooMany { limit: 64, .. })
        ));
    }

    #[test]
    fn resolved_rules_go_after_the_policys_own_as_far_as_they_fit() {
        let rule = |port| gateway_common::EgressRule {
            port,
            ..Default::default()
        };
        let own: Vec<_> = (0..60).map(rule).collect();
        let resolved: Vec<_> = (100..110).map(rule).collect();
        let (rules, dropped) = egress_rules(&own, &resolved);
        assert_eq!((rules.len(), dropped), (MAX_EGRESS_RULES as usize, 6));
        assert_eq!(
            (rules[59].port, rules[60].port, rules[63].port),
            (59, 100, 103)
        );
        let (rules, dropped) = egress_rules(&own[..2], &resolved[..1]);
        assert_eq!((rules.len(), dropped), (3, 0));
    }

    #[test]
    fn a_session_cgroup_is_placed_below_the_parent() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("gatewayd");
        let mut deep = parent.join("top");
        std::fs::create_dir_all(&deep).unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let top = Place::of(&deep, &parent).unwrap();
        assert_eq!((top.depth, top.id, top.top), (1, ino(&deep), ino(&deep)));
        for _ in 0..MAX_SESSION_NESTING {
            deep.push("n");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let nested = Place::of(&deep, &parent).unwrap();
        assert_eq!(nested.depth, MAX_DEPTH);
        assert_eq!(nested.top, top.id);
        deep.push("n");
        std::fs::create_dir_all(&deep).unwrap();
        assert!(matches!(
            Place::of(&deep, &parent),
            Err(KernelError::NestedTooDeep { max: 8, .. })
        ));
        assert!(matches!(
            Place::of(dir.path(), &parent),
            Err(KernelError::NotUnderParent { .. })
        ));
        assert!(matches!(
            Place::of(&parent, &parent),
            Err(KernelError::NotUnderParent { .. })
        ));
    }
}
