//! The agent's seccomp filter: a deny list of the kernel interfaces an agent has no use for
//! and that reach past its confinement, installed last before exec (after `no_new_privs`).
//! Every rule has a reason code (`docs/KERNEL.md`, "Seccomp"). Denials return an errno to
//! the agent; the kernel reports nothing of them to gatewayd, so they are not audited.
//!
//! Three filters, which the kernel evaluates together (the strictest answer wins):
//!
//! - a guard, written by hand: a syscall of another ABI (another `AUDIT_ARCH`, or x32 on
//!   `x86_64`) kills the process (`foreign_abi`); a syscall number newer than this build's
//!   tables gets `ENOSYS` (`newer_syscall`), as an unknown syscall does in container
//!   runtimes, so a new kernel interface is closed until it is reviewed;
//! - the deny list, `EPERM` ([`DENIED`] and the socket rules);
//! - `clone3` gets `ENOSYS` (`clone3_flags_unchecked`): its flags sit in memory, out of a
//!   filter's reach, so the C library falls back to `clone`, whose flags are checked.
//!
//! The rules name syscalls; `seccompiler`'s tables turn them into numbers for `x86_64` and
//! `aarch64` (the architectures gatewayd builds for).
use seccompiler::{TargetArch, sock_filter};
use serde_json::{Value, json};

use gatewayd_core::policy::Agent;

/// Syscalls denied outright with `EPERM`, by reason code.
pub(crate) const DENIED: [(&str, &[&str]); 8] = [
    (
        "mount",
        &[
            "mount",
            "umount2",
            "fsopen",
            "fsconfig",
            "fsmount",
            "move_mount",
            "open_tree",
            "fspick",
            "mount_setattr",
            "pivot_root",
        ],
    ),
    (
        "kernel_code",
        &[
            "init_module",
            "finit_module",
            "delete_module",
            "kexec_load",
            "kexec_file_load",
        ],
    ),
    ("perf_events", &["perf_event_open"]),
    ("userfaultfd", &["userfaultfd"]),
    ("bpf", &["bpf"]),
    ("file_handle", &["open_by_handle_at"]),
    ("kernel_keyring", &["keyctl", "add_key", "request_key"]),
    (
        "io_uring",
        &["io_uring_setup", "io_uring_enter", "io_uring_register"],
    ),
];

/// Left to the BPF LSM programs at tier 1 (`lsm/bpf`, `lsm/sb_mount`, `lsm/sb_umount`,
/// `lsm/move_mount`), which deny them with an audit record; seccomp, which runs first, would
/// leave none. `open_tree` too: the detached copy it makes is attached only through
/// `move_mount`, and files opened through it still meet `lsm/file_open`. The other calls of
/// the new mount API (`fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr`) stay with
/// seccomp.
pub(crate) const LEFT_TO_BPF_LSM: [&str; 5] =
    ["bpf", "mount", "umount2", "move_mount", "open_tree"];

/// The first syscall number this build's tables do not know (463: `setxattrat`, Linux 6.13;
/// since Linux 5.1 new syscalls have one number on every architecture).
pub(crate) const FIRST_UNKNOWN_SYSCALL: u32 = 463;

const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const AF_NETLINK: u64 = 16;
/// `SOCK_TYPE_MASK` and the types refused in `AF_INET`/`AF_INET6`: raw, reliable datagram,
/// DCCP and the obsolete `SOCK_PACKET`.
const SOCK_TYPE_MASK: u64 = 0xf;
const DENIED_INET_TYPES: [u64; 4] = [3, 4, 6, 10];
/// The protocols an `AF_INET`/`AF_INET6` socket may name: the default one of its type (0),
/// TCP and UDP. Every other (ICMP ping sockets, SCTP, MPTCP, UDP-Lite, ...) is refused: the
/// cgroup egress programs run on TCP's and UDP's connect and send paths, not on all of
/// theirs (an ICMP echo on an unconnected ping socket runs none).
const ALLOWED_INET_PROTOCOLS: [u64; 3] = [0, 6, 17];
const CLONE_NEWUSER: u64 = 0x1000_0000;
const MFD_EXEC: u64 = 0x10;
const AT_EMPTY_PATH: u64 = 0x1000;
/// `ioctl` requests that put text in front of whoever reads a terminal: `TIOCSTI` (push
/// input as if typed) and `TIOCLINUX` (its paste-selection subcommand, on a virtual console).
const TERMINAL_INJECTION: [(&str, u64); 2] = [("TIOCSTI", 0x5412), ("TIOCLINUX", 0x541c)];

/// `AUDIT_ARCH_*` of `linux/audit.h`.
const AUDIT_ARCH_X86_64: u32 = 0x3e | 0x8000_0000 | 0x4000_0000;
const AUDIT_ARCH_AARCH64: u32 = 0xb7 | 0x8000_0000 | 0x4000_0000;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Why the filter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// gatewayd was built for an architecture the filter has no tables for.
    #[error("no seccomp tables for the architecture {0}")]
    Arch(String),
    /// The compiler refused the rules.
    #[error("{0}")]
    Compile(#[from] seccompiler::Error),
}

/// The compiled filters, ready for the forked child.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    programs: Vec<Vec<libc::sock_filter>>,
    families: Vec<u64>,
    netlink: Vec<u64>,
    bpf_lsm: bool,
    /// Hard links refused too ([`Filter::refuse_hard_links`]).
    links_refused: bool,
}

impl Filter {
    /// The filters for this policy and the architecture gatewayd runs on.
    /// `bpf_lsm`: the BPF LSM programs are attached (tier 1), so [`LEFT_TO_BPF_LSM`] is left to
    /// them.
    pub(crate) fn for_policy(agent: &Agent, bpf_lsm: bool) -> Result<Filter, SeccompError> {
        Filter::build(agent, this_arch()?, bpf_lsm)
    }

    /// The filters for `arch`.
    pub(crate) fn build(
        agent: &Agent,
        arch: TargetArch,
        bpf_lsm: bool,
    ) -> Result<Filter, SeccompError> {
        let mut families = vec![AF_UNIX, AF_INET, AF_INET6];
        families.extend(agent.socket_family_numbers().into_iter().map(u64::from));
        let netlink: Vec<u64> = agent.netlink_numbers().into_iter().map(u64::from).collect();
        if !netlink.is_empty() {
            families.push(AF_NETLINK);
        }
        let mut deny = rules(&families, &netlink);
        if bpf_lsm {
            deny.retain(|r| !LEFT_TO_BPF_LSM.iter().any(|s| r["syscall"] == *s));
        }
        let doc = json!({
            "deny": {"mismatch_action": "allow", "match_action": {"errno": libc::EPERM}, "filter": deny},
            "clone3": {"mismatch_action": "allow", "match_action": {"errno": libc::ENOSYS},
                "filter": [{"syscall": "clone3"}]},
        });
        let mut compiled = seccompiler::compile_from_json(doc.to_string().as_bytes(), arch)?;
        let mut programs = vec![guard(arch)];
        for name in ["deny", "clone3"] {
            let p = compiled.remove(name).unwrap_or_default();
            programs.push(p.iter().map(to_libc).collect());
        }
        Ok(Filter {
            programs,
            families,
            netlink,
            bpf_lsm,
            links_refused: false,
        })
    }

    /// Adds a filter that refuses hard links (`link`, `linkat`) with `EPERM`
    /// (`hard_link_named`): at tier 2 with `sandbox.protected_names`, where nothing could
    /// stop a link from giving a protected-name file a name no pattern matches. git, cargo
    /// and pnpm fall back to a rename or a copy when a link fails.
    pub(crate) fn refuse_hard_links(&mut self) -> Result<(), SeccompError> {
        if self.links_refused {
            return Ok(());
        }
        let arch = this_arch()?;
        let calls: &[&str] = if matches!(arch, TargetArch::x86_64) {
            &["link", "linkat"]
        } else {
            &["linkat"]
        };
        let filter: Vec<Value> = calls.iter().map(|c| json!({"syscall": c})).collect();
        let doc = json!({"links": {"mismatch_action": "allow",
            "match_action": {"errno": libc::EPERM}, "filter": filter}});
        let mut compiled = seccompiler::compile_from_json(doc.to_string().as_bytes(), arch)?;
        let p = compiled.remove("links").unwrap_or_default();
        self.programs.push(p.iter().map(to_libc).collect());
        self.links_refused = true;
        Ok(())
    }

    /// What the `session_start` record says of the filter.
    pub(crate) fn describe(&self) -> Value {
        let left: &[&str] = if self.bpf_lsm { &LEFT_TO_BPF_LSM } else { &[] };
        json!({
            "denied": DENIED.iter().flat_map(|(_, s)| s.iter()).filter(|s| !left.contains(s)).collect::<Vec<_>>(),
            "left_to_bpf_lsm": left,
            "socket_families": self.families,
            "netlink_protocols": self.netlink,
            "unknown_syscalls_from": FIRST_UNKNOWN_SYSCALL,
            "denied_ioctls": TERMINAL_INJECTION.map(|(name, _)| name),
            "hard_links": if self.links_refused { "refused (protected names at tier 2)" } else { "allowed" },
        })
    }

    /// Installs the filters on the calling thread; `no_new_privs` must be set. For the
    /// forked child: async-signal-safe.
    pub(crate) fn install(&self) -> std::io::Result<()> {
        self.programs.iter().try_for_each(|p| install_program(p))
    }

    #[cfg(test)]
    pub(crate) fn programs(&self) -> &[Vec<libc::sock_filter>] {
        &self.programs
    }
}

/// The architecture gatewayd runs on, as seccompiler names it.
fn this_arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH.into()))
}

/// Installs one classic-BPF program as a seccomp filter on the calling thread;
/// `no_new_privs` must be set. Async-signal-safe.
pub(crate) fn install_program(p: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: p.len() as libc::c_ushort,
        filter: p.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program; `prog` and `p` outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &raw const prog,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn to_libc(i: &sock_filter) -> libc::sock_filter {
    libc::sock_filter {
        code: i.code,
        jt: i.jt,
        jf: i.jf,
        k: i.k,
    }
}

/// One argument condition of the JSON rules: 32-bit, `op` as seccompiler spells it.
fn arg(index: u8, op: Value, val: u64) -> Value {
    json!({"index": index, "type": "dword", "op": op, "val": val})
}

/// The deny list as seccompiler's JSON rules (each rule: every condition holds).
fn rules(families: &[u64], netlink: &[u64]) -> Vec<Value> {
    let mut r: Vec<Value> = DENIED
        .iter()
        .flat_map(|(_, calls)| calls.iter().map(|c| json!({"syscall": c})))
        .collect();
    // socket_family: a family not allowed; netlink_protocol: a netlink protocol not listed.
    let not_allowed: Vec<Value> = families.iter().map(|f| arg(0, json!("ne"), *f)).collect();
    let mut netlink_rule = vec![arg(0, json!("eq"), AF_NETLINK)];
    netlink_rule.extend(netlink.iter().map(|p| arg(2, json!("ne"), *p)));
    for call in ["socket", "socketpair"] {
        r.push(json!({"syscall": call, "args": not_allowed}));
        if !netlink.is_empty() {
            r.push(json!({"syscall": call, "args": netlink_rule}));
        }
    }
    // raw_socket: raw and other non-stream, non-datagram types of IPv4 and IPv6.
    for family in [AF_INET, AF_INET6] {
        for t in DENIED_INET_TYPES {
            r.push(json!({"syscall": "socket", "args": [
                arg(0, json!("eq"), family),
                arg(1, json!({"masked_eq": SOCK_TYPE_MASK}), t),
            ]}));
        }
    }
    // inet_protocol: an IPv4/IPv6 protocol other than TCP and UDP.
    for family in [AF_INET, AF_INET6] {
        let mut args = vec![arg(0, json!("eq"), family)];
        args.extend(
            ALLOWED_INET_PROTOCOLS
                .iter()
                .map(|p| arg(2, json!("ne"), *p)),
        );
        r.push(json!({"syscall": "socket", "args": args}));
    }
    // user_namespace: a new user namespace gives its creator every capability inside it.
    for call in ["unshare", "clone"] {
        r.push(json!({"syscall": call,
            "args": [arg(0, json!({"masked_eq": CLONE_NEWUSER}), CLONE_NEWUSER)]}));
    }
    // memfd_exec: an executable memfd, and exec of an open file (fexecve) with it.
    r.push(json!({"syscall": "memfd_create",
        "args": [arg(1, json!({"masked_eq": MFD_EXEC}), MFD_EXEC)]}));
    r.push(json!({"syscall": "execveat",
        "args": [arg(4, json!({"masked_eq": AT_EMPTY_PATH}), AT_EMPTY_PATH)]}));
    // terminal_injection: text pushed into the terminal the agent inherited is read by the
    // user's shell once the agent ends. The request is compared on its low 32 bits, as the
    // kernel reads it (`unsigned int cmd`), so high bits set in the register do not pass.
    for (_, cmd) in TERMINAL_INJECTION {
        r.push(json!({"syscall": "ioctl", "args": [arg(1, json!("eq"), cmd)]}));
    }
    // self_protection: setting another process's resource limits (gatewayd's, as root).
    r.push(json!({"syscall": "prlimit64", "args": [
        json!({"index": 0, "type": "dword", "op": "ne", "val": 0}),
        json!({"index": 2, "type": "qword", "op": "ne", "val": 0}),
    ]}));
    r
}

/// The hand-written guard: another ABI is killed, a number past the tables gets `ENOSYS`.
fn guard(arch: TargetArch) -> Vec<libc::sock_filter> {
    let (audit_arch, x32) = match arch {
        TargetArch::x86_64 => (AUDIT_ARCH_X86_64, X32_SYSCALL_BIT),
        _ => (AUDIT_ARCH_AARCH64, 0),
    };
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    vec![
        stmt(ld, 4), // 0: arch
        jump(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            audit_arch,
            0,
            5,
        ), // 1: else 7
        stmt(ld, 0), // 2: nr
        jump(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, x32, 3, 0), // 3: x32: 7
        jump(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            FIRST_UNKNOWN_SYSCALL,
            0,
            1,
        ), // 4
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32), // 5
        stmt(ret, libc::SECCOMP_RET_ALLOW), // 6
        stmt(ret, libc::SECCOMP_RET_KILL_PROCESS), // 7
    ]
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
mod tests;
