//! Reaching Unix sockets: `ARG` is a socket file's path or `@` and an abstract name.
use std::os::{
    linux::net::SocketAddrExt as _,
    unix::net::{SocketAddr, UnixDatagram, UnixStream},
};

use super::Outcome;

fn addr(arg: &str) -> std::io::Result<SocketAddr> {
    match arg.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(arg),
    }
}

fn outcome<T>(r: std::io::Result<T>) -> Outcome {
    r.map_or_else(
        |e| Outcome::Errno(e.raw_os_error().unwrap_or(0)),
        |_| Outcome::Ok,
    )
}

/// `connect()` of a stream socket to `arg`.
pub(crate) fn connect(arg: &str) -> Outcome {
    outcome(addr(arg).and_then(|a| UnixStream::connect_addr(&a)))
}

/// `sendto()` of one datagram to `arg` from an unbound datagram socket.
pub(crate) fn send(arg: &str) -> Outcome {
    outcome(addr(arg).and_then(|a| UnixDatagram::unbound()?.send_to_addr(b"gw-escape", &a)))
}

/// A datagram and a stream `socketpair()` of this process, one message through each.
pub(crate) fn pair() -> Outcome {
    use std::io::{Read as _, Write as _};
    outcome((|| {
        let (a, b) = UnixDatagram::pair()?;
        a.send(b"d")?;
        b.recv(&mut [0u8; 1])?;
        let (mut a, mut b) = UnixStream::pair()?;
        a.write_all(b"s")?;
        b.read_exact(&mut [0u8; 1])
    })())
}
