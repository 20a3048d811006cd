//! The session's egress proxy in the kernel (`gatewayd run` with name-based egress): the
//! connect and sendmsg programs send the agent's TCP connects that no address rule allows to
//! the proxy of its session on loopback, and all of its port-53 traffic to the session's
//! resolver, keeping the original destination in `ORIGINAL` by socket cookie, where the proxy
//! finds it; `getpeername4/6` show the agent that original peer.
use aya_ebpf::{
    EbpfContext, bindings::bpf_sock_addr, helpers::bpf_get_socket_cookie, macros::cgroup_sock_addr,
    programs::SockAddrContext,
};
use gateway_common::{AF_INET, AF_INET6, OriginalDst};

use crate::maps::{ORIGINAL, PROXY};

const SOCK_STREAM: u32 = 1;
const SOCK_DGRAM: u32 = 2;
const DNS_PORT: u32 = 53;

/// How the agent's socket names its destination, for the rewrite.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dst {
    /// An IPv4 socket.
    V4,
    /// An IPv6 socket, to an IPv4-mapped address (`::ffff:a.b.c.d`).
    Mapped,
    /// An IPv6 socket, to an IPv6 address.
    V6,
}

/// What the proxy made of a connect or send.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Redirect {
    /// Not for the proxy: the address rules decide.
    No,
    /// Sent to the proxy or the resolver: allow the rewritten call.
    Done,
    /// For the proxy, but the original destination could not be kept: deny.
    Failed,
}

/// Whether `addr` (in `EgressRule::addr` layout) is a loopback address.
#[inline(always)]
pub(crate) fn loopback(family: u32, addr: &[u8; 16]) -> bool {
    if family == AF_INET {
        return addr[0] == 127;
    }
    addr[..15].iter().all(|b| *b == 0) && addr[15] == 1
}

/// Sends the call to the session's proxy (TCP not allowed by an address rule) or resolver
/// (port 53, UDP or TCP, whatever the rules say), when the session has a proxy.
#[inline(always)]
pub(crate) fn redirect(
    ctx: &SockAddrContext,
    session: u64,
    dst: Dst,
    family: u32,
    addr: &[u8; 16],
    port: u32,
    allowed: bool,
) -> Redirect {
    // SAFETY: a copy of the map value, read before the program returns.
    let Some(ports) = (unsafe { PROXY.get(&session) }).copied() else {
        return Redirect::No;
    };
    // SAFETY: the kernel hands every cgroup sock_addr program a valid context.
    let sa = unsafe { &mut *ctx.sock_addr };
    // DNS first, to any address (a loopback resolver's, a listed one's): no tunnel.
    let to = if port == DNS_PORT
        && ports.dns != 0
        && (sa.type_ == SOCK_DGRAM || sa.type_ == SOCK_STREAM)
    {
        ports.dns
    } else if !allowed && !loopback(family, addr) && sa.type_ == SOCK_STREAM && ports.tcp != 0 {
        ports.tcp
    } else {
        return Redirect::No;
    };
    let original = OriginalDst {
        session,
        family,
        port,
        addr: *addr,
    };
    // SAFETY: the helper reads the socket of the context it is given.
    let cookie = unsafe { bpf_get_socket_cookie(ctx.as_ptr()) };
    if ORIGINAL.insert(&cookie, &original, 0).is_err() {
        return Redirect::Failed;
    }
    let lo4 = u32::to_be(0x7f00_0001);
    match dst {
        Dst::V4 => sa.user_ip4 = lo4,
        Dst::Mapped => sa.user_ip6 = [0, 0, u32::to_be(0xffff), lo4],
        Dst::V6 => sa.user_ip6 = [0, 0, 0, u32::to_be(1)],
    }
    sa.user_port = u32::from(u16::to_be(to as u16));
    Redirect::Done
}

/// Shows the agent the original peer of a socket the connect programs redirected.
#[inline(always)]
fn peer_name(ctx: &SockAddrContext, v6: bool) -> i32 {
    // SAFETY: the helper reads the socket of the context it is given.
    let cookie = unsafe { bpf_get_socket_cookie(ctx.as_ptr()) };
    // SAFETY: a copy of the map value, read before the program returns.
    let Some(o) = (unsafe { ORIGINAL.get(&cookie) }).copied() else {
        return 1;
    };
    // SAFETY: as in `redirect`: a valid context for the duration of the run.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    let w = |i: usize| u32::from_ne_bytes([o.addr[i], o.addr[i + 1], o.addr[i + 2], o.addr[i + 3]]);
    match (v6, o.family) {
        (false, AF_INET) => sa.user_ip4 = w(0),
        (true, AF_INET) => sa.user_ip6 = [0, 0, u32::to_be(0xffff), w(0)],
        (true, AF_INET6) => sa.user_ip6 = [w(0), w(4), w(8), w(12)],
        _ => return 1,
    }
    sa.user_port = u32::from(u16::to_be(o.port as u16));
    1
}

#[cgroup_sock_addr(getpeername4)]
pub fn getpeername4(ctx: SockAddrContext) -> i32 {
    peer_name(&ctx, false)
}

#[cgroup_sock_addr(getpeername6)]
pub fn getpeername6(ctx: SockAddrContext) -> i32 {
    peer_name(&ctx, true)
}
