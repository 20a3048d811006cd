//! Children gatewayd supervises (the agent of `gatewayd run`, a tool server of `gatewayd
//! mcp`): tied to gatewayd's life and confined in the forked child, before exec.

/// Arranges for `cmd`'s child to die with gatewayd (`PR_SET_PDEATHSIG`; a child whose
/// parent died between fork and that `prctl` exits at once, 137) and then to run `confine`
/// (its cgroup, Landlock, credentials, seccomp: whatever the caller built).
///
/// # Safety
/// `confine` runs between fork and exec: it must make only async-signal-safe calls, on
/// memory prepared before the fork.
pub unsafe fn supervise(
    cmd: &mut tokio::process::Command,
    confine: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
) {
    let parent = nix::unistd::getpid();
    // SAFETY: prctl and getppid are async-signal-safe; `confine` is, by this function's
    // contract.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // gatewayd died between fork and prctl: do not run unsupervised.
            if libc::getppid() != parent.as_raw() {
                libc::_exit(137);
            }
            confine()
        });
    }
}
