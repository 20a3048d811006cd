//! Every map the kernel programs use, in one place. One program set serves every session on
//! the host: each map is keyed by the session (its cgroup id), and userspace adds a session's
//! entries when it starts and removes them when it ends (see `gateway-user/src/kernel/`).
use aya_ebpf::{
    btf_maps::{ArrayOfMaps, RingBuf},
    macros::{btf_map, map},
    maps::{CgroupArray, HashMap, PerCpuArray},
};
use gateway_common::{
    EgressPolicy, Event, MAX_EXEC_TOTAL, MAX_PROTECTED_TOTAL, MAX_SESSIONS, SESSION_EVENTS_BYTES,
    SessionInfo, SessionInode,
};
use gateway_common::{MAX_UNIX_TOTAL, UnixName};

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

/// Protected files and directories, per session, by (session, kernel dev_t, inode). Value
/// unused (1).
#[map]
pub static PROTECTED: HashMap<SessionInode, u32> =
    HashMap::with_max_entries(MAX_PROTECTED_TOTAL, BPF_F_NO_PREALLOC);

/// Binaries a session's agent may execute, when its `SessionInfo::exec_enforced`.
#[map]
pub static EXEC: HashMap<SessionInode, u32> =
    HashMap::with_max_entries(MAX_EXEC_TOTAL, BPF_F_NO_PREALLOC);

/// Each session's egress allowlist and lockdown switch.
#[map]
pub static EGRESS: HashMap<u64, EgressPolicy> =
    HashMap::with_max_entries(MAX_SESSIONS, BPF_F_NO_PREALLOC);

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
