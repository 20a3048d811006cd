//! Objects a process shares with the host beyond files and sockets (System V IPC, POSIX
//! message queues, descriptors inherited from whoever started it), and the host's resources
//! it can exhaust (processes, memory).
use std::ffi::CString;

use super::Outcome;

/// The attempts of this module, with what they do.
pub(crate) const ATTEMPTS: [(&str, &str); 8] = [
    (
        "sysv_msgsnd",
        "send one message to the existing System V message queue of key ARG (decimal)",
    ),
    (
        "sysv_shm_leave",
        "create a 1 MiB System V shared memory segment of key ARG and leave it behind",
    ),
    (
        "mq_leave",
        "create the POSIX message queue named ARG (e.g. /gw-q) and leave it behind",
    ),
    (
        "fd_read",
        "read from descriptor ARG, which this process never opened (inherited)",
    ),
    (
        "fd_write",
        "write `gw-escape` to descriptor ARG, which this process never opened (inherited)",
    ),
    (
        "fork_many",
        "fork ARG children that wait, all alive at once, then end them (errno: the fork refused)",
    ),
    ("alloc", "allocate ARG MiB and touch every page"),
    (
        "signal_group",
        "kill(0, SIGUSR2): the process group it inherited (gw-escape itself ignores SIGUSR2)",
    ),
];

/// Makes the attempt `name` (one of [`ATTEMPTS`]) with `arg`.
pub(crate) fn attempt(name: &str, arg: &str) -> Outcome {
    let number = || arg.parse::<i32>().unwrap_or(-1);
    // SAFETY (every block below): System V, mqueue and read/write calls on integers and
    // buffers that live across the call.
    match name {
        "sysv_msgsnd" => {
            let id = unsafe { libc::msgget(number(), 0) };
            if id < 0 {
                return super::errno();
            }
            // struct msgbuf: a long type, then the text.
            let mut msg = [0u8; 16];
            msg[..8].copy_from_slice(&1i64.to_ne_bytes());
            msg[8..].copy_from_slice(b"gw-escap");
            super::check(
                unsafe { libc::msgsnd(id, msg.as_ptr().cast(), 8, libc::IPC_NOWAIT) }.into(),
            )
        }
        "sysv_shm_leave" => {
            super::check(unsafe { libc::shmget(number(), 1 << 20, libc::IPC_CREAT | 0o600) }.into())
        }
        "mq_leave" => {
            let name = CString::new(arg).unwrap_or_default();
            let q = unsafe {
                libc::mq_open(
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_RDWR,
                    0o600 as libc::mode_t,
                    std::ptr::null_mut::<libc::mq_attr>(),
                )
            };
            if q < 0 {
                return super::errno();
            }
            unsafe { libc::mq_close(q) };
            Outcome::Ok
        }
        "fd_read" => {
            let mut buf = [0u8; 64];
            super::check(unsafe { libc::read(number(), buf.as_mut_ptr().cast(), buf.len()) } as i64)
        }
        "fd_write" => {
            super::check(unsafe { libc::write(number(), b"gw-escape".as_ptr().cast(), 9) } as i64)
        }
        "fork_many" => fork_many(number()),
        "alloc" => alloc(number()),
        "signal_group" => super::check(unsafe { libc::kill(0, libc::SIGUSR2) }.into()),
        _ => Outcome::Errno(libc::EINVAL),
    }
}

/// Forks `n` children that sleep; once all exist (or a fork failed), kills and reaps them.
fn fork_many(n: i32) -> Outcome {
    let mut children = Vec::with_capacity(n.max(0) as usize);
    let mut outcome = Outcome::Ok;
    for _ in 0..n {
        // SAFETY: the child only sleeps and exits, async-signal-safe calls.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::sleep(30);
                libc::_exit(0);
            }
        }
        if pid < 0 {
            outcome = super::errno();
            break;
        }
        children.push(pid);
    }
    for pid in children {
        // SAFETY: signals and reaps this process's own children.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    outcome
}

/// Maps `mib` MiB of anonymous memory and writes to every page of it.
fn alloc(mib: i32) -> Outcome {
    let len = (mib.max(0) as usize) << 20;
    // SAFETY: a fresh private anonymous mapping, written within its length, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return super::errno();
        }
        for off in (0..len).step_by(4096) {
            p.cast::<u8>().add(off).write_volatile(1);
        }
        libc::munmap(p, len);
    }
    Outcome::Ok
}
