//! The bypass suite's attacker: makes escape attempts with raw syscalls, each in a child
//! process of its own (one attempt per process, so one cannot change the next), and prints
//! one parseable line per attempt:
//!
//! ```text
//! NAME ok               # the attempt worked
//! NAME errno N          # the syscall that makes the attempt failed with errno N
//! NAME killed N         # the process was killed by signal N (31: SIGSYS, a seccomp kill)
//! ```
//!
//! `gw-escape ATTEMPT[=ARG] ...`; the attempts that act on "the parent" act on the pid in
//! `GW_ESCAPE_TARGET` (the tests put gatewayd's there), else on this process's parent (the
//! test when run bare; under `gatewayd run`, the init of the agent's PID namespace). The list is
//! [`ATTEMPTS`]; `tests/privileged/src/escape.rs` says what each must do bare and under
//! gatewayd. std and libc only: the attempt is the syscall, nothing in between.
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
mod families;
mod inet;
mod roots;
mod shared;
mod system;
mod unix;

use std::{
    ffi::CString,
    io::Write as _,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
};

/// Every attempt this program knows, with what it does.
const ATTEMPTS: [(&str, &str); 56] = [
    ("mount", "mount(2) a tmpfs on ARG (then unmount it)"),
    ("fsopen", "fsopen(\"tmpfs\"): the new mount API"),
    (
        "open_tree",
        "open_tree(\"/\", OPEN_TREE_CLONE): a detached copy of a mount",
    ),
    ("perf_event_open", "a software counter on itself"),
    ("userfaultfd", "userfaultfd(2)"),
    (
        "finit_module",
        "finit_module(/dev/null): reaches the module loader",
    ),
    (
        "delete_module",
        "delete_module of a module that does not exist",
    ),
    ("raw_socket", "socket(AF_INET, SOCK_RAW, ICMP)"),
    ("raw_socket6", "socket(AF_INET6, SOCK_RAW, ICMPV6)"),
    (
        "icmp_echo",
        "an ICMP echo to the address ARG with sendto() on an unconnected ping socket",
    ),
    ("sctp_socket", "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)"),
    (
        "tcp_fastopen",
        "sendto(MSG_FASTOPEN) to ARG (IPv4:port): a TCP connect made by a send",
    ),
    (
        "mptcp_socket",
        "socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)",
    ),
    ("packet_socket", "socket(AF_PACKET, SOCK_RAW)"),
    ("vsock_socket", "socket(AF_VSOCK, SOCK_STREAM)"),
    ("netlink_audit", "socket(AF_NETLINK, NETLINK_AUDIT)"),
    ("bpf", "bpf(BPF_MAP_CREATE) of a one-entry array"),
    (
        "io_uring",
        "io_uring_setup: a ring that makes syscalls seccomp never sees",
    ),
    ("keyctl", "keyctl(KEYCTL_GET_KEYRING_ID, session keyring)"),
    (
        "open_by_handle",
        "name_to_handle_at + open_by_handle_at of FILE (ARG: FILE,DIR; DIR: on the same filesystem), and read it",
    ),
    ("unshare_userns", "unshare(CLONE_NEWUSER)"),
    ("clone_userns", "clone(CLONE_NEWUSER)"),
    ("clone3", "clone3: flags out of a seccomp filter's reach"),
    (
        "memfd_exec",
        "a memfd holding this program, run with execveat(AT_EMPTY_PATH)",
    ),
    (
        "memfd_exec_proc",
        "a memfd holding this program, run through /proc/self/fd/N",
    ),
    ("memfd_mfd_exec", "memfd_create(MFD_EXEC)"),
    (
        "deleted_exec",
        "a copy of this program in the directory ARG, opened, deleted, run through /proc/self/fd/N",
    ),
    (
        "mmap_exec",
        "mmap the file ARG with PROT_EXEC (what ld.so and LD_PRELOAD do to load code)",
    ),
    (
        "mprotect_exec",
        "mmap the file ARG readable, then mprotect it to PROT_EXEC",
    ),
    ("x32", "getpid through the x32 ABI"),
    ("int80", "getpid through int 0x80 (the i386 ABI)"),
    (
        "sethostname",
        "sethostname to the current name: needs CAP_SYS_ADMIN",
    ),
    ("capset_raise", "raise CAP_SYS_ADMIN into the effective set"),
    ("setuid0", "setuid(0)"),
    ("ptrace_parent", "PTRACE_SEIZE the parent"),
    ("kill_parent", "kill(parent, SIGCONT)"),
    (
        "prlimit_parent",
        "prlimit64 on the parent (its RLIMIT_CORE, unchanged)",
    ),
    (
        "renice_parent",
        "setpriority of the parent (to its current value)",
    ),
    (
        "oom_parent",
        "write the parent's oom_score_adj (its current value)",
    ),
    ("parent_environ", "read /proc/PARENT/environ"),
    ("parent_mem", "process_vm_readv of the parent"),
    (
        "kill_all",
        "kill(-1, SIGKILL): every process this one may signal, itself and its init aside",
    ),
    (
        "tiocsti",
        "ioctl(0, TIOCSTI, \"\\n\"): push input into the terminal on stdin, as if typed",
    ),
    ("tcgets", "ioctl(0, TCGETS): read the terminal's settings"),
    (
        "accept_one",
        "listen on ARG (ADDR:PORT) and wait up to 6 s for one connection (a bind shell)",
    ),
    ("tcp_connect", "connect to ARG (ADDR:PORT) over TCP"),
    (
        "own_listener",
        "listen on ARG (an address, port 0) and connect to that listener on loopback",
    ),
    (
        "own_listener_reuseport",
        "the same, the listener bound with SO_REUSEPORT",
    ),
    (
        "dns_query",
        "a DNS A query, ARG = SERVER,NAME,udp|tcp; prints rcode=R ip=A first",
    ),
    (
        "udp_send",
        "one UDP datagram to ARG (ADDR:PORT), as a QUIC client's first packet",
    ),
    (
        "unix_connect",
        "connect a Unix stream socket to ARG (a path)",
    ),
    (
        "unix_connect_listed",
        "connect a Unix stream socket to ARG (a path the policy lists)",
    ),
    (
        "unix_connect_abstract",
        "connect a Unix stream socket to ARG (@abstract-name)",
    ),
    ("unix_send", "send a datagram to ARG (a path)"),
    (
        "unix_send_abstract",
        "send a datagram to ARG (@abstract-name)",
    ),
    (
        "unix_pair",
        "a datagram and a stream socketpair, one message through each",
    ),
];

/// The outcome of one attempt, as printed.
#[derive(PartialEq, Eq)]
enum Outcome {
    Ok,
    Errno(i32),
}

fn errno() -> Outcome {
    Outcome::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// `Ok` when a syscall's return value is not negative, its errno otherwise.
fn check(rc: i64) -> Outcome {
    if rc < 0 { errno() } else { Outcome::Ok }
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap_or_default()
}

/// `Ok` and the fd, closed on drop.
fn fd_of(rc: i64) -> Result<OwnedFd, Outcome> {
    if rc < 0 {
        Err(errno())
    } else {
        // SAFETY: a new fd this process owns.
        Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
    }
}

fn sys(nr: libc::c_long, args: [u64; 5]) -> i64 {
    // SAFETY: every call passes integers or pointers to live memory of the caller.
    unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4]) }
}

/// A fork-like raw clone/clone3: the child exits at once, the parent reaps it.
fn reap(rc: i64) -> Outcome {
    if rc == 0 {
        // SAFETY: the child exits without running anything.
        unsafe { libc::_exit(0) };
    }
    if rc > 0 {
        // SAFETY: waits for the child just made.
        unsafe { libc::waitpid(rc as i32, std::ptr::null_mut(), 0) };
    }
    check(rc)
}

fn memfd_with_self(flags: u32) -> Result<OwnedFd, Outcome> {
    let me = std::fs::read("/proc/self/exe").map_err(|_| errno())?;
    let name = cstr("gw-escape");
    let fd = fd_of(sys(
        libc::SYS_memfd_create,
        [name.as_ptr() as u64, u64::from(flags), 0, 0, 0],
    ))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(&me).map_err(|_| errno())?;
    Ok(f.into())
}

/// Maps the first page of the file at `path` executable: directly, or readable and then
/// `mprotect`ed to executable.
fn map_exec(path: &str, through_mprotect: bool) -> Outcome {
    let Ok(file) = std::fs::File::open(path) else {
        return errno();
    };
    let first = if through_mprotect {
        libc::PROT_READ
    } else {
        libc::PROT_READ | libc::PROT_EXEC
    };
    // SAFETY: a fresh private mapping of an open file, unmapped below; nothing reads it.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            first,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return errno();
    }
    let outcome = if through_mprotect {
        // SAFETY: the mapping just made, one page long.
        check(unsafe { libc::mprotect(addr, 4096, libc::PROT_READ | libc::PROT_EXEC) }.into())
    } else {
        Outcome::Ok
    };
    // SAFETY: the mapping just made, one page long, not used after this.
    unsafe { libc::munmap(addr, 4096) };
    outcome
}

fn attempt(name: &str, arg: &str, parent: i32) -> Outcome {
    use families::{
        code_and_namespaces, kernel_interfaces, kernel_objects, others_and_terminal, privileges,
        the_parent,
    };
    kernel_interfaces(name, arg)
        .or_else(|| kernel_objects(name, arg))
        .or_else(|| code_and_namespaces(name, arg))
        .or_else(|| privileges(name))
        .or_else(|| the_parent(name, parent))
        .or_else(|| others_and_terminal(name))
        .unwrap_or_else(|| files_and_sockets(name, arg))
}

/// Files, sockets, and the attempts of the topic modules.
fn files_and_sockets(name: &str, arg: &str) -> Outcome {
    match name {
        "show" => match std::fs::read_to_string(arg) {
            Ok(text) => {
                print!("{text}");
                Outcome::Ok
            }
            Err(_) => errno(),
        },
        "link" => match std::fs::read_link(arg) {
            Ok(target) => {
                println!("link {}", target.display());
                Outcome::Ok
            }
            Err(_) => errno(),
        },
        "read" => std::fs::read(arg).map_or_else(|_| errno(), |_| Outcome::Ok),
        "write" => std::fs::write(arg, "gw-escape").map_or_else(|_| errno(), |()| Outcome::Ok),
        "hardlink_read" => {
            let (src, dst) = arg.split_once(',').unwrap_or((arg, ""));
            if std::fs::hard_link(src, dst).is_err() {
                return errno();
            }
            std::fs::read(dst).map_or_else(|_| errno(), |_| Outcome::Ok)
        }
        "unix_connect" | "unix_connect_listed" | "unix_connect_abstract" => unix::connect(arg),
        "unix_send" | "unix_send_abstract" => unix::send(arg),
        "unix_pair" => unix::pair(),
        "icmp_echo" => inet::icmp_echo(arg),
        "tcp_fastopen" => inet::tcp_fastopen(arg),
        "accept_one" => inet::accept_one(arg),
        "tcp_connect" => inet::tcp_connect(arg),
        "own_listener" => inet::own_listener(arg, false),
        "own_listener_reuseport" => inet::own_listener(arg, true),
        "dns_query" => inet::dns_query(arg),
        "udp_send" => inet::udp_send(arg),
        "sctp_socket" => inet::socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        "mptcp_socket" => inet::socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_MPTCP),
        n if system::ATTEMPTS.iter().any(|(s, _)| *s == n) => system::attempt(n, arg),
        n if shared::ATTEMPTS.iter().any(|(s, _)| *s == n) => shared::attempt(n, arg),
        _ => roots::attempt(name, arg).unwrap_or(Outcome::Errno(libc::EINVAL)),
    }
}

fn socket(family: i32, ty: i32, proto: i32) -> Outcome {
    // SAFETY: a plain syscall; the fd is closed on drop.
    fd_of(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) }.into())
        .map_or_else(|e| e, |_| Outcome::Ok)
}

fn open_by_handle(arg: &str) -> Outcome {
    let (path, mount_dir) = arg.split_once(',').unwrap_or((arg, "/"));
    let c = cstr(path);
    // struct file_handle: handle_bytes, handle_type, then the handle (up to 128 bytes).
    let mut fh = [0u32; 2 + 32];
    fh[0] = 128;
    let mut mount_id = 0i32;
    let at = libc::AT_FDCWD as u64;
    let (h, m) = (fh.as_mut_ptr() as u64, &raw mut mount_id as u64);
    if sys(
        libc::SYS_name_to_handle_at,
        [at, c.as_ptr() as u64, h, m, 0],
    ) != 0
    {
        return errno();
    }
    let Ok(dir) = std::fs::File::open(mount_dir) else {
        return errno();
    };
    let rc = sys(
        libc::SYS_open_by_handle_at,
        [dir.as_raw_fd() as u64, h, libc::O_RDONLY as u64, 0, 0],
    );
    match fd_of(rc) {
        Ok(fd) => {
            let mut buf = [0u8; 16];
            // SAFETY: reads into a local buffer.
            check(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } as i64)
        }
        Err(e) => e,
    }
}

/// getpid through another ABI: x32 (the x32 bit on the syscall number) or i386 (`int 0x80`).
#[cfg(target_arch = "x86_64")]
fn foreign_abi(x32: bool) -> Outcome {
    if x32 {
        return check(sys(libc::SYS_getpid | 0x4000_0000, [0; 5]));
    }
    let ret: i64;
    // SAFETY: i386 getpid (20) takes no arguments and touches no memory.
    unsafe {
        std::arch::asm!("int 0x80", inlateout("rax") 20i64 => ret, options(nostack));
    }
    if ret < 0 {
        Outcome::Errno(-ret as i32)
    } else {
        Outcome::Ok
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn foreign_abi(_x32: bool) -> Outcome {
    Outcome::Errno(libc::ENOSYS)
}

fn print(name: &str, outcome: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{name} {outcome}");
    let _ = out.flush();
}

fn main() {
    // `signal_group` signals the whole process group, this program included.
    // SAFETY: sets a disposition; no handler runs.
    unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args[0] == "--help" {
        let all = ATTEMPTS
            .iter()
            .chain(&system::ATTEMPTS)
            .chain(&shared::ATTEMPTS)
            .chain(&roots::ATTEMPTS);
        for (n, what) in all {
            println!("{n:16} {what}");
        }
        return;
    }
    let parent = std::env::var("GW_ESCAPE_TARGET")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            // SAFETY: getppid cannot fail.
            unsafe { libc::getppid() }
        });
    for a in &args {
        if let Some(name) = a.strip_prefix("report=") {
            // The image a memfd exec started: the attempt worked.
            print(name, "ok");
            return;
        }
        let (name, arg) = a.split_once('=').unwrap_or((a, ""));
        // SAFETY: fork of this single-threaded process; the child makes one attempt.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            match attempt(name, arg, parent) {
                Outcome::Ok => print(name, "ok"),
                Outcome::Errno(e) => print(name, &format!("errno {e}")),
            }
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just made.
        if pid < 0 || unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0 {
            print(
                name,
                &format!(
                    "errno {}",
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
                ),
            );
        } else if libc::WIFSIGNALED(status) {
            print(name, &format!("killed {}", libc::WTERMSIG(status)));
        }
    }
}
