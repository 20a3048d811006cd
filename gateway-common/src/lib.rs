//! Types shared by gatewayd's kernel programs (`gateway-ebpf`) and the daemon (`gateway-user`).
//!
//! Everything here is `#[repr(C)]` plain data with explicit padding, so the byte layout the
//! eBPF programs write is exactly the one userspace reads. Flags are `u32`, never `bool`.
//! The `user` feature adds `aya::Pod` so userspace can put these types in maps and globals.
#![no_std]

/// Number of slots in the `EGRESS` array map (destinations the agent may reach).
pub const MAX_EGRESS_RULES: u32 = 64;
/// Capacity of the `PROTECTED` hash map (protected files and directories, by inode).
pub const MAX_PROTECTED: u32 = 4096;
/// Capacity of the `EXEC` hash map (binaries the agent may execute, by inode).
pub const MAX_EXEC: u32 = 1024;
/// How many path components `lsm/file_open` walks up from an opened file looking for a
/// protected ancestor. A deeper file is denied (`REASON_UNRESOLVABLE`): fail closed.
pub const MAX_PATH_DEPTH: u32 = 48;

/// Event kinds: which program produced an [`Event`].
pub const EV_FILE_OPEN: u32 = 1;
pub const EV_CONNECT4: u32 = 2;
pub const EV_CONNECT6: u32 = 3;
pub const EV_SENDMSG4: u32 = 4;
pub const EV_SENDMSG6: u32 = 5;
pub const EV_BPF: u32 = 6;
pub const EV_MOUNT: u32 = 7;
pub const EV_PTRACE: u32 = 8;
pub const EV_KILL: u32 = 9;
pub const EV_EXEC: u32 = 10;
pub const EV_UNLINK: u32 = 11;
pub const EV_RMDIR: u32 = 12;
pub const EV_RENAME: u32 = 13;
pub const EV_SETATTR: u32 = 14;

/// Reason codes carried by kernel events (mapped to audit reason strings in userspace).
/// The opened file is, or lies under, a protected path.
pub const REASON_PROTECTED_PATH: u32 = 1;
/// The destination is not in the policy's egress allowlist.
pub const REASON_EGRESS_NOT_ALLOWED: u32 = 2;
/// The session tripped the Rule of Two: all egress is denied.
pub const REASON_EGRESS_LOCKDOWN: u32 = 3;
/// The program could not read what it needed to decide (or the path was too deep): deny.
pub const REASON_UNRESOLVABLE: u32 = 4;
/// The agent tried to weaken its own confinement: `bpf()`, `mount()`, ptrace, signalling
/// gatewayd, or writing to a cgroup file (e.g. moving itself out of its cgroup).
pub const REASON_SELF_PROTECTION: u32 = 5;
/// The executed file is not in the policy's exec allowlist.
pub const REASON_EXEC_NOT_ALLOWED: u32 = 6;

/// Address families as the kernel numbers them.
pub const AF_INET: u32 = 2;
pub const AF_INET6: u32 = 10;

/// One kernel decision, sent to userspace through the `EVENTS` ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// `EV_*`
    pub kind: u32,
    /// `REASON_*`
    pub reason: u32,
    /// Thread-group id (what userspace calls the pid).
    pub pid: u32,
    /// `AF_INET` / `AF_INET6` for network events, 0 otherwise.
    pub family: u32,
    pub cgroup_id: u64,
    /// file_open: inode number of the opened file.
    pub ino: u64,
    /// file_open: inode number of the protected ancestor that matched (may equal `ino`).
    pub matched_ino: u64,
    /// file_open: kernel `dev_t` (`MAJOR << 20 | MINOR`) of the file's superblock.
    pub dev: u32,
    /// Network events: destination port, host byte order.
    pub port: u32,
    /// Network events: destination address, network byte order (IPv4 in the first 4 bytes).
    pub addr: [u8; 16],
    /// `comm` of the task.
    pub comm: [u8; 16],
}

/// Load-time configuration, written into the `CONFIG` global (.rodata) with
/// `EbpfLoader::override_global` before the programs are loaded.
///
/// Rust eBPF has no CO-RE field relocations, so struct member offsets are read from the
/// running kernel's BTF by userspace and passed in here.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    /// cgroup v2 id (inode number of the directory) of the agent's cgroup (for events; the
    /// LSM programs test membership with the `AGENT` cgroup array, which also covers the
    /// agent's sub-cgroups and works inside cgroup namespaces).
    pub cgroup_id: u64,
    /// gatewayd's own tgid: the agent may not signal or ptrace it.
    pub daemon_tgid: u32,
    /// 1 when `EXEC` is an allowlist (the policy lists binaries); 0 leaves exec unrestricted.
    pub exec_enforced: u32,
    /// offsetof(struct file, f_path) + offsetof(struct path, dentry)
    pub off_file_dentry: u64,
    /// offsetof(struct dentry, d_parent)
    pub off_dentry_parent: u64,
    /// offsetof(struct dentry, d_inode)
    pub off_dentry_inode: u64,
    /// offsetof(struct inode, i_ino)
    pub off_inode_ino: u64,
    /// offsetof(struct inode, i_sb)
    pub off_inode_sb: u64,
    /// offsetof(struct super_block, s_dev)
    pub off_sb_dev: u64,
    /// offsetof(struct super_block, s_magic)
    pub off_sb_magic: u64,
    /// offsetof(struct file, f_mode)
    pub off_file_mode: u64,
    /// offsetof(struct task_struct, tgid)
    pub off_task_tgid: u64,
    /// offsetof(struct linux_binprm, file)
    pub off_bprm_file: u64,
}

/// Key of the `PROTECTED` map: a file or directory by identity, not by name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InodeKey {
    /// Kernel `dev_t` of the superblock (`MAJOR << 20 | MINOR`), not userspace `st_dev`.
    pub dev: u64,
    pub ino: u64,
}

/// One allowed destination in the `EGRESS` array map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressRule {
    /// `AF_INET` or `AF_INET6`; 0 marks an unused slot.
    pub family: u32,
    /// Destination port (host byte order); 0 = any port.
    pub port: u32,
    /// Network address, network byte order (IPv4 in the first 4 bytes, the rest zero).
    pub addr: [u8; 16],
    /// Netmask in the same layout (a /24 is `ff ff ff 00`).
    pub mask: [u8; 16],
}

/// Index of the egress lockdown flag in the `STATE` array map: non-zero = deny all egress.
pub const STATE_EGRESS_LOCKDOWN: u32 = 0;
/// Number of slots in the `STATE` array map.
pub const STATE_SLOTS: u32 = 4;

const _: () = {
    assert!(core::mem::size_of::<Event>() == 80);
    assert!(core::mem::offset_of!(Event, cgroup_id) == 16);
    assert!(core::mem::offset_of!(Event, addr) == 48);
    assert!(core::mem::size_of::<Config>() == 96);
    assert!(core::mem::size_of::<InodeKey>() == 16);
    assert!(core::mem::size_of::<EgressRule>() == 40);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C) with no implicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::Event {}
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::InodeKey {}
    unsafe impl aya::Pod for super::EgressRule {}
}
