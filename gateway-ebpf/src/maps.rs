//! Every map the kernel programs use, in one place. One program set serves every session on
//! the host: each map is keyed by the session (its cgroup id), and userspace adds a session's
//! entries when it starts and removes them when it ends (see `gatewayd-kernel/src/kernel/`).
use aya_ebpf::{
    btf_maps::{ArrayOfMaps, RingBuf},
    macros::{btf_map, map},
    maps::{Array, CgroupArray, HashMap, LruHashMap, PerCpuArray},
};
use gateway_common::{
    DirName, MAX_READ_ONLY_NAMES_TOTAL, MAX_ROOTS_TOTAL, MAX_UNIX_TOTAL, NamePatterns, UnixName,
};
use gateway_common::{
    EgressPolicy, Event, InodeKey, MAX_EXEC_TOTAL, MAX_PROTECTED_TOTAL, MAX_SESSIONS,
    MAX_TREE_TOTAL, SESSION_EVENTS_BYTES, SessionInfo, SessionInode,
};
use gateway_common::{MAX_REDIRECTED, OriginalDst, ProxyPorts};

/// Values are replaced whole by userspace while programs read them: without preallocation
/// the kernel frees a replaced value only after every reader is done (no aliasing).
const BPF_F_NO_PREALLOC: u32 = 1;

/// gatewayd's parent cgroup (slot 0, a directory fd set by userspace): every session's
/// cgroup sits under it. A task outside it is outside every session: the BPF LSM programs
/// stop after this one test.
#[map]
pub static PARENT: CgroupArray = CgroupArray::with_max_entries(1, 0);

/// Live sessions by cgroup id.
#[map]
pub static SESSIONS: HashMap<u64, SessionInfo> =
    HashMap::with_max_entries(MAX_SESSIONS, BPF_F_NO_PREALLOC);

/// Protected files and directories, per session, by (session, kernel dev_t, inode): the
/// policy's protected paths and, for a session whose trees are indexed, every file and
/// directory under its protected directories when it started. Value: the inode number of the
/// protected path the entry is for (its own, or the protected directory it lies under), for
/// the audit record.
#[map]
pub static PROTECTED: HashMap<SessionInode, u64> =
    HashMap::with_max_entries(MAX_PROTECTED_TOTAL, BPF_F_NO_PREALLOC);

/// With a session's `SessionInfo::exec_enforced`: binaries its agent may execute
/// (`EXEC_RUN`), and library trees and ELF interpreters whose files it may only map
/// executable (`EXEC_MAP_ONLY`). Any entry is also kept from being written or replaced.
#[map]
pub static EXEC: HashMap<SessionInode, u32> =
    HashMap::with_max_entries(MAX_EXEC_TOTAL, BPF_F_NO_PREALLOC);

/// With a session's `SessionInfo::roots`: its readable and writable roots, by (session,
/// kernel dev_t, inode) of the root directory or file, and of the root of every filesystem
/// mounted under a root when the session started (a walk up the dentry parents stops at its
/// filesystem's root). Value: `ROOT_READ` | `ROOT_WRITE`, what may be done beneath it.
#[map]
pub static ROOTS: HashMap<SessionInode, u32> =
    HashMap::with_max_entries(MAX_ROOTS_TOTAL, BPF_F_NO_PREALLOC);

/// Names a session's agent may not make: its read-only paths (`sandbox.read_only`, the
/// built-in ones among them) that did not exist when it started, by (session, the parent
/// directory's dev_t and inode, name). Value: the path's index in the session's list, for
/// the audit record.
#[map]
pub static READ_ONLY_NAMES: HashMap<DirName, u32> =
    HashMap::with_max_entries(MAX_READ_ONLY_NAMES_TOTAL, BPF_F_NO_PREALLOC);

/// With a session's `SessionInfo::names`: its `sandbox.protected_names` patterns, by cgroup
/// id (a file of such a name under a `ROOT_NAMES` root is protected).
#[map]
pub static NAMES: HashMap<u64, NamePatterns> =
    HashMap::with_max_entries(MAX_SESSIONS, BPF_F_NO_PREALLOC);

/// Each session's egress allowlist and lockdown switch.
#[map]
pub static EGRESS: HashMap<u64, EgressPolicy> =
    HashMap::with_max_entries(MAX_SESSIONS, BPF_F_NO_PREALLOC);

/// The loopback ports of a session's egress proxy and resolver, by cgroup id (sessions
/// with name-based egress only; see `proxy.rs`).
#[map]
pub static PROXY: HashMap<u64, ProxyPorts> =
    HashMap::with_max_entries(MAX_SESSIONS, BPF_F_NO_PREALLOC);

/// Where each socket the connect programs sent to a session's proxy or resolver meant to go,
/// by socket cookie: the proxy reads it, `getpeername4/6` show it to the agent.
#[map]
pub static ORIGINAL: LruHashMap<u64, OriginalDst> = LruHashMap::with_max_entries(MAX_REDIRECTED, 0);

/// Each session's own ring buffer of denials (one [`Event`] each), at the session's slot
/// (`SessionInfo::slot`), read by the session's owner: one session's burst cannot fill
/// another's. A slot's ring buffer is created by its first session and kept for the next
/// ones (replacing an inner map makes the kernel wait for an RCU grace period).
#[btf_map]
pub static EVENTS: ArrayOfMaps<
    RingBuf<Event, { SESSION_EVENTS_BYTES as usize }>,
    { MAX_SESSIONS as usize },
> = ArrayOfMaps::new();

/// Per session slot, events that did not fit in the session's ring buffer (per CPU;
/// userspace sums and audits the total, and zeroes the slot for its next session).
#[map]
pub static DROPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_SESSIONS, 0);

/// Host-wide, for every process: every inode a live session protects (userspace, value
/// `TREE_PROTECTED`), the directories of the indexed protected trees of the live sessions
/// (userspace, value `TREE_INDEXED`), and every inode that came into one of them while they
/// were indexed (created, linked or moved in, by any process: `d_instantiate` and
/// `inode_rename` mark it, value `TREE_MARKED`). A session's file check looks an inode up in
/// `PROTECTED` only when it is here, and walks up the dentry parents only for one marked or
/// indexed; one not found here is not protected. Emptied by userspace when the set has no
/// session left.
#[map]
pub static TREE: HashMap<InodeKey, u32> =
    HashMap::with_max_entries(MAX_TREE_TOTAL, BPF_F_NO_PREALLOC);

/// Slot 0, non-zero: every session's file checks walk up the dentry parents, as for a session
/// whose trees are not indexed. Set by a program when a directory (whose subtree `TREE`
/// cannot mark) is moved into an indexed tree, or when `TREE` is full; cleared by userspace
/// with `TREE`.
#[map]
pub static FILE_WALK: Array<u32> = Array::with_max_entries(1, 0);

/// Slot 0, non-zero while some live session needs a file check of its own on every open:
/// it enforces roots (`SessionInfo::roots`) or its trees are not indexed
/// (`SessionInfo::file_walk`). While it and `FILE_WALK` are zero, an inode `TREE` does not
/// hold is clear for every session, so `file_open` allows reading it without finding the
/// task's session. Kept by userspace from `SESSIONS`, under the set lock.
#[map]
pub static EVERY_OPEN: Array<u32> = Array::with_max_entries(1, 0);

/// Slot 0, non-zero while some live session learns (`SessionInfo::learn`): only then does
/// `sys_exit` look further at a call that succeeded (a learning session's names made,
/// removed or renamed). Kept by userspace from `SESSIONS`, under the set lock.
#[map]
pub static LEARNING: Array<u32> = Array::with_max_entries(1, 0);

/// Whether the flag in slot 0 of `map` is set; set when it cannot be read (the check it
/// gates then runs).
#[inline(always)]
pub fn flag(map: &Array<u32>) -> bool {
    map.get(0).is_none_or(|v| *v != 0)
}

/// Path-named Unix sockets a session's agent may connect or send to, by (session, kernel
/// dev_t, inode) of the socket file (the policy's `network.unix` paths). Value unused (1).
#[map]
pub static UNIX_PATHS: HashMap<SessionInode, u32> =
    HashMap::with_max_entries(MAX_UNIX_TOTAL, BPF_F_NO_PREALLOC);

/// Abstract Unix socket names a session's agent may connect or send to (the policy's
/// `network.unix` entries starting with `@`). Value unused (1).
#[map]
pub static UNIX_NAMES: HashMap<UnixName, u32> =
    HashMap::with_max_entries(MAX_UNIX_TOTAL, BPF_F_NO_PREALLOC);

/// Per CPU, the `UNIX_NAMES` key the Unix socket programs build (too big for the BPF
/// stack). Not pinned: nothing in userspace reads it.
#[map]
pub static UNIX_SCRATCH: PerCpuArray<UnixName> = PerCpuArray::with_max_entries(1, 0);
