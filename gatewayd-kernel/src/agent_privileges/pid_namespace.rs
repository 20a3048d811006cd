//! The agent's PID namespace, and the small init at its PID 1 (`docs/KERNEL.md`, "The
//! agent's privileges").
//!
//! Three processes stand between gatewayd and the agent's program, all made between fork and
//! exec, with raw syscalls only (no allocation: everything is prepared before the fork):
//!
//! - **C**, the child gatewayd forked: unshares a PID namespace for its children, forks G,
//!   tells gatewayd G's pid when asked to (the creator of tier 2's Landlock domain, which
//!   names it in its audit records), waits for G's word that the namespace is ready (or the errno of what failed, which it
//!   returns, so the spawn fails as before), then relays: every forwarded signal goes to G,
//!   and C exits with G's status.
//! - **G**, PID 1 of the new namespace: dies with C (`PR_SET_PDEATHSIG`), mounts a procfs of
//!   the namespace on `/proc` (in the agent's private mount namespace: gatewayd and every
//!   other host process are out of its sight), sets `vm.memfd_noexec` to 2 for the namespace
//!   where the kernel has it, runs the caller's step (the agent's `/proc`, `/sys` and `/dev`
//!   around entering the cgroup, after the mount: tier 1's `lsm/sb_mount` refuses the
//!   cgroup's mounts; then, at tier 2, the hiding mounts and the Landlock ruleset, which A
//!   and all its descendants inherit), forks A, and becomes the init:
//!   forwards signals to A, reaps every orphan, and exits with A's status (exit code, or
//!   128 + signal) when A exits. When PID 1 exits the kernel kills everything else in the
//!   namespace, so no descendant of the agent outlives it.
//! - **A** returns from [`PidNamespace::enter`] and goes on to the agent's other steps and
//!   its exec.
use std::io;

/// The sysctl `vm.memfd_noexec` (Linux 6.3+), set per PID namespace.
const MEMFD_NOEXEC: &std::ffi::CStr = c"/proc/sys/vm/memfd_noexec";

/// Signals C and G pass on to the agent: the ones gatewayd forwards, and the user signals.
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// What is known before the fork about the namespace to make.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PidNamespace {
    memfd_noexec: bool,
}

impl PidNamespace {
    /// Looks, in gatewayd, for what this kernel has.
    pub(crate) fn new() -> PidNamespace {
        PidNamespace {
            memfd_noexec: std::path::Path::new("/proc/sys/vm/memfd_noexec").exists(),
        }
    }

    /// Whether this kernel has `vm.memfd_noexec`, which G sets to 2 (no memfd is executable).
    pub(crate) fn memfd_noexec(self) -> bool {
        self.memfd_noexec
    }

    /// In the forked child C: makes the namespace, its init G (which runs `in_init` before
    /// forking A) and returns in A only. An error of C or G is returned in C, which then has
    /// no child left. When `tell_init` is a descriptor, C writes G's pid (4 bytes, native
    /// order, as gatewayd's PID namespace numbers it) to it as soon as G exists.
    pub(crate) fn enter(
        self,
        in_init: &dyn Fn() -> io::Result<()>,
        tell_init: Option<libc::c_int>,
    ) -> io::Result<()> {
        // SAFETY: raw syscalls in the single-threaded forked child, on stack memory.
        unsafe {
            let set = signal_set();
            // Default disposition for SIGCHLD (gatewayd's runtime has a handler), then block
            // the set: C and G take these signals with sigwaitinfo, none is lost in between.
            libc::signal(libc::SIGCHLD, libc::SIG_DFL);
            check(libc::sigprocmask(
                libc::SIG_BLOCK,
                &raw const set,
                std::ptr::null_mut(),
            ))?;
            check(libc::unshare(libc::CLONE_NEWPID))?;
            let mut fds = [0; 2];
            check(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC))?;
            let g = libc::fork();
            if g < 0 {
                return Err(io::Error::last_os_error());
            }
            if g == 0 {
                libc::close(fds[0]);
                if let Some(fd) = tell_init {
                    libc::close(fd);
                }
                return self.init(fds[1], in_init, &set);
            }
            libc::close(fds[1]);
            if let Some(fd) = tell_init {
                // Best effort: a gatewayd that cannot read it only loses the attribution.
                libc::write(fd, g.to_ne_bytes().as_ptr().cast(), 4);
                libc::close(fd);
            }
            let mut word = [0u8; 4];
            let n = libc::read(fds[0], word.as_mut_ptr().cast(), 4);
            libc::close(fds[0]);
            let errno = i32::from_ne_bytes(word);
            if n != 4 || errno != 0 {
                let mut status = 0;
                libc::waitpid(g, &raw mut status, 0);
                return Err(io::Error::from_raw_os_error(if n == 4 {
                    errno
                } else {
                    libc::ECHILD
                }));
            }
            // The spawn's error pipe among them: gatewayd hears of A's exec (or error) alone.
            close_from(3);
            relay(g, &set)
        }
    }

    /// G: prepares the namespace, forks A (which returns `Ok`), then reaps until A exits.
    unsafe fn init(
        self,
        report: libc::c_int,
        in_init: &dyn Fn() -> io::Result<()>,
        set: &libc::sigset_t,
    ) -> io::Result<()> {
        // SAFETY: raw syscalls in the single-threaded forked child (G), on stack memory.
        unsafe {
            // Dies with C. Had C died already, the word written below would meet a closed
            // pipe (SIGPIPE, or EPIPE and exit).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                fail(report, &io::Error::last_os_error());
            }
            if let Err(e) = self.prepare().and_then(|()| in_init()) {
                fail(report, &e);
            }
            let a = libc::fork();
            if a < 0 {
                fail(report, &io::Error::last_os_error());
            }
            if a == 0 {
                libc::close(report);
                // The agent starts with default dispositions and nothing blocked.
                for sig in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
                    libc::signal(sig, libc::SIG_DFL);
                }
                check(libc::sigprocmask(
                    libc::SIG_UNBLOCK,
                    set,
                    std::ptr::null_mut(),
                ))?;
                return Ok(());
            }
            let ok = [0u8; 4];
            if libc::write(report, ok.as_ptr().cast(), 4) != 4 {
                libc::_exit(137);
            }
            libc::close(report);
            close_from(3);
            reap(a, set)
        }
    }

    /// G, before A exists: a procfs of this namespace on `/proc` (the host's is detached
    /// first, with whatever was mounted under it), then `vm.memfd_noexec = 2`.
    fn prepare(self) -> io::Result<()> {
        // SAFETY: plain syscalls on static C strings.
        unsafe {
            libc::umount2(c"/proc".as_ptr(), libc::MNT_DETACH);
            check(libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ))?;
            if self.memfd_noexec {
                let fd = libc::open(MEMFD_NOEXEC.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let n = libc::write(fd, b"2".as_ptr().cast(), 1);
                let e = io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// The forwarded signals and SIGCHLD.
fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        for sig in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&raw mut set, sig);
        }
        set
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// G's report of what failed, then its exit.
fn fail(report: libc::c_int, e: &io::Error) -> ! {
    let word = e.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes();
    // SAFETY: a write of a stack buffer and the exit of the forked child.
    unsafe {
        libc::write(report, word.as_ptr().cast(), 4);
        libc::_exit(127)
    }
}

/// Closes every descriptor from `first` on.
fn close_from(first: libc::c_uint) {
    // SAFETY: closing descriptors this process holds; nothing refers to them afterwards.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0) != 0 {
            for fd in first..4096 {
                libc::close(fd as libc::c_int);
            }
        }
    }
}

/// A status as the run reports it: the exit code, or 128 + the signal that ended it.
fn exit_code(status: libc::c_int) -> libc::c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

/// C: passes signals on to G; exits with G's status.
fn relay(g: libc::pid_t, set: &libc::sigset_t) -> ! {
    loop {
        // SAFETY: sigwaitinfo on a set these signals are blocked in; waitpid and kill of
        // this process's own child.
        unsafe {
            let sig = libc::sigwaitinfo(set, std::ptr::null_mut());
            if sig == libc::SIGCHLD {
                let mut status = 0;
                if libc::waitpid(g, &raw mut status, libc::WNOHANG) == g {
                    libc::_exit(exit_code(status));
                }
            } else if sig > 0 {
                libc::kill(g, sig);
            }
        }
    }
}

/// G: passes signals on to A, reaps every child, exits with A's status when A exits.
fn reap(a: libc::pid_t, set: &libc::sigset_t) -> ! {
    loop {
        // SAFETY: as in `relay`; waitpid(-1) reaps the namespace's orphans too.
        unsafe {
            let sig = libc::sigwaitinfo(set, std::ptr::null_mut());
            if sig == libc::SIGCHLD {
                loop {
                    let mut status = 0;
                    let pid = libc::waitpid(-1, &raw mut status, libc::WNOHANG);
                    if pid <= 0 {
                        break;
                    }
                    if pid == a {
                        libc::_exit(exit_code(status));
                    }
                }
            } else if sig > 0 {
                libc::kill(a, sig);
            }
        }
    }
}
