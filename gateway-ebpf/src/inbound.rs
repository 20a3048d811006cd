//! `cgroup_skb/ingress`, attached to the parent cgroup: the packets delivered to a session's
//! sockets. A packet for a listening TCP socket (a connection request: a SYN, or the ACK
//! that completes a SYN cookie) from a source outside the host's loopback addresses is
//! dropped: a connection accepted from the network would be a channel to and from the agent
//! that no `connect()` or `sendmsg()` of its own opens, so the egress allowlist never sees
//! it. Every other packet passes untouched (one socket-state test).
use aya_ebpf::{
    bindings::{__sk_buff, BPF_TCP_LISTEN},
    helpers::{bpf_sk_fullsock, bpf_skb_ancestor_cgroup_id, bpf_skb_cgroup_id},
    macros::cgroup_skb,
    programs::SkBuffContext,
};
use gateway_common::{AF_INET, AF_INET6, Event, EventKind, Reason};

use crate::session::{CgroupIds, send, session_of};

/// cgroup_skb programs: 1 lets the packet through, 0 drops it.
const PASS: i32 = 1;
const DROP: i32 = 0;
/// `skb->protocol` (network byte order as read): IPv4 and IPv6.
const ETH_P_IP: u32 = (0x0800u16).to_be() as u32;
const ETH_P_IPV6: u32 = (0x86ddu16).to_be() as u32;

#[cgroup_skb(ingress)]
pub fn inbound(ctx: SkBuffContext) -> i32 {
    match try_inbound(&ctx) {
        Ok(ret) | Err(ret) => ret,
    }
}

/// The cgroup of the packet's socket.
struct SocketOf(*mut __sk_buff);

impl CgroupIds for SocketOf {
    #[inline(always)]
    fn own(&self) -> u64 {
        // SAFETY: the program's own context, valid for the run.
        unsafe { bpf_skb_cgroup_id(self.0) }
    }

    #[inline(always)]
    fn ancestor(&self, level: u32) -> u64 {
        // SAFETY: as above; `level` is a plain integer.
        unsafe { bpf_skb_ancestor_cgroup_id(self.0, level as i32) }
    }
}

fn try_inbound(ctx: &SkBuffContext) -> Result<i32, i32> {
    let skb = ctx.skb.skb;
    // SAFETY: the program's own context, valid for the run; `sk` is read once.
    let sk = unsafe { (*skb).__bindgen_anon_2.sk };
    if sk.is_null() {
        return Ok(PASS);
    }
    // SAFETY: `sk` is the context's socket pointer, checked non-null above.
    let full = unsafe { bpf_sk_fullsock(sk) };
    // SAFETY: a non-null pointer from `bpf_sk_fullsock` points at the socket, valid for the
    // run.
    if full.is_null() || unsafe { (*full).state } != BPF_TCP_LISTEN {
        return Ok(PASS);
    }
    // The packet starts at its network header. An unreadable one is dropped (fail closed).
    let mut src = [0u8; 16];
    let family = match ctx.skb.protocol() {
        ETH_P_IP => {
            let v4: [u8; 4] = ctx.load(12).map_err(|_| DROP)?;
            if v4[0] == 127 {
                return Ok(PASS);
            }
            src[..4].copy_from_slice(&v4);
            AF_INET
        }
        ETH_P_IPV6 => {
            src = ctx.load(8).map_err(|_| DROP)?;
            if u128::from_be_bytes(src) == 1 {
                return Ok(PASS);
            }
            AF_INET6
        }
        _ => return Ok(DROP),
    };
    let ids = SocketOf(skb);
    let session = match session_of(&ids) {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(PASS),
        Err(_) => return Ok(DROP),
    };
    let mut ev = Event::new(EventKind::Inbound, Reason::InboundNotAllowed);
    ev.cgroup_id = ids.own();
    ev.dst_family = family;
    ev.dst_addr = src;
    ev.dst_port = ctx.skb.local_port();
    send(&session, ev);
    Ok(DROP)
}
