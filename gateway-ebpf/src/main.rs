//! gatewayd's kernel programs. Thin entry points; the decisions are the small functions below.
//!
//! One set of these programs serves every session on the host. A session is a cgroup under
//! gatewayd's parent cgroup; its policy sits in the maps under its cgroup id (`maps.rs`).
//! Each program first finds the session of the current task (`session.rs`): a task
//! outside the parent cgroup stops at one test, whatever the number of sessions.
//!
//! - The file programs (BPF LSM, `files.rs`): inside a session, deny opening, changing,
//!   linking or creating inside a protected path (matched by inode identity while walking up
//!   the dentry chain; anything unreadable, or a path deeper than `MAX_PATH_DEPTH`, is
//!   denied), writing or replacing a file of the exec allowlist, and opening any cgroup file
//!   for writing (the agent may not move itself out of its cgroup or change its settings).
//! - The code-loading programs (BPF LSM, `exec.rs`): deny executing a file with no link (a
//!   memfd, a deleted file) and, inside a session whose policy lists binaries, executing
//!   anything else (matched by inode) and mapping executable any file that is neither listed
//!   nor under a library tree.
//! - `bpf`, `sb_mount`, `move_mount`, `sb_umount`, `ptrace_access_check`, `task_kill` (BPF
//!   LSM, self-protection): inside a session, deny every `bpf()`, every mount, move of a
//!   mount and unmount, every ptrace attach and any ptrace read access to the session's
//!   gatewayd, and any signal to it.
//! - `unix_stream_connect`, `unix_may_send` (BPF LSM, `unix.rs`): inside a session, deny
//!   connecting or sending to a Unix socket outside the session, unless it is the session's
//!   gatewayd's or the policy lists it (by socket inode, or by abstract name).
//! - `connect4`/`connect6`/`sendmsg4`/`sendmsg6` (cgroup sock_addr, attached to the parent
//!   cgroup): deny destinations outside the session's `EGRESS` allowlist, and everything
//!   while it is in lockdown; with the session's egress proxy, send TCP the allowlist does
//!   not allow, and port 53, to it on loopback (`proxy.rs`, with `getpeername4/6`).
//!   A TCP connect to a loopback listener the session bound itself is let through
//!   (`own_listener.rs`, with `bind4/6`, which mark the session's sockets).
//! - `inbound` (cgroup_skb ingress, attached to the parent cgroup, `inbound.rs`): drop
//!   connection requests to a session's listening TCP sockets from outside the loopback
//!   addresses.
//!
//! - `sys_exit` (raw tracepoint, `calls.rs`): records, refuses nothing: a session's path
//!   calls that the VFS refused with `EROFS` or `EBUSY` (its read-only binds), which no LSM
//!   hook sees.
//!
//! Userspace knows each of these through its program table (`gatewayd-kernel/src/kernel/
//! programs.rs`); a test there fails when a program here is missing from it, or the reverse.
#![no_std]
#![no_main]

mod calls;
mod exec;
mod files;
mod inbound;
mod maps;
mod names;
mod own_listener;
mod proxy;
mod session;
mod unix;

use aya_ebpf::{
    Global,
    helpers::bpf_probe_read_kernel,
    macros::{cgroup_sock_addr, lsm},
    programs::{LsmContext, SockAddrContext},
};
use gateway_common::{
    AF_INET, AF_INET6, Config, EgressPolicy, Event, EventKind, InodeKey, LEARNED, MAX_EGRESS_RULES,
    Reason,
};
use maps::EGRESS;
use proxy::{Dst, Redirect};
use session::{current_session, emit, lsm_session};

pub(crate) const EPERM: i32 = 1;
/// cgroup sock_addr programs: 1 lets the call through, 0 fails it with EPERM.
const SOCK_ALLOW: i32 = 1;
const SOCK_DENY: i32 = 0;

/// Written by userspace at load time (`EbpfLoader::override_global("CONFIG", ..)`).
// SAFETY: `CONFIG` is the one symbol of that name in the object; userspace finds it by name.
#[unsafe(no_mangle)]
pub(crate) static CONFIG: Global<Config> = Global::new(Config {
    parent_cgroup_id: 0,
    off_file_dentry: 0,
    off_dentry_parent: 0,
    off_dentry_inode: 0,
    off_inode_ino: 0,
    off_inode_sb: 0,
    off_sb_dev: 0,
    off_sb_magic: 0,
    off_file_mode: 0,
    off_task_tgid: 0,
    off_bprm_file: 0,
    off_inode_mode: 0,
    off_dentry_flags: 0,
    off_inode_nlink: 0,
    off_vma_file: 0,
    off_sock_cgroup: 0,
    off_sock_peer_pid: 0,
    off_socket_sk: 0,
    off_cgroup_level: 0,
    off_cgroup_ancestors: 0,
    off_cgroup_kn: 0,
    off_kn_id: 0,
    off_pid_nr: 0,
    off_unix_dentry: 0,
    off_unix_addr: 0,
    off_unix_addr_len: 0,
    off_unix_addr_path: 0,
    off_file_flags: 0,
    off_file_inode: 0,
    off_task_cgroups: 0,
    off_css_set_dfl_cgrp: 0,
    off_dentry_name: 0,
});

/// The load-time configuration, read field by field where it is used (`CONFIG.load()`
/// would copy all of it to the stack on every run). The address goes through a volatile
/// read so that the compiler cannot fold the fields to the placeholder zeros above; the
/// verifier still knows each field's value, `CONFIG` being a frozen read-only map, so the
/// offsets stay constants for [`load`].
#[inline(always)]
pub(crate) fn config() -> &'static Config {
    let at: *const Config = (&raw const CONFIG).cast();
    // SAFETY: a volatile read of a local; `Global` is `repr(transparent)` over the `Config`,
    // which userspace wrote before loading and nothing changes afterwards.
    unsafe { &*core::ptr::read_volatile(&raw const at) }
}

const PTRACE_MODE_ATTACH: u32 = 0x2;

/// Reads a `T` at `base + off` in kernel memory; an unreadable address is an `Err`.
#[inline(always)]
pub(crate) fn read<T>(base: *const u8, off: u64) -> Result<T, ()> {
    // SAFETY: bpf_probe_read_kernel copies into a local and fails (instead of faulting) on a
    // bad address; the pointer is never dereferenced directly. `T` is a plain integer or
    // pointer here, valid for any bit pattern.
    unsafe { bpf_probe_read_kernel(base.wrapping_add(off as usize) as *const T) }.map_err(|_| ())
}

/// Reads a `T` at `base + off` with a plain load instead of a helper call, for a `file_open`
/// argument only: the opened `struct file`, its `f_inode` (never null while the file is
/// being opened) and what `load` reads from those. The verifier knows these pointers' types
/// from BTF and checks that `off` (a constant: `CONFIG` is a frozen read-only map) lands on
/// a field of `T`'s size; a pointer it does not call trusted is read with a guarded load
/// (a fault reads 0).
///
/// Never for a pointer that may be null while the verifier calls it trusted: a first try
/// that read the dentry chain this way oopsed the 6.12 guest in `inode_create` (a NULL read
/// at the inode number's offset through a new, negative name's `d_inode`), the program's own
/// null test having had no effect, as when the verifier takes the pointer for a trusted,
/// non-null one and drops the test as dead code. Everything else is read with [`read`].
#[inline(always)]
pub(crate) fn load<T: Copy>(base: *const u8, off: u64) -> T {
    // SAFETY: only called on the opened file and the pointers read from it (see above),
    // valid for the program's run; the verifier accepts the load only at a field of `T`'s
    // size; `T` is a plain integer or pointer, valid for any bit pattern.
    unsafe { core::ptr::read_volatile(base.wrapping_add(off as usize).cast::<T>()) }
}

/// [`inode_key`] of the opened file's inode (`file->f_inode`), with [`load`].
#[inline(always)]
pub(crate) fn opened_inode_key(cfg: &Config, inode: *const u8) -> InodeKey {
    let sb: *const u8 = load(inode, cfg.off_inode_sb);
    InodeKey {
        dev: u64::from(load::<u32>(sb, cfg.off_sb_dev)),
        ino: load(inode, cfg.off_inode_ino),
    }
}

/// An inode's identity: (kernel dev_t of its superblock, inode number).
#[inline(always)]
pub(crate) fn inode_key(cfg: &Config, inode: *const u8) -> Result<InodeKey, ()> {
    let ino: u64 = read(inode, cfg.off_inode_ino)?;
    let sb: *const u8 = read(inode, cfg.off_inode_sb)?;
    let dev: u32 = read(sb, cfg.off_sb_dev)?;
    Ok(InodeKey {
        dev: u64::from(dev),
        ino,
    })
}

// --------------------------------------------------------------------------------------------
// BPF LSM: self-protection
// --------------------------------------------------------------------------------------------

/// Denies the hook for every task of a session. `earlier` is the verdict of the
/// BPF LSM programs that ran before this one (the argument after the hook's parameters):
/// passed through untouched, so a denial by someone else is never turned into an allow.
#[inline(always)]
fn deny_agent(earlier: i32, kind: EventKind) -> i32 {
    if earlier != 0 {
        return earlier;
    }
    let session = match lsm_session() {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(deny) => return deny,
    };
    emit(&session, Event::new(kind, Reason::SelfProtection));
    -EPERM
}

// The verdict's position is the hook's parameter count, which for `bpf` differs between
// kernels; userspace reads it from BTF and loads the matching program (constant offsets only:
// the verifier refuses a computed offset into the context).

/// LSM_HOOK(int, 0, bpf, int cmd, union bpf_attr *attr, unsigned int size) (kernels < 6.16)
#[lsm(hook = "bpf")]
pub fn bpf3(ctx: LsmContext) -> i32 {
    deny_agent(ctx.arg(3), EventKind::Bpf)
}

/// LSM_HOOK(int, 0, bpf, int cmd, union bpf_attr *attr, unsigned int size, bool kernel)
#[lsm(hook = "bpf")]
pub fn bpf4(ctx: LsmContext) -> i32 {
    deny_agent(ctx.arg(4), EventKind::Bpf)
}

/// LSM_HOOK(int, 0, sb_mount, const char *dev_name, const struct path *path,
///          const char *type, unsigned long flags, void *data)
#[lsm(hook = "sb_mount")]
pub fn sb_mount(ctx: LsmContext) -> i32 {
    deny_agent(ctx.arg(5), EventKind::Mount)
}

/// LSM_HOOK(int, 0, move_mount, const struct path *from_path, const struct path *to_path):
/// attaching a mount made by `fsmount()` or cloned by `open_tree()`, or moving one, with
/// `move_mount()` (`mount(MS_MOVE)` goes through `sb_mount`).
#[lsm(hook = "move_mount")]
pub fn move_mount(ctx: LsmContext) -> i32 {
    deny_agent(ctx.arg(2), EventKind::MoveMount)
}

/// LSM_HOOK(int, 0, sb_umount, struct vfsmount *mnt, int flags)
#[lsm(hook = "sb_umount")]
pub fn sb_umount(ctx: LsmContext) -> i32 {
    deny_agent(ctx.arg(2), EventKind::Umount)
}

/// LSM_HOOK(int, 0, ptrace_access_check, struct task_struct *child, unsigned int mode):
/// deny attaching to anything, and any access to the session's gatewayd.
#[lsm(hook = "ptrace_access_check")]
pub fn ptrace_access_check(ctx: LsmContext) -> i32 {
    let earlier: i32 = ctx.arg(2);
    if earlier != 0 {
        return earlier;
    }
    let session = match lsm_session() {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(deny) => return deny,
    };
    let cfg = config();
    let owner = session.info.owner_tgid;
    let child: *const u8 = ctx.arg(0);
    let mode: u32 = ctx.arg(1);
    let tgid: u32 = read(child, cfg.off_task_tgid).unwrap_or(owner);
    if mode & PTRACE_MODE_ATTACH == 0 && tgid != owner {
        return 0;
    }
    let mut ev = Event::new(EventKind::Ptrace, Reason::SelfProtection);
    ev.target_pid = tgid;
    emit(&session, ev);
    -EPERM
}

/// LSM_HOOK(int, 0, task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig,
/// const struct cred *cred): deny signals from the agent to its session's gatewayd, and to
/// any task outside the session's cgroup (the PID namespace hides those by pid, but
/// `kill(0)` reaches the process group the agent inherited from gatewayd's caller).
#[lsm(hook = "task_kill")]
pub fn task_kill(ctx: LsmContext) -> i32 {
    let earlier: i32 = ctx.arg(4);
    if earlier != 0 {
        return earlier;
    }
    let session = match lsm_session() {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(deny) => return deny,
    };
    let target: *const u8 = ctx.arg(0);
    match try_task_kill(config(), &session, target) {
        Ok(None) => 0,
        Ok(Some((reason, tgid))) | Err((reason, tgid)) => {
            let mut ev = Event::new(EventKind::Kill, reason);
            ev.target_pid = tgid;
            ev.signal = ctx.arg::<i32>(2) as u32;
            emit(&session, ev);
            -EPERM
        }
    }
}

/// `None` when the signal may go; else the reason and the target's tgid. What cannot be
/// read is denied (`unresolvable`).
#[inline(always)]
fn try_task_kill(
    cfg: &Config,
    session: &session::Session,
    target: *const u8,
) -> Result<Option<(Reason, u32)>, (Reason, u32)> {
    let unreadable = |tgid| (Reason::Unresolvable, tgid);
    let tgid: u32 = read(target, cfg.off_task_tgid).map_err(|()| unreadable(0))?;
    if tgid == session.info.owner_tgid {
        return Ok(Some((Reason::SelfProtection, tgid)));
    }
    let css_set: *const u8 = read(target, cfg.off_task_cgroups).map_err(|()| unreadable(tgid))?;
    let cgroup: *const u8 =
        read(css_set, cfg.off_css_set_dfl_cgrp).map_err(|()| unreadable(tgid))?;
    if session::cgroup_in_session(cfg, session, cgroup).map_err(|()| unreadable(tgid))? {
        return Ok(None);
    }
    Ok(Some((Reason::SignalOutside, tgid)))
}

// --------------------------------------------------------------------------------------------
// cgroup sock_addr: connect4/6, sendmsg4/6
// --------------------------------------------------------------------------------------------

/// Whether the session's allowlist allows (addr, port). `addr` holds the address in network
/// byte order in the layout of `EgressRule::addr` (IPv4 in the first 4 bytes, the rest zero).
#[inline(always)]
fn egress_allowed(policy: &EgressPolicy, family: u32, addr: &[u8; 16], port: u32) -> bool {
    let (a0, a1) = halves(addr);
    for i in 0..MAX_EGRESS_RULES {
        if i >= policy.count {
            return false;
        }
        let r = &policy.rules[i as usize];
        if r.family != family || (r.port != 0 && r.port != port) {
            continue;
        }
        let (n0, n1) = halves(&r.addr);
        let (m0, m1) = halves(&r.mask);
        if a0 & m0 == n0 && a1 & m1 == n1 {
            return true;
        }
    }
    false
}

#[inline(always)]
fn halves(b: &[u8; 16]) -> (u64, u64) {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&b[..8]);
    hi.copy_from_slice(&b[8..]);
    (u64::from_ne_bytes(lo), u64::from_ne_bytes(hi))
}

/// The shared decision of the four sock_addr programs. They are attached to the parent
/// cgroup, so they run only for tasks under it; one that is in no session of this set (a
/// session of another gatewayd version's set, or a cgroup that is not a session) is left
/// to the programs that know it. A session without its `EGRESS` entry is denied everything.
/// A session with an egress proxy has what it takes sent there (`proxy::redirect`).
#[inline(always)]
fn sock_decide(ctx: &SockAddrContext, kind: EventKind, dst: Dst, addr: [u8; 16], port: u32) -> i32 {
    let family = if dst == Dst::V6 { AF_INET6 } else { AF_INET };
    let session = match current_session() {
        Ok(Some(s)) => s,
        Ok(None) => return SOCK_ALLOW,
        Err(_) => return SOCK_DENY,
    };
    // SAFETY: a reference into the map value, read before the program returns; values are
    // replaced whole (the map is not preallocated), never changed in place.
    let reason = match unsafe { EGRESS.get(&session.id) } {
        Some(p) if p.lockdown != 0 => Reason::EgressLockdown,
        Some(p) => {
            let allowed = egress_allowed(p, family, &addr, port)
                || (matches!(kind, EventKind::Connect4 | EventKind::Connect6)
                    && own_listener::own_listener(ctx, session.id, family, &addr, port));
            match proxy::redirect(ctx, session.id, dst, family, &addr, port, allowed) {
                Redirect::Done => return SOCK_ALLOW,
                Redirect::No if allowed => return SOCK_ALLOW,
                _ => Reason::EgressNotAllowed,
            }
        }
        None => Reason::EgressNotAllowed,
    };
    // A learning session: allowed and recorded, but never the lockdown nor a metadata service.
    let learned = session.info.learn != 0
        && reason == Reason::EgressNotAllowed
        && !metadata_service(family, &addr);
    let mut ev = Event::new(kind, reason);
    if learned {
        ev.reason |= LEARNED;
    }
    ev.dst_family = family;
    ev.dst_addr = addr;
    ev.dst_port = port;
    emit(&session, ev);
    if learned { SOCK_ALLOW } else { SOCK_DENY }
}

/// The cloud's instance metadata services (169.254.169.254, 100.100.100.200,
/// fd00:ec2::254): they hand out the machine's credentials, so learn mode never opens them.
#[inline(always)]
fn metadata_service(family: u32, addr: &[u8; 16]) -> bool {
    const V6: [u8; 16] = [
        0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54,
    ];
    match family {
        AF_INET => matches!(&addr[..4], [169, 254, 169, 254] | [100, 100, 100, 200]),
        _ => *addr == V6,
    }
}

fn sock_v4(ctx: &SockAddrContext, kind: EventKind) -> i32 {
    // SAFETY: the kernel hands every cgroup sock_addr program a valid `bpf_sock_addr` context
    // for the duration of the run; it is only read here.
    let sa = unsafe { &*ctx.sock_addr };
    let mut addr = [0u8; 16];
    addr[..4].copy_from_slice(&sa.user_ip4.to_ne_bytes());
    let port = u32::from(u16::from_be(sa.user_port as u16));
    sock_decide(ctx, kind, Dst::V4, addr, port)
}

fn sock_v6(ctx: &SockAddrContext, kind: EventKind) -> i32 {
    // SAFETY: as in `sock_v4`: a valid context for the duration of the run.
    let sa = unsafe { &*ctx.sock_addr };
    let port = u32::from(u16::from_be(sa.user_port as u16));
    let w = [
        sa.user_ip6[0],
        sa.user_ip6[1],
        sa.user_ip6[2],
        sa.user_ip6[3],
    ];
    let mut addr = [0u8; 16];
    // An IPv4-mapped address (::ffff:a.b.c.d) is an IPv4 destination: judge it as one.
    if w[0] == 0 && w[1] == 0 && w[2] == u32::to_be(0xffff) {
        addr[..4].copy_from_slice(&w[3].to_ne_bytes());
        return sock_decide(ctx, kind, Dst::Mapped, addr, port);
    }
    for (i, word) in w.iter().enumerate() {
        addr[i * 4..i * 4 + 4].copy_from_slice(&word.to_ne_bytes());
    }
    sock_decide(ctx, kind, Dst::V6, addr, port)
}

#[cgroup_sock_addr(connect4)]
pub fn connect4(ctx: SockAddrContext) -> i32 {
    sock_v4(&ctx, EventKind::Connect4)
}

#[cgroup_sock_addr(connect6)]
pub fn connect6(ctx: SockAddrContext) -> i32 {
    sock_v6(&ctx, EventKind::Connect6)
}

#[cgroup_sock_addr(sendmsg4)]
pub fn sendmsg4(ctx: SockAddrContext) -> i32 {
    sock_v4(&ctx, EventKind::SendMsg4)
}

#[cgroup_sock_addr(sendmsg6)]
pub fn sendmsg6(ctx: SockAddrContext) -> i32 {
    sock_v6(&ctx, EventKind::SendMsg6)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

// SAFETY: the kernel reads the program license from the `license` section by this name;
// nothing else in the object uses either.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
