//! Egress by name (`*.domain` entries): the kernel sends the agent's TCP to the session's
//! proxy, which decides by the TLS server name, and its DNS to the session's resolver. A
//! real HTTPS server (`openssl s_server -WWW`; a test certificate from `openssl req`) on
//! extra loopback addresses, a DNS server of this test on `192.0.2.53:53`, `curl` as the
//! agent. Every bypass is first shown working bare (the same script without gatewayd), then
//! refused under it, each refusal a record. Then learn mode
//! learns the name, and the policy `suggest` drafts from it lets the same fetch through.
use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream},
    sync::Arc,
};

use super::*;
use gatewayd_testkit::net::ExtraAddress;

const ALLOWED_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 31);
const OTHER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 32);
const OTHER_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x32);
const DNS_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const HTTPS_PORT: u16 = 8443;
/// The script's HTTPS attempts that work bare and are refused under gatewayd.
const REFUSED_CURLS: &[&str] = &[
    "refused_name",
    "raw_ip",
    "forged_name",
    "mapped",
    "ipv6",
    "proxy_port",
];

/// The A answer of each name the test's DNS server knows.
fn known(name: &str) -> Option<Ipv4Addr> {
    match name {
        "api.allowed.test" | "www.wild.test" => Some(ALLOWED_IP),
        "evil.test" => Some(OTHER_IP),
        _ => None,
    }
}

/// The test's DNS server on `at:53` ([`gatewayd_testkit::net::dns_server`]).
pub(crate) fn dns_server(at: Ipv4Addr, known: fn(&str) -> Option<Ipv4Addr>) {
    gatewayd_testkit::net::dns_server(at, known).expect("the test's DNS server on port 53");
}

/// The HTTPS servers, ended when dropped (a failed assertion included).
pub(crate) struct Servers(pub(crate) Vec<std::process::Child>);

impl Servers {
    /// `child`, a server, once `addr` accepts a connection (its listen is made).
    pub(crate) fn listening(child: std::process::Child, addr: SocketAddr) -> Servers {
        let servers = Servers(vec![child]);
        let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
        while TcpStream::connect(addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the server on {addr} did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        servers
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A certificate for the test's names, and HTTPS servers with it on port 8443 of every
/// address of the host (`0.0.0.0` and `[::]`: `s_server` binds an IPv6 address for IPv6
/// only), serving `hello` as `hello-from-server`.
fn https_server(dir: &Scratch) -> (PathBuf, Servers) {
    let (cert, key) = (dir.path("cert.pem"), dir.path("key.pem"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=api.allowed.test", "-addext"])
        .arg("subjectAltName=DNS:api.allowed.test,DNS:www.wild.test,DNS:evil.test")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let www = dir.path("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("hello"), "hello-from-server").unwrap();
    // `-WWW` serves the files under its working directory.
    let serve = |accept: String| {
        Command::new("openssl")
            .args(["s_server", "-quiet", "-WWW", "-accept", &accept])
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .current_dir(&www)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let servers = Servers(vec![
        serve(format!("0.0.0.0:{HTTPS_PORT}")),
        serve(format!("[::]:{HTTPS_PORT}")),
    ]);
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    while TcpStream::connect((ALLOWED_IP, HTTPS_PORT)).is_err()
        || TcpStream::connect((OTHER_IP6, HTTPS_PORT)).is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTPS servers did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (cert, servers)
}

/// The attempts, one line each: `NAME RESULT` (the body, or `rcode=..`, or `fail`).
fn script(dir: &Scratch, cert: &Path) -> String {
    let escape = crate::escape::escape_bin();
    let curl = format!("curl -sS --max-time 10 --cacert {}", cert.display());
    let get = |name: &str, args: &str, url: &str| {
        format!("echo \"{name} $({curl} {args} {url} 2>/dev/null || echo fail)\"\n")
    };
    let r = |host: &str, ip: &str| format!("--resolve {host}:{HTTPS_PORT}:{ip}");
    let (a, o, o6) = (ALLOWED_IP, OTHER_IP, OTHER_IP6);
    let url = |host: &str| format!("https://{host}:{HTTPS_PORT}/hello");
    let mut s = String::new();
    s += &get(
        "allowed",
        &r("api.allowed.test", &a.to_string()),
        &url("api.allowed.test"),
    );
    s += &get(
        "wildcard",
        &r("www.wild.test", &a.to_string()),
        &url("www.wild.test"),
    );
    s += &get(
        "refused_name",
        &r("evil.test", &o.to_string()),
        &url("evil.test"),
    );
    s += &get("raw_ip", "-k", &url(&o.to_string()));
    s += &get(
        "forged_name",
        &r("api.allowed.test", &o.to_string()),
        &url("api.allowed.test"),
    );
    s += &get("mapped", "-k", &url(&format!("[::ffff:{o}]")));
    s += &get("ipv6", "-k", &url(&format!("[{o6}]")));
    let port = dir.path("port");
    s += &format!(
        "while [ ! -s {p} ]; do sleep 0.05; done; P=$(cat {p})\n",
        p = port.display()
    );
    s += &format!(
        "echo \"proxy_port $({curl} --resolve api.allowed.test:$P:127.0.0.1 https://api.allowed.test:$P/hello 2>/dev/null || echo fail)\"\n"
    );
    for (n, host, how) in [
        ("dns_udp_listed", "evil.test", "udp"),
        ("dns_tcp", "evil.test", "tcp"),
        ("dns_allowed", "api.allowed.test", "udp"),
    ] {
        s += &format!(
            "echo \"{n} $({escape} dns_query={DNS_IP},{host},{how} | grep '^rcode=' || echo fail)\"\n"
        );
    }
    s += &format!(
        "echo \"quic $({escape} udp_send={a}:443 | grep -q ' ok$' && echo sent || echo fail)\"\n"
    );
    s
}

fn outcomes(text: &str) -> std::collections::BTreeMap<String, String> {
    escape_outcomes(text)
}

#[test]
fn egress_by_name_goes_through_the_proxy_and_every_bypass_is_refused() {
    let _ = tier();
    // What `gatewayd run` checks before the agent starts, doctor reports.
    let diag = &doctor()["egress by name (socket diagnostics)"];
    assert_eq!(diag["ok"], true, "{diag}");
    let _addrs: Vec<ExtraAddress> = [
        IpAddr::V4(ALLOWED_IP),
        IpAddr::V4(OTHER_IP),
        IpAddr::V4(DNS_IP),
        IpAddr::V6(OTHER_IP6),
    ]
    .into_iter()
    .map(ExtraAddress::add)
    .collect();
    let dir = Scratch::new("egress-proxy");
    dns_server(DNS_IP, known);
    let (cert, _servers) = https_server(&dir);
    let quic = Arc::new(UdpSocket::bind((ALLOWED_IP, 443)).unwrap());
    quic.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let sh = script(&dir, &cert);
    let port = dir.path("port");

    // Bare: every attempt works (the proxy port is the server's own here).
    std::fs::write(&port, HTTPS_PORT.to_string()).unwrap();
    let bare = Command::new("sh").args(["-c", &sh]).output().unwrap();
    let bare = outcomes(&stdout(&bare));
    for n in ["allowed", "wildcard"].iter().chain(REFUSED_CURLS) {
        assert_eq!(bare[*n], "hello-from-server", "bare {n}: {bare:?}");
    }
    assert_eq!(
        bare["dns_udp_listed"],
        format!("rcode=0 ip={OTHER_IP}"),
        "{bare:?}"
    );
    assert_eq!(
        bare["dns_tcp"],
        format!("rcode=0 ip={OTHER_IP}"),
        "{bare:?}"
    );
    assert_eq!(bare["quic"], "sent");
    let mut got = [0u8; 8];
    assert_eq!(
        quic.recv(&mut got).ok(),
        Some(4),
        "the bare QUIC datagram arrived"
    );

    // Under gatewayd.
    std::fs::remove_file(&port).unwrap();
    let policy = write_policy(
        &dir,
        best_effort(serde_json::json!([
            {"host": "api.allowed.test", "port": HTTPS_PORT},
            {"host": "*.wild.test", "port": HTTPS_PORT},
            {"cidr": format!("{DNS_IP}/32"), "port": 53},
            {"cidr": "127.0.0.0/8"}
        ])),
    );
    let audit = dir.path("audit.jsonl");
    let child = gatewayd_run()
        .arg("--policy")
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .args(["--", "sh", "-c", &sh])
        .env("GATEWAYD_DNS_SERVER", format!("{DNS_IP}:53"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let proxy = wait_for_record(&audit, "egress_proxy");
    std::fs::write(&port, proxy["detail"]["tcp_port"].to_string()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let gated = outcomes(&text);
    assert_eq!(gated["allowed"], "hello-from-server", "{text}");
    assert_eq!(gated["wildcard"], "hello-from-server", "{text}");
    for n in REFUSED_CURLS.iter().chain(&["quic"]) {
        assert_eq!(gated[*n], "fail", "under gatewayd {n}: {text}");
    }
    assert_eq!(gated["dns_udp_listed"], "rcode=3 ip=-", "{text}");
    assert_eq!(gated["dns_tcp"], "rcode=3 ip=-", "{text}");
    assert_eq!(
        gated["dns_allowed"],
        format!("rcode=0 ip={ALLOWED_IP}"),
        "{text}"
    );
    assert!(
        quic.recv(&mut got).is_err(),
        "no QUIC datagram under gatewayd"
    );

    let recs = records(&audit);
    let refused: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["reason"] == "egress_not_allowed")
        .collect();
    let by_host = |h: &str| refused.iter().filter(|r| r["detail"]["host"] == h).count();
    assert!(
        by_host("evil.test") >= 3,
        "the name, and both DNS queries: {refused:#?}"
    );
    assert!(
        by_host("api.allowed.test") >= 1,
        "the forged name: {refused:#?}"
    );
    let no_name = refused
        .iter()
        .filter(|r| r["detail"]["via"] == "egress_proxy" && r["detail"]["host"].is_null())
        .count();
    assert!(
        no_name >= 4,
        "raw IP, mapped, IPv6, the proxy's own port: {refused:#?}"
    );
    let kernel_quic = refused
        .iter()
        .any(|r| r["hook"] == "cgroup/sendmsg4" && r["detail"]["port"] == 443);
    assert!(kernel_quic, "{refused:#?}");
    assert!(verify(&audit).status.success());

    learn_by_name(&dir, &cert);
}

/// `--learn` with a policy that lists no name: the proxy runs all the same, lets the
/// connection by name through and records it; `policy suggest` proposes the host, under
/// which the same fetch runs with no refusal.
fn learn_by_name(dir: &Scratch, cert: &Path) {
    let fetch = format!(
        "curl -sS --max-time 10 --cacert {} --resolve api.allowed.test:{HTTPS_PORT}:{ALLOWED_IP} https://api.allowed.test:{HTTPS_PORT}/hello",
        cert.display()
    );
    let run = |policy: &Path, audit: &Path, learn: bool| {
        let mut c = gatewayd_run();
        if learn {
            c.arg("--learn");
        }
        c.arg("--policy")
            .arg(policy)
            .arg("--audit")
            .arg(audit)
            .args(["--", "sh", "-c", &fetch])
            .env("GATEWAYD_DNS_SERVER", format!("{DNS_IP}:53"))
            .output()
            .unwrap()
    };
    let policy = write_policy(
        dir,
        best_effort(serde_json::json!([{"cidr": format!("{DNS_IP}/32"), "port": 53}])),
    );
    let enforced = dir.path("learn-enforced.jsonl");
    let out = run(&policy, &enforced, false);
    assert_ne!(stdout(&out), "hello-from-server", "no name listed: refused");

    let audit = dir.path("learn.jsonl");
    let out = run(&policy, &audit, true);
    assert_eq!(stdout(&out), "hello-from-server", "learned: {out:?}");
    let learned: Vec<serde_json::Value> = records(&audit)
        .into_iter()
        .filter(|r| r["decision"] == "would_deny" && r["reason"] == "egress_not_allowed")
        .collect();
    assert!(
        learned
            .iter()
            .any(|r| r["detail"]["host"] == "api.allowed.test"
                && r["detail"]["via"] == "egress_proxy"),
        "{learned:#?}"
    );

    let suggested = dir.path("suggested.json");
    let s = suggest(&audit, &policy, &suggested);
    assert!(s.status.success(), "{s:?}");
    let drafted: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&suggested).unwrap()).unwrap();
    let egress = drafted["network"]["egress"].clone();
    assert!(
        egress
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["host"] == "api.allowed.test" && e["port"] == HTTPS_PORT),
        "the name, not its address: {egress}"
    );
    // Decided by name as it was learned: the agent's own look-ups reach the session's
    // resolver only through it.
    assert_eq!(drafted["network"]["proxy"], true, "{drafted}");
    let audit = dir.path("suggested.jsonl");
    let out = run(&suggested, &audit, false);
    assert_eq!(
        stdout(&out),
        "hello-from-server",
        "under the suggested policy"
    );
    let refused: Vec<_> = records(&audit)
        .into_iter()
        .filter(|r| matches!(r["decision"].as_str(), Some("deny" | "would_deny")))
        .collect();
    assert!(refused.is_empty(), "no refusal: {refused:#?}");
}

/// The resolver of the test below: an address of its own (the other tests' resolvers stay
/// bound for the test process's life: `.53` above, `.54` the one of `egress_l7`, `.72` to `.74` those of `canary`).
const DNS_IP_PLAIN: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 55);

/// A list of plain `host` entries, as the starter writes (`gatewayd policy init`): with
/// `proxy: true` the agent's own look-up of a listed name (curl's, through the system's
/// resolver) reaches the session's resolver and the fetch by name works; with `proxy: false`
/// the agent's DNS meets the address rules, which list no resolver, and the same fetch fails.
#[test]
fn a_plain_host_list_is_reached_by_name_through_the_session_resolver() {
    let _ = tier();
    // The HTTPS servers' start is awaited on the IPv6 address too.
    let _addrs: Vec<ExtraAddress> = [
        IpAddr::V4(ALLOWED_IP),
        IpAddr::V4(DNS_IP_PLAIN),
        IpAddr::V6(OTHER_IP6),
    ]
    .into_iter()
    .map(ExtraAddress::add)
    .collect();
    let dir = Scratch::new("egress-plain-hosts");
    dns_server(DNS_IP_PLAIN, known);
    let (cert, _servers) = https_server(&dir);
    let escape = crate::escape::escape_bin();
    let sh = format!(
        "echo \"dns $({escape} dns_query={DNS_IP_PLAIN},api.allowed.test,udp | grep '^rcode=' || echo fail)\"\n\
         echo \"fetch $(curl -sS --max-time 10 --cacert {} https://api.allowed.test:{HTTPS_PORT}/hello 2>/dev/null || echo fail)\"\n",
        cert.display()
    );
    let bare = outcomes(&stdout(
        &Command::new("sh").args(["-c", &sh]).output().unwrap(),
    ));
    assert_eq!(
        bare["dns"],
        format!("rcode=0 ip={ALLOWED_IP}"),
        "bare: {bare:?}"
    );

    let run = |proxy: bool| {
        let mut p = best_effort(serde_json::json!([
            {"host": "api.allowed.test", "port": HTTPS_PORT}
        ]));
        p["network"]["proxy"] = serde_json::json!(proxy);
        let policy = write_policy(&dir, p);
        let audit = dir.path(&format!("plain-{proxy}.jsonl"));
        let out = under_gatewayd(&policy, &audit, "sh")
            .args(["-c", &sh])
            .env("GATEWAYD_DNS_SERVER", format!("{DNS_IP_PLAIN}:53"))
            .output()
            .unwrap();
        (outcomes(&stdout(&out)), records(&audit))
    };
    let (by_name, _) = run(true);
    assert_eq!(
        by_name["dns"],
        format!("rcode=0 ip={ALLOWED_IP}"),
        "{by_name:?}"
    );
    assert_eq!(by_name["fetch"], "hello-from-server", "{by_name:?}");
    let (by_address, recs) = run(false);
    assert_eq!(by_address["dns"], "fail", "{by_address:?}");
    assert_eq!(by_address["fetch"], "fail", "{by_address:?}");
    assert!(
        recs.iter()
            .any(|r| r["reason"] == "egress_not_allowed" && r["detail"]["port"] == 53),
        "the agent's DNS refused: {recs:#?}"
    );
}
