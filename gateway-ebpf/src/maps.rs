//! Every map the kernel programs use, in one place. Userspace fills them before the agent
//! starts (see `gateway-user/src/kernel/`), and flips `STATE` at run time.
use aya_ebpf::{
    macros::map,
    maps::{Array, CgroupArray, HashMap, PerCpuArray, RingBuf},
};
use gateway_common::{
    EgressRule, InodeKey, MAX_EGRESS_RULES, MAX_EXEC, MAX_PROTECTED, STATE_SLOTS,
};

/// The agent's cgroup (slot 0, a directory fd set by userspace): the BPF LSM programs act
/// only for tasks under it.
#[map]
pub static AGENT: CgroupArray = CgroupArray::with_max_entries(1, 0);

/// Denials, one [`gateway_common::Event`] each, read by the daemon and written to the audit log.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Events that did not fit in `EVENTS` (per CPU; userspace sums and audits the total).
#[map]
pub static DROPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Protected files and directories by (kernel dev_t, inode). Value unused (1).
#[map]
pub static PROTECTED: HashMap<InodeKey, u32> = HashMap::with_max_entries(MAX_PROTECTED, 0);

/// Binaries the agent may execute, by (kernel dev_t, inode), when `CONFIG.exec_enforced`.
#[map]
pub static EXEC: HashMap<InodeKey, u32> = HashMap::with_max_entries(MAX_EXEC, 0);

/// Allowed destinations, filled densely from slot 0; the first slot with `family == 0` ends
/// the list.
#[map]
pub static EGRESS: Array<EgressRule> = Array::with_max_entries(MAX_EGRESS_RULES, 0);

/// Run-time switches written by the daemon, e.g. `STATE_EGRESS_LOCKDOWN`.
#[map]
pub static STATE: Array<u32> = Array::with_max_entries(STATE_SLOTS, 0);
