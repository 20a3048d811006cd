//! The Unix socket programs. Inside a session, connecting a stream or seqpacket socket
//! (`unix_stream_connect`) or sending a datagram (`unix_may_send`, which also runs for a
//! datagram socket's `connect()` and for every send on a connected one) to a Unix socket is
//! allowed only when the peer socket is
//!
//! 1. the session's own: made by a task of the session's cgroup or of a cgroup below it (its
//!    `sk_cgrp_data`), and of no session nested deeper than this one;
//! 2. the session's gatewayd's: its owner (`sk_peer_pid`, set by `listen()` and
//!    `socketpair()`) is the session's owner (the socket `gatewayd run` serves its agent);
//! 3. listed by the policy (`network.unix`): a path-named socket by the inode of its socket
//!    file (`UNIX_PATHS`), an abstract one by its name (`UNIX_NAMES`).
//!
//! Anything else, an unnamed socket outside the session included, is denied with `EPERM`
//! (reason `unix_connect`); what cannot be read is denied too (`unresolvable`).
use aya_ebpf::{helpers::bpf_probe_read_kernel_buf, macros::lsm, programs::LsmContext};
use gateway_common::{AF_UNIX, Config, Event, EventKind, Reason, UNIX_NAME_MAX, UnixName};

use crate::{
    EPERM, config, inode_key,
    maps::{UNIX_NAMES, UNIX_PATHS, UNIX_SCRATCH},
    read,
    session::{Session, cgroup_in_session, emit, lsm_session, session_inode},
};

/// LSM_HOOK(int, 0, unix_stream_connect, struct sock *sock, struct sock *other,
///          struct sock *newsk): `other` is the listening socket.
#[lsm(hook = "unix_stream_connect")]
pub fn unix_stream_connect(ctx: LsmContext) -> i32 {
    let earlier: i32 = ctx.arg(3);
    if earlier != 0 {
        return earlier;
    }
    decide(EventKind::UnixConnect, ctx.arg(1), false)
}

/// LSM_HOOK(int, 0, unix_may_send, struct socket *sock, struct socket *other)
#[lsm(hook = "unix_may_send")]
pub fn unix_may_send(ctx: LsmContext) -> i32 {
    let earlier: i32 = ctx.arg(2);
    if earlier != 0 {
        return earlier;
    }
    decide(EventKind::UnixSend, ctx.arg(1), true)
}

/// The shared decision: `peer` is a `struct socket *` when `is_socket`, else a
/// `struct sock *`.
#[inline(always)]
fn decide(kind: EventKind, peer: *const u8, is_socket: bool) -> i32 {
    let session = match lsm_session() {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(deny) => return deny,
    };
    let cfg = config();
    let mut ev = Event::new(kind, Reason::Unresolvable);
    ev.dst_family = AF_UNIX;
    match allowed(cfg, &session, peer, is_socket, &mut ev) {
        Ok(true) => return 0,
        Ok(false) => ev.reason = Reason::UnixConnect as u32,
        Err(()) => {}
    }
    emit(&session, ev);
    -EPERM
}

/// Whether the session may reach the peer; what identifies a refused peer goes into `ev`.
#[inline(always)]
fn allowed(
    cfg: &Config,
    session: &Session,
    peer: *const u8,
    is_socket: bool,
    ev: &mut Event,
) -> Result<bool, ()> {
    let sk: *const u8 = if is_socket {
        read(peer, cfg.off_socket_sk)?
    } else {
        peer
    };
    if sk.is_null() {
        return Err(());
    }
    if cgroup_in_session(cfg, session, read(sk, cfg.off_sock_cgroup)?)? {
        return Ok(true);
    }
    let owner: *const u8 = read(sk, cfg.off_sock_peer_pid)?;
    if !owner.is_null() && read::<u32>(owner, cfg.off_pid_nr)? == session.info.owner_tgid {
        return Ok(true);
    }
    let dentry: *const u8 = read(sk, cfg.off_unix_dentry)?;
    if !dentry.is_null() {
        let key = inode_key(cfg, read(dentry, cfg.off_dentry_inode)?)?;
        ev.file_ino = key.ino;
        ev.file_dev = key.dev as u32;
        return Ok(UNIX_PATHS.get_ptr(session_inode(session, &key)).is_some());
    }
    let addr: *const u8 = read(sk, cfg.off_unix_addr)?;
    if addr.is_null() {
        return Ok(false);
    }
    abstract_listed(cfg, session, addr, ev)
}

/// Whether an abstract peer's name is on the session's list (recorded in `ev` either way).
/// A peer whose address is neither a path nor abstract is not.
#[inline(always)]
fn abstract_listed(
    cfg: &Config,
    session: &Session,
    addr: *const u8,
    ev: &mut Event,
) -> Result<bool, ()> {
    // `len` counts `sun_family` (2 bytes) and the leading NUL of an abstract name.
    let len: i32 = read(addr, cfg.off_unix_addr_len)?;
    let first: u8 = read(addr, cfg.off_unix_addr_path)?;
    let n = len - 3;
    if first != 0 || n < 0 || n > UNIX_NAME_MAX as i32 {
        return Ok(false);
    }
    let Some(key) = UNIX_SCRATCH.get_ptr_mut(0) else {
        return Err(());
    };
    // SAFETY: this CPU's slot of the scratch map, valid for the rest of the program run; a
    // BPF LSM program is not re-entered on the same CPU while it runs.
    let key: &mut UnixName = unsafe { &mut *key };
    key.session = session.id;
    key.len = n as u32;
    key.pad = 0;
    let src = addr.wrapping_add((cfg.off_unix_addr_path + 1) as usize);
    // SAFETY: copies kernel memory into the map value, failing (not faulting) on a bad
    // address; bytes past the name are zeroed below.
    unsafe { bpf_probe_read_kernel_buf(src, &mut key.name) }.map_err(|_| ())?;
    for i in 0..key.name.len() {
        if i as i32 >= n {
            key.name[i] = 0;
        }
    }
    ev.dst_port = n as u32 + 1;
    ev.dst_addr.copy_from_slice(&key.name[..16]);
    Ok(UNIX_NAMES.get_ptr(key).is_some())
}
