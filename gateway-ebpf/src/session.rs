//! Which session the current task belongs to, and sending a session's denials to it.
//!
//! A session is a cgroup under gatewayd's parent cgroup; a task belongs to the session of
//! the parent's child it descends from, or to the innermost session nested below that one.
use aya_ebpf::helpers::{
    bpf_get_current_ancestor_cgroup_id, bpf_get_current_cgroup_id, bpf_get_current_comm,
    bpf_get_current_pid_tgid,
};
use gateway_common::{
    Config, Event, EventKind, InodeKey, MAX_CGROUP_LEVEL, MAX_SESSION_NESTING, Reason, SessionInfo,
    SessionInode,
};

use crate::{
    EPERM, config,
    maps::{DROPPED, EVENTS, PARENT, SESSIONS},
    read,
};

/// The session a task belongs to.
#[derive(Clone, Copy)]
pub struct Session {
    /// The session's cgroup id (its key in every map).
    pub id: u64,
    pub info: SessionInfo,
}

impl Session {
    /// Whether this learning session is let through a file refusal for `reason`, without an
    /// event ([`Reason::learned_by_fanotify`]).
    #[inline(always)]
    pub fn learns_file(&self, reason: Reason) -> bool {
        self.info.learn != 0 && reason.learned_by_fanotify()
    }
}

/// Where a program reads the cgroup ids it finds a session by: the current task's, or for a
/// packet, its socket's (`SocketOf`).
pub trait CgroupIds {
    /// The id of the cgroup itself.
    fn own(&self) -> u64;
    /// The id of its ancestor at `level` (0 = the root), its own at its own level, and 0
    /// below that. Levels are the kernel's own: the same inside a cgroup namespace.
    fn ancestor(&self, level: u32) -> u64;
}

/// The current task's cgroup.
pub struct CurrentTask;

impl CgroupIds for CurrentTask {
    #[inline(always)]
    fn own(&self) -> u64 {
        // SAFETY: a helper without arguments, callable from every program type used here.
        unsafe { bpf_get_current_cgroup_id() }
    }

    #[inline(always)]
    fn ancestor(&self, level: u32) -> u64 {
        // SAFETY: a helper taking a plain integer, callable from BPF LSM and cgroup programs.
        unsafe { bpf_get_current_ancestor_cgroup_id(level as i32) }
    }
}

/// For the BPF LSM programs, which run for every task on the host: whether the task is
/// under gatewayd's parent cgroup (`bpf_current_task_under_cgroup` against `PARENT[0]`).
/// A task outside it is outside every session.
#[inline(always)]
pub fn under_parent() -> bool {
    PARENT.current_task_under_cgroup(0).unwrap_or(false)
}

/// [`under_parent`], then [`current_session`].
#[inline(always)]
pub fn lsm_session() -> Result<Option<Session>, i32> {
    if !under_parent() {
        return Ok(None);
    }
    current_session()
}

/// The session of the current task, when it is in one: [`session_of`] its cgroup.
#[inline(always)]
pub fn current_session() -> Result<Option<Session>, i32> {
    session_of(&CurrentTask)
}

/// The session a cgroup belongs to, when it is in one: its own cgroup's, when that is a
/// session (one `SESSIONS` lookup, the common case); otherwise the parent cgroup's level is found
/// among the task's ancestors (by id, so no level has to be known in advance), the child of
/// the parent it descends from is looked up in `SESSIONS`, and, when that session has
/// sessions nested in it, the innermost session among the task's deeper ancestors wins.
/// `Err(-EPERM)` when the task is deeper than `MAX_CGROUP_LEVEL` levels and the parent was
/// not found above that: its session cannot be known, so it is denied (fail closed).
#[inline(always)]
pub fn session_of(ids: &impl CgroupIds) -> Result<Option<Session>, i32> {
    // The common case first: the cgroup itself is a session's (an agent that made no
    // sub-cgroup). Being the deepest of its ancestors, it is the innermost session; the
    // callers' test against the parent cgroup (or the cgroup programs' attachment to it)
    // has placed it under the parent already.
    let own = ids.own();
    // SAFETY: the value is copied out at once; values are replaced whole, never in place.
    if let Some(info) = unsafe { SESSIONS.get(&own) } {
        return Ok(Some(Session {
            id: own,
            info: *info,
        }));
    }
    let parent = config().parent_cgroup_id;
    let mut level = 0;
    for l in 1..MAX_CGROUP_LEVEL {
        let id = ids.ancestor(l);
        if id == 0 {
            return Ok(None);
        }
        if id == parent {
            level = l;
            break;
        }
    }
    if level == 0 {
        return Err(-EPERM);
    }
    let top = ids.ancestor(level + 1);
    if top == 0 {
        return Ok(None);
    }
    // SAFETY: the value is copied out at once; values are replaced whole, never in place.
    let Some(info) = (unsafe { SESSIONS.get(&top) }).copied() else {
        return Ok(None);
    };
    let mut session = Session { id: top, info };
    if info.nested != 0 {
        for depth in 2..MAX_SESSION_NESTING + 2 {
            let id = ids.ancestor(level + depth);
            if id == 0 {
                break;
            }
            // SAFETY: as above.
            if let Some(inner) = unsafe { SESSIONS.get(&id) } {
                session = Session { id, info: *inner };
            }
        }
    }
    Ok(Some(session))
}

/// What a file or exec check learnt about the file it decided on, for the denial's event.
/// Kept apart from [`Event`] so that a check that allows builds no event: the compiler
/// zeroes `Event`'s byte arrays with calls to a byte-at-a-time `memset`, which on
/// `file_open`'s fast path cost about as much as a map lookup.
#[derive(Clone, Copy, Default)]
pub struct Subject {
    /// The file's inode number and superblock `dev_t` ([`Event::file_ino`], `file_dev`).
    pub file_ino: u64,
    pub file_dev: u32,
    /// The protected path that matched ([`Event::protected_ino`]).
    pub protected_ino: u64,
}

impl Subject {
    /// Records the file's identity, unless one is recorded already.
    #[inline(always)]
    pub fn file(&mut self, key: &InodeKey) {
        if self.file_ino == 0 {
            self.file_ino = key.ino;
            self.file_dev = key.dev as u32;
        }
    }

    /// Sends the denial of `kind` for `reason` to the session; returns the errno.
    #[inline(always)]
    pub fn deny(self, session: &Session, kind: EventKind, reason: Reason) -> i32 {
        let mut ev = Event::new(kind, reason);
        ev.file_ino = self.file_ino;
        ev.file_dev = self.file_dev;
        ev.protected_ino = self.protected_ino;
        emit(session, ev);
        -EPERM
    }
}

/// Sends one denial of the current task to the session's ring buffer (with the task's pid,
/// cgroup and `comm`).
#[inline(always)]
pub fn emit(session: &Session, mut ev: Event) {
    ev.pid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: a helper without arguments, callable from every program type used here.
    ev.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    ev.comm = bpf_get_current_comm().unwrap_or([0; 16]);
    send(session, ev);
}

/// Sends one denial to the session's ring buffer; counts it in `DROPPED` when that is full.
#[inline(always)]
pub fn send(session: &Session, mut ev: Event) {
    ev.session_id = session.id;
    let slot = session.info.slot;
    let sent = match EVENTS.get(slot) {
        Some(ring) => ring.output(&ev, 0).is_ok(),
        None => false,
    };
    if !sent && let Some(n) = DROPPED.get_ptr_mut(slot) {
        // SAFETY: a non-null pointer from a map lookup points at this CPU's slot of the
        // session's counter and stays valid for the rest of the program run.
        unsafe { *n += 1 };
    }
}

/// The session's entry for an inode, in `PROTECTED` or `EXEC`.
#[inline(always)]
pub fn session_inode(session: &Session, key: &InodeKey) -> SessionInode {
    SessionInode {
        session: session.id,
        dev: key.dev,
        ino: key.ino,
    }
}

/// The cgroup id of `cgroup`'s ancestor at `level` (`cgroup->ancestors[level]->kn->id`).
#[inline(always)]
fn ancestor_id(cfg: &Config, cgroup: *const u8, level: u32) -> Result<u64, ()> {
    let a: *const u8 = read(cgroup, cfg.off_cgroup_ancestors + 8 * u64::from(level))?;
    let kn: *const u8 = read(a, cfg.off_cgroup_kn)?;
    read(kn, cfg.off_kn_id)
}

/// Whether `cgroup` (a `struct cgroup *`: a socket's, a task's) is the session's cgroup or
/// below it, and not inside a session nested below this one (whose agent is another
/// session's).
#[inline(always)]
pub fn cgroup_in_session(cfg: &Config, session: &Session, cgroup: *const u8) -> Result<bool, ()> {
    if cgroup.is_null() {
        return Ok(false);
    }
    let level: i32 = read(cgroup, cfg.off_cgroup_level)?;
    let mut found = 0;
    for l in 1..MAX_CGROUP_LEVEL + MAX_SESSION_NESTING + 1 {
        if l as i32 > level {
            return Ok(false);
        }
        if ancestor_id(cfg, cgroup, l)? == session.id {
            found = l;
            break;
        }
    }
    if found == 0 {
        return Ok(false);
    }
    if session.info.nested == 0 {
        return Ok(true);
    }
    for depth in 1..MAX_SESSION_NESTING + 1 {
        let l = found + depth;
        if l as i32 > level {
            break;
        }
        if SESSIONS.get_ptr(&ancestor_id(cfg, cgroup, l)?).is_some() {
            return Ok(false);
        }
    }
    Ok(true)
}
