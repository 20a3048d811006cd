//! `raw_tp/sys_exit`: records a session's path calls that the VFS refused with `EROFS` or
//! `EBUSY` (a write under a read-only bind, a rename or removal of a pinned directory), which
//! no LSM hook sees: the refusal comes from the mount before any hook runs; and those refused
//! with `EACCES`, which userspace keeps for a path under the session's protected paths (at
//! tier 2 they are hidden by mounts, which no program sees either) or, at tier 2, outside the
//! Landlock ruleset's roots and exec allowlist. In a learning session it also records the
//! calls that made, removed or renamed a name and succeeded ([`changes_names`]), which no
//! fanotify event of a mount mark reports: userspace keeps those outside the writable roots.
//! It refuses nothing. A call that failed otherwise costs one comparison, one that succeeded
//! the look at `LEARNING` (and while a session learns, a read of its number); only a task
//! under gatewayd's parent cgroup goes on to find its session.
use aya_ebpf::{
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_probe_read_user_str_bytes,
    },
    macros::raw_tracepoint,
    programs::RawTracePointContext,
};
use gateway_common::{
    AT_FDCWD, CallEvent, EACCES, EBUSY, EROFS, Event, EventKind, LEARNED, NO_ARG, REGS_ARGS,
    REGS_ORIG_AX, Reason, changes_names, path_call,
};

use crate::{
    maps::{DROPPED, EVENTS, LEARNING, flag},
    read,
    session::{current_session, under_parent},
};

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> i32 {
    let _ = try_sys_exit(&ctx);
    0
}

#[inline(always)]
fn try_sys_exit(ctx: &RawTracePointContext) -> Result<(), ()> {
    // sys_exit's arguments: the task's saved registers and the call's return value.
    let ret: i64 = ctx.arg(1);
    let regs: *const u8 = ctx.arg(0);
    let reason = if ret == 0 {
        // A learning session's name made, removed or renamed: userspace judges its directory.
        if !flag(&LEARNING) {
            return Ok(());
        }
        let nr: u64 = read(regs, REGS_ORIG_AX)?;
        if !changes_names(nr as u32) {
            return Ok(());
        }
        Reason::OutsideWritable
    } else if ret == -i64::from(EROFS) || ret == -i64::from(EBUSY) {
        Reason::ReadOnlyPath
    } else if ret == -i64::from(EACCES) {
        // Userspace keeps it only for a path under the session's protected (at tier 2,
        // hidden) paths, or outside the roots its Landlock ruleset enforces: an ordinary
        // permission refusal is not gatewayd's.
        Reason::ProtectedPath
    } else {
        return Ok(());
    };
    if !under_parent() {
        return Ok(());
    }
    let Some(session) = current_session().map_err(|_| ())? else {
        return Ok(());
    };
    if ret == 0 && session.info.learn == 0 {
        return Ok(());
    }
    let nr: u64 = read(regs, REGS_ORIG_AX)?;
    let Some(args) = path_call(nr as u32) else {
        return Ok(());
    };
    let slot = session.info.slot;
    let Some(mut entry) = EVENTS
        .get(slot)
        .and_then(|ring| ring.reserve_untyped::<CallEvent>(0))
    else {
        if let Some(n) = DROPPED.get_ptr_mut(slot) {
            // SAFETY: a non-null pointer from a map lookup points at this CPU's slot of the
            // session's counter and stays valid for the rest of the program run.
            unsafe { *n += 1 };
        }
        return Ok(());
    };
    let call = entry.as_mut_ptr();
    // SAFETY: `call` points at the reserved entry, which this run owns until it submits it;
    // every field is written before the submit.
    unsafe {
        let mut ev = Event::new(EventKind::CallRefused, reason);
        if ret == 0 {
            ev.reason |= LEARNED;
        }
        ev.pid = (bpf_get_current_pid_tgid() >> 32) as u32;
        ev.cgroup_id = bpf_get_current_cgroup_id();
        ev.session_id = session.id;
        ev.comm = bpf_get_current_comm().unwrap_or([0; 16]);
        (*call).event = ev;
        (*call).nr = nr as u32;
        (*call).errno = (-ret) as u32;
        (*call).dirfd = match args.dirfd {
            NO_ARG => AT_FDCWD,
            i => read::<u64>(regs, REGS_ARGS[(i & 3) as usize]).map_or(AT_FDCWD, |fd| fd as i32),
        };
        (*call).pad = 0;
        user_path(regs, args.path, &mut (*call).path);
        user_path(regs, args.path2, &mut (*call).path2);
    }
    entry.submit(0);
    Ok(())
}

/// Copies the path the call's argument `arg` points at into `out` (empty when there is no
/// such argument or it cannot be read).
#[inline(always)]
fn user_path(regs: *const u8, arg: u8, out: &mut [u8]) {
    out[0] = 0;
    if arg == NO_ARG || arg as usize >= REGS_ARGS.len() {
        return;
    }
    let Ok(ptr) = read::<u64>(regs, REGS_ARGS[arg as usize]) else {
        return;
    };
    // SAFETY: the helper copies at most `out.len()` bytes from user memory and fails instead
    // of faulting; `ptr` is never dereferenced here.
    if unsafe { bpf_probe_read_user_str_bytes(ptr as *const u8, out) }.is_err() {
        out[0] = 0;
    }
}
