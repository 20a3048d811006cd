//! The one table of gatewayd's kernel programs. Everything else is derived from it: the
//! loader attaches [`PROGRAMS`] in order, the event describer names and explains a denial by
//! its [`EventKind`], `doctor` lists one row per entry, and docs/KERNEL.md's program table
//! mirrors it (a test compares the two, and another compares it with the programs in the
//! eBPF object).
//!
//! Adding a kernel hook: write the program in gateway-ebpf, give it an [`EventKind`] in
//! gateway-common, add its entry here, and paste the row the KERNEL.md test prints.
use gateway_common::{EventKind, Reason};

/// How a program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// A BPF LSM hook, attached globally; the program acts only inside the agent's cgroup.
    /// The object may carry one program per parameter count the hook has had across kernels
    /// (its "earlier verdict" argument comes right after the parameters, at a constant
    /// offset): the loader picks the one matching this kernel's BTF.
    Lsm {
        /// The LSM hook's name, e.g. `file_open` (BTF function `bpf_lsm_file_open`).
        hook: &'static str,
        /// (parameter count, program name in the object)
        by_params: &'static [(u32, &'static str)],
    },
    /// A cgroup `sock_addr` program (its attach type comes from its section), attached to
    /// gatewayd's parent cgroup without `BPF_F_ALLOW_OVERRIDE`.
    SockAddr {
        /// The program's name in the object.
        object: &'static str,
    },
    /// A `cgroup_skb` ingress program, attached to gatewayd's parent cgroup without
    /// `BPF_F_ALLOW_OVERRIDE`: it sees the packets delivered to the sockets of every cgroup
    /// below it.
    SkbIngress {
        /// The program's name in the object.
        object: &'static str,
    },
    /// A raw tracepoint, attached globally; the program acts only inside the agent's cgroup.
    /// It records and refuses nothing, so the tier does not depend on it. `x86_64` only (it
    /// reads `x86_64`'s system call registers).
    RawTracepoint {
        /// The program's name in the object.
        object: &'static str,
        /// The tracepoint, e.g. `sys_exit`.
        tracepoint: &'static str,
    },
}

/// What a denial's audit `detail` carries beyond `pid`, `comm` and `cgroup_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `ino`, `dev`, and for `protected_path` the protected inode and its path.
    File,
    /// `ino` and `dev` of the executed file.
    Exec,
    /// Nothing more.
    Nothing,
    /// `target_pid`.
    Target,
    /// `target_pid` and `signal`.
    Signal,
    /// `addr` and `port` of the destination.
    Destination,
    /// `from`, the source address of a connection request, and `port`, the agent's
    /// listening port it was for.
    Inbound,
    /// The Unix socket peer: `peer` (`path`, `abstract` or `unnamed`), the socket file's
    /// `ino` and `dev` (and its `path` when the policy lists it), or the abstract `name`.
    UnixPeer,
    /// The refused call: `syscall`, `errno`, and the `path` (and `path2`) it named, as the
    /// agent passed them.
    Call,
}

/// One kernel program as gatewayd knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    /// Name in audit records (`hook`), `doctor` and the `session_start` record.
    pub name: &'static str,
    /// How it is attached.
    pub attach: Attach,
    /// The kind its events carry (one program per kind).
    pub event: EventKind,
    /// What a denial's audit `detail` carries.
    pub payload: Payload,
    /// What it denies inside the agent's cgroup, in one line (`doctor`, KERNEL.md).
    pub enforces: &'static str,
    /// Every reason it denies with, and the message the audit record gives the model.
    pub messages: &'static [(Reason, &'static str)],
}

const UNRESOLVABLE: (Reason, &str) = (
    Reason::Unresolvable,
    "the kernel could not resolve this file's path within its depth limit, so the operation is denied",
);
const CHANGE_PROTECTED: (Reason, &str) = (
    Reason::ProtectedPath,
    "deleting, renaming, replacing or changing a protected path (or anything under a protected directory) is denied by the kernel",
);
const CREATE_PROTECTED: (Reason, &str) = (
    Reason::ProtectedPath,
    "creating or linking anything inside a protected directory, and hard-linking a protected path, is denied by the kernel",
);
const OUTSIDE_WRITABLE: (Reason, &str) = (
    Reason::OutsideWritable,
    "this path is outside the policy's writable roots (sandbox.writable): changing, creating or deleting it is denied by the kernel",
);
const READ_ONLY_NAME: (Reason, &str) = (
    Reason::ReadOnlyName,
    "this name is a read-only path that did not exist when the session started (git's config or hooks, an .envrc, an editor's task file): the agent may not make it, so the user's own tools will not run it later",
);
const PROTECTED_NAME: (Reason, &str) = (
    Reason::ProtectedName,
    "this file's name is one of the policy's sandbox.protected_names (a secret by its name, such as .env or a key): under the session's root and writable roots the kernel denies opening, making, renaming, linking or removing it; ask the user for what you need from it",
);
const EXEC_LISTED: (Reason, &str) = (
    Reason::ExecListed,
    "this file is on the policy's exec allowlist: writing, truncating, replacing or deleting it is denied by the kernel",
);
const MAP_NOT_ALLOWED: (Reason, &str) = (
    Reason::ExecNotAllowed,
    "mapping this file as executable code is denied: it is neither an allowed binary nor under the policy's library trees (sandbox.exec_libs)",
);
const MAP_UNRESOLVABLE: (Reason, &str) = (
    Reason::Unresolvable,
    "the kernel could not identify the file being mapped executable, so the mapping is denied",
);
const MOUNT: (Reason, &str) = (
    Reason::SelfProtection,
    "mounting, moving a mount and unmounting are denied inside the agent's cgroup",
);
const NOT_ALLOWED: (Reason, &str) = (
    Reason::EgressNotAllowed,
    "this destination is not in the policy's egress allowlist",
);
const LOCKDOWN: (Reason, &str) = (
    Reason::EgressLockdown,
    "all egress is denied: this session tripped the Rule of Two",
);
const EGRESS: &[(Reason, &str)] = &[NOT_ALLOWED, LOCKDOWN];
const UNIX: &[(Reason, &str)] = &[
    (
        Reason::UnixConnect,
        "this Unix socket is outside the agent's session and not in the policy's network.unix list; use the gateway's socket ($GATEWAYD_SOCKET)",
    ),
    (
        Reason::Unresolvable,
        "the kernel could not identify this Unix socket's peer, so the connection is denied",
    ),
];

/// Every program, in the order the loader attaches them (BPF LSM first).
pub static PROGRAMS: [Program; 32] = [
    Program {
        name: "lsm/file_open",
        attach: Attach::Lsm {
            hook: "file_open",
            by_params: &[(1, "file_open")],
        },
        event: EventKind::FileOpen,
        payload: Payload::File,
        enforces: "open() of a protected file or of anything under a protected directory; opening an exec-listed file or any cgroup file for writing (the agent may not leave its cgroup); with sandbox.readable listed, opening for reading outside the readable roots (not for execution); with sandbox.writable listed, opening for writing outside the writable roots; opening a file named by sandbox.protected_names under root or a writable root",
        messages: &[
            (
                Reason::ProtectedPath,
                "opening a protected file (or a file under a protected directory) is denied by the kernel",
            ),
            (
                Reason::ExecListed,
                "this file is on the policy's exec allowlist: opening it for writing is denied by the kernel",
            ),
            (
                Reason::SelfProtection,
                "writing to cgroup files is denied: the agent may not leave or reconfigure its cgroup",
            ),
            (
                Reason::OutsideReadable,
                "this file is outside the policy's readable roots (sandbox.readable): reading it is denied by the kernel",
            ),
            (
                Reason::OutsideWritable,
                "this file is outside the policy's writable roots (sandbox.writable): opening it for writing is denied by the kernel",
            ),
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_unlink",
        attach: Attach::Lsm {
            hook: "inode_unlink",
            by_params: &[(2, "inode_unlink")],
        },
        event: EventKind::Unlink,
        payload: Payload::File,
        enforces: "deleting a protected file, anything under a protected directory, or an exec-listed file; with sandbox.writable listed, deleting outside the writable roots; deleting a file named by sandbox.protected_names under root or a writable root",
        messages: &[
            CHANGE_PROTECTED,
            EXEC_LISTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_rmdir",
        attach: Attach::Lsm {
            hook: "inode_rmdir",
            by_params: &[(2, "inode_rmdir")],
        },
        event: EventKind::Rmdir,
        payload: Payload::File,
        enforces: "removing a protected directory or one under a protected directory; with sandbox.writable listed, one outside the writable roots; removing a directory named by sandbox.protected_names under root or a writable root",
        messages: &[
            CHANGE_PROTECTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_rename",
        attach: Attach::Lsm {
            hook: "inode_rename",
            by_params: &[(4, "inode_rename")],
        },
        event: EventKind::Rename,
        payload: Payload::File,
        enforces: "renaming a protected path, replacing one, or moving anything into a protected directory; renaming or replacing an exec-listed file; with sandbox.writable listed, either side outside the writable roots; making a read-only path that did not exist when the session started; renaming to or from a name of sandbox.protected_names under root or a writable root",
        messages: &[
            CHANGE_PROTECTED,
            EXEC_LISTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_setattr",
        attach: Attach::Lsm {
            hook: "inode_setattr",
            by_params: &[(2, "inode_setattr2"), (3, "inode_setattr3")],
        },
        event: EventKind::Setattr,
        payload: Payload::File,
        enforces: "truncate, chmod, chown and utimes of a protected path or anything under it, or of an exec-listed file; with sandbox.writable listed, of anything outside the writable roots; of a file named by sandbox.protected_names under root or a writable root",
        messages: &[
            CHANGE_PROTECTED,
            EXEC_LISTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_link",
        attach: Attach::Lsm {
            hook: "inode_link",
            by_params: &[(3, "inode_link")],
        },
        event: EventKind::Link,
        payload: Payload::File,
        enforces: "a hard link to a protected path or to anything under a protected directory, and a new link inside a protected directory or, with sandbox.writable listed, outside the writable roots; making a read-only path that did not exist when the session started; a hard link from or to a name of sandbox.protected_names under root or a writable root",
        messages: &[
            CREATE_PROTECTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_create",
        attach: Attach::Lsm {
            hook: "inode_create",
            by_params: &[(3, "inode_create")],
        },
        event: EventKind::Create,
        payload: Payload::File,
        enforces: "creating a file inside a protected directory or, with sandbox.writable listed, outside the writable roots; making a read-only path that did not exist when the session started; making a name of sandbox.protected_names under root or a writable root",
        messages: &[
            CREATE_PROTECTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_mknod",
        attach: Attach::Lsm {
            hook: "inode_mknod",
            by_params: &[(4, "inode_mknod")],
        },
        event: EventKind::Mknod,
        payload: Payload::File,
        enforces: "creating a FIFO, socket or device node inside a protected directory or, with sandbox.writable listed, outside the writable roots; making a read-only path that did not exist when the session started; making a name of sandbox.protected_names under root or a writable root",
        messages: &[
            CREATE_PROTECTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_symlink",
        attach: Attach::Lsm {
            hook: "inode_symlink",
            by_params: &[(3, "inode_symlink")],
        },
        event: EventKind::Symlink,
        payload: Payload::File,
        enforces: "creating a symbolic link inside a protected directory or, with sandbox.writable listed, outside the writable roots; making a read-only path that did not exist when the session started; making a name of sandbox.protected_names under root or a writable root",
        messages: &[
            CREATE_PROTECTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/inode_mkdir",
        attach: Attach::Lsm {
            hook: "inode_mkdir",
            by_params: &[(3, "inode_mkdir")],
        },
        event: EventKind::Mkdir,
        payload: Payload::File,
        enforces: "creating a directory inside a protected directory or, with sandbox.writable listed, outside the writable roots; making a read-only path that did not exist when the session started; making a name of sandbox.protected_names under root or a writable root",
        messages: &[
            CREATE_PROTECTED,
            OUTSIDE_WRITABLE,
            READ_ONLY_NAME,
            PROTECTED_NAME,
            UNRESOLVABLE,
        ],
    },
    Program {
        name: "lsm/d_instantiate",
        attach: Attach::Lsm {
            hook: "d_instantiate",
            by_params: &[(2, "d_instantiate")],
        },
        event: EventKind::TreeMark,
        payload: Payload::Nothing,
        enforces: "nothing; for every process, marks each inode that comes into an indexed protected directory (created, linked, looked up), so the file programs know it",
        messages: &[],
    },
    Program {
        name: "lsm/bprm_check_security",
        attach: Attach::Lsm {
            hook: "bprm_check_security",
            by_params: &[(1, "bprm_check_security")],
        },
        event: EventKind::Exec,
        payload: Payload::Exec,
        enforces: "executing a file with no link (a memfd, a deleted file); with sandbox.exec listed, executing anything else (matched by inode; a script and its interpreter are checked separately)",
        messages: &[
            (
                Reason::ExecNotAllowed,
                "executing this file is denied: it is not in the policy's exec allowlist",
            ),
            (
                Reason::ExecUnlinked,
                "executing a file that has no name (a memfd, a deleted or O_TMPFILE file) is denied by the kernel",
            ),
            (
                Reason::Unresolvable,
                "the kernel could not identify the executed file, so the exec is denied",
            ),
        ],
    },
    Program {
        name: "lsm/mmap_file",
        attach: Attach::Lsm {
            hook: "mmap_file",
            by_params: &[(4, "mmap_file")],
        },
        event: EventKind::MmapExec,
        payload: Payload::Exec,
        enforces: "with sandbox.exec listed, mapping a file executable unless it is a listed binary, under sandbox.exec_libs or a listed binary's ELF interpreter (so ld.so and LD_PRELOAD cannot load an unlisted binary)",
        messages: &[MAP_NOT_ALLOWED, MAP_UNRESOLVABLE],
    },
    Program {
        name: "lsm/file_mprotect",
        attach: Attach::Lsm {
            hook: "file_mprotect",
            by_params: &[(3, "file_mprotect")],
        },
        event: EventKind::MprotectExec,
        payload: Payload::Exec,
        enforces: "with sandbox.exec listed, making a file mapping executable on the same terms as lsm/mmap_file",
        messages: &[MAP_NOT_ALLOWED, MAP_UNRESOLVABLE],
    },
    Program {
        name: "lsm/bpf",
        attach: Attach::Lsm {
            hook: "bpf",
            by_params: &[(3, "bpf3"), (4, "bpf4")],
        },
        event: EventKind::Bpf,
        payload: Payload::Nothing,
        enforces: "every bpf() call",
        messages: &[(
            Reason::SelfProtection,
            "bpf() is denied inside the agent's cgroup: the agent may not touch the kernel layer",
        )],
    },
    Program {
        name: "lsm/sb_mount",
        attach: Attach::Lsm {
            hook: "sb_mount",
            by_params: &[(5, "sb_mount")],
        },
        event: EventKind::Mount,
        payload: Payload::Nothing,
        enforces: "every mount() (also remounts, bind mounts, MS_MOVE and propagation changes)",
        messages: &[MOUNT],
    },
    Program {
        name: "lsm/move_mount",
        attach: Attach::Lsm {
            hook: "move_mount",
            by_params: &[(2, "move_mount")],
        },
        event: EventKind::MoveMount,
        payload: Payload::Nothing,
        enforces: "every move_mount(): attaching a mount made by fsmount() or cloned by open_tree(), or moving one",
        messages: &[MOUNT],
    },
    Program {
        name: "lsm/sb_umount",
        attach: Attach::Lsm {
            hook: "sb_umount",
            by_params: &[(2, "sb_umount")],
        },
        event: EventKind::Umount,
        payload: Payload::Nothing,
        enforces: "every umount()",
        messages: &[MOUNT],
    },
    Program {
        name: "lsm/ptrace_access_check",
        attach: Attach::Lsm {
            hook: "ptrace_access_check",
            by_params: &[(2, "ptrace_access_check")],
        },
        event: EventKind::Ptrace,
        payload: Payload::Target,
        enforces: "every ptrace attach (also process_vm_writev, /proc/PID/mem), and any ptrace access to gatewayd",
        messages: &[(
            Reason::SelfProtection,
            "ptrace attach, and any ptrace access to gatewayd, is denied inside the agent's cgroup",
        )],
    },
    Program {
        name: "lsm/task_kill",
        attach: Attach::Lsm {
            hook: "task_kill",
            by_params: &[(4, "task_kill")],
        },
        event: EventKind::Kill,
        payload: Payload::Signal,
        enforces: "signals to gatewayd, and to any process outside the session",
        messages: &[
            (Reason::SelfProtection, "the agent may not signal gatewayd"),
            (
                Reason::SignalOutside,
                "the agent may not signal a process outside its session",
            ),
        ],
    },
    Program {
        name: "lsm/unix_stream_connect",
        attach: Attach::Lsm {
            hook: "unix_stream_connect",
            by_params: &[(3, "unix_stream_connect")],
        },
        event: EventKind::UnixConnect,
        payload: Payload::UnixPeer,
        enforces: "connect() of a stream or seqpacket Unix socket to a socket outside the session (not made in its cgroup, not its gatewayd's) that network.unix does not list, by path or abstract name",
        messages: UNIX,
    },
    Program {
        name: "lsm/unix_may_send",
        attach: Attach::Lsm {
            hook: "unix_may_send",
            by_params: &[(2, "unix_may_send")],
        },
        event: EventKind::UnixSend,
        payload: Payload::UnixPeer,
        enforces: "sending a datagram (or connecting a datagram socket) to a Unix socket outside the session that network.unix does not list",
        messages: UNIX,
    },
    Program {
        name: "cgroup/connect4",
        attach: Attach::SockAddr { object: "connect4" },
        event: EventKind::Connect4,
        payload: Payload::Destination,
        enforces: "IPv4 connect() outside the egress allowlist; all of it in lockdown",
        messages: EGRESS,
    },
    Program {
        name: "cgroup/connect6",
        attach: Attach::SockAddr { object: "connect6" },
        event: EventKind::Connect6,
        payload: Payload::Destination,
        enforces: "IPv6 connect() outside the egress allowlist (an IPv4-mapped address is judged as IPv4); all of it in lockdown",
        messages: EGRESS,
    },
    Program {
        name: "cgroup/sendmsg4",
        attach: Attach::SockAddr { object: "sendmsg4" },
        event: EventKind::SendMsg4,
        payload: Payload::Destination,
        enforces: "unconnected UDP sendto()/sendmsg() to IPv4 destinations outside the egress allowlist; all of it in lockdown",
        messages: EGRESS,
    },
    Program {
        name: "cgroup/sendmsg6",
        attach: Attach::SockAddr { object: "sendmsg6" },
        event: EventKind::SendMsg6,
        payload: Payload::Destination,
        enforces: "unconnected UDP sendto()/sendmsg() to IPv6 destinations outside the egress allowlist; all of it in lockdown",
        messages: EGRESS,
    },
    Program {
        name: "cgroup/getpeername4",
        attach: Attach::SockAddr {
            object: "getpeername4",
        },
        event: EventKind::PeerName4,
        payload: Payload::Nothing,
        enforces: "nothing; shows the agent the original IPv4 peer of a connection sent to the session's egress proxy",
        messages: &[],
    },
    Program {
        name: "cgroup/getpeername6",
        attach: Attach::SockAddr {
            object: "getpeername6",
        },
        event: EventKind::PeerName6,
        payload: Payload::Nothing,
        enforces: "nothing; shows the agent the original IPv6 peer of a connection sent to the session's egress proxy",
        messages: &[],
    },
    Program {
        name: "cgroup/bind4",
        attach: Attach::SockAddr { object: "bind4" },
        event: EventKind::Bind4,
        payload: Payload::Nothing,
        enforces: "nothing; marks each TCP socket a session binds (IPv4) as the session's, so that the connect programs let the session reach its own listeners on loopback",
        messages: &[],
    },
    Program {
        name: "cgroup/bind6",
        attach: Attach::SockAddr { object: "bind6" },
        event: EventKind::Bind6,
        payload: Payload::Nothing,
        enforces: "nothing; marks each TCP socket a session binds (IPv6) as the session's, as cgroup/bind4 does",
        messages: &[],
    },
    Program {
        name: "cgroup_skb/ingress",
        attach: Attach::SkbIngress { object: "inbound" },
        event: EventKind::Inbound,
        payload: Payload::Inbound,
        enforces: "a connection request to a listening TCP socket (IPv4 or IPv6) from outside the loopback addresses: the packet is dropped, so the peer sees no answer",
        messages: &[(
            Reason::InboundNotAllowed,
            "a connection from outside this host to a port the agent listens on was dropped by the kernel: only local (loopback) clients may connect to the agent",
        )],
    },
    Program {
        name: "raw_tp/sys_exit",
        attach: Attach::RawTracepoint {
            object: "sys_exit",
            tracepoint: "sys_exit",
        },
        event: EventKind::CallRefused,
        payload: Payload::Call,
        enforces: "nothing: it records the agent's path calls that its read-only binds refused (EROFS: a write under a read-only path; EBUSY: a rename or removal of one, or of a directory pinned above one), which no LSM hook sees, and those refused with EACCES under a protected path (at tier 2 its hiding mount refused them) or, where Landlock enforces the roots and records nothing itself, outside the roots or the exec allowlist (a name made, removed or renamed judged by its directory); in a learning session, the names made, removed or renamed in a directory outside the writable roots",
        messages: &[
            (
                Reason::ReadOnlyPath,
                "this path is read-only in the agent's session (a read-only path of the policy, such as git's config and hooks, a directory pinned above one, or a system interface): writing, truncating, making, renaming or removing it is refused; leave it as it is, or ask the user to change it",
            ),
            (
                Reason::ProtectedPath,
                "this path is protected (a secret the policy keeps from the agent): it is hidden in the agent's session and cannot be opened; do not try another way to reach it",
            ),
            (
                Reason::OutsideReadable,
                "this file is outside the policy's readable roots (sandbox.readable), so the kernel (Landlock) refused to open it; work inside the readable roots, or ask the user to add this path",
            ),
            (
                Reason::OutsideWritable,
                "this path is outside the policy's writable roots (sandbox.writable), so the kernel (Landlock) refused to make, remove or rename it (detail.directory, when given, is the directory the kernel judged: a name is made or removed with its directory's rights, so a writable file of its own cannot be replaced by a rename); write inside the writable roots, or ask the user to add this path",
            ),
            (
                Reason::ExecNotAllowed,
                "this program is not in the policy's exec allowlist (sandbox.exec), so the kernel (Landlock) refused to run it; use a listed program, or ask the user to add it",
            ),
        ],
    },
];

impl Program {
    /// The program producing events of `kind`.
    pub fn for_event(kind: EventKind) -> Option<&'static Program> {
        PROGRAMS.iter().find(|p| p.event == kind)
    }

    /// Whether it is a BPF LSM program (as opposed to a cgroup program).
    pub fn is_lsm(&self) -> bool {
        matches!(self.attach, Attach::Lsm { .. })
    }

    /// Whether it only records (refuses nothing): the tier does not depend on it.
    pub fn records_only(&self) -> bool {
        matches!(self.attach, Attach::RawTracepoint { .. })
    }

    /// The message for a denial with `reason`, when this program denies for that reason.
    pub fn message(&self, reason: Reason) -> Option<&'static str> {
        self.messages
            .iter()
            .find(|(r, _)| *r == reason)
            .map(|(_, m)| *m)
    }

    /// Names of this entry's programs in the eBPF object.
    pub fn object_programs(&self) -> Vec<&'static str> {
        match self.attach {
            Attach::Lsm { by_params, .. } => by_params.iter().map(|(_, name)| *name).collect(),
            Attach::SockAddr { object }
            | Attach::SkbIngress { object }
            | Attach::RawTracepoint { object, .. } => vec![object],
        }
    }
}

#[cfg(test)]
#[path = "programs_tests.rs"]
mod tests;
