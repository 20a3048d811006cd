//! The file programs: protected paths (matched by inode identity: the session's index of its
//! protected trees, and a walk up the dentry chain for what came into them since), the files
//! of the session's exec allowlist, and, for a session whose policy lists `sandbox.readable`
//! or `sandbox.writable`, its readable and writable roots (`ROOTS`, matched by inode on the
//! same walk).
//!
//! - `file_open`: opening a protected file or anything under a protected directory; opening
//!   an exec-listed file or any cgroup file for writing; with roots, opening for reading
//!   outside the readable roots (not for execution: that is the exec programs' business)
//!   and for writing outside the writable ones.
//! - `inode_unlink`, `inode_rmdir`, `inode_rename`, `inode_setattr`: deleting, renaming,
//!   replacing, moving into, truncating or chmod'ing a protected path or an exec-listed file;
//!   with writable roots, any of these outside them (both sides of a rename).
//! - `inode_link`: a hard link to a protected inode (or to anything under a protected
//!   directory), and a new link inside a protected directory or outside the writable roots.
//! - `inode_create`, `inode_mknod`, `inode_symlink`, `inode_mkdir`: creating anything inside
//!   a protected directory or outside the writable roots (the new, negative dentry's walk
//!   starts at its parent).
//! - every hook above, on the side that makes or changes a name: a name of the session's
//!   `READ_ONLY_NAMES` (a read-only path that did not exist when it started) in its
//!   directory.
//! - every hook above, on every side, after the checks above found nothing: a name that
//!   matches one of the session's `sandbox.protected_names` under a `ROOT_NAMES` root
//!   ([`crate::names`]).
//! - `d_instantiate` (and `inode_rename`, before its decision), for every process: keeping
//!   the index current (`TREE`), never denying.
use aya_ebpf::{helpers::bpf_probe_read_kernel_str_bytes, macros::lsm, programs::LsmContext};
use gateway_common::{
    Config, DirName, EventKind, InodeKey, MAX_PATH_DEPTH, READ_ONLY_NAME_MAX, ROOT_READ,
    ROOT_WRITE, Reason, TREE_MARKED, TREE_PROTECTED,
};

use crate::{
    config, inode_key, load,
    maps::{EVERY_OPEN, EXEC, FILE_WALK, PROTECTED, READ_ONLY_NAMES, ROOTS, TREE, flag},
    opened_inode_key, read,
    session::{Session, Subject, current_session, lsm_session, session_inode, under_parent},
};

const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
const PROC_SUPER_MAGIC: u64 = 0x9fa0;
const SYSFS_MAGIC: u64 = 0x6265_6572;
const DEVPTS_SUPER_MAGIC: u64 = 0x1cd1;
const PIPEFS_MAGIC: u64 = 0x5049_5045;
const SOCKFS_MAGIC: u64 = 0x534f_434b;
const ANON_INODE_FS_MAGIC: u64 = 0x0904_1934;
const FMODE_READ: u32 = 0x1;
const FMODE_WRITE: u32 = 0x2;
/// `file.f_flags`: opened by execve or uselib (the kernel's `__FMODE_EXEC`, which stays in
/// `f_flags` on every kernel; whether `f_mode` carries `FMODE_EXEC` too changed over time).
const FMODE_EXEC_FLAG: u32 = 0x20;
/// `dentry.d_flags`: a dentry reached by a file handle, not (yet) connected to its parents
/// (the same bit in 6.1 and 6.12).
const DCACHE_DISCONNECTED: u32 = 0x20;
const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFCHR: u32 = 0o020_000;

/// What a file check found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Neither protected nor outside the roots asked about.
    Clear,
    /// The file is, or lies under, a protected path (recorded in the event).
    Protected,
    /// The file lies outside the roots: the rights (`ROOT_READ`, `ROOT_WRITE`) it lacks.
    Outside(u32),
}

/// A learning session takes what lies outside its roots as clear ([`Session::learns_file`]):
/// its other checks (protected names, exec-listed files, gatewayd's own) still run.
#[inline(always)]
fn learn_outside(session: &Session, found: Result<Found, ()>) -> Result<Found, ()> {
    match found {
        Ok(Found::Outside(missing)) if session.learns_file(outside(missing)) => Ok(Found::Clear),
        other => other,
    }
}

/// The audit reason of a [`Found::Outside`].
#[inline(always)]
fn outside(missing: u32) -> Reason {
    if missing & ROOT_READ != 0 {
        Reason::OutsideReadable
    } else {
        Reason::OutsideWritable
    }
}

// --------------------------------------------------------------------------------------------
// BPF LSM: file_open
// --------------------------------------------------------------------------------------------

/// LSM_HOOK(int, 0, file_open, struct file *file): arg 0 = file, arg 1 = earlier verdict.
#[lsm(hook = "file_open")]
pub fn file_open(ctx: LsmContext) -> i32 {
    match try_file_open(&ctx) {
        Ok(ret) | Err(ret) => ret,
    }
}

fn try_file_open(ctx: &LsmContext) -> Result<i32, i32> {
    let earlier: i32 = ctx.arg(1);
    if earlier != 0 {
        return Ok(earlier);
    }
    if !under_parent() {
        return Ok(0);
    }
    let cfg = config();
    let file: *const u8 = ctx.arg(0);
    // The opened file's own fields are plain loads (see `load`): no helper call on the
    // fast path.
    let inode: *const u8 = load(file, cfg.off_file_inode);
    let mode: u32 = load(file, cfg.off_file_mode);
    let key = opened_inode_key(cfg, inode);
    let tree = tree_value(key);
    // The fast exit, before the session is found: reading an inode `TREE` does not hold is
    // clear for every session while none enforces roots or walks (`EVERY_OPEN`,
    // `FILE_WALK`). Writing needs the session (its exec allowlist).
    if tree.is_none() && mode & FMODE_WRITE == 0 && !flag(&EVERY_OPEN) && !flag(&FILE_WALK) {
        return Ok(0);
    }
    let Some(session) = current_session()? else {
        return Ok(0);
    };
    let mut hit = Subject::default();
    let deny = |hit: Subject, reason: Reason| Err(hit.deny(&session, EventKind::FileOpen, reason));
    // The roots asked about: none for a session without roots (one flag test).
    let mut need = 0;
    if session.info.roots != 0 {
        let flags: u32 = load(file, cfg.off_file_flags);
        if mode & FMODE_READ != 0 && flags & FMODE_EXEC_FLAG == 0 {
            need |= ROOT_READ;
        }
        if mode & FMODE_WRITE != 0 {
            need |= ROOT_WRITE;
        }
        need &= session.info.roots;
    }
    let dentry = || read::<*const u8>(file, cfg.off_file_dentry);
    match learn_outside(
        &session,
        check_inode(cfg, &session, key, tree, inode, dentry, &mut hit, need),
    ) {
        Ok(Found::Clear) => {}
        Ok(Found::Protected) => return deny(hit, Reason::ProtectedPath),
        Ok(Found::Outside(missing)) => return deny(hit, outside(missing)),
        Err(()) => return deny(hit, Reason::Unresolvable),
    }
    if session.info.names != 0 {
        let Ok(d) = dentry() else {
            return deny(hit, Reason::Unresolvable);
        };
        match crate::names::protected_by_name(cfg, &session, d, &mut hit) {
            Ok(false) => {}
            Ok(true) => return deny(hit, Reason::ProtectedName),
            Err(()) => return deny(hit, Reason::Unresolvable),
        }
    }
    if mode & FMODE_WRITE == 0 {
        return Ok(0);
    }
    let Ok(dentry) = dentry() else {
        return deny(hit, Reason::Unresolvable);
    };
    match exec_listed(cfg, &session, dentry) {
        Ok(false) => {}
        Ok(true) => return deny(hit, Reason::ExecListed),
        Err(()) => return deny(hit, Reason::Unresolvable),
    }
    if on_cgroupfs(cfg, dentry).unwrap_or(true) {
        return deny(hit, Reason::SelfProtection);
    }
    Ok(0)
}

/// Whether the dentry is on a cgroup filesystem.
#[inline(always)]
fn on_cgroupfs(cfg: &Config, dentry: *const u8) -> Result<bool, ()> {
    let inode: *const u8 = read(dentry, cfg.off_dentry_inode)?;
    let sb: *const u8 = read(inode, cfg.off_inode_sb)?;
    let magic: u64 = read(sb, cfg.off_sb_magic)?;
    Ok(magic == CGROUP2_SUPER_MAGIC || magic == CGROUP_SUPER_MAGIC)
}

/// Whether an inode is outside the roots' reach: a character device (`/dev/null`, a tty),
/// or a file of procfs, sysfs, devpts, a cgroup filesystem, or the kernel's pipe, socket
/// and anonymous-inode filesystems (what `/proc/self/fd/N` reopens). These are not data
/// files a root could name.
#[inline(always)]
fn exempt(cfg: &Config, inode: *const u8) -> Result<bool, ()> {
    let mode: u16 = read(inode, cfg.off_inode_mode)?;
    if u32::from(mode) & S_IFMT == S_IFCHR {
        return Ok(true);
    }
    let sb: *const u8 = read(inode, cfg.off_inode_sb)?;
    let magic: u64 = read(sb, cfg.off_sb_magic)?;
    Ok(matches!(
        magic,
        PROC_SUPER_MAGIC
            | SYSFS_MAGIC
            | DEVPTS_SUPER_MAGIC
            | CGROUP2_SUPER_MAGIC
            | CGROUP_SUPER_MAGIC
            | PIPEFS_MAGIC
            | SOCKFS_MAGIC
            | ANON_INODE_FS_MAGIC
    ))
}

/// Whether the dentry's own inode is on the session's exec allowlist (only looked up when the
/// session enforces one; a negative dentry is not).
#[inline(always)]
fn exec_listed(cfg: &Config, session: &Session, dentry: *const u8) -> Result<bool, ()> {
    if session.info.exec_enforced == 0 {
        return Ok(false);
    }
    let inode: *const u8 = read(dentry, cfg.off_dentry_inode)?;
    if inode.is_null() {
        return Ok(false);
    }
    let key = inode_key(cfg, inode)?;
    Ok(EXEC.get_ptr(session_inode(session, &key)).is_some())
}

/// Checks a dentry against the session's protected paths and, for the rights in `need`
/// (`ROOT_READ`, `ROOT_WRITE`; 0 for a session without roots, or a hook that asks none),
/// its roots. Err: something could not be read, the path is deeper than `MAX_PATH_DEPTH` or
/// cannot be walked to its root. A negative dentry (a name that does not exist yet, e.g. a
/// rename target or a file being created) has no inode of its own: its parent directory is
/// looked up.
///
/// The fast path is one `TREE` lookup: an inode `TREE` does not hold is in no session's
/// `PROTECTED` (userspace enters each protected and indexed inode in both) and came into no
/// indexed tree, so it is not protected. One it holds is looked up in `PROTECTED` under the
/// session (an indexed session has every inode of its protected trees there, whatever name
/// reaches it). Only an indexed directory or an inode that came into an indexed tree during a
/// session, a session that is not indexed, or `FILE_WALK` set, takes the walk up the dentry
/// parents for protected paths. Rights not granted by the inode's own `ROOTS` entry take the
/// walk too (an exempt inode needs none).
#[inline(always)]
fn check_dentry(
    cfg: &Config,
    session: &Session,
    dentry: *const u8,
    hit: &mut Subject,
    need: u32,
) -> Result<Found, ()> {
    let mut first = dentry;
    let mut inode: *const u8 = read(first, cfg.off_dentry_inode)?;
    if inode.is_null() {
        first = read(first, cfg.off_dentry_parent)?;
        inode = read(first, cfg.off_dentry_inode)?;
        if inode.is_null() {
            return Err(());
        }
    }
    let key = inode_key(cfg, inode)?;
    check_inode(
        cfg,
        session,
        key,
        tree_value(key),
        inode,
        || Ok(first),
        hit,
        need,
    )
}

/// The inode's value in `TREE`, if it holds the inode.
#[inline(always)]
fn tree_value(key: InodeKey) -> Option<u32> {
    // SAFETY: a non-null pointer from a map lookup, read at once; values are replaced whole
    // (the map is not preallocated), never changed in place.
    TREE.get_ptr(key).map(|v| unsafe { *v })
}

/// [`check_dentry`] from the inode on: `key` is `inode`'s identity and `tree` its value in
/// `TREE`, `first` gives the positive dentry whose parents the walk climbs (asked for only
/// when it walks).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn check_inode(
    cfg: &Config,
    session: &Session,
    key: InodeKey,
    tree: Option<u32>,
    inode: *const u8,
    first: impl FnOnce() -> Result<*const u8, ()>,
    hit: &mut Subject,
    mut need: u32,
) -> Result<Found, ()> {
    hit.file(&key);
    let own = session_inode(session, &key);
    let walk_all = session.info.file_walk != 0 || flag(&FILE_WALK);
    // Every inode a live session protects is in `TREE` too: one `TREE` does not hold is in
    // no session's `PROTECTED`.
    if (walk_all || tree.is_some())
        && let Some(root) = PROTECTED.get_ptr(own)
    {
        // SAFETY: a non-null pointer from a map lookup, read at once; values are replaced
        // whole (the map is not preallocated), never changed in place.
        hit.protected_ino = unsafe { *root };
        return Ok(Found::Protected);
    }
    if need != 0 {
        if exempt(cfg, inode)? {
            need = 0;
        } else if let Some(rights) = ROOTS.get_ptr(own) {
            // SAFETY: as above: read at once, values replaced whole.
            need &= !unsafe { *rights };
        }
    }
    // A protected inode itself needs no walk; an indexed directory or what came into one
    // does.
    let protected = walk_all || tree.is_some_and(|v| v != TREE_PROTECTED);
    if !protected && need == 0 {
        return Ok(Found::Clear);
    }
    walk(cfg, session, first()?, hit, need, protected)
}

/// Whether the dentry lies under a root of the session whose `ROOTS` value has `right`:
/// the walk from its parent up finds one. Err as [`walk`]'s.
#[inline(always)]
pub fn walk_to_root(
    cfg: &Config,
    session: &Session,
    dentry: *const u8,
    right: u32,
) -> Result<bool, ()> {
    let mut ignored = Subject::default();
    Ok(walk(cfg, session, dentry, &mut ignored, right, false)? == Found::Clear)
}

/// Walks from a positive dentry's parent up to its filesystem root (the dentry itself was
/// looked up by the caller): with `protected`, each inode is looked up in `PROTECTED` under
/// the session; while `need` has rights no level granted yet, in `ROOTS` too. Ok: what was
/// found ([`Found::Outside`] when the root is reached with rights still missing); Err:
/// something could not be read, the path is deeper than `MAX_PATH_DEPTH`, or the walk ends
/// at a disconnected dentry (one reached by a file handle, whose parents the kernel has not
/// connected): its names are unknown, so it is denied.
#[inline(always)]
fn walk(
    cfg: &Config,
    session: &Session,
    mut dentry: *const u8,
    hit: &mut Subject,
    mut need: u32,
    protected: bool,
) -> Result<Found, ()> {
    for _ in 0..MAX_PATH_DEPTH {
        let parent: *const u8 = read(dentry, cfg.off_dentry_parent)?;
        if parent == dentry {
            let flags: u32 = read(dentry, cfg.off_dentry_flags)?;
            if flags & DCACHE_DISCONNECTED != 0 {
                return Err(());
            }
            return Ok(if need == 0 {
                Found::Clear
            } else {
                Found::Outside(need)
            });
        }
        dentry = parent;
        let inode: *const u8 = read(dentry, cfg.off_dentry_inode)?;
        if inode.is_null() {
            return Err(());
        }
        let key = inode_key(cfg, inode)?;
        let here = session_inode(session, &key);
        if protected && let Some(root) = PROTECTED.get_ptr(here) {
            // SAFETY: as in `check_inode`: read at once, values replaced whole.
            hit.protected_ino = unsafe { *root };
            return Ok(Found::Protected);
        }
        if need != 0
            && let Some(rights) = ROOTS.get_ptr(here)
        {
            // SAFETY: as above.
            need &= !unsafe { *rights };
            if need == 0 && !protected {
                return Ok(Found::Clear);
            }
        }
    }
    Err(())
}

// --------------------------------------------------------------------------------------------
// BPF LSM: keeping the index current (every process on the host)
// --------------------------------------------------------------------------------------------

/// LSM_HOOK(void, LSM_RET_VOID, d_instantiate, struct dentry *dentry, struct inode *inode):
/// a name gets its inode (a file, directory, node or symbolic link created, a hard link
/// made, or a name looked up). In a directory `TREE` knows, the inode is marked, whoever
/// made it: files made during a session inside a protected directory, by the agent or not,
/// take the walk. Never denies.
#[lsm(hook = "d_instantiate")]
pub fn d_instantiate(ctx: LsmContext) -> i32 {
    match try_d_instantiate(&ctx) {
        Ok(()) | Err(()) => 0,
    }
}

fn try_d_instantiate(ctx: &LsmContext) -> Result<(), ()> {
    let cfg = config();
    let dentry: *const u8 = ctx.arg(0);
    let inode: *const u8 = ctx.arg(1);
    if inode.is_null() {
        return Ok(());
    }
    let parent: *const u8 = read(dentry, cfg.off_dentry_parent)?;
    if parent == dentry {
        return Ok(());
    }
    let dir: *const u8 = read(parent, cfg.off_dentry_inode)?;
    if dir.is_null() || TREE.get_ptr(inode_key(cfg, dir)?).is_none() {
        return Ok(());
    }
    mark(cfg, inode)
}

/// Marks an inode in `TREE`; when `TREE` is full, sets `FILE_WALK` (every session walks):
/// an unmarked inode in a protected directory would be taken for an unprotected one.
#[inline(always)]
fn mark(cfg: &Config, inode: *const u8) -> Result<(), ()> {
    let key = inode_key(cfg, inode)?;
    // A protected inode's `TREE_PROTECTED` gives way to the mark: it may now lie under
    // another session's protected directory, which only the walk sees.
    // SAFETY: a non-null pointer from a map lookup, read at once.
    let known = TREE
        .get_ptr(key)
        .is_some_and(|v| unsafe { *v } != TREE_PROTECTED);
    if known || TREE.insert(key, TREE_MARKED, 0).is_ok() {
        return Ok(());
    }
    walk_everything();
    Ok(())
}

/// Sets `FILE_WALK`.
#[inline(always)]
fn walk_everything() {
    if let Some(w) = FILE_WALK.get_ptr_mut(0) {
        // SAFETY: a non-null pointer from an array map lookup points at slot 0's value, valid
        // for the rest of the program run; a plain store of a flag only ever set here.
        unsafe { *w = 1 };
    }
}

/// For `inode_rename`, every process: an inode moved into a directory `TREE` knows is
/// marked; a directory moved there sets `FILE_WALK` (what lies under it cannot be marked
/// one by one). `RENAME_EXCHANGE` calls the hook once for each direction.
#[inline(always)]
fn mark_moved(ctx: &LsmContext) -> Result<(), ()> {
    let cfg = config();
    let new_dir: *const u8 = ctx.arg(2);
    if new_dir.is_null() || TREE.get_ptr(inode_key(cfg, new_dir)?).is_none() {
        return Ok(());
    }
    let old_dentry: *const u8 = ctx.arg(1);
    let inode: *const u8 = read(old_dentry, cfg.off_dentry_inode)?;
    if inode.is_null() {
        return Ok(());
    }
    let mode: u16 = read(inode, cfg.off_inode_mode)?;
    if u32::from(mode) & S_IFMT == S_IFDIR {
        walk_everything();
    }
    mark(cfg, inode)
}

// --------------------------------------------------------------------------------------------
// BPF LSM: changes to protected entries without opening them
// --------------------------------------------------------------------------------------------

/// Whether a hook also refuses dentries whose inode is on the exec allowlist.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExecListed {
    Deny,
    Ignore,
}

/// Denies the hook when any of the dentries is, or lies under, a protected path (or, with
/// [`ExecListed::Deny`], is an exec-listed file), or lies outside the session's roots for
/// the rights its `needs` entry asks (`ROOT_WRITE` or 0; only the sides the session
/// enforces are asked); a side that asks `ROOT_WRITE` also when its name is one of the
/// session's read-only names.
#[inline(always)]
fn deny_file(
    earlier: i32,
    kind: EventKind,
    dentries: [*const u8; 2],
    needs: [u32; 2],
    exec: ExecListed,
) -> i32 {
    if earlier != 0 {
        return earlier;
    }
    let session = match lsm_session() {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(deny) => return deny,
    };
    let cfg = config();
    for (d, need) in dentries.into_iter().zip(needs) {
        if d.is_null() {
            continue;
        }
        let mut hit = Subject::default();
        let found = check_dentry(cfg, &session, d, &mut hit, need & session.info.roots);
        let reason = match learn_outside(&session, found) {
            Ok(Found::Clear) if exec == ExecListed::Ignore => None,
            Ok(Found::Clear) => match exec_listed(cfg, &session, d) {
                Ok(false) => None,
                Ok(true) => Some(Reason::ExecListed),
                Err(()) => Some(Reason::Unresolvable),
            },
            Ok(Found::Protected) => Some(Reason::ProtectedPath),
            Ok(Found::Outside(missing)) => Some(outside(missing)),
            Err(()) => Some(Reason::Unresolvable),
        };
        let reason = match reason {
            None if need & ROOT_WRITE != 0 => match read_only_name(cfg, &session, d, &mut hit) {
                Ok(false) => None,
                Ok(true) => Some(Reason::ReadOnlyName),
                Err(()) => Some(Reason::Unresolvable),
            },
            other => other,
        };
        let reason = match reason {
            None => match crate::names::protected_by_name(cfg, &session, d, &mut hit) {
                Ok(false) => None,
                Ok(true) => Some(Reason::ProtectedName),
                Err(()) => Some(Reason::Unresolvable),
            },
            other => other,
        };
        if let Some(reason) = reason {
            return hit.deny(&session, kind, reason);
        }
    }
    0
}

/// Whether `dentry`'s name in its directory is one of the session's `READ_ONLY_NAMES`; the
/// event then names the directory (`file_ino`) and the name's index in the session's list
/// (`protected_ino`).
#[inline(always)]
fn read_only_name(
    cfg: &Config,
    session: &Session,
    dentry: *const u8,
    hit: &mut Subject,
) -> Result<bool, ()> {
    let parent: *const u8 = read(dentry, cfg.off_dentry_parent)?;
    let dir: *const u8 = read(parent, cfg.off_dentry_inode)?;
    if dir.is_null() {
        return Err(());
    }
    let dir = inode_key(cfg, dir)?;
    let name: *const u8 = read(dentry, cfg.off_dentry_name)?;
    let mut key = DirName {
        session: session.id,
        dev: dir.dev,
        ino: dir.ino,
        name: [0; 32],
    };
    // SAFETY: copies at most 32 bytes (the NUL included) into the key's own array, and fails
    // instead of faulting on a bad address.
    let len = unsafe { bpf_probe_read_kernel_str_bytes(name, &mut key.name) }
        .map_err(|_| ())?
        .len();
    // A longer name was cut at 31 bytes: none of the session's.
    if len > READ_ONLY_NAME_MAX as usize {
        return Ok(false);
    }
    match READ_ONLY_NAMES.get_ptr(&key) {
        Some(index) => {
            hit.file_ino = dir.ino;
            hit.file_dev = dir.dev as u32;
            // SAFETY: a non-null pointer from a map lookup, read at once.
            hit.protected_ino = u64::from(unsafe { *index });
            Ok(true)
        }
        None => Ok(false),
    }
}

/// LSM_HOOK(int, 0, inode_unlink, struct inode *dir, struct dentry *dentry)
#[lsm(hook = "inode_unlink")]
pub fn inode_unlink(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(2),
        EventKind::Unlink,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Deny,
    )
}

/// LSM_HOOK(int, 0, inode_rmdir, struct inode *dir, struct dentry *dentry)
#[lsm(hook = "inode_rmdir")]
pub fn inode_rmdir(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(2),
        EventKind::Rmdir,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_rename, struct inode *old_dir, struct dentry *old_dentry,
///          struct inode *new_dir, struct dentry *new_dentry): the source, and the target
/// (replacing a protected or exec-listed file, or moving something into a protected
/// directory).
#[lsm(hook = "inode_rename")]
pub fn inode_rename(ctx: LsmContext) -> i32 {
    if mark_moved(&ctx).is_err() {
        walk_everything();
    }
    deny_file(
        ctx.arg(4),
        EventKind::Rename,
        [ctx.arg(1), ctx.arg(3)],
        [ROOT_WRITE, ROOT_WRITE],
        ExecListed::Deny,
    )
}

/// LSM_HOOK(int, 0, inode_setattr, struct dentry *dentry, struct iattr *attr) (kernels < 6.3)
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr2(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(2),
        EventKind::Setattr,
        [ctx.arg(0), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Deny,
    )
}

/// LSM_HOOK(int, 0, inode_setattr, struct mnt_idmap *idmap, struct dentry *dentry,
///          struct iattr *attr): chmod, chown, truncate, utimes.
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr3(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(3),
        EventKind::Setattr,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Deny,
    )
}

// --------------------------------------------------------------------------------------------
// BPF LSM: links and creation inside protected directories
// --------------------------------------------------------------------------------------------

/// LSM_HOOK(int, 0, inode_link, struct dentry *old_dentry, struct inode *dir,
///          struct dentry *new_dentry): the inode linked (protected, or under a protected
/// directory) and the new name (inside a protected directory).
#[lsm(hook = "inode_link")]
pub fn inode_link(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(3),
        EventKind::Link,
        [ctx.arg(0), ctx.arg(2)],
        [0, ROOT_WRITE],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_create, struct inode *dir, struct dentry *dentry, umode_t mode)
#[lsm(hook = "inode_create")]
pub fn inode_create(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(3),
        EventKind::Create,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_mknod, struct inode *dir, struct dentry *dentry, umode_t mode,
///          dev_t dev)
#[lsm(hook = "inode_mknod")]
pub fn inode_mknod(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(4),
        EventKind::Mknod,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_symlink, struct inode *dir, struct dentry *dentry,
///          const char *old_name)
#[lsm(hook = "inode_symlink")]
pub fn inode_symlink(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(3),
        EventKind::Symlink,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_mkdir, struct inode *dir, struct dentry *dentry, umode_t mode)
#[lsm(hook = "inode_mkdir")]
pub fn inode_mkdir(ctx: LsmContext) -> i32 {
    deny_file(
        ctx.arg(3),
        EventKind::Mkdir,
        [ctx.arg(1), core::ptr::null()],
        [ROOT_WRITE, 0],
        ExecListed::Ignore,
    )
}
