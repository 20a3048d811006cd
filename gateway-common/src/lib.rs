//! Types shared by gatewayd's kernel programs (`gateway-ebpf`) and the daemon (`gatewayd-kernel`).
//!
//! Everything here is `#[repr(C)]` plain data with explicit padding, so the byte layout the
//! eBPF programs write is exactly the one userspace reads. Flags are `u32`, never `bool`.
//! The `user` feature adds `aya::Pod` so userspace can put these types in maps and globals.
#![no_std]
#![warn(missing_docs)]

mod calls;
pub use calls::{
    AT_FDCWD, CALL_PATH_BYTES, CallEvent, EACCES, EBUSY, EROFS, NO_ARG, PathArgs, REGS_ARGS,
    REGS_ORIG_AX, changes_names, path_call,
};

/// Live sessions one host's program set holds at once (capacity of `SESSIONS` and `EGRESS`,
/// and the number of slots of `EVENTS` and `DROPPED`).
pub const MAX_SESSIONS: u32 = 1024;
/// Egress rules one session may have (destinations its agent may reach).
pub const MAX_EGRESS_RULES: u32 = 64;
/// Protected files and directories one session may have.
pub const MAX_PROTECTED: u32 = 4096;
/// Binaries one session's exec allowlist may have.
pub const MAX_EXEC: u32 = 1024;
/// Capacity of the `PROTECTED` hash map: protected inodes of all live sessions together
/// (their protected paths and the inodes of their indexed protected directories).
pub const MAX_PROTECTED_TOTAL: u32 = 131_072;
/// Inodes one session's protected directories may hold to be indexed (every file and
/// directory under them entered in `PROTECTED`). A session whose trees hold more is not
/// indexed: its file checks walk up the dentry parents instead (slower, same verdicts).
pub const MAX_INDEXED: u32 = 16384;
/// Capacity of the host-wide `TREE` hash map: every inode a session protects (its protected
/// paths and indexed inodes), the directories of every indexed protected tree, and the
/// inodes that came into those trees while a session was live.
pub const MAX_TREE_TOTAL: u32 = 131_072;
/// `TREE`'s value for a directory userspace entered while indexing a session's trees.
pub const TREE_INDEXED: u32 = 1;
/// `TREE`'s value for an inode a program marked (it came into an indexed directory).
pub const TREE_MARKED: u32 = 2;
/// `TREE`'s value for an inode a session protects (entered by userspace with its `PROTECTED`
/// entry, unless `TREE` held it already): looked up in `PROTECTED`, not walked from. A mark
/// replaces it.
pub const TREE_PROTECTED: u32 = 3;
/// `EXEC` value of a binary the agent may execute (and map executable).
pub const EXEC_RUN: u32 = 1;
/// `EXEC` value of a library tree or an ELF interpreter: its files may be mapped executable
/// (`mmap`/`mprotect` with `PROT_EXEC`) but not executed.
pub const EXEC_MAP_ONLY: u32 = 2;
/// Capacity of the `EXEC` hash map: exec allowlist entries of all live sessions together.
pub const MAX_EXEC_TOTAL: u32 = 16384;
/// Bytes of each session's event ring buffer (a power of two, a multiple of the page size).
pub const SESSION_EVENTS_BYTES: u32 = 128 * 1024;
/// How many cgroup levels below the root the programs search for gatewayd's parent cgroup.
/// A deeper parent is refused by userspace when the set is created.
pub const MAX_CGROUP_LEVEL: u32 = 32;
/// How many levels below a session's cgroup another session may sit (a nested session).
pub const MAX_SESSION_NESTING: u32 = 8;
/// Unix socket paths and abstract names one session's policy may list (`network.unix`).
pub const MAX_UNIX: u32 = 256;
/// Capacity of the `UNIX_PATHS` and `UNIX_NAMES` hash maps: allowed Unix sockets of all
/// live sessions together.
pub const MAX_UNIX_TOTAL: u32 = 16384;
/// Longest abstract Unix socket name, in bytes (`sun_path` is 108 bytes, the first of which
/// is the NUL that makes the name abstract).
pub const UNIX_NAME_MAX: u32 = 107;
/// Read-only names one session may have (`READ_ONLY_NAMES`: read-only paths that did not
/// exist when it started).
pub const MAX_READ_ONLY_NAMES: u32 = 256;
/// Capacity of `READ_ONLY_NAMES`, shared by all live sessions.
pub const MAX_READ_ONLY_NAMES_TOTAL: u32 = 16384;
/// The longest name (in bytes) `READ_ONLY_NAMES` holds; a longer one is not refused by name.
pub const READ_ONLY_NAME_MAX: u32 = 30;
/// Entries one session may have in `ROOTS`: its readable and writable roots and the mount
/// points under them.
pub const MAX_ROOTS: u32 = 1024;
/// Capacity of the `ROOTS` hash map: root entries of all live sessions together.
pub const MAX_ROOTS_TOTAL: u32 = 16384;
/// A `ROOTS` value bit, and a `SessionInfo::roots` bit: reading (the read side is
/// enforced; the tree may be read).
pub const ROOT_READ: u32 = 1;
/// A `ROOTS` value bit, and a `SessionInfo::roots` bit: writing (the write side is
/// enforced; the tree may be written).
pub const ROOT_WRITE: u32 = 2;
/// A `ROOTS` value bit: the session's `sandbox.protected_names` apply beneath this root
/// (`sandbox.root` and the writable roots).
pub const ROOT_NAMES: u32 = 4;
/// Patterns one session may have in `NAMES` (`sandbox.protected_names`).
pub const MAX_NAME_PATTERNS: u32 = 16;
/// The longest prefix, and the longest suffix, of a name pattern, in bytes.
pub const NAME_PART_MAX: u32 = 32;
/// How many path components `lsm/file_open` walks up from an opened file looking for a
/// protected ancestor. A deeper file is denied ([`Reason::Unresolvable`]): fail closed.
pub const MAX_PATH_DEPTH: u32 = 48;
/// Set in an [`Event`]'s `reason` (or-ed with the [`Reason`]) when the session learns
/// ([`SessionInfo::learn`]) and the operation was allowed and only recorded: the audit
/// record is a `would_deny`.
pub const LEARNED: u32 = 1 << 31;

/// Which program produced an [`Event`] (`Event::kind`). The eBPF programs write
/// `kind as u32`; userspace reads it back with `EventKind::try_from`, which refuses codes it
/// does not know. gatewayd-kernel's program table (`kernel/programs.rs`) maps each kind to its
/// program.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `lsm/file_open`: opening a protected file, or a cgroup file for writing.
    FileOpen = 1,
    /// `cgroup/connect4`: IPv4 `connect()`.
    Connect4 = 2,
    /// `cgroup/connect6`: IPv6 `connect()`.
    Connect6 = 3,
    /// `cgroup/sendmsg4`: unconnected UDP send to an IPv4 destination.
    SendMsg4 = 4,
    /// `cgroup/sendmsg6`: unconnected UDP send to an IPv6 destination.
    SendMsg6 = 5,
    /// `lsm/bpf`: any `bpf()` call.
    Bpf = 6,
    /// `lsm/sb_mount`: any `mount()` (also bind mounts, remounts and `MS_MOVE`).
    Mount = 7,
    /// `lsm/ptrace_access_check`: a ptrace attach, or any ptrace access to gatewayd.
    Ptrace = 8,
    /// `lsm/task_kill`: a signal to gatewayd.
    Kill = 9,
    /// `lsm/bprm_check_security`: executing a file outside the exec allowlist.
    Exec = 10,
    /// `lsm/inode_unlink`: deleting a protected path.
    Unlink = 11,
    /// `lsm/inode_rmdir`: removing a protected directory.
    Rmdir = 12,
    /// `lsm/inode_rename`: renaming a protected path or moving into a protected directory.
    Rename = 13,
    /// `lsm/inode_setattr`: truncate, chmod, chown or utimes of a protected path.
    Setattr = 14,
    /// `lsm/inode_link`: a hard link to a protected inode, or a new link in a protected
    /// directory.
    Link = 15,
    /// `lsm/inode_create`: creating a file in a protected directory.
    Create = 16,
    /// `lsm/inode_mknod`: creating a device node, FIFO or socket in a protected directory.
    Mknod = 17,
    /// `lsm/inode_symlink`: creating a symbolic link in a protected directory.
    Symlink = 18,
    /// `lsm/inode_mkdir`: creating a directory in a protected directory.
    Mkdir = 19,
    /// `lsm/move_mount`: attaching or moving a mount (`move_mount()`).
    MoveMount = 20,
    /// `lsm/sb_umount`: any unmount.
    Umount = 21,
    /// `lsm/d_instantiate`: keeps the index of protected trees current (`TREE`). It never
    /// denies, so no event carries this kind; it names the program in the program table.
    TreeMark = 40,
    /// `lsm/mmap_file`: mapping a file executable that is neither an allowed binary nor
    /// under `sandbox.exec_libs`.
    MmapExec = 22,
    /// `lsm/file_mprotect`: making a file mapping executable, on the same terms.
    MprotectExec = 23,
    /// `lsm/unix_stream_connect`: `connect()` of a stream or seqpacket Unix socket to a
    /// socket outside the session that the policy does not list.
    UnixConnect = 24,
    /// `lsm/unix_may_send`: a datagram sent (or a datagram socket connected) to a Unix
    /// socket outside the session that the policy does not list.
    UnixSend = 25,
    /// `cgroup_skb/ingress`: a connection request (a packet for a listening TCP socket)
    /// from outside the host's loopback addresses.
    Inbound = 26,
    /// `raw_tp/sys_exit`: a path call of the agent failed with `EROFS` or `EBUSY` (a
    /// read-only or pinned bind of the session); recorded, not refused by the program.
    CallRefused = 27,
    /// `cgroup/getpeername4`: shows the agent the original IPv4 peer of a connection the
    /// connect programs sent to the session's egress proxy. It never denies.
    PeerName4 = 41,
    /// `cgroup/getpeername6`: the same for IPv6 sockets. It never denies.
    PeerName6 = 42,
    /// `cgroup/bind4`: marks a TCP socket a session binds as the session's, so that its
    /// connects to that listener on loopback are let through. It never denies.
    Bind4 = 43,
    /// `cgroup/bind6`: the same for IPv6 sockets. It never denies.
    Bind6 = 44,
}

impl EventKind {
    /// Every kind, in code order.
    pub const ALL: [EventKind; 32] = [
        EventKind::FileOpen,
        EventKind::Connect4,
        EventKind::Connect6,
        EventKind::SendMsg4,
        EventKind::SendMsg6,
        EventKind::Bpf,
        EventKind::Mount,
        EventKind::Ptrace,
        EventKind::Kill,
        EventKind::Exec,
        EventKind::Unlink,
        EventKind::Rmdir,
        EventKind::Rename,
        EventKind::Setattr,
        EventKind::Link,
        EventKind::Create,
        EventKind::Mknod,
        EventKind::Symlink,
        EventKind::Mkdir,
        EventKind::MoveMount,
        EventKind::Umount,
        EventKind::TreeMark,
        EventKind::MmapExec,
        EventKind::MprotectExec,
        EventKind::UnixConnect,
        EventKind::UnixSend,
        EventKind::Inbound,
        EventKind::CallRefused,
        EventKind::PeerName4,
        EventKind::PeerName6,
        EventKind::Bind4,
        EventKind::Bind6,
    ];
}

/// A code no variant has; carries the raw value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownCode(pub u32);

impl TryFrom<u32> for EventKind {
    type Error = UnknownCode;
    fn try_from(code: u32) -> Result<Self, UnknownCode> {
        EventKind::ALL
            .into_iter()
            .find(|k| *k as u32 == code)
            .ok_or(UnknownCode(code))
    }
}

/// Why a program denied (`Event::reason`), written as `reason as u32`; userspace reads it
/// back with `Reason::try_from` and records [`Reason::name`] as the audit `reason`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The file is, or lies under, a protected path.
    ProtectedPath = 1,
    /// The destination is not in the policy's egress allowlist.
    EgressNotAllowed = 2,
    /// The session tripped the Rule of Two: all egress is denied.
    EgressLockdown = 3,
    /// The program could not read what it needed to decide (or the path was too deep): deny.
    Unresolvable = 4,
    /// The agent tried to weaken its own confinement: `bpf()`, a change to the mount tree
    /// (`mount()`, `move_mount()`, `umount()`), ptrace, signalling
    /// gatewayd, or writing to a cgroup file (e.g. moving itself out of its cgroup).
    SelfProtection = 5,
    /// The executed file is not in the policy's exec allowlist.
    ExecNotAllowed = 6,
    /// The file is on the session's exec allowlist: the agent may not write, truncate,
    /// replace or delete it.
    ExecListed = 7,
    /// The executed file has no name left (no link: a memfd, an `O_TMPFILE` file, a deleted
    /// file): code that is in no file the policy could name.
    ExecUnlinked = 8,
    /// The Unix socket is outside the session (another cgroup's, not the session's
    /// gatewayd's) and not in the policy's `network.unix` list.
    UnixConnect = 9,
    /// The file lies outside every readable root of the session's policy
    /// (`sandbox.readable` enforced in the kernel).
    OutsideReadable = 10,
    /// The file (or the directory a name is made in) lies outside every writable root of
    /// the session's policy (`sandbox.writable` enforced in the kernel).
    OutsideWritable = 11,
    /// A connection to the agent's listening socket from a source other than a loopback
    /// address: an inbound channel past the egress allowlist.
    InboundNotAllowed = 12,
    /// A signal from the agent to a process outside its session (its caller's process
    /// group through `kill(0)`, say).
    SignalOutside = 13,
    /// The name is a read-only path that did not exist when the session started (a new
    /// `.git/commondir`, an `.envrc`): the agent may not make, link, move in or replace it.
    ReadOnlyName = 14,
    /// The path is read-only in the agent's mount namespace (a read-only path of the
    /// session, bound read-only, or a directory pinned above one): the VFS refused a write
    /// (`EROFS`), a rename or a removal (`EBUSY`) before any LSM hook.
    ReadOnlyPath = 15,
    /// The file's name matches one of the session's `sandbox.protected_names` and it lies
    /// under the session's `root` or a writable root: the agent may not open, make, rename,
    /// link or remove it.
    ProtectedName = 16,
}

impl Reason {
    /// Every reason, in code order.
    pub const ALL: [Reason; 16] = [
        Reason::ProtectedPath,
        Reason::EgressNotAllowed,
        Reason::EgressLockdown,
        Reason::Unresolvable,
        Reason::SelfProtection,
        Reason::ExecNotAllowed,
        Reason::ExecListed,
        Reason::ExecUnlinked,
        Reason::UnixConnect,
        Reason::OutsideReadable,
        Reason::OutsideWritable,
        Reason::InboundNotAllowed,
        Reason::SignalOutside,
        Reason::ReadOnlyName,
        Reason::ReadOnlyPath,
        Reason::ProtectedName,
    ];

    /// Whether a denial for this reason is an attempt on a secret, which counts toward the
    /// session's Rule of Two as a gateway `protected_path` denial does (the policy's
    /// `suspicion`).
    pub const fn is_secret_attempt(self) -> bool {
        matches!(self, Reason::ProtectedPath | Reason::ProtectedName)
    }

    /// Whether a learning session ([`SessionInfo::learn`]) is let through a file refusal for
    /// this reason: outside the roots, or a program outside the exec allowlist. The file
    /// programs send no event for it: gatewayd's fanotify learner (the same at both tiers)
    /// records the access with its path, which a `suggest` needs. Protected paths and
    /// names, read-only names, exec-listed files and gatewayd's own are never learned.
    pub const fn learned_by_fanotify(self) -> bool {
        matches!(
            self,
            Reason::OutsideReadable | Reason::OutsideWritable | Reason::ExecNotAllowed
        )
    }

    /// The audit record's `reason` value.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::ProtectedPath => "protected_path",
            Reason::EgressNotAllowed => "egress_not_allowed",
            Reason::EgressLockdown => "egress_lockdown",
            Reason::Unresolvable => "unresolvable",
            Reason::SelfProtection => "self_protection",
            Reason::ExecNotAllowed => "exec_not_allowed",
            Reason::ExecListed => "exec_listed",
            Reason::ExecUnlinked => "exec_unlinked",
            Reason::UnixConnect => "unix_connect",
            Reason::OutsideReadable => "outside_readable",
            Reason::OutsideWritable => "outside_writable",
            Reason::InboundNotAllowed => "inbound_not_allowed",
            Reason::SignalOutside => "signal_outside_session",
            Reason::ReadOnlyName => "read_only_name",
            Reason::ReadOnlyPath => "read_only_path",
            Reason::ProtectedName => "protected_name",
        }
    }
}

impl TryFrom<u32> for Reason {
    type Error = UnknownCode;
    fn try_from(code: u32) -> Result<Self, UnknownCode> {
        Reason::ALL
            .into_iter()
            .find(|r| *r as u32 == code)
            .ok_or(UnknownCode(code))
    }
}

/// IPv4 address family, as the kernel numbers it.
pub const AF_INET: u32 = 2;
/// IPv6 address family, as the kernel numbers it.
pub const AF_INET6: u32 = 10;
/// Unix socket family, as the kernel numbers it (`Event::dst_family` of Unix socket events).
pub const AF_UNIX: u32 = 1;

/// One kernel decision, sent to userspace through its session's ring buffer (in `EVENTS`). Every field has
/// one meaning; a field a program has nothing for stays 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// [`EventKind`] `as u32`.
    pub kind: u32,
    /// [`Reason`] `as u32`.
    pub reason: u32,
    /// Thread-group id of the denied task (what userspace calls the pid).
    pub pid: u32,
    /// Network events: `AF_INET` / `AF_INET6` of the destination.
    pub dst_family: u32,
    /// cgroup v2 id of the denied task's cgroup.
    pub cgroup_id: u64,
    /// cgroup v2 id of the session's cgroup (the session the denial belongs to; the task may
    /// sit in a sub-cgroup of it).
    pub session_id: u64,
    /// File and exec events: inode number of the file the operation is on. Unix socket
    /// events: the inode of the peer's socket file (a path-named peer; 0 otherwise).
    pub file_ino: u64,
    /// File events denied as `ProtectedPath`: inode number of the protected path that matched
    /// (the file itself or an ancestor directory).
    pub protected_ino: u64,
    /// File and exec events: kernel `dev_t` (`MAJOR << 20 | MINOR`) of the file's superblock.
    pub file_dev: u32,
    /// Network events: destination port, host byte order. Unix socket events: for an
    /// abstract peer, 1 + the length of its name; 0 for any other peer.
    pub dst_port: u32,
    /// Network events: destination address, network byte order (IPv4 in the first 4 bytes).
    /// Unix socket events: the first 16 bytes of an abstract peer's name (after its NUL).
    pub dst_addr: [u8; 16],
    /// `comm` of the denied task.
    pub comm: [u8; 16],
    /// ptrace and signal events: tgid of the task acted on.
    pub target_pid: u32,
    /// Signal events: the signal number.
    pub signal: u32,
}

impl Event {
    /// An event of `kind` for `reason`, every other field 0.
    pub const fn new(kind: EventKind, reason: Reason) -> Event {
        Event {
            kind: kind as u32,
            reason: reason as u32,
            pid: 0,
            dst_family: 0,
            cgroup_id: 0,
            session_id: 0,
            file_ino: 0,
            protected_ino: 0,
            file_dev: 0,
            dst_port: 0,
            dst_addr: [0; 16],
            comm: [0; 16],
            target_pid: 0,
            signal: 0,
        }
    }
}

/// Load-time configuration, written into the `CONFIG` global (.rodata) with
/// `EbpfLoader::override_global` before the programs are loaded.
///
/// Rust eBPF has no CO-RE field relocations, so struct member offsets are read from the
/// running kernel's BTF by userspace and passed in here.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    /// cgroup v2 id of gatewayd's parent cgroup, under which every session's cgroup sits.
    pub parent_cgroup_id: u64,
    /// offsetof(struct file, `f_path`) + offsetof(struct path, dentry)
    pub off_file_dentry: u64,
    /// offsetof(struct dentry, `d_parent`)
    pub off_dentry_parent: u64,
    /// offsetof(struct dentry, `d_inode`)
    pub off_dentry_inode: u64,
    /// offsetof(struct inode, `i_ino`)
    pub off_inode_ino: u64,
    /// offsetof(struct inode, `i_sb`)
    pub off_inode_sb: u64,
    /// offsetof(struct `super_block`, `s_dev`)
    pub off_sb_dev: u64,
    /// offsetof(struct `super_block`, `s_magic`)
    pub off_sb_magic: u64,
    /// offsetof(struct file, `f_mode`)
    pub off_file_mode: u64,
    /// offsetof(struct `task_struct`, tgid)
    pub off_task_tgid: u64,
    /// offsetof(struct `linux_binprm`, file)
    pub off_bprm_file: u64,
    /// offsetof(struct inode, `i_mode`)
    pub off_inode_mode: u64,
    /// offsetof(struct dentry, `d_flags`)
    pub off_dentry_flags: u64,
    /// offsetof(struct inode, `i_nlink`)
    pub off_inode_nlink: u64,
    /// offsetof(struct `vm_area_struct`, `vm_file`)
    pub off_vma_file: u64,
    /// offsetof(struct sock, `sk_cgrp_data`) + offsetof(struct `sock_cgroup_data`, cgroup)
    pub off_sock_cgroup: u64,
    /// offsetof(struct sock, `sk_peer_pid`)
    pub off_sock_peer_pid: u64,
    /// offsetof(struct socket, sk)
    pub off_socket_sk: u64,
    /// offsetof(struct cgroup, level)
    pub off_cgroup_level: u64,
    /// offsetof(struct cgroup, ancestors)
    pub off_cgroup_ancestors: u64,
    /// offsetof(struct cgroup, kn)
    pub off_cgroup_kn: u64,
    /// offsetof(struct `kernfs_node`, id)
    pub off_kn_id: u64,
    /// offsetof(struct pid, numbers) + offsetof(struct upid, nr): the pid in the initial
    /// namespace
    pub off_pid_nr: u64,
    /// offsetof(struct `unix_sock`, path) + offsetof(struct path, dentry)
    pub off_unix_dentry: u64,
    /// offsetof(struct `unix_sock`, addr)
    pub off_unix_addr: u64,
    /// offsetof(struct `unix_address`, len)
    pub off_unix_addr_len: u64,
    /// offsetof(struct `unix_address`, name) + offsetof(struct `sockaddr_un`, `sun_path`)
    pub off_unix_addr_path: u64,
    /// offsetof(struct file, `f_flags`)
    pub off_file_flags: u64,
    /// offsetof(struct file, `f_inode`)
    pub off_file_inode: u64,
    /// offsetof(struct `task_struct`, cgroups): the task's `css_set`
    pub off_task_cgroups: u64,
    /// offsetof(struct `css_set`, `dfl_cgrp`): the task's cgroup v2 cgroup
    pub off_css_set_dfl_cgrp: u64,
    /// offsetof(struct dentry, `d_name`) + offsetof(struct qstr, name): the name's bytes
    pub off_dentry_name: u64,
}

/// A file or directory by identity, not by name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InodeKey {
    /// Kernel `dev_t` of the superblock (`MAJOR << 20 | MINOR`), not userspace `st_dev`.
    pub dev: u64,
    /// Inode number on that superblock.
    pub ino: u64,
}

/// Key of the `PROTECTED` and `EXEC` maps: one session's entry for one inode.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SessionInode {
    /// The session's cgroup id.
    pub session: u64,
    /// Device of the inode's superblock, in the kernel's `dev_t` encoding.
    pub dev: u64,
    /// Inode number on that superblock.
    pub ino: u64,
}

/// Key of the `UNIX_NAMES` map: one session's entry for an abstract Unix socket name.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnixName {
    /// The session's cgroup id.
    pub session: u64,
    /// Length of the name in bytes (at most [`UNIX_NAME_MAX`]; it may contain NULs).
    pub len: u32,
    /// Always 0 (explicit padding: the key is hashed byte for byte).
    pub pad: u32,
    /// The name without its leading NUL; every byte from `len` on is 0.
    pub name: [u8; 112],
}

impl UnixName {
    /// The key of `session` for the abstract name `name` (without its leading NUL); `None`
    /// when it is longer than [`UNIX_NAME_MAX`].
    pub fn new(session: u64, name: &[u8]) -> Option<UnixName> {
        if name.len() > UNIX_NAME_MAX as usize {
            return None;
        }
        let mut key = UnixName {
            session,
            len: name.len() as u32,
            pad: 0,
            name: [0; 112],
        };
        key.name[..name.len()].copy_from_slice(name);
        Some(key)
    }
}

/// Key of the `READ_ONLY_NAMES` map: one session's name in one directory.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DirName {
    /// The session's cgroup id.
    pub session: u64,
    /// Kernel `dev_t` of the directory's superblock.
    pub dev: u64,
    /// The directory's inode number.
    pub ino: u64,
    /// The name, at most [`READ_ONLY_NAME_MAX`] bytes, every byte after it 0.
    pub name: [u8; 32],
}

impl DirName {
    /// The key of `session` for `name` in the directory (`dev`, `ino`); `None` when the name
    /// is empty, holds a NUL or a `/`, or is longer than [`READ_ONLY_NAME_MAX`].
    pub fn new(session: u64, dev: u64, ino: u64, name: &[u8]) -> Option<DirName> {
        if name.is_empty()
            || name.len() > READ_ONLY_NAME_MAX as usize
            || name.iter().any(|&b| b == 0 || b == b'/')
        {
            return None;
        }
        let mut key = DirName {
            session,
            dev,
            ino,
            name: [0; 32],
        };
        key.name[..name.len()].copy_from_slice(name);
        Some(key)
    }
}

/// Value of the `SESSIONS` map, keyed by the session's cgroup id: the session's switches.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// tgid of the gatewayd process that owns the session: its agent may not signal or
    /// ptrace it.
    pub owner_tgid: u32,
    /// 1 when `EXEC` is an allowlist for this session (its policy lists binaries).
    pub exec_enforced: u32,
    /// Number of sessions nested below this one (in sub-cgroups of its cgroup). Non-zero
    /// makes the programs look for the innermost session of a task.
    pub nested: u32,
    /// The session's slot in `EVENTS` (its ring buffer) and `DROPPED` (its drop counter),
    /// below [`MAX_SESSIONS`]; unique among live sessions.
    pub slot: u32,
    /// 1 when the session's protected directories are not indexed (they hold more than
    /// [`MAX_INDEXED`] inodes, or `PROTECTED` had no room): its file checks walk up the
    /// dentry parents of every file.
    pub file_walk: u32,
    /// Which sides of the session's file roots are enforced (`ROOTS`): [`ROOT_READ`]
    /// (`sandbox.readable` is listed), [`ROOT_WRITE`] (`sandbox.writable` is listed); 0:
    /// the kernel does not restrict by roots.
    pub roots: u32,
    /// How many `sandbox.protected_names` patterns the session has in `NAMES`; 0: none.
    pub names: u32,
    /// 1 when the session learns (`gatewayd run --learn`): a destination outside the egress
    /// allowlist is allowed and recorded ([`LEARNED`]); the lockdown and the cloud's
    /// metadata services stay denied. At tier 1 the file programs also let through what
    /// [`Reason::learned_by_fanotify`] names, without an event: gatewayd's fanotify learner
    /// records each of those with its path.
    pub learn: u32,
}

impl SessionInfo {
    /// Whether `file_open` must find this session for every open (`EVERY_OPEN`): it
    /// enforces roots, protects names, or walks.
    pub const fn needs_every_open(&self) -> bool {
        self.roots != 0 || self.file_walk != 0 || self.names != 0
    }
}

/// One `sandbox.protected_names` pattern, laid out for word-wise comparison in the kernel:
/// a name's first [`NAME_PART_MAX`] bytes (`head`) and its last ones, right-aligned
/// (`tail`), each as four little-endian words ([`NamePattern::matches`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamePattern {
    /// The prefix's bytes from the name's first byte on; 0 beyond it.
    pub prefix: [u64; 4],
    /// 0xff over the prefix's bytes.
    pub prefix_mask: [u64; 4],
    /// The suffix's bytes, ending at the tail's last byte; 0 before it.
    pub suffix: [u64; 4],
    /// 0xff over the suffix's bytes.
    pub suffix_mask: [u64; 4],
    /// The shortest matching name: the prefix's length plus the suffix's.
    pub min_len: u32,
    /// Non-zero for a pattern without `*`: the only length that matches.
    pub exact_len: u32,
}

impl NamePattern {
    /// A pattern of `prefix`, then any bytes (with `wildcard`), then `suffix`; `None` when a
    /// part is longer than [`NAME_PART_MAX`], or a pattern without `*` has a suffix.
    pub fn new(prefix: &[u8], suffix: &[u8], wildcard: bool) -> Option<NamePattern> {
        let max = NAME_PART_MAX as usize;
        if prefix.len() > max || suffix.len() > max || (!wildcard && !suffix.is_empty()) {
            return None;
        }
        let mut p = NamePattern {
            min_len: (prefix.len() + suffix.len()) as u32,
            exact_len: if wildcard { 0 } else { prefix.len() as u32 },
            ..NamePattern::default()
        };
        for (i, b) in prefix.iter().enumerate() {
            p.prefix[i / 8] |= u64::from(*b) << ((i % 8) * 8);
            p.prefix_mask[i / 8] |= 0xff << ((i % 8) * 8);
        }
        let start = max - suffix.len();
        for (j, b) in suffix.iter().enumerate() {
            let i = start + j;
            p.suffix[i / 8] |= u64::from(*b) << ((i % 8) * 8);
            p.suffix_mask[i / 8] |= 0xff << ((i % 8) * 8);
        }
        Some(p)
    }

    /// Whether a name of `len` bytes matches, given its `head` (first bytes, whatever
    /// follows a shorter name) and `tail` (last bytes, right-aligned; whatever precedes a
    /// shorter name): a few word operations, the same in the kernel and in userspace.
    // Inlined into the eBPF file programs, as their own helpers are.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    pub fn matches(&self, head: &[u64; 4], tail: &[u64; 4], len: u32) -> bool {
        if len < self.min_len || (self.exact_len != 0 && len != self.exact_len) {
            return false;
        }
        let mut diff = 0;
        for i in 0..4 {
            diff |= (head[i] ^ self.prefix[i]) & self.prefix_mask[i];
            diff |= (tail[i] ^ self.suffix[i]) & self.suffix_mask[i];
        }
        diff == 0
    }
}

/// Value of the `NAMES` map, keyed by the session's cgroup id: its protected-name patterns.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamePatterns {
    /// Patterns in use, from `patterns[0]`.
    pub count: u32,
    /// Padding (0).
    pub pad: u32,
    /// The patterns (the first `count` are in use).
    pub patterns: [NamePattern; MAX_NAME_PATTERNS as usize],
}

/// The tail of a name shorter than [`NAME_PART_MAX`] bytes, from its head: the first `len`
/// bytes moved to the end of the 32, as a shift of the 256-bit little-endian number left by
/// `32 - len` bytes (what lies past the name in `head` is shifted out). Constant indices and
/// shifts only, for the eBPF verifier (no variable offset into the stack).
#[allow(clippy::inline_always)]
#[inline(always)]
pub fn right_aligned(head: &[u64; 4], len: u32) -> [u64; 4] {
    let bits = NAME_PART_MAX.saturating_sub(len) * 8;
    let [a, b, c, d] = *head;
    let y = match bits / 64 {
        0 => [a, b, c, d],
        1 => [0, a, b, c],
        2 => [0, 0, a, b],
        3 => [0, 0, 0, a],
        _ => [0, 0, 0, 0],
    };
    let s = bits % 64;
    if s == 0 {
        return y;
    }
    [
        y[0] << s,
        (y[1] << s) | (y[0] >> (64 - s)),
        (y[2] << s) | (y[1] >> (64 - s)),
        (y[3] << s) | (y[2] >> (64 - s)),
    ]
}

/// A name's head and tail words, as the kernel builds them ([`NamePattern::matches`]): the
/// head is its first 32 bytes (whatever follows a shorter name stays there, as in the
/// kernel's read), the tail its last 32, or [`right_aligned`] for a shorter name.
pub fn name_words(name: &[u8]) -> ([u64; 4], [u64; 4], u32) {
    let max = NAME_PART_MAX as usize;
    let mut head = [0xAAu8; 32];
    let n = name.len().min(max);
    head[..n].copy_from_slice(&name[..n]);
    let words = |b: &[u8]| {
        let mut w = [0u64; 4];
        for (i, c) in b.chunks_exact(8).enumerate() {
            let mut x = [0u8; 8];
            x.copy_from_slice(c);
            w[i] = u64::from_le_bytes(x);
        }
        w
    };
    let head_words = words(&head);
    let tail = if name.len() >= max {
        words(&name[name.len() - max..])
    } else {
        right_aligned(&head_words, name.len() as u32)
    };
    (head_words, tail, name.len() as u32)
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

/// Value of the `EGRESS` map, keyed by the session's cgroup id: the session's allowlist.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EgressPolicy {
    /// Non-zero: deny all egress (the Rule-of-Two lockdown switch).
    pub lockdown: u32,
    /// Rules in use, from `rules[0]`.
    pub count: u32,
    /// The allowlist: destinations this session may reach (the first `count` are in use).
    pub rules: [EgressRule; MAX_EGRESS_RULES as usize],
}

impl EgressPolicy {
    /// No rule, no lockdown: every destination is denied.
    pub const EMPTY: EgressPolicy = EgressPolicy {
        lockdown: 0,
        count: 0,
        rules: [EgressRule {
            family: 0,
            port: 0,
            addr: [0; 16],
            mask: [0; 16],
        }; MAX_EGRESS_RULES as usize],
    };
}

/// Value of the `PROXY` map, keyed by the session's cgroup id: the loopback ports of the
/// session's egress proxy (host byte order; 0: none). With an entry, the connect programs send
/// the agent's TCP connects that no address rule allows to `tcp`, and all of its port-53
/// traffic (UDP and TCP, listed resolvers included) to `dns`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyPorts {
    /// The proxy's TCP port on `127.0.0.1` and `::1`.
    pub tcp: u32,
    /// The session resolver's port (UDP and TCP) on `127.0.0.1` and `::1`.
    pub dns: u32,
}

/// Value of the `ORIGINAL` map, keyed by socket cookie: where the agent's socket meant to go
/// before a connect program sent it to the session's proxy or resolver.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OriginalDst {
    /// The session (cgroup id) whose agent made the socket.
    pub session: u64,
    /// `AF_INET` (an IPv4-mapped IPv6 destination included) or `AF_INET6`.
    pub family: u32,
    /// Destination port (host byte order).
    pub port: u32,
    /// Destination address, network byte order, in the layout of `EgressRule::addr`.
    pub addr: [u8; 16],
}

/// Capacity of `ORIGINAL` (least recently used entries go first), shared by every session.
pub const MAX_REDIRECTED: u32 = 65536;

const _: () = {
    assert!(core::mem::size_of::<ProxyPorts>() == 8);
    assert!(core::mem::size_of::<OriginalDst>() == 32);
    assert!(core::mem::size_of::<Event>() == 96);
    assert!(core::mem::offset_of!(Event, cgroup_id) == 16);
    assert!(core::mem::offset_of!(Event, session_id) == 24);
    assert!(core::mem::offset_of!(Event, dst_addr) == 56);
    assert!(core::mem::offset_of!(Event, comm) == 72);
    assert!(core::mem::offset_of!(Event, target_pid) == 88);
    assert!(core::mem::offset_of!(Event, signal) == 92);
    assert!(core::mem::size_of::<Config>() == 256);
    assert!(core::mem::offset_of!(Config, off_dentry_name) == 248);
    assert!(core::mem::size_of::<DirName>() == 56);
    assert!(core::mem::offset_of!(Config, off_file_flags) == 216);
    assert!(core::mem::offset_of!(Config, off_file_inode) == 224);
    assert!(core::mem::offset_of!(Config, off_css_set_dfl_cgrp) == 240);
    assert!(core::mem::size_of::<UnixName>() == 128);
    assert!(core::mem::offset_of!(Config, off_file_dentry) == 8);
    assert!(core::mem::size_of::<InodeKey>() == 16);
    assert!(core::mem::size_of::<SessionInode>() == 24);
    assert!(core::mem::size_of::<SessionInfo>() == 32);
    assert!(core::mem::size_of::<NamePattern>() == 136);
    assert!(core::mem::size_of::<NamePatterns>() == 8 + 136 * MAX_NAME_PATTERNS as usize);
    assert!(core::mem::offset_of!(SessionInfo, file_walk) == 16);
    assert!(core::mem::offset_of!(SessionInfo, roots) == 20);
    assert!(core::mem::size_of::<EgressRule>() == 40);
    assert!(core::mem::size_of::<EgressPolicy>() == 8 + 40 * MAX_EGRESS_RULES as usize);
    assert!(SESSION_EVENTS_BYTES.is_power_of_two() && SESSION_EVENTS_BYTES.is_multiple_of(4096));
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C) with no implicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::Event {}
    unsafe impl aya::Pod for super::Config {}
    unsafe impl aya::Pod for super::InodeKey {}
    unsafe impl aya::Pod for super::SessionInode {}
    unsafe impl aya::Pod for super::UnixName {}
    unsafe impl aya::Pod for super::DirName {}
    unsafe impl aya::Pod for super::SessionInfo {}
    unsafe impl aya::Pod for super::NamePatterns {}
    unsafe impl aya::Pod for super::EgressRule {}
    unsafe impl aya::Pod for super::EgressPolicy {}
    unsafe impl aya::Pod for super::ProxyPorts {}
    unsafe impl aya::Pod for super::OriginalDst {}
}
