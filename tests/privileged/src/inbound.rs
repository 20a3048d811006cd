//! Connections into the agent. A listener the agent opens on every address takes
//! connections from the network (a bind shell): a channel to and from the agent that no
//! `connect()` or `sendmsg()` of its own opens, so the egress allowlist never sees it.
//! `cgroup_skb/ingress` drops connection requests from outside the loopback addresses, at
//! both tiers; local clients still connect.
//!
//! A source outside loopback without a second interface: `192.0.2.7` (TEST-NET-1) and
//! `2001:db8::7` (the documentation prefix) are added to `lo` for the test's length, and the
//! client binds to them.
use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener},
    time::{Duration, Instant},
};

use super::*;
use escape::{Outcome, escape_bin, parse};

const FROM4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
const FROM6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7));

pub(crate) use gatewayd_testkit::net::ExtraAddress;

/// One TCP connection from `from` to `to` (same family), given up after `wait`. The client's
/// port is never `to`'s: `from` and `to` share an address, and a socket whose source is its
/// own destination connects to itself (TCP's simultaneous open) when nothing listens there.
/// The port `to` names was free a moment before (`free_port`), so the kernel may well give
/// it to the client: that made a run under gatewayd report a client "got in" with no
/// packet ever reaching the agent.
fn connect_from(from: IpAddr, to: SocketAddr, wait: Duration) -> bool {
    // std's TcpStream cannot choose its source address: libc binds it first.
    let (family, src, dst) = match (from, to) {
        (IpAddr::V4(f), SocketAddr::V4(t)) => {
            (libc::AF_INET, sockaddr4(f, 0), sockaddr4(*t.ip(), t.port()))
        }
        (IpAddr::V6(f), SocketAddr::V6(t)) => (
            libc::AF_INET6,
            sockaddr6(f, 0),
            sockaddr6(*t.ip(), t.port()),
        ),
        _ => panic!("{from} and {to} are of different families"),
    };
    // SAFETY: plain syscalls on a socket this function owns and closes; the addresses
    // outlive the calls, and each length is its own storage's.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut ok = libc::bind(fd, (&raw const src.0).cast(), src.1) == 0
            && local_port(fd) != Some(to.port());
        if ok && libc::connect(fd, (&raw const dst.0).cast(), dst.1) != 0 {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            let mut err: libc::c_int = 0;
            let mut n = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            ok = libc::poll(&raw mut p, 1, wait.as_millis() as i32) == 1
                && libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    (&raw mut err).cast(),
                    &raw mut n,
                ) == 0
                && err == 0;
        }
        libc::close(fd);
        ok
    }
}

/// The port a bound socket has.
fn local_port(fd: libc::c_int) -> Option<u16> {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut n = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `st` and `n` are this function's own storage and its length; `fd` is the
    // caller's open socket.
    if unsafe { libc::getsockname(fd, (&raw mut st).cast(), &raw mut n) } != 0 {
        return None;
    }
    // SAFETY: getsockname filled `st` with a sockaddr of the socket's family, whose port
    // is at the same offset in sockaddr_in and sockaddr_in6.
    let sin: libc::sockaddr_in = unsafe { std::ptr::read((&raw const st).cast()) };
    Some(u16::from_be(sin.sin_port))
}

/// A `sockaddr_storage` holding an IPv4 address, and its length.
fn sockaddr4(a: Ipv4Addr, port: u16) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(a).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
    unsafe { std::ptr::write((&raw mut st).cast(), sin) };
    (
        st,
        std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
    )
}

/// A `sockaddr_storage` holding an IPv6 address, and its length.
fn sockaddr6(a: Ipv6Addr, port: u16) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero sockaddr_storage and sockaddr_in6 are valid.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_port = port.to_be();
    sin6.sin6_addr.s6_addr = a.octets();
    // SAFETY: sockaddr_storage is larger than sockaddr_in6 and suitably aligned.
    unsafe { std::ptr::write((&raw mut st).cast(), sin6) };
    (
        st,
        std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
    )
}

/// Runs `agent` (listening on every address at `port`, `listen` `0.0.0.0` or `[::]`) while a
/// client connects from `from` again and again for up to 6 s; whether the client got in,
/// and the agent's outcome.
fn try_inbound(
    mut agent: Command,
    listen: &str,
    from: IpAddr,
    port: u16,
) -> (bool, Option<Outcome>) {
    let child = agent
        .arg(format!("accept_one={listen}:{port}"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let to = SocketAddr::new(from, port);
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut connected = false;
    while !connected && Instant::now() < deadline {
        connected = connect_from(from, to, Duration::from_millis(500));
        if !connected {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let out = child.wait_with_output().expect("the agent ends");
    let text = stdout(&out);
    (connected, parse(&text).get("accept_one").copied())
}

fn free_port() -> u16 {
    TcpListener::bind("[::]:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn connections_from_outside_loopback_do_not_reach_the_agent() {
    let dir = Scratch::new("inbound");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    );
    for (from, listen, local) in [
        (FROM4, "0.0.0.0", IpAddr::V4(Ipv4Addr::LOCALHOST)),
        (FROM6, "[::]", IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ] {
        let _address = ExtraAddress::add(from);
        let (connected, outcome) =
            try_inbound(Command::new(escape_bin()), listen, from, free_port());
        assert!(connected, "bare, a client from {from} must get in");
        assert_eq!(outcome, Some(Outcome::Ok), "bare, from {from}");

        let audit = dir.path(&format!("audit-{}.jsonl", local.is_ipv4()));
        let p = free_port();
        let under = under_gatewayd(&policy, &audit, escape_bin());
        let (connected, outcome) = try_inbound(under, listen, from, p);
        assert!(!connected, "under gatewayd, a client from {from} got in");
        assert_eq!(
            outcome,
            Some(Outcome::Errno(libc::ETIMEDOUT)),
            "under gatewayd, from {from}"
        );
        let k: Vec<serde_json::Value> = records(&audit)
            .into_iter()
            .filter(|r| r["source"] == "kernel")
            .collect();
        assert!(!k.is_empty(), "no kernel record for {from}");
        for r in &k {
            // A repeat within a second is counted in a `denials_aggregated` record.
            if r["reason"] == "denials_aggregated" {
                assert_eq!(r["detail"]["reason"], "inbound_not_allowed", "{r}");
                assert_eq!(r["detail"]["object"], format!("{from}:{p}"), "{r}");
                continue;
            }
            assert_eq!(
                (r["hook"].as_str(), r["reason"].as_str()),
                (Some("cgroup_skb/ingress"), Some("inbound_not_allowed")),
                "{r}"
            );
            assert_eq!(r["detail"]["from"], from.to_string(), "{r}");
            assert_eq!(r["detail"]["port"], p, "{r}");
        }

        // A local client still gets in.
        let audit = dir.path(&format!("audit-local-{}.jsonl", local.is_ipv4()));
        let under = under_gatewayd(&policy, &audit, escape_bin());
        let (connected, outcome) = try_inbound(under, listen, local, free_port());
        assert!(
            connected,
            "under gatewayd, a client from {local} must get in"
        );
        assert_eq!(outcome, Some(Outcome::Ok), "under gatewayd, from {local}");
    }
}
