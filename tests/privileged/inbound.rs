//! Connections into the agent. A listener the agent opens on every address takes
//! connections from the network (a bind shell): a channel to and from the agent that no
//! `connect()` or `sendmsg()` of its own opens, so the egress allowlist never sees it.
//! `cgroup_skb/ingress` drops connection requests from outside the loopback addresses, at
//! both tiers; local clients still connect.
//!
//! A source outside loopback without a second interface: `192.0.2.7` (TEST-NET-1) is added
//! to `lo` for the test's length, and the client binds to it.
use std::{
    net::{Ipv4Addr, SocketAddrV4, TcpListener},
    time::{Duration, Instant},
};

use super::*;
use escape::{Outcome, escape_bin, parse};

const FROM: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 7);

/// `FROM` on `lo` while it lives (removed at the end only when it was added here).
struct ExtraAddress(bool);

impl ExtraAddress {
    fn add() -> ExtraAddress {
        let out = Command::new("ip")
            .args(["addr", "add", &format!("{FROM}/32"), "dev", "lo"])
            .output()
            .expect("ip (iproute2 or busybox)");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || text.contains("exists"),
            "ip addr add: {text}"
        );
        ExtraAddress(out.status.success())
    }
}

impl Drop for ExtraAddress {
    fn drop(&mut self) {
        if self.0 {
            let _ = Command::new("ip")
                .args(["addr", "del", &format!("{FROM}/32"), "dev", "lo"])
                .status();
        }
    }
}

/// One TCP connection from `from` to `to`, given up after `wait`.
fn connect_from(from: Ipv4Addr, to: SocketAddrV4, wait: Duration) -> bool {
    let sin = |a: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(a).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain syscalls on a socket this function owns and closes; the addresses
    // outlive the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let src = sin(from, 0);
        let dst = sin(*to.ip(), to.port());
        let mut ok = libc::bind(fd, (&raw const src).cast(), len) == 0;
        if ok && libc::connect(fd, (&raw const dst).cast(), len) != 0 {
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

/// Runs `agent` (listening on every address at `port`) while a client connects from
/// `from` again and again for up to 6 s; whether the client got in, and the agent's outcome.
fn try_inbound(mut agent: Command, from: Ipv4Addr, port: u16) -> (bool, Option<Outcome>) {
    let child = agent
        .arg(format!("accept_one=0.0.0.0:{port}"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let to = SocketAddrV4::new(from, port);
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

#[test]
fn connections_from_outside_loopback_do_not_reach_the_agent() {
    let _address = ExtraAddress::add();
    let port = || {
        TcpListener::bind("0.0.0.0:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port")
    };
    let (connected, outcome) = try_inbound(Command::new(escape_bin()), FROM, port());
    assert!(connected, "bare, a client from {FROM} must get in");
    assert_eq!(outcome, Some(Outcome::Ok), "bare");

    let dir = Scratch::new("inbound");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    );
    let audit = dir.path("audit.jsonl");
    let p = port();
    let (connected, outcome) = try_inbound(under_gatewayd(&policy, &audit, escape_bin()), FROM, p);
    assert!(!connected, "under gatewayd, a client from {FROM} got in");
    assert_eq!(
        outcome,
        Some(Outcome::Errno(libc::ETIMEDOUT)),
        "under gatewayd"
    );
    let k: Vec<serde_json::Value> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    assert!(!k.is_empty(), "no kernel record");
    for r in &k {
        assert_eq!(
            (r["hook"].as_str(), r["reason"].as_str()),
            (Some("cgroup_skb/ingress"), Some("inbound_not_allowed")),
            "{r}"
        );
        assert_eq!(r["detail"]["from"], FROM.to_string(), "{r}");
        assert_eq!(r["detail"]["port"], p, "{r}");
    }

    // A local client still gets in.
    let audit = dir.path("audit-local.jsonl");
    let (connected, outcome) = try_inbound(
        under_gatewayd(&policy, &audit, escape_bin()),
        Ipv4Addr::LOCALHOST,
        port(),
    );
    assert!(
        connected,
        "under gatewayd, a client from 127.0.0.1 must get in"
    );
    assert_eq!(outcome, Some(Outcome::Ok), "under gatewayd, from loopback");
}
