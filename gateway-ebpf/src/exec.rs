//! The code-loading programs: what a session's agent may run.
//!
//! - `bprm_check_security`: executing a file with no name left (a memfd, an `O_TMPFILE`
//!   file, a deleted file: no link) is denied in every session; with the policy's exec
//!   allowlist, executing anything not on it is denied (matched by inode; runs for the
//!   executed file and again for a script's interpreter).
//! - `mmap_file`, `file_mprotect`: with the exec allowlist, mapping a file executable
//!   (`PROT_EXEC`) is allowed only for a listed binary and for files under a library tree
//!   (`sandbox.exec_libs`) or an ELF interpreter of a listed binary, so an unlisted binary
//!   cannot be run through the dynamic loader (`ld.so BINARY`) or `LD_PRELOAD`. Anonymous
//!   executable memory (JIT compilers) is not a file and is left alone.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use gateway_common::{Config, EXEC_RUN, EventKind, InodeKey, MAX_PATH_DEPTH, Reason};

use crate::{
    config, inode_key,
    maps::EXEC,
    read,
    session::{Session, Subject, lsm_session, session_inode},
};

/// `PROT_EXEC` of `mmap(2)`.
const PROT_EXEC: u64 = 0x4;

// --------------------------------------------------------------------------------------------
// BPF LSM: bprm_check_security
// --------------------------------------------------------------------------------------------

/// LSM_HOOK(int, 0, bprm_check_security, struct linux_binprm *bprm): arg 1 = earlier verdict.
#[lsm(hook = "bprm_check_security")]
pub fn bprm_check_security(ctx: LsmContext) -> i32 {
    match try_bprm_check(&ctx) {
        Ok(ret) | Err(ret) => ret,
    }
}

fn try_bprm_check(ctx: &LsmContext) -> Result<i32, i32> {
    let earlier: i32 = ctx.arg(1);
    if earlier != 0 {
        return Ok(earlier);
    }
    let Some(session) = lsm_session()? else {
        return Ok(0);
    };
    let cfg = config();
    let bprm: *const u8 = ctx.arg(0);
    let mut hit = Subject::default();
    let deny = |hit: Subject, reason: Reason| hit.deny(&session, EventKind::Exec, reason);
    let (key, nlink) = exec_file(cfg, bprm).map_err(|()| deny(hit, Reason::Unresolvable))?;
    hit.file(&key);
    if nlink == 0 {
        return Err(deny(hit, Reason::ExecUnlinked));
    }
    if session.info.exec_enforced == 0 {
        return Ok(0);
    }
    // SAFETY: a non-null pointer from a map lookup points at the entry's value, valid for
    // the rest of the program run.
    match EXEC.get_ptr(session_inode(&session, &key)) {
        Some(v) if unsafe { *v } == EXEC_RUN => Ok(0),
        _ if session.learns_file(Reason::ExecNotAllowed) => Ok(0),
        _ => Err(deny(hit, Reason::ExecNotAllowed)),
    }
}

/// Identity and link count of the file being executed.
#[inline(always)]
fn exec_file(cfg: &Config, bprm: *const u8) -> Result<(InodeKey, u32), ()> {
    let file: *const u8 = read(bprm, cfg.off_bprm_file)?;
    let dentry: *const u8 = read(file, cfg.off_file_dentry)?;
    let inode: *const u8 = read(dentry, cfg.off_dentry_inode)?;
    Ok((inode_key(cfg, inode)?, read(inode, cfg.off_inode_nlink)?))
}

// --------------------------------------------------------------------------------------------
// BPF LSM: mmap_file, file_mprotect
// --------------------------------------------------------------------------------------------

/// LSM_HOOK(int, 0, mmap_file, struct file *file, unsigned long reqprot, unsigned long prot,
/// unsigned long flags): arg 4 = earlier verdict. `file` is null for anonymous memory.
#[lsm(hook = "mmap_file")]
pub fn mmap_file(ctx: LsmContext) -> i32 {
    match try_mmap_file(&ctx) {
        Ok(ret) | Err(ret) => ret,
    }
}

fn try_mmap_file(ctx: &LsmContext) -> Result<i32, i32> {
    let earlier: i32 = ctx.arg(4);
    if earlier != 0 {
        return Ok(earlier);
    }
    let prot: u64 = ctx.arg(2);
    let file: *const u8 = ctx.arg(0);
    if prot & PROT_EXEC == 0 || file.is_null() {
        return Ok(0);
    }
    exec_mapping(EventKind::MmapExec, |_| Ok(file))
}

/// LSM_HOOK(int, 0, file_mprotect, struct vm_area_struct *vma, unsigned long reqprot,
/// unsigned long prot): arg 3 = earlier verdict.
#[lsm(hook = "file_mprotect")]
pub fn file_mprotect(ctx: LsmContext) -> i32 {
    match try_file_mprotect(&ctx) {
        Ok(ret) | Err(ret) => ret,
    }
}

fn try_file_mprotect(ctx: &LsmContext) -> Result<i32, i32> {
    let earlier: i32 = ctx.arg(3);
    if earlier != 0 {
        return Ok(earlier);
    }
    let prot: u64 = ctx.arg(2);
    if prot & PROT_EXEC == 0 {
        return Ok(0);
    }
    let vma: *const u8 = ctx.arg(0);
    exec_mapping(EventKind::MprotectExec, |cfg| read(vma, cfg.off_vma_file))
}

/// The decision on mapping a file executable inside a session that lists binaries: allowed
/// when the file, or a directory above it, is in the session's `EXEC` entries (a binary, a
/// library tree, an interpreter). `file` (null: anonymous memory, allowed) is only read once
/// the task is known to be in such a session: every other task pays the session test alone.
#[inline(always)]
fn exec_mapping(
    kind: EventKind,
    file: impl FnOnce(&Config) -> Result<*const u8, ()>,
) -> Result<i32, i32> {
    let Some(session) = lsm_session()? else {
        return Ok(0);
    };
    if session.info.exec_enforced == 0 {
        return Ok(0);
    }
    let cfg = config();
    let mut hit = Subject::default();
    let deny = |hit: Subject, reason: Reason| hit.deny(&session, kind, reason);
    let file = file(cfg).map_err(|()| deny(hit, Reason::Unresolvable))?;
    if file.is_null() {
        return Ok(0);
    }
    let dentry: *const u8 =
        read(file, cfg.off_file_dentry).map_err(|()| deny(hit, Reason::Unresolvable))?;
    match exec_tree(cfg, &session, dentry, &mut hit) {
        Ok(true) => Ok(0),
        Ok(false) if session.learns_file(Reason::ExecNotAllowed) => Ok(0),
        Ok(false) => Err(deny(hit, Reason::ExecNotAllowed)),
        Err(()) => Err(deny(hit, Reason::Unresolvable)),
    }
}

/// Walks from a dentry up to its filesystem root, looking each inode up in `EXEC` under the
/// session (any value: a binary, a library tree or an interpreter). The first inode is
/// recorded in `hit`. Err: unreadable, or deeper than `MAX_PATH_DEPTH`.
#[inline(always)]
fn exec_tree(
    cfg: &Config,
    session: &Session,
    mut dentry: *const u8,
    hit: &mut Subject,
) -> Result<bool, ()> {
    for _ in 0..MAX_PATH_DEPTH {
        let key = inode_key(cfg, read(dentry, cfg.off_dentry_inode)?)?;
        hit.file(&key);
        if EXEC.get_ptr(session_inode(session, &key)).is_some() {
            return Ok(true);
        }
        let parent: *const u8 = read(dentry, cfg.off_dentry_parent)?;
        if parent == dentry {
            return Ok(false);
        }
        dentry = parent;
    }
    Err(())
}
