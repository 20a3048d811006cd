//! What the QEMU guest's init keeps running beside the suite.
//!
//! ```text
//! holdperf    # open a software perf counter on this process, print one line, then wait
//!             # until killed
//! ```
//!
//! Why: the first per-task perf event of a kernel enables the static key
//! `perf_sched_events`, whose jump labels sit in `__schedule`, and the kernel disables it
//! again about a second after the last such event closes. Under QEMU's multi-threaded TCG
//! that live code patching (`text_poke_bp`) can race with the other vCPU running `__schedule`
//! ("Oops: int3"). The escape suite's bare half opens such a counter on itself; with one held
//! for the guest's whole life, its open and close only move a count and patch nothing.
use std::io::Write as _;

use super::{Failure, Outcome};

/// Runs `action` when it is `holdperf`; then it returns only on failure.
pub(crate) fn run(action: &[String]) -> Outcome {
    if action[0] != "holdperf" {
        return Err(Failure::NotMine);
    }
    // struct perf_event_attr (PERF_ATTR_SIZE_VER7, 128 bytes), zeroed but for: type
    // PERF_TYPE_SOFTWARE (1), size, config PERF_COUNT_SW_CPU_CLOCK (0), and the flags
    // disabled | exclude_kernel | exclude_hv. Disabled, it counts nothing; it only exists.
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_le_bytes());
    attr[4..8].copy_from_slice(&128u32.to_le_bytes());
    attr[40..48].copy_from_slice(&(1u64 | 1 << 5 | 1 << 6).to_le_bytes());
    // SAFETY: perf_event_open reads `attr` (128 bytes, alive for the call); pid 0 is this
    // task, cpu -1 any CPU, group fd -1 none, no flags.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            0 as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().to_string().into());
    }
    println!(
        "OK holdperf: a perf counter held on pid {}",
        std::process::id()
    );
    let _ = std::io::stdout().flush();
    loop {
        // SAFETY: waits for a signal; the counter's fd stays open for the process's life.
        unsafe { libc::pause() };
    }
}
