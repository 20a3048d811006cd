//! The session's own TCP servers on loopback. A development server the agent starts, or the
//! server a test suite binds to `127.0.0.1:0`, is reached by a `connect()` to a loopback
//! address that no egress rule lists. Such a connection stays inside the session, so the
//! connect programs let it through when the listener it would reach was bound by the same
//! session: `bind4`/`bind6` mark each TCP socket a session binds (socket storage, which dies
//! with the socket), and `connect4`/`connect6` look the loopback destination's listener up
//! and read that mark. A host service on loopback (a database, a local proxy) carries no
//! mark and stays refused.
//!
//! A socket bound with `SO_REUSEPORT` is not marked: it may share its port with another
//! process's listener, and the lookup here could find the session's socket where the
//! connection would reach the other's.
use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_F_CURRENT_NETNS, SO_REUSEPORT, SOL_SOCKET, bpf_sock_tuple},
    btf_maps::SkStorage,
    helpers::generated::{bpf_getsockopt, bpf_sk_lookup_tcp, bpf_sk_release, bpf_sk_storage_get},
    macros::{btf_map, cgroup_sock_addr},
    programs::SockAddrContext,
};
use gateway_common::AF_INET;

use crate::session::current_session;

const SOCK_STREAM: u32 = 1;
/// bind programs: 1 lets the call through.
const BIND_ALLOW: i32 = 1;

/// The session that bound each TCP socket, on the socket itself.
#[btf_map]
static BOUND_BY: SkStorage<u64> = SkStorage::new();

#[cgroup_sock_addr(bind4)]
pub fn bind4(ctx: SockAddrContext) -> i32 {
    mark_bound(&ctx);
    BIND_ALLOW
}

#[cgroup_sock_addr(bind6)]
pub fn bind6(ctx: SockAddrContext) -> i32 {
    mark_bound(&ctx);
    BIND_ALLOW
}

/// Marks the socket being bound with its session, when it is a TCP socket of a session and
/// not bound with `SO_REUSEPORT`. Refuses nothing: a socket left unmarked is only one whose
/// clients in the session are judged by the egress rules.
#[inline(always)]
fn mark_bound(ctx: &SockAddrContext) {
    let Ok(Some(session)) = current_session() else {
        return;
    };
    // SAFETY: the kernel hands every cgroup sock_addr program a valid context; read only.
    if unsafe { (*ctx.sock_addr).type_ } != SOCK_STREAM {
        return;
    }
    let mut reuseport: i32 = 1;
    // SAFETY: the helper reads an option of the context's own socket into `reuseport`,
    // whose size it is given.
    let read = unsafe {
        bpf_getsockopt(
            ctx.as_ptr(),
            SOL_SOCKET as i32,
            SO_REUSEPORT as i32,
            core::ptr::from_mut(&mut reuseport).cast(),
            4,
        )
    };
    if read != 0 || reuseport != 0 {
        return;
    }
    let mut id = session.id;
    // SAFETY: the storage of the context's own socket, created with `id` when it has none;
    // the pointer is valid for the run.
    let owner = unsafe { BOUND_BY.get_or_insert_ptr_mut(ctx, Some(&mut id)) };
    if !owner.is_null() {
        // SAFETY: a non-null pointer into the socket's storage, valid for the run.
        unsafe { *owner = session.id };
    }
}

/// Whether the TCP listener at loopback `addr`:`port` (in `EgressRule::addr` layout, the
/// family `family`) was bound by `session`.
#[inline(always)]
pub(crate) fn own_listener(
    ctx: &SockAddrContext,
    session: u64,
    family: u32,
    addr: &[u8; 16],
    port: u32,
) -> bool {
    // SAFETY: a valid context for the run; read only.
    if unsafe { (*ctx.sock_addr).type_ } != SOCK_STREAM || !crate::proxy::loopback(family, addr) {
        return false;
    }
    // SAFETY: an all-zero tuple is a valid value of this plain C union.
    let mut tuple: bpf_sock_tuple = unsafe { core::mem::zeroed() };
    let dport = (port as u16).to_be();
    let size = if family == AF_INET {
        tuple.__bindgen_anon_1.ipv4.daddr =
            u32::from_ne_bytes([addr[0], addr[1], addr[2], addr[3]]);
        tuple.__bindgen_anon_1.ipv4.dport = dport;
        12
    } else {
        let w = |i: usize| u32::from_ne_bytes([addr[i], addr[i + 1], addr[i + 2], addr[i + 3]]);
        tuple.__bindgen_anon_1.ipv6.daddr = [w(0), w(4), w(8), w(12)];
        tuple.__bindgen_anon_1.ipv6.dport = dport;
        36
    };
    // SAFETY: the helper reads `size` bytes of `tuple` and looks a socket up in the caller's
    // network namespace; a non-null result holds a reference, released below.
    let sk = unsafe {
        bpf_sk_lookup_tcp(
            ctx.as_ptr(),
            &mut tuple,
            size,
            BPF_F_CURRENT_NETNS as u64,
            0,
        )
    };
    if sk.is_null() {
        return false;
    }
    let map = core::ptr::from_ref(&BOUND_BY).cast_mut().cast();
    // SAFETY: `sk` is the socket just found and still referenced; no storage is created.
    let owner: *const u64 =
        unsafe { bpf_sk_storage_get(map, sk.cast(), core::ptr::null_mut(), 0) }.cast();
    // SAFETY: a non-null pointer into the socket's storage, valid while `sk` is held.
    let own = !owner.is_null() && unsafe { *owner } == session;
    // SAFETY: releases the reference the lookup took, once.
    unsafe { bpf_sk_release(sk.cast()) };
    own
}
