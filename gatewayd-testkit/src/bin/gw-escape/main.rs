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
const ATTEMPTS: [(&str, &str); 51] = [
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
    let p = parent as u64;
    match name {
        "mount" => {
            let (src, dir, ty) = (cstr("gw-escape"), cstr(arg), cstr("tmpfs"));
            // SAFETY: C strings that outlive the calls.
            let rc = unsafe {
                libc::mount(src.as_ptr(), dir.as_ptr(), ty.as_ptr(), 0, std::ptr::null())
            };
            if rc == 0 {
                // SAFETY: as above.
                unsafe { libc::umount2(dir.as_ptr(), libc::MNT_DETACH) };
            }
            check(rc.into())
        }
        "fsopen" => {
            let ty = cstr("tmpfs");
            fd_of(sys(libc::SYS_fsopen, [ty.as_ptr() as u64, 1, 0, 0, 0]))
                .map_or_else(|e| e, |_| Outcome::Ok)
        }
        "open_tree" => {
            let root = cstr("/");
            let flags = 1 | libc::O_CLOEXEC as u64; // OPEN_TREE_CLONE
            let rc = sys(
                libc::SYS_open_tree,
                [libc::AT_FDCWD as u64, root.as_ptr() as u64, flags, 0, 0],
            );
            fd_of(rc).map_or_else(|e| e, |_| Outcome::Ok)
        }
        "perf_event_open" => {
            let mut attr = [0u8; 128];
            attr[0..4].copy_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
            attr[4..8].copy_from_slice(&128u32.to_le_bytes());
            // disabled, exclude_kernel, exclude_hv
            attr[40..48].copy_from_slice(&(1u64 | 1 << 5 | 1 << 6).to_le_bytes());
            let cpu = u64::MAX; // -1: any CPU
            let rc = sys(
                libc::SYS_perf_event_open,
                [attr.as_ptr() as u64, 0, cpu, u64::MAX, 0],
            );
            fd_of(rc).map_or_else(|e| e, |_| Outcome::Ok)
        }
        "userfaultfd" => fd_of(sys(
            libc::SYS_userfaultfd,
            [libc::O_CLOEXEC as u64, 0, 0, 0, 0],
        ))
        .map_or_else(|e| e, |_| Outcome::Ok),
        "finit_module" => match std::fs::File::open("/dev/null") {
            Ok(f) => {
                let empty = cstr("");
                let fd = f.as_raw_fd() as u64;
                check(sys(
                    libc::SYS_finit_module,
                    [fd, empty.as_ptr() as u64, 0, 0, 0],
                ))
            }
            Err(_) => errno(),
        },
        "delete_module" => {
            let m = cstr("gw_escape_no_such_module");
            check(sys(
                libc::SYS_delete_module,
                [m.as_ptr() as u64, libc::O_NONBLOCK as u64, 0, 0, 0],
            ))
        }
        "raw_socket" => socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        "raw_socket6" => socket(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_ICMPV6),
        "packet_socket" => socket(libc::AF_PACKET, libc::SOCK_RAW, 0),
        "vsock_socket" => socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        "netlink_audit" => socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_AUDIT),
        "netlink_route" => socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE),
        "tcp_socket" => socket(libc::AF_INET, libc::SOCK_STREAM, 0),
        "bpf" => {
            let mut attr = [0u32; 18];
            attr[..4].copy_from_slice(&[2, 4, 4, 1]); // BPF_MAP_TYPE_ARRAY, key 4, value 4, 1
            let rc = sys(libc::SYS_bpf, [0, attr.as_ptr() as u64, 72, 0, 0]);
            fd_of(rc).map_or_else(|e| e, |_| Outcome::Ok)
        }
        "io_uring" => {
            let params = [0u8; 120];
            fd_of(sys(
                libc::SYS_io_uring_setup,
                [1, params.as_ptr() as u64, 0, 0, 0],
            ))
            .map_or_else(|e| e, |_| Outcome::Ok)
        }
        "keyctl" => check(sys(libc::SYS_keyctl, [0, (-3i64) as u64, 0, 0, 0])),
        "open_by_handle" => open_by_handle(arg),
        "unshare_userns" => {
            // SAFETY: a plain syscall.
            check(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into())
        }
        "clone_userns" => reap(sys(
            libc::SYS_clone,
            [(libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0, 0, 0, 0],
        )),
        "clone" => reap(sys(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0])),
        "clone3" => {
            let mut args = [0u64; 8];
            args[4] = libc::SIGCHLD as u64; // exit_signal
            reap(sys(libc::SYS_clone3, [args.as_ptr() as u64, 64, 0, 0, 0]))
        }
        "memfd_exec" | "memfd_exec_proc" => match memfd_with_self(libc::MFD_CLOEXEC) {
            Ok(fd) => {
                let report = cstr(&format!("report={name}"));
                let argv0 = cstr("gw-escape");
                let argv = [argv0.as_ptr(), report.as_ptr(), std::ptr::null()];
                let envp: [*const libc::c_char; 1] = [std::ptr::null()];
                let empty = cstr("");
                let path = cstr(&format!("/proc/self/fd/{}", fd.as_raw_fd()));
                // SAFETY: NUL-terminated argument vectors that outlive the call; on success
                // the new image prints the outcome.
                unsafe {
                    if name == "memfd_exec" {
                        libc::syscall(
                            libc::SYS_execveat,
                            fd.as_raw_fd(),
                            empty.as_ptr(),
                            argv.as_ptr(),
                            envp.as_ptr(),
                            libc::AT_EMPTY_PATH,
                        );
                    } else {
                        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                    }
                }
                errno()
            }
            Err(e) => e,
        },
        "deleted_exec" => {
            let path = format!("{arg}/gw-escape-deleted-{}", std::process::id());
            if std::fs::copy("/proc/self/exe", &path).is_err() {
                return errno();
            }
            let Ok(file) = std::fs::File::open(&path) else {
                return errno();
            };
            if std::fs::remove_file(&path).is_err() {
                return errno();
            }
            let report = cstr("report=deleted_exec");
            let argv0 = cstr("gw-escape");
            let argv = [argv0.as_ptr(), report.as_ptr(), std::ptr::null()];
            let envp: [*const libc::c_char; 1] = [std::ptr::null()];
            let proc_path = cstr(&format!("/proc/self/fd/{}", file.as_raw_fd()));
            // SAFETY: NUL-terminated argument vectors that outlive the call; on success the
            // new image prints the outcome.
            unsafe { libc::execve(proc_path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            errno()
        }
        "memfd_mfd_exec" => {
            let n = cstr("gw-escape");
            let flags = u64::from(libc::MFD_CLOEXEC) | 0x10; // MFD_EXEC
            fd_of(sys(
                libc::SYS_memfd_create,
                [n.as_ptr() as u64, flags, 0, 0, 0],
            ))
            .map_or_else(|e| e, |_| Outcome::Ok)
        }
        "mmap_exec" => map_exec(arg, false),
        "mprotect_exec" => map_exec(arg, true),
        "memfd" => memfd_with_self(libc::MFD_CLOEXEC).map_or_else(|e| e, |_| Outcome::Ok),
        "x32" => foreign_abi(true),
        "int80" => foreign_abi(false),
        "sethostname" => {
            let mut buf = [0u8; 256];
            // SAFETY: the buffer outlives both calls.
            unsafe {
                if libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) != 0 {
                    return errno();
                }
                let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
                check(libc::sethostname(buf.as_ptr().cast(), len).into())
            }
        }
        "capset_raise" => {
            let mut header = [0x2008_0522u32, 0]; // _LINUX_CAPABILITY_VERSION_3, self
            let mut data = [0u32; 6];
            if sys(
                libc::SYS_capget,
                [
                    header.as_mut_ptr() as u64,
                    data.as_mut_ptr() as u64,
                    0,
                    0,
                    0,
                ],
            ) != 0
            {
                return errno();
            }
            data[0] |= 1 << 21; // CAP_SYS_ADMIN into effective
            data[1] |= 1 << 21; // and permitted
            check(sys(
                libc::SYS_capset,
                [header.as_ptr() as u64, data.as_ptr() as u64, 0, 0, 0],
            ))
        }
        // SAFETY: plain syscalls with integer arguments.
        "setuid0" => check(unsafe { libc::setuid(0) }.into()),
        "ptrace_parent" => check(sys(
            libc::SYS_ptrace,
            [u64::from(libc::PTRACE_SEIZE), p, 0, 0, 0],
        )),
        // SAFETY: SIGCONT to a running process changes nothing.
        "kill_parent" => check(unsafe { libc::kill(parent, libc::SIGCONT) }.into()),
        "prlimit_parent" => {
            let mut old = [0u64; 2];
            let core = u64::from(libc::RLIMIT_CORE);
            if sys(
                libc::SYS_prlimit64,
                [p, core, 0, old.as_mut_ptr() as u64, 0],
            ) != 0
            {
                return errno();
            }
            check(sys(
                libc::SYS_prlimit64,
                [p, core, old.as_ptr() as u64, 0, 0],
            ))
        }
        "renice_parent" => {
            let which = u64::from(libc::PRIO_PROCESS);
            let now = sys(libc::SYS_getpriority, [which, p, 0, 0, 0]);
            if now < 0 {
                return errno();
            }
            // The raw syscall returns 20 - nice.
            let nice = (20 - now) as u64;
            check(sys(libc::SYS_setpriority, [which, p, nice, 0, 0]))
        }
        "oom_parent" => {
            let path = format!("/proc/{parent}/oom_score_adj");
            match std::fs::read_to_string(&path) {
                Ok(v) => std::fs::write(&path, v.trim()).map_or_else(|_| errno(), |()| Outcome::Ok),
                Err(_) => errno(),
            }
        }
        "parent_environ" => std::fs::read(format!("/proc/{parent}/environ"))
            .map_or_else(|_| errno(), |_| Outcome::Ok),
        "parent_mem" => {
            let mut buf = [0u8; 8];
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: 8,
            };
            // An address the parent surely has not mapped: past the access check, EFAULT.
            let remote = libc::iovec {
                iov_base: 8 as *mut libc::c_void,
                iov_len: 8,
            };
            // SAFETY: one iovec each way, flags 0; the kernel writes only into `buf`. Every
            // argument is 64 bits wide: the counts and flags are `unsigned long`, and a
            // narrower variadic argument would leave the register's upper half undefined.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_process_vm_readv,
                    libc::c_long::from(parent),
                    &raw const local,
                    1 as libc::c_ulong,
                    &raw const remote,
                    1 as libc::c_ulong,
                    0 as libc::c_ulong,
                )
            };
            check(rc)
        }
        // SAFETY: the caller chose to kill everything it may signal.
        "kill_all" => check(unsafe { libc::kill(-1, libc::SIGKILL) }.into()),
        // SAFETY: the kernel reads one byte at the pointer, which outlives the call.
        "tiocsti" => check(unsafe { libc::ioctl(0, libc::TIOCSTI, c"\n".as_ptr()) }.into()),
        "tcgets" => {
            // SAFETY: all-zero is a valid termios; the kernel writes it, which outlives the call.
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            check(unsafe { libc::ioctl(0, libc::TCGETS, &raw mut t) }.into())
        }
        // Not attempts: what the process sees, for the tests' own checks.
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
