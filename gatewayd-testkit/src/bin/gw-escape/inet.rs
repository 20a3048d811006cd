//! IPv4/IPv6 sockets of protocols other than TCP and UDP, whose send paths do not all run
//! the cgroup egress programs (an ICMP echo on an unconnected ping socket runs none), and a
//! TCP listener waiting for a connection from outside, and TCP connections on loopback to a
//! listener of the agent's own and to another's.
use super::Outcome;

/// A TCP listener on `arg` (`ADDR:PORT`) that waits up to 6 s for one connection, as a
/// bind shell does. Ok: one was accepted; `ETIMEDOUT`: none came.
pub(crate) fn accept_one(arg: &str) -> Outcome {
    let io = |e: std::io::Error| Outcome::Errno(e.raw_os_error().unwrap_or(libc::EIO));
    let listener = match std::net::TcpListener::bind(arg) {
        Ok(l) => l,
        Err(e) => return io(e),
    };
    if let Err(e) = listener.set_nonblocking(true) {
        return io(e);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(6);
    while std::time::Instant::now() < deadline {
        match listener.accept() {
            Ok(_) => return Outcome::Ok,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return io(e),
        }
    }
    Outcome::Errno(libc::ETIMEDOUT)
}

/// A TCP connection to `arg` (`ADDR:PORT`), given up after 3 s. Ok: it was accepted.
pub(crate) fn tcp_connect(arg: &str) -> Outcome {
    let Ok(to) = arg.parse::<std::net::SocketAddr>() else {
        return Outcome::Errno(libc::EINVAL);
    };
    match std::net::TcpStream::connect_timeout(&to, std::time::Duration::from_secs(3)) {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::Errno(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// A TCP listener of its own on `arg` (an address, port 0; with `reuseport`, bound with
/// `SO_REUSEPORT`), then a connection to it on loopback (`127.0.0.1` for `0.0.0.0` and
/// `::`, which a dual-stack socket takes too), as a test suite reaches the server it
/// started. Ok: the connection was accepted.
pub(crate) fn own_listener(arg: &str, reuseport: bool) -> Outcome {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::os::fd::FromRawFd as _;
    let io = |e: std::io::Error| Outcome::Errno(e.raw_os_error().unwrap_or(libc::EIO));
    let Ok(ip) = arg.parse::<IpAddr>() else {
        return Outcome::Errno(libc::EINVAL);
    };
    let family = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: a plain syscall; the fd is owned by the listener made below.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return errno();
    }
    // SAFETY: `fd` was just made and is owned by nothing else; the listener closes it.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: sets an int option of the socket just made, from a live int of that size.
    if reuseport
        && unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEPORT,
                (&raw const one).cast(),
                size,
            )
        } != 0
    {
        return errno();
    }
    let bound = match ip {
        IpAddr::V4(a) => bind_to(fd, &sockaddr_in(a, 0)),
        IpAddr::V6(a) => bind_to(fd, &sockaddr_in6(a, 0)),
    };
    // SAFETY: a plain syscall on the socket just bound.
    if bound != 0 || unsafe { libc::listen(fd, 8) } != 0 {
        return errno();
    }
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => return io(e),
    };
    let to = if ip.is_unspecified() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    } else {
        SocketAddr::new(ip, port)
    };
    let outcome = tcp_connect(&to.to_string());
    if outcome == Outcome::Ok {
        return listener.accept().map_or_else(io, |_| Outcome::Ok);
    }
    outcome
}

/// A socket of `family`/`ty`/`proto` (closed at once).
pub(crate) fn socket(family: i32, ty: i32, proto: i32) -> Outcome {
    // SAFETY: a plain syscall; the fd is closed below.
    let fd = unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return errno();
    }
    // SAFETY: the fd just made, closed once.
    unsafe { libc::close(fd) };
    Outcome::Ok
}

/// An ICMP echo request sent with `sendto()` on an unconnected ping socket
/// (`SOCK_DGRAM`, `IPPROTO_ICMP`/`IPPROTO_ICMPV6`) to `arg`, an IP address: what the
/// `ping` of iputils does, and a way out past `cgroup/sendmsg4` (which only UDP runs).
pub(crate) fn icmp_echo(arg: &str) -> Outcome {
    let Ok(ip) = arg.parse::<std::net::IpAddr>() else {
        return Outcome::Errno(libc::EINVAL);
    };
    let (family, proto, echo_type) = match ip {
        std::net::IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP, 8u8),
        std::net::IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6, 128u8),
    };
    // SAFETY: a plain syscall; the fd is closed below.
    let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return errno();
    }
    // Type, code, checksum and identifier are filled in by the kernel; then the payload.
    let mut msg = [0u8; 16];
    msg[0] = echo_type;
    msg[8..16].copy_from_slice(b"gwescape");
    let sent = match ip {
        std::net::IpAddr::V4(v4) => send_to(fd, &msg, 0, &sockaddr_in(v4, 0)),
        std::net::IpAddr::V6(v6) => send_to(fd, &msg, 0, &sockaddr_in6(v6, 0)),
    };
    let out = if sent < 0 { errno() } else { Outcome::Ok };
    // SAFETY: the fd made above, closed once.
    unsafe { libc::close(fd) };
    out
}

/// `sendto(MSG_FASTOPEN)` of `stolen` on a fresh TCP socket to `arg` (`IPv4:port`): a
/// connect made by a send, which must meet the same egress programs as `connect()`.
pub(crate) fn tcp_fastopen(arg: &str) -> Outcome {
    let Ok(addr) = arg.parse::<std::net::SocketAddrV4>() else {
        return Outcome::Errno(libc::EINVAL);
    };
    // SAFETY: a plain syscall; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return errno();
    }
    let sa = sockaddr_in(*addr.ip(), addr.port());
    let sent = send_to(fd, b"stolen", libc::MSG_FASTOPEN, &sa);
    let out = if sent < 0 { errno() } else { Outcome::Ok };
    // SAFETY: the fd made above, closed once (the data goes out before the FIN).
    unsafe { libc::close(fd) };
    out
}

/// A `sockaddr_in` of `ip` and `port`.
fn sockaddr_in(ip: std::net::Ipv4Addr, port: u16) -> libc::sockaddr_in {
    // SAFETY: an all-zero sockaddr_in is valid; the fields are set below.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from_ne_bytes(ip.octets());
    sa
}

/// A `sockaddr_in6` of `ip` and `port`.
fn sockaddr_in6(ip: std::net::Ipv6Addr, port: u16) -> libc::sockaddr_in6 {
    // SAFETY: an all-zero sockaddr_in6 is valid; the fields are set below.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = port.to_be();
    sa.sin6_addr.s6_addr = ip.octets();
    sa
}

/// `bind(fd, sa)`: its return value.
fn bind_to<T>(fd: i32, sa: &T) -> i32 {
    // SAFETY: sa is valid for its size; T is a sockaddr of its family.
    unsafe {
        libc::bind(
            fd,
            std::ptr::from_ref(sa).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

/// `sendto(fd, msg, flags, sa)`: its return value.
fn send_to<T>(fd: i32, msg: &[u8], flags: i32, sa: &T) -> isize {
    // SAFETY: msg and sa are valid for the lengths given; T is a sockaddr of its family.
    unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            flags,
            std::ptr::from_ref(sa).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

fn errno() -> Outcome {
    Outcome::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// A DNS A query for a name, as an agent tunnelling through DNS would make it: `arg` is
/// `SERVER,NAME,udp|tcp` (SERVER an IPv4 or IPv6 address, port 53). Prints
/// `rcode=R ip=A` (`ip=-` when the answer has no record) before the outcome line.
pub(crate) fn dns_query(arg: &str) -> Outcome {
    use std::io::{Read as _, Write as _};
    let io = |e: std::io::Error| Outcome::Errno(e.raw_os_error().unwrap_or(libc::EIO));
    let mut parts = arg.splitn(3, ',');
    let (Some(server), Some(name), Some(how)) = (parts.next(), parts.next(), parts.next()) else {
        return Outcome::Errno(libc::EINVAL);
    };
    let Ok(server) = server.parse::<std::net::IpAddr>() else {
        return Outcome::Errno(libc::EINVAL);
    };
    let server = std::net::SocketAddr::new(server, 53);
    let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        query.push(u8::try_from(label.len()).unwrap_or(63));
        query.extend_from_slice(label.as_bytes());
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    let timeout = Some(std::time::Duration::from_secs(5));
    let answer = if how == "udp" {
        let exchange = || -> std::io::Result<Vec<u8>> {
            let socket = std::net::UdpSocket::bind(unspecified_for(server))?;
            socket.set_read_timeout(timeout)?;
            socket.send_to(&query, server)?;
            let mut buf = [0u8; 4096];
            let n = socket.recv(&mut buf)?;
            Ok(buf[..n].to_vec())
        };
        exchange()
    } else {
        let exchange = || -> std::io::Result<Vec<u8>> {
            let mut s =
                std::net::TcpStream::connect_timeout(&server, std::time::Duration::from_secs(5))?;
            s.set_read_timeout(timeout)?;
            let len = u16::try_from(query.len()).unwrap_or(u16::MAX).to_be_bytes();
            s.write_all(&[&len[..], &query].concat())?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len)?;
            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut buf)?;
            Ok(buf)
        };
        exchange()
    };
    let answer = match answer {
        Ok(a) if a.len() >= 12 => a,
        Ok(_) => return Outcome::Errno(libc::EBADMSG),
        Err(e) => return io(e),
    };
    let answers = u16::from_be_bytes([answer[6], answer[7]]);
    let ip = match (answers, answer.get(answer.len().saturating_sub(4)..)) {
        (1.., Some(a)) => format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]),
        _ => "-".to_owned(),
    };
    println!("rcode={} ip={ip}", answer[3] & 15);
    Outcome::Ok
}

/// One UDP datagram to `arg` (`ADDR:PORT`) from an unconnected socket, as a QUIC client's
/// first packet goes.
pub(crate) fn udp_send(arg: &str) -> Outcome {
    let io = |e: std::io::Error| Outcome::Errno(e.raw_os_error().unwrap_or(libc::EIO));
    let Ok(to) = arg.parse::<std::net::SocketAddr>() else {
        return Outcome::Errno(libc::EINVAL);
    };
    match std::net::UdpSocket::bind(unspecified_for(to)).and_then(|s| s.send_to(b"quic", to)) {
        Ok(_) => Outcome::Ok,
        Err(e) => io(e),
    }
}

/// Any local address and port of `to`'s family, to send to `to` from.
fn unspecified_for(to: std::net::SocketAddr) -> std::net::SocketAddr {
    if to.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    }
}
