//! Unix sockets outside the session: this test process listens on a path-named and an
//! abstract socket (stream and datagram each), which `gw-escape` reaches bare; under
//! `gatewayd run`, tier 1's BPF LSM programs refuse all four with an audit record each while
//! a socket the policy lists and the agent's own socketpairs still work; at tier 2 Landlock
//! scopes abstract sockets (ABI 6), and the path-named ones bound before the session are
//! covered by mounts in the agent's namespace (`ECONNREFUSED`, no audit record). The session's own gateway socket is used by every test of
//! `gateway.rs`.
use std::os::{
    linux::net::SocketAddrExt as _,
    unix::{
        fs::MetadataExt as _,
        net::{SocketAddr, UnixDatagram, UnixListener},
    },
};

use super::{escape::escape_bin, *};

/// The sockets outside the session, bound by this process; kept open for the test.
struct Outside {
    dir: Scratch,
    _sockets: (
        UnixListener,
        UnixListener,
        UnixDatagram,
        UnixDatagram,
        UnixListener,
    ),
    abstract_stream: String,
    abstract_dgram: String,
}

impl Outside {
    fn new() -> Outside {
        let dir = Scratch::new("unix");
        let me = std::process::id();
        let abstract_stream = format!("gwtest-unix-stream-{me}");
        let abstract_dgram = format!("gwtest-unix-dgram-{me}");
        let sockets = (
            UnixListener::bind(dir.path("outside.sock")).unwrap(),
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_stream).unwrap())
                .unwrap(),
            UnixDatagram::bind(dir.path("outside.dgram")).unwrap(),
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&abstract_dgram).unwrap())
                .unwrap(),
            UnixListener::bind(dir.path("listed.sock")).unwrap(),
        );
        Outside {
            dir,
            _sockets: sockets,
            abstract_stream,
            abstract_dgram,
        }
    }

    fn path(&self, rel: &str) -> String {
        self.dir.path(rel).display().to_string()
    }

    /// gw-escape's arguments: one attempt per socket, and the agent's own socketpairs.
    fn args(&self) -> Vec<String> {
        vec![
            format!("unix_connect={}", self.path("outside.sock")),
            format!("unix_connect_abstract=@{}", self.abstract_stream),
            format!("unix_send={}", self.path("outside.dgram")),
            format!("unix_send_abstract=@{}", self.abstract_dgram),
            format!("unix_connect_listed={}", self.path("listed.sock")),
            "unix_pair".into(),
        ]
    }
}

#[test]
fn unix_sockets_outside_the_session_are_refused_unless_listed() {
    let tier = tier();
    let out = Outside::new();
    let bare = Command::new(escape_bin())
        .args(out.args())
        .output()
        .unwrap();
    let bare = escape_outcomes(&stdout(&bare));
    assert_eq!(bare.len(), 6, "{bare:?}");
    assert!(bare.values().all(|o| o == "ok"), "bare, all work: {bare:?}");

    let policy = write_policy(
        &out.dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "network": {"unix": [out.path("listed.sock")]}}),
    );
    let audit = out.dir.path("audit.jsonl");
    let run = escape_under(&policy, &audit, &out.args());
    assert!(run.status.success(), "{run:?}");
    let text = stdout(&run);
    eprintln!("gw-escape under gatewayd:\n{text}");
    let got = escape_outcomes(&text);
    let eperm = format!("errno {}", libc::EPERM);
    assert_eq!(got["unix_connect_listed"], "ok", "listed: {text}");
    assert_eq!(got["unix_pair"], "ok", "the agent's own sockets: {text}");
    let kernel: Vec<serde_json::Value> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    match tier {
        Tier::BpfLsm => {
            for name in [
                "unix_connect",
                "unix_connect_abstract",
                "unix_send",
                "unix_send_abstract",
            ] {
                assert_eq!(got[name], eperm, "{name}: {text}");
            }
            let seen: Vec<(&str, &str, &str)> = kernel
                .iter()
                .map(|r| {
                    (
                        r["hook"].as_str().unwrap(),
                        r["reason"].as_str().unwrap(),
                        r["detail"]["peer"].as_str().unwrap_or("?"),
                    )
                })
                .collect();
            assert_eq!(
                seen,
                [
                    ("lsm/unix_stream_connect", "unix_connect", "path"),
                    ("lsm/unix_stream_connect", "unix_connect", "abstract"),
                    ("lsm/unix_may_send", "unix_connect", "path"),
                    ("lsm/unix_may_send", "unix_connect", "abstract"),
                ],
                "{kernel:#?}"
            );
            let ino = std::fs::metadata(out.dir.path("outside.sock"))
                .unwrap()
                .ino();
            assert_eq!(kernel[0]["detail"]["ino"], ino);
            let prefix: String = out.abstract_stream.chars().take(16).collect();
            assert_eq!(kernel[1]["detail"]["name"], format!("@{prefix}…"));
            assert_eq!(kernel[1]["detail"]["name_len"], out.abstract_stream.len());
        }
        Tier::Landlock => {
            assert!(kernel.is_empty(), "Landlock reports nothing: {kernel:#?}");
            let abi = gatewayd_kernel::landlock::abi_version().unwrap_or(0);
            let abstract_want = if abi >= 6 { eperm.as_str() } else { "ok" };
            for name in ["unix_connect_abstract", "unix_send_abstract"] {
                assert_eq!(got[name], abstract_want, "{name} (ABI {abi}): {text}");
            }
            if abi < 6 {
                note(&format!(
                    "Landlock ABI {abi} has no abstract Unix socket scope: asserted abstract \
                     sockets outside the session stay reachable at tier 2"
                ));
            }
            // Path-named sockets bound before the session: covered in the agent's mount
            // namespace (no Landlock right exists for them), the listed one left alone.
            let refused = format!("errno {}", libc::ECONNREFUSED);
            for name in ["unix_connect", "unix_send"] {
                assert_eq!(got[name], refused, "{name}: {text}");
            }
            let start = records(&audit)
                .into_iter()
                .find(|r| r["reason"] == "session_start")
                .unwrap();
            let covered = &start["detail"]["agent_privileges"]["hidden"]["unix_sockets"]["covered"];
            for (name, want) in [
                ("outside.sock", true),
                ("outside.dgram", true),
                ("listed.sock", false),
            ] {
                let path = std::fs::canonicalize(out.dir.path(name)).unwrap();
                let found = covered
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c.as_str() == path.to_str());
                assert_eq!(found, want, "{name} covered: {covered}");
            }
            note(&format!(
                "tier 2 (Landlock ABI {abi}): no Landlock right covers connecting to a \
                 path-named Unix socket; asserted the sockets bound before the session are \
                 covered by mounts (ECONNREFUSED); one bound after it starts is not"
            ));
        }
    }
    assert!(verify(&audit).status.success());
}
