//! The file programs: protected paths (matched by inode identity: the session's index of its
//! protected trees, and a walk up the dentry chain for what came into them since) and the
//! files of the session's exec allowlist.
//!
//! - `file_open`: opening a protected file or anything under a protected directory; opening
//!   an exec-listed file or any cgroup file for writing.
//! - `inode_unlink`, `inode_rmdir`, `inode_rename`, `inode_setattr`: deleting, renaming,
//!   replacing, moving into, truncating or chmod'ing a protected path or an exec-listed file.
//! - `inode_link`: a hard link to a protected inode (or to anything under a protected
//!   directory), and a new link inside a protected directory.
//! - `inode_create`, `inode_mknod`, `inode_symlink`, `inode_mkdir`: creating anything inside
//!   a protected directory (the new, negative dentry's walk starts at its parent).
//! - `d_instantiate` (and `inode_rename`, before its decision), for every process: keeping
//!   the index current (`TREE`), never denying.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use gateway_common::{Config, Event, EventKind, MAX_PATH_DEPTH, Reason, TREE_MARKED};

use crate::{
    CONFIG, EPERM, inode_key,
    maps::{EXEC, FILE_WALK, PROTECTED, TREE},
    read,
    session::{Session, emit, lsm_session, session_inode},
};

const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
const FMODE_WRITE: u32 = 0x2;
/// `dentry.d_flags`: a dentry reached by a file handle, not (yet) connected to its parents
/// (the same bit in 6.1 and 6.12).
const DCACHE_DISCONNECTED: u32 = 0x20;
const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;

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
    let Some(session) = lsm_session()? else {
        return Ok(0);
    };
    let cfg = CONFIG.load();
    let file: *const u8 = ctx.arg(0);
    let mut ev = Event::new(EventKind::FileOpen, Reason::Unresolvable);
    let deny = |ev: Event| {
        emit(&session, ev);
        Err(-EPERM)
    };
    let Ok(dentry) = read::<*const u8>(file, cfg.off_file_dentry) else {
        return deny(ev);
    };
    match protected_dentry(&cfg, &session, dentry, &mut ev) {
        Ok(false) => {}
        Ok(true) => {
            ev.reason = Reason::ProtectedPath as u32;
            return deny(ev);
        }
        Err(()) => return deny(ev),
    }
    let Ok(mode) = read::<u32>(file, cfg.off_file_mode) else {
        return deny(ev);
    };
    if mode & FMODE_WRITE == 0 {
        return Ok(0);
    }
    match exec_listed(&cfg, &session, dentry) {
        Ok(false) => {}
        Ok(true) => {
            ev.reason = Reason::ExecListed as u32;
            return deny(ev);
        }
        Err(()) => return deny(ev),
    }
    if on_cgroupfs(&cfg, dentry).unwrap_or(true) {
        ev.reason = Reason::SelfProtection as u32;
        return deny(ev);
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

/// Whether a dentry is, or lies under, a protected path of the session. Ok(true): found
/// (recorded in `ev`); Ok(false): not protected; Err: something could not be read, the path
/// is deeper than `MAX_PATH_DEPTH` or cannot be walked to its root. A negative dentry (a name
/// that does not exist yet, e.g. a rename target or a file being created) has no inode of its
/// own: its parent directory is looked up.
///
/// The fast path is one `PROTECTED` lookup of the inode under the session (an indexed
/// session has every inode of its protected trees there, whatever name reaches it) and one
/// `TREE` lookup: an inode in neither is not protected. Only an inode `TREE` knows (it came
/// into an indexed tree during a session), a session that is not indexed, or `FILE_WALK` set,
/// takes the walk up the dentry parents.
#[inline(always)]
fn protected_dentry(
    cfg: &Config,
    session: &Session,
    dentry: *const u8,
    ev: &mut Event,
) -> Result<bool, ()> {
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
    ev.file_ino = key.ino;
    ev.file_dev = key.dev as u32;
    if let Some(root) = PROTECTED.get_ptr(session_inode(session, &key)) {
        // SAFETY: a non-null pointer from a map lookup, read at once; values are replaced
        // whole (the map is not preallocated), never changed in place.
        ev.protected_ino = unsafe { *root };
        return Ok(true);
    }
    let walk_all = FILE_WALK.get(0).is_none_or(|w| *w != 0);
    if session.info.file_walk == 0 && !walk_all && TREE.get_ptr(key).is_none() {
        return Ok(false);
    }
    walk_protected(cfg, session, first, ev)
}

/// Walks from a positive dentry's parent up to its filesystem root, looking each inode up in
/// `PROTECTED` under the session (the dentry itself was looked up by the caller). Ok(true): a
/// protected inode was found (recorded in `ev`); Ok(false): none; Err: something could not be
/// read, the path is deeper than `MAX_PATH_DEPTH`, or the walk ends at a disconnected dentry
/// (one reached by a file handle, whose parents the kernel has not connected): its names are
/// unknown, so it is denied.
#[inline(always)]
fn walk_protected(
    cfg: &Config,
    session: &Session,
    mut dentry: *const u8,
    ev: &mut Event,
) -> Result<bool, ()> {
    for _ in 0..MAX_PATH_DEPTH {
        let parent: *const u8 = read(dentry, cfg.off_dentry_parent)?;
        if parent == dentry {
            let flags: u32 = read(dentry, cfg.off_dentry_flags)?;
            return if flags & DCACHE_DISCONNECTED == 0 {
                Ok(false)
            } else {
                Err(())
            };
        }
        dentry = parent;
        let inode: *const u8 = read(dentry, cfg.off_dentry_inode)?;
        if inode.is_null() {
            return Err(());
        }
        let key = inode_key(cfg, inode)?;
        if let Some(root) = PROTECTED.get_ptr(session_inode(session, &key)) {
            // SAFETY: as in `protected_dentry`: read at once, values replaced whole.
            ev.protected_ino = unsafe { *root };
            return Ok(true);
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
    let cfg = CONFIG.load();
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
    if dir.is_null() || TREE.get_ptr(inode_key(&cfg, dir)?).is_none() {
        return Ok(());
    }
    mark(&cfg, inode)
}

/// Marks an inode in `TREE`; when `TREE` is full, sets `FILE_WALK` (every session walks):
/// an unmarked inode in a protected directory would be taken for an unprotected one.
#[inline(always)]
fn mark(cfg: &Config, inode: *const u8) -> Result<(), ()> {
    let key = inode_key(cfg, inode)?;
    if TREE.get_ptr(key).is_some() || TREE.insert(key, TREE_MARKED, 0).is_ok() {
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
    let cfg = CONFIG.load();
    let new_dir: *const u8 = ctx.arg(2);
    if new_dir.is_null() || TREE.get_ptr(inode_key(&cfg, new_dir)?).is_none() {
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
    mark(&cfg, inode)
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
/// [`ExecListed::Deny`], is an exec-listed file).
#[inline(always)]
fn deny_protected(
    earlier: i32,
    kind: EventKind,
    dentries: [*const u8; 2],
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
    let cfg = CONFIG.load();
    for d in dentries {
        if d.is_null() {
            continue;
        }
        let mut ev = Event::new(kind, Reason::Unresolvable);
        let verdict = match protected_dentry(&cfg, &session, d, &mut ev) {
            Ok(false) if exec == ExecListed::Ignore => Ok(false),
            Ok(false) => exec_listed(&cfg, &session, d).map(|listed| {
                ev.reason = Reason::ExecListed as u32;
                listed
            }),
            Ok(true) => {
                ev.reason = Reason::ProtectedPath as u32;
                Ok(true)
            }
            Err(()) => Err(()),
        };
        if verdict != Ok(false) {
            if verdict.is_err() {
                ev.reason = Reason::Unresolvable as u32;
            }
            emit(&session, ev);
            return -EPERM;
        }
    }
    0
}

/// LSM_HOOK(int, 0, inode_unlink, struct inode *dir, struct dentry *dentry)
#[lsm(hook = "inode_unlink")]
pub fn inode_unlink(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(2),
        EventKind::Unlink,
        [ctx.arg(1), core::ptr::null()],
        ExecListed::Deny,
    )
}

/// LSM_HOOK(int, 0, inode_rmdir, struct inode *dir, struct dentry *dentry)
#[lsm(hook = "inode_rmdir")]
pub fn inode_rmdir(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(2),
        EventKind::Rmdir,
        [ctx.arg(1), core::ptr::null()],
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
    deny_protected(
        ctx.arg(4),
        EventKind::Rename,
        [ctx.arg(1), ctx.arg(3)],
        ExecListed::Deny,
    )
}

/// LSM_HOOK(int, 0, inode_setattr, struct dentry *dentry, struct iattr *attr) (kernels < 6.3)
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr2(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(2),
        EventKind::Setattr,
        [ctx.arg(0), core::ptr::null()],
        ExecListed::Deny,
    )
}

/// LSM_HOOK(int, 0, inode_setattr, struct mnt_idmap *idmap, struct dentry *dentry,
///          struct iattr *attr): chmod, chown, truncate, utimes.
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr3(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(3),
        EventKind::Setattr,
        [ctx.arg(1), core::ptr::null()],
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
    deny_protected(
        ctx.arg(3),
        EventKind::Link,
        [ctx.arg(0), ctx.arg(2)],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_create, struct inode *dir, struct dentry *dentry, umode_t mode)
#[lsm(hook = "inode_create")]
pub fn inode_create(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(3),
        EventKind::Create,
        [ctx.arg(1), core::ptr::null()],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_mknod, struct inode *dir, struct dentry *dentry, umode_t mode,
///          dev_t dev)
#[lsm(hook = "inode_mknod")]
pub fn inode_mknod(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(4),
        EventKind::Mknod,
        [ctx.arg(1), core::ptr::null()],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_symlink, struct inode *dir, struct dentry *dentry,
///          const char *old_name)
#[lsm(hook = "inode_symlink")]
pub fn inode_symlink(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(3),
        EventKind::Symlink,
        [ctx.arg(1), core::ptr::null()],
        ExecListed::Ignore,
    )
}

/// LSM_HOOK(int, 0, inode_mkdir, struct inode *dir, struct dentry *dentry, umode_t mode)
#[lsm(hook = "inode_mkdir")]
pub fn inode_mkdir(ctx: LsmContext) -> i32 {
    deny_protected(
        ctx.arg(3),
        EventKind::Mkdir,
        [ctx.arg(1), core::ptr::null()],
        ExecListed::Ignore,
    )
}
