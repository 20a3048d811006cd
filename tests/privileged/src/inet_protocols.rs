//! IPv4/IPv6 sockets of protocols other than TCP and UDP: the cgroup egress programs run on
//! TCP's and UDP's connect and send paths, so the seccomp filter refuses the others
//! (`inet_protocol`). The way out it closes: an ICMP echo carrying any payload, sent with
//! `sendto()` on an unconnected ping socket, which no cgroup program sees. Ping sockets are
//! allowed to the groups in `net.ipv4.ping_group_range` (systemd opens it to everyone); the
//! test opens it to gid 0 for its length (both runs are root's), so the echo works bare.
use super::{escape::escape_bin, *};

const RANGE: &str = "/proc/sys/net/ipv4/ping_group_range";

/// `net.ipv4.ping_group_range` set to `0 0` until dropped, then put back.
struct PingGroupRange(String);

impl PingGroupRange {
    fn open_to_root() -> PingGroupRange {
        let old = std::fs::read_to_string(RANGE).unwrap();
        std::fs::write(RANGE, "0 0").unwrap();
        PingGroupRange(old)
    }
}

impl Drop for PingGroupRange {
    fn drop(&mut self) {
        let _ = std::fs::write(RANGE, self.0.trim());
    }
}

const ATTEMPTS: [&str; 4] = [
    "icmp_echo=127.0.0.1",
    "sctp_socket",
    "mptcp_socket",
    "tcp_socket",
];

#[test]
fn inet_sockets_of_protocols_without_egress_hooks_are_refused() {
    let tier = tier();
    let _range = PingGroupRange::open_to_root();
    let dir = Scratch::new("inet");
    let bare = Command::new(escape_bin()).args(ATTEMPTS).output().unwrap();
    let bare = escape_outcomes(&stdout(&bare));
    assert_eq!(bare["icmp_echo"], "ok", "bare, the echo goes out: {bare:?}");
    assert_eq!(bare["tcp_socket"], "ok", "{bare:?}");
    let denied = [
        format!("errno {}", libc::EPERM),
        format!("errno {}", libc::EACCES),
    ];
    for name in ["sctp_socket", "mptcp_socket"] {
        // Reaches the kernel's protocol code bare (it may lack the protocol: not a denial).
        assert!(!denied.contains(&bare[name]), "{name} bare: {bare:?}");
    }
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let run = escape_under(&policy, &audit, &ATTEMPTS);
    let text = stdout(&run);
    eprintln!("gw-escape under gatewayd ({tier:?}):\n{text}");
    let got = escape_outcomes(&text);
    for name in ["icmp_echo", "sctp_socket", "mptcp_socket"] {
        assert_eq!(got[name], denied[0], "{name}: {text}");
    }
    assert_eq!(got["tcp_socket"], "ok", "TCP is not refused: {text}");
    assert!(verify(&audit).status.success());
}

/// A TCP connect made by `sendto(MSG_FASTOPEN)` meets `cgroup/connect4` like `connect()`.
#[test]
fn a_tcp_fast_open_send_meets_the_egress_programs() {
    let _ = tier();
    let dir = Scratch::new("tfo");
    let (port, got) = listener("127.0.0.1:0");
    let attempt = format!("tcp_fastopen=127.0.0.1:{port}");
    let bare = Command::new(escape_bin()).arg(&attempt).output().unwrap();
    assert_eq!(stdout(&bare).trim(), "tcp_fastopen ok", "{bare:?}");
    assert_eq!(
        got.recv_timeout(Duration::from_secs(5)).unwrap(),
        b"stolen",
        "bare, the data arrives"
    );
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let run = escape_under(&policy, &audit, &[&attempt]);
    assert_eq!(
        stdout(&run).trim(),
        format!("tcp_fastopen errno {}", libc::EPERM),
        "{run:?}"
    );
    assert!(
        got.recv_timeout(Duration::from_millis(300)).is_err(),
        "the listener got a connection under gatewayd"
    );
    let kernel: Vec<serde_json::Value> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    assert_eq!(kernel.len(), 1, "{kernel:#?}");
    assert_eq!(kernel[0]["hook"], "cgroup/connect4");
    assert_eq!(kernel[0]["reason"], "egress_not_allowed");
    assert!(verify(&audit).status.success());
}
