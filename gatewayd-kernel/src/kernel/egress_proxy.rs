//! The kernel side of a session's egress proxy (`gatewayd run` with name-based egress): the
//! `PROXY` entry that makes the connect programs send the agent's connections to the proxy
//! and resolver of its session, and the `ORIGINAL` map where the proxy finds where each one
//! meant to go. The proxy knows an accepted connection by its peer (the agent's socket on
//! loopback); the kernel's socket diagnostics (`NETLINK_SOCK_DIAG`) give that socket's
//! cookie, the key of `ORIGINAL`.
use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex},
};

use gateway_common::{AF_INET, AF_INET6, ProxyPorts};

use super::{
    KernelError,
    maps::{SetMaps, map_err},
    set::lock,
};

/// A session's `PROXY` and `ORIGINAL` entries, for its proxy (cloneable).
#[derive(Clone)]
pub struct ProxyMaps {
    maps: Arc<Mutex<SetMaps>>,
    session: u64,
}

impl std::fmt::Debug for ProxyMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyMaps")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl ProxyMaps {
    pub(crate) fn new(maps: Arc<Mutex<SetMaps>>, session: u64) -> ProxyMaps {
        ProxyMaps { maps, session }
    }

    /// Sends the agent's TCP that no address rule allows to `tcp`, and its port-53 traffic
    /// to `dns` (both on `127.0.0.1` and `::1`). The entry goes with the session's others.
    pub fn set_ports(&self, tcp: u16, dns: u16) -> Result<(), KernelError> {
        let ports = ProxyPorts {
            tcp: u32::from(tcp),
            dns: u32::from(dns),
        };
        lock(&self.maps)
            .proxy
            .insert(self.session, ports, 0)
            .map_err(map_err("PROXY"))
    }

    /// Whether this kernel gives a TCP socket's cookie by its addresses (`NETLINK_SOCK_DIAG`
    /// for TCP: `inet_diag` and `tcp_diag`, modules on many distributions, which the kernel
    /// loads on first use where it may): asked of a loopback connection of gatewayd's own.
    /// Without it the proxy could find no connection's destination and would refuse them
    /// all, so `gatewayd run` checks it before the agent starts.
    pub fn check_socket_diag() -> std::io::Result<()> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let client = std::net::TcpStream::connect(listener.local_addr()?)?;
        sys::socket_cookie(client.local_addr()?, client.peer_addr()?).map(|_| ())
    }

    /// Where the agent's socket that `peer` (its address on loopback, seen from the proxy's
    /// side) is meant to go, when a connect program of this session sent it here; `None`
    /// for any other connection (one made to the proxy's port directly, say).
    pub fn original(&self, peer: SocketAddr, local: SocketAddr) -> Option<SocketAddr> {
        let cookie = sys::socket_cookie(peer, local).ok()?;
        let o = lock(&self.maps).original.get(&cookie, 0).ok()?;
        if o.session != self.session {
            return None;
        }
        let ip = match o.family {
            AF_INET => IpAddr::V4(Ipv4Addr::new(o.addr[0], o.addr[1], o.addr[2], o.addr[3])),
            AF_INET6 => IpAddr::V6(Ipv6Addr::from(o.addr)),
            _ => return None,
        };
        Some(SocketAddr::new(ip, u16::try_from(o.port).ok()?))
    }
}

/// The socket diagnostics request, on its own netlink socket.
mod sys {
    use std::{
        io,
        net::{IpAddr, SocketAddr},
        os::fd::{AsRawFd, FromRawFd, OwnedFd},
    };

    const NETLINK_SOCK_DIAG: i32 = 4;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    const NLM_F_REQUEST: u16 = 1;
    const HEADER: usize = 16;
    /// `inet_diag_req_v2`: family, protocol, ext, pad, states, then `inet_diag_sockid`.
    const REQUEST: usize = 56;
    /// Offset of `idiag_cookie` in `inet_diag_msg` (after family, state, timer, retrans,
    /// the ports, both addresses and the interface).
    const COOKIE_AT: usize = 44;

    fn family_and_bytes(ip: IpAddr) -> (u8, [u8; 16]) {
        match ip {
            IpAddr::V4(v4) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v4.octets());
                (libc::AF_INET as u8, b)
            }
            IpAddr::V6(v6) => (libc::AF_INET6 as u8, v6.octets()),
        }
    }

    /// The cookie of the TCP socket whose own address is `own` and whose peer is `peer`.
    pub(super) fn socket_cookie(own: SocketAddr, peer: SocketAddr) -> io::Result<u64> {
        let (family, src) = family_and_bytes(own.ip());
        let (_, dst) = family_and_bytes(peer.ip());
        let mut req = [0u8; HEADER + REQUEST];
        req[..4].copy_from_slice(&((HEADER + REQUEST) as u32).to_ne_bytes());
        req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        req[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        let r = &mut req[HEADER..];
        r[0] = family;
        r[1] = libc::IPPROTO_TCP as u8;
        r[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        r[8..10].copy_from_slice(&own.port().to_be_bytes());
        r[10..12].copy_from_slice(&peer.port().to_be_bytes());
        r[12..28].copy_from_slice(&src);
        r[28..44].copy_from_slice(&dst);
        // No cookie known: INET_DIAG_NOCOOKIE.
        r[48..56].copy_from_slice(&[0xff; 8]);
        // SAFETY: plain socket(2); the result is checked before it is owned.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the buffer is valid for its length for the duration of the call.
        let sent = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 4096];
        // SAFETY: the buffer is valid and writable for its length during the call.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        parse_reply(&buf[..n])
    }

    fn parse_reply(msg: &[u8]) -> io::Result<u64> {
        let short = || io::Error::from(io::ErrorKind::UnexpectedEof);
        let word = |at: usize| -> io::Result<[u8; 4]> {
            msg.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(short)
        };
        let kind = msg.get(4..6).ok_or_else(short)?;
        let kind = u16::from_ne_bytes([kind[0], kind[1]]);
        if kind == NLMSG_ERROR {
            let errno = i32::from_ne_bytes(word(HEADER)?);
            return Err(io::Error::from_raw_os_error(-errno));
        }
        if kind != SOCK_DIAG_BY_FAMILY {
            return Err(io::Error::from(io::ErrorKind::InvalidData));
        }
        let lo = u32::from_ne_bytes(word(HEADER + COOKIE_AT)?);
        let hi = u32::from_ne_bytes(word(HEADER + COOKIE_AT + 4)?);
        Ok(u64::from(hi) << 32 | u64::from(lo))
    }

    #[cfg(test)]
    mod tests {
        use std::net::{TcpListener, TcpStream};

        use super::*;

        #[test]
        fn finds_the_cookie_of_a_connected_socket_by_its_addresses() {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let a = socket_cookie(c.local_addr().unwrap(), c.peer_addr().unwrap()).unwrap();
            let b = socket_cookie(c.local_addr().unwrap(), c.peer_addr().unwrap()).unwrap();
            assert_eq!(a, b);
            assert_ne!(a, 0);
            // The accepted side is another socket.
            let (s, _) = l.accept().unwrap();
            let other = socket_cookie(s.local_addr().unwrap(), s.peer_addr().unwrap()).unwrap();
            assert_ne!(a, other);
        }
    }
}
