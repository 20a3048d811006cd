//! The attempts on the kernel's interfaces, code loading, privileges and the parent, one
//! function per family; each answers None for a name that is not its own.
use super::*;

/// Mounts, performance events, userfaultfd and kernel modules.
pub(crate) fn kernel_interfaces(name: &str, arg: &str) -> Option<Outcome> {
    Some(match name {
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
        _ => return None,
    })
}

/// Raw and special sockets, BPF, `io_uring`, keys, file handles.
pub(crate) fn kernel_objects(name: &str, arg: &str) -> Option<Outcome> {
    Some(match name {
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
        _ => return None,
    })
}

/// New namespaces and processes, code that was never a file on disk, foreign ABIs.
pub(crate) fn code_and_namespaces(name: &str, arg: &str) -> Option<Outcome> {
    Some(match name {
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
            Ok(fd) => exec_fd(fd.as_raw_fd(), name, name == "memfd_exec_proc"),
            Err(e) => e,
        },
        "deleted_exec" => deleted_exec(arg),
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
        _ => return None,
    })
}

/// Runs this program again from a copy that is deleted before the exec.
fn deleted_exec(dir: &str) -> Outcome {
    let path = format!("{dir}/gw-escape-deleted-{}", std::process::id());
    if std::fs::copy("/proc/self/exe", &path).is_err() {
        return errno();
    }
    let Ok(file) = std::fs::File::open(&path) else {
        return errno();
    };
    if std::fs::remove_file(&path).is_err() {
        return errno();
    }
    exec_fd(file.as_raw_fd(), "deleted_exec", true)
}

/// Runs the program open on `fd` (by `execveat` on the descriptor, or `execve` of its
/// `/proc/self/fd` path) with `report=NAME`; on success the new image prints the outcome, so
/// this returns only the failure.
fn exec_fd(fd: std::os::fd::RawFd, name: &str, via_proc: bool) -> Outcome {
    let report = cstr(&format!("report={name}"));
    let argv0 = cstr("gw-escape");
    let argv = [argv0.as_ptr(), report.as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let empty = cstr("");
    let path = cstr(&format!("/proc/self/fd/{fd}"));
    // SAFETY: NUL-terminated argument vectors that outlive the call.
    unsafe {
        if via_proc {
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        } else {
            libc::syscall(
                libc::SYS_execveat,
                fd,
                empty.as_ptr(),
                argv.as_ptr(),
                envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
        }
    }
    errno()
}

/// Privileges: the host name, capabilities, uid 0.
pub(crate) fn privileges(name: &str) -> Option<Outcome> {
    Some(match name {
        "sethostname" => {
            let mut buf = [0u8; 256];
            // SAFETY: the buffer outlives both calls.
            unsafe {
                if libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) != 0 {
                    return Some(errno());
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
                return Some(errno());
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
        _ => return None,
    })
}

/// The parent (gatewayd): tracing, signals, limits, priority, OOM score, memory.
pub(crate) fn the_parent(name: &str, parent: i32) -> Option<Outcome> {
    let p = parent as u64;
    Some(match name {
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
                return Some(errno());
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
                return Some(errno());
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
        _ => return None,
    })
}

/// Every process at once, and the terminal.
pub(crate) fn others_and_terminal(name: &str) -> Option<Outcome> {
    Some(match name {
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
        _ => return None,
    })
}
