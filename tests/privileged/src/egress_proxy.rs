//! Egress by name (`*.domain` entries): the kernel sends the agent's TCP to the session's
//! proxy, which decides by the TLS server name, and its DNS to the session's resolver. A
//! real HTTPS server (Python's `http.server` with `ssl`, the one installed here; a test
//! certificate from `openssl`) on extra loopback addresses, a DNS server of this test on
//! `192.0.2.53:53`, `curl` as the agent. Every bypass is first shown working bare (the same
//! script without gatewayd), then refused under it, each refusal a record.
use std::{
    io::Write as _,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, TcpStream},
    sync::Arc,
};

use super::*;
use inbound::ExtraAddress;

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

/// A DNS answer to `q` (one question): its A record when known, else none.
fn dns_answer(q: &[u8]) -> Option<Vec<u8>> {
    let end = q
        .iter()
        .skip(12)
        .position(|&b| b == 0)
        .map(|p| 12 + p + 5)?;
    let qname = q.get(12..end - 5)?;
    let mut name = Vec::new();
    let mut i = 0;
    while i < qname.len() {
        let n = usize::from(qname[i]);
        name.push(String::from_utf8_lossy(qname.get(i + 1..i + 1 + n)?).into_owned());
        i += 1 + n;
    }
    let ip = (q.get(end - 4..end - 2)? == [0, 1])
        .then(|| known(&name.join(".")))
        .flatten();
    let mut r = Vec::from(q.get(..2)?);
    r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(ip.is_some()), 0, 0, 0, 0]);
    r.extend_from_slice(&q[12..end]);
    if let Some(ip) = ip {
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        r.extend_from_slice(&ip.octets());
    }
    Some(r)
}

/// The test's DNS server on `DNS_IP:53`, UDP and TCP.
fn dns_server() {
    let udp = UdpSocket::bind((DNS_IP, 53)).unwrap();
    let tcp = TcpListener::bind((DNS_IP, 53)).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            if let Some(r) = dns_answer(&buf[..n]) {
                let _ = udp.send_to(&r, from);
            }
        }
    });
    std::thread::spawn(move || {
        for mut c in tcp.incoming().flatten() {
            let mut len = [0u8; 2];
            if c.read_exact(&mut len).is_err() {
                continue;
            }
            let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if c.read_exact(&mut q).is_err() {
                continue;
            }
            if let Some(r) = dns_answer(&q) {
                let _ = c.write_all(&(r.len() as u16).to_be_bytes());
                let _ = c.write_all(&r);
            }
        }
    });
}

/// A certificate for the test's names, and an HTTPS server with it on `[::]:8443` (every
/// address of the host), serving `hello` as `hello-from-server`.
fn https_server(dir: &Scratch) -> (PathBuf, std::process::Child) {
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
    let script = format!(
        "import http.server, ssl, socket\n\
         class S(http.server.ThreadingHTTPServer):\n    address_family = socket.AF_INET6\n\
         \x20   def server_bind(self):\n\
         \x20       self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n\
         \x20       super().server_bind()\n\
         h = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory='{}', **k)\n\
         s = S(('::', {HTTPS_PORT}), h)\n\
         c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('{}', '{}')\n\
         s.socket = c.wrap_socket(s.socket, server_side=True)\n\
         s.serve_forever()\n",
        www.display(),
        cert.display(),
        key.display()
    );
    let child = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    while TcpStream::connect((ALLOWED_IP, HTTPS_PORT)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTPS server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (cert, child)
}

/// A DNS query tool for the agent: `dnsq.py SERVER NAME udp|tcp` prints `rcode=R ip=A`.
const DNSQ: &str = r#"
import socket, struct, sys
server, name, how = sys.argv[1], sys.argv[2], sys.argv[3]
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
if how == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
    s.sendto(q, (server, 53)); r = s.recv(4096)
else:
    s = socket.create_connection((server, 53), timeout=5)
    s.sendall(struct.pack(">H", len(q)) + q); n = struct.unpack(">H", s.recv(2))[0]; r = s.recv(n)
ip = ".".join(str(b) for b in r[-4:]) if struct.unpack(">H", r[6:8])[0] else "-"
print("rcode=%d ip=%s" % (r[3] & 15, ip))
"#;

/// The attempts, one line each: `NAME RESULT` (the body, or `rcode=..`, or `fail`).
fn script(dir: &Scratch, cert: &Path) -> String {
    let dnsq = dir.path("dnsq.py");
    std::fs::write(&dnsq, DNSQ).unwrap();
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
            "echo \"{n} $(/usr/bin/python3 {} {DNS_IP} {host} {how} 2>/dev/null || echo fail)\"\n",
            dnsq.display()
        );
    }
    s += &format!(
        "echo \"quic $(/usr/bin/python3 -c 'import socket; socket.socket(2, 2).sendto(b\"quic\", (\"{a}\", 443)); print(\"sent\")' 2>/dev/null || echo fail)\"\n"
    );
    s
}

fn outcomes(text: &str) -> std::collections::BTreeMap<String, String> {
    escape_outcomes(text)
}

#[test]
fn egress_by_name_goes_through_the_proxy_and_every_bypass_is_refused() {
    let _ = tier();
    // The QEMU guests' image has no openssl, curl or python3 yet: there this test cannot
    // make its server and client, and says so loudly (a known gap: docs/LIMITS.md).
    let missing: Vec<&str> = ["openssl", "curl", "python3"]
        .into_iter()
        .filter(|p| {
            !std::env::var_os("PATH")
                .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
        })
        .collect();
    if !missing.is_empty() {
        println!(
            "KERNEL-NOTE egress proxy test NOT RUN: no {} here",
            missing.join(", ")
        );
        return;
    }
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
    dns_server();
    let (cert, mut server) = https_server(&dir);
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
    let _ = server.kill();
    let _ = server.wait();
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
}

/// The first record with `reason`, waiting for it.
fn wait_for_record(audit: &Path, reason: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    loop {
        let text = std::fs::read_to_string(audit).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|r| r["reason"] == reason);
        if let Some(r) = found {
            return r;
        }
        assert!(std::time::Instant::now() < deadline, "no {reason} record");
        std::thread::sleep(Duration::from_millis(20));
    }
}
