//! gatewayd's kernel programs. Thin entry points; the decisions are the small functions below.
//!
//! - `file_open` (BPF LSM): inside the agent's cgroup, deny opening a protected file or
//!   anything under a protected directory, matched by inode identity while walking up the
//!   dentry chain. Anything unreadable, or a path deeper than `MAX_PATH_DEPTH`, is denied.
//! - `connect4`/`connect6`/`sendmsg4`/`sendmsg6` (cgroup sock_addr, attached to the agent's
//!   cgroup): deny destinations outside `EGRESS`, and everything while `STATE` says lockdown.
#![no_std]
#![no_main]

mod maps;

use aya_ebpf::{
    Global,
    helpers::{
        bpf_get_current_ancestor_cgroup_id, bpf_get_current_cgroup_id, bpf_get_current_comm,
        bpf_get_current_pid_tgid, bpf_probe_read_kernel,
    },
    macros::{cgroup_sock_addr, lsm},
    programs::{LsmContext, SockAddrContext},
};
use gateway_common::{
    AF_INET, AF_INET6, Config, EV_CONNECT4, EV_CONNECT6, EV_FILE_OPEN, EV_SENDMSG4, EV_SENDMSG6,
    Event, InodeKey, MAX_EGRESS_RULES, MAX_PATH_DEPTH, REASON_EGRESS_LOCKDOWN,
    REASON_EGRESS_NOT_ALLOWED, REASON_PROTECTED_PATH, REASON_UNRESOLVABLE, STATE_EGRESS_LOCKDOWN,
};
use maps::{DROPPED, EGRESS, EVENTS, PROTECTED, STATE};

const EPERM: i32 = 1;
/// cgroup sock_addr programs: 1 lets the call through, 0 fails it with EPERM.
const SOCK_ALLOW: i32 = 1;
const SOCK_DENY: i32 = 0;

/// Written by userspace at load time (`EbpfLoader::override_global("CONFIG", ..)`).
#[unsafe(no_mangle)]
static CONFIG: Global<Config> = Global::new(Config {
    cgroup_id: 0,
    cgroup_level: 0,
    _pad: 0,
    off_file_dentry: 0,
    off_dentry_parent: 0,
    off_dentry_inode: 0,
    off_inode_ino: 0,
    off_inode_sb: 0,
    off_sb_dev: 0,
});

/// Sends one denial to userspace; counts it in `DROPPED` when the ring buffer is full.
#[inline(always)]
fn emit(mut ev: Event) {
    ev.pid = (bpf_get_current_pid_tgid() >> 32) as u32;
    ev.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    ev.comm = bpf_get_current_comm().unwrap_or([0; 16]);
    if EVENTS.output::<Event>(&ev, 0).is_err() {
        if let Some(n) = DROPPED.get_ptr_mut(0) {
            unsafe { *n += 1 };
        }
    }
}

const fn empty_event(kind: u32, reason: u32) -> Event {
    Event {
        kind,
        reason,
        pid: 0,
        family: 0,
        cgroup_id: 0,
        ino: 0,
        matched_ino: 0,
        dev: 0,
        port: 0,
        addr: [0; 16],
        comm: [0; 16],
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

/// Whether the current task is in the agent's cgroup or one of its descendants.
#[inline(always)]
fn in_agent_cgroup(cfg: &Config) -> bool {
    let id = unsafe { bpf_get_current_ancestor_cgroup_id(cfg.cgroup_level as i32) };
    id == cfg.cgroup_id
}

#[inline(always)]
fn read<T>(base: *const u8, off: u64) -> Result<T, ()> {
    unsafe { bpf_probe_read_kernel(base.wrapping_add(off as usize) as *const T) }.map_err(|_| ())
}

fn try_file_open(ctx: &LsmContext) -> Result<i32, i32> {
    let earlier: i32 = ctx.arg(1);
    if earlier != 0 {
        return Ok(earlier);
    }
    let cfg = CONFIG.load();
    if !in_agent_cgroup(&cfg) {
        return Ok(0);
    }
    let file: *const u8 = ctx.arg(0);
    let mut ev = empty_event(EV_FILE_OPEN, REASON_UNRESOLVABLE);
    match protected_ancestor(&cfg, file, &mut ev) {
        Ok(false) => Ok(0),
        Ok(true) => {
            ev.reason = REASON_PROTECTED_PATH;
            emit(ev);
            Err(-EPERM)
        }
        Err(()) => {
            emit(ev);
            Err(-EPERM)
        }
    }
}

/// Walks from the opened file's dentry up to its filesystem root, looking each inode up in
/// `PROTECTED`. Ok(true): a protected inode was found (recorded in `ev`); Ok(false): none;
/// Err: something could not be read or the path is deeper than `MAX_PATH_DEPTH`.
#[inline(always)]
fn protected_ancestor(cfg: &Config, file: *const u8, ev: &mut Event) -> Result<bool, ()> {
    let mut dentry: *const u8 = read(file, cfg.off_file_dentry)?;
    for depth in 0..MAX_PATH_DEPTH {
        let inode: *const u8 = read(dentry, cfg.off_dentry_inode)?;
        if inode.is_null() {
            return Err(());
        }
        let ino: u64 = read(inode, cfg.off_inode_ino)?;
        let sb: *const u8 = read(inode, cfg.off_inode_sb)?;
        let dev: u32 = read(sb, cfg.off_sb_dev)?;
        if depth == 0 {
            ev.ino = ino;
            ev.dev = dev;
        }
        let key = InodeKey {
            dev: u64::from(dev),
            ino,
        };
        if PROTECTED.get_ptr(&key).is_some() {
            ev.matched_ino = ino;
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

// --------------------------------------------------------------------------------------------
// cgroup sock_addr: connect4/6, sendmsg4/6
// --------------------------------------------------------------------------------------------

/// Whether `EGRESS` allows (addr, port). `addr` holds the address in network byte order in
/// the layout of `EgressRule::addr` (IPv4 in the first 4 bytes, the rest zero).
#[inline(always)]
fn egress_allowed(family: u32, addr: &[u8; 16], port: u32) -> bool {
    let (a0, a1) = halves(addr);
    for i in 0..MAX_EGRESS_RULES {
        let Some(r) = EGRESS.get(i) else {
            return false;
        };
        if r.family == 0 {
            return false;
        }
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

/// The shared decision of the four sock_addr programs.
#[inline(always)]
fn sock_decide(kind: u32, family: u32, addr: [u8; 16], port: u32) -> i32 {
    let lockdown = STATE.get(STATE_EGRESS_LOCKDOWN).is_some_and(|v| *v != 0);
    let reason = if lockdown {
        REASON_EGRESS_LOCKDOWN
    } else if egress_allowed(family, &addr, port) {
        return SOCK_ALLOW;
    } else {
        REASON_EGRESS_NOT_ALLOWED
    };
    let mut ev = empty_event(kind, reason);
    ev.family = family;
    ev.addr = addr;
    ev.port = port;
    emit(ev);
    SOCK_DENY
}

fn sock_v4(ctx: &SockAddrContext, kind: u32) -> i32 {
    let sa = unsafe { &*ctx.sock_addr };
    let mut addr = [0u8; 16];
    addr[..4].copy_from_slice(&sa.user_ip4.to_ne_bytes());
    sock_decide(
        kind,
        AF_INET,
        addr,
        u32::from(u16::from_be(sa.user_port as u16)),
    )
}

fn sock_v6(ctx: &SockAddrContext, kind: u32) -> i32 {
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
        return sock_decide(kind, AF_INET, addr, port);
    }
    for (i, word) in w.iter().enumerate() {
        addr[i * 4..i * 4 + 4].copy_from_slice(&word.to_ne_bytes());
    }
    sock_decide(kind, AF_INET6, addr, port)
}

#[cgroup_sock_addr(connect4)]
pub fn connect4(ctx: SockAddrContext) -> i32 {
    sock_v4(&ctx, EV_CONNECT4)
}

#[cgroup_sock_addr(connect6)]
pub fn connect6(ctx: SockAddrContext) -> i32 {
    sock_v6(&ctx, EV_CONNECT6)
}

#[cgroup_sock_addr(sendmsg4)]
pub fn sendmsg4(ctx: SockAddrContext) -> i32 {
    sock_v4(&ctx, EV_SENDMSG4)
}

#[cgroup_sock_addr(sendmsg6)]
pub fn sendmsg6(ctx: SockAddrContext) -> i32 {
    sock_v6(&ctx, EV_SENDMSG6)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
