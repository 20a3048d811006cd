//! The session egress proxy's cost (`cargo xtask bench`; issue "egress by name"): plain
//! HTTP from `gw-testagent` to a server of this bench on a documentation address put on `lo`
//! (`192.0.2.71:8080`, so the connect is not a loopback one), by the name
//! `bench.proxy.test`, which a DNS server of the bench resolves. Three places, in the same
//! minutes: bare; under `gatewayd run` with an address rule for the server (no proxy); and
//! under `gatewayd run` with `*.proxy.test` (the kernel sends the connect to the session's
//! proxy, which decides by the `Host` name, checks that the name resolves to the address and
//! forwards). Figures: a request on a new connection (p50, p99), requests per second on 4
//! threads, one 1 GiB download, and the gatewayd process's memory while its agent idles.
use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, TcpListener, TcpStream},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use gatewayd_testkit::net::{ExtraAddress, dns_server};

use crate::util::Bins;

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 71);
const DNS_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 73);
const PORT: u16 = 8080;
const NAME: &str = "bench.proxy.test";
/// The bulk download's size.
const BULK: u64 = 1 << 30;

fn known(name: &str) -> Option<Ipv4Addr> {
    (name == NAME).then_some(SERVER_IP)
}

/// Where the client ran.
#[derive(Clone, Copy)]
enum Place {
    Bare,
    AddressRule,
    ByName,
}

impl Place {
    fn label(self) -> &'static str {
        match self {
            Place::Bare => "bare",
            Place::AddressRule => "address rule",
            Place::ByName => "by name (proxy)",
        }
    }
}

pub(crate) fn run_host(bins: &Bins, dir: &Path) -> anyhow::Result<()> {
    let _server = ExtraAddress::try_add(IpAddr::V4(SERVER_IP)).map_err(anyhow::Error::msg)?;
    let _dns = ExtraAddress::try_add(IpAddr::V4(DNS_IP)).map_err(anyhow::Error::msg)?;
    dns_server(DNS_IP, known).context("the bench's DNS server")?;
    http_server()?;
    let to = format!("{SERVER_IP}:{PORT}");
    println!(
        "\negress proxy (HTTP/1 to {to} as {NAME}; bare / address rule / by name through the session proxy):"
    );
    let places = [Place::Bare, Place::AddressRule, Place::ByName];
    let mut p50 = Vec::new();
    for place in places {
        let line = agent(bins, dir, place, &["httploop", &to, NAME, "2000", "1"])?;
        println!(
            "  one request, new connection, {:<16} {line}",
            place.label()
        );
        p50.push(figure(&line, "p50 ")?);
    }
    println!(
        "  added p50 by the proxy: {:.0} µs against bare, {:.0} µs against the address rule",
        (p50[2] - p50[0]) / 1000.0,
        (p50[2] - p50[1]) / 1000.0
    );
    for place in places {
        let line = agent(bins, dir, place, &["httploop", &to, NAME, "10000", "4"])?;
        println!("  requests per second, {:<16} {line}", place.label());
    }
    // Best of 3 rounds, the places taking turns in each: one transfer is at the mercy of
    // whatever else the machine does in its second.
    let mut rates = [0f64; 3];
    let mut lines = [const { String::new() }; 3];
    for _ in 0..3 {
        for (i, place) in places.into_iter().enumerate() {
            let line = agent(bins, dir, place, &["download", &to, NAME])?;
            let rate = figure(&line, "ms, ")?;
            if rate > rates[i] {
                rates[i] = rate;
                lines[i] = line;
            }
        }
    }
    for (place, line) in places.into_iter().zip(&lines) {
        println!("  1 GiB download, best of 3, {:<16} {line}", place.label());
    }
    println!(
        "  bulk through the proxy: {:.0} % of bare",
        rates[2] / rates[0] * 100.0
    );
    let (plain, proxied) = (
        idle_rss(bins, dir, Place::AddressRule)?,
        idle_rss(bins, dir, Place::ByName)?,
    );
    println!(
        "  gatewayd run's memory, agent idle: address rule {plain} KiB, by name {proxied} KiB (the proxy: {} KiB)",
        proxied.saturating_sub(plain)
    );
    Ok(())
}

/// The number after `label` in `line`.
fn figure(line: &str, label: &str) -> anyhow::Result<f64> {
    line.split(label)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no `{label}` figure in `{line}`"))
}

/// The session's policy for `place` (`None` bare).
fn policy(dir: &Path, place: Place) -> anyhow::Result<Option<std::path::PathBuf>> {
    let server = match place {
        Place::Bare => return Ok(None),
        Place::AddressRule => serde_json::json!({"cidr": format!("{SERVER_IP}/32"), "port": PORT}),
        Place::ByName => serde_json::json!({"host": "*.proxy.test", "port": PORT}),
    };
    let path = dir.join("proxy-policy.json");
    std::fs::write(
        &path,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "network": {"egress": [server, {"cidr": "127.0.0.0/8"}]}})
        .to_string(),
    )?;
    Ok(Some(path))
}

/// The command that runs `gw-testagent args` at `place`.
fn command(bins: &Bins, dir: &Path, place: Place, args: &[&str]) -> anyhow::Result<Command> {
    let Some(policy) = policy(dir, place)? else {
        let mut c = Command::new(&bins.testagent);
        c.args(args);
        return Ok(c);
    };
    let mut c = Command::new(&bins.gatewayd);
    c.args(["run", "--user", "root", "--policy"])
        .arg(policy)
        .arg("--audit")
        .arg(dir.join("proxy-audit.jsonl"))
        .env("GATEWAYD_DNS_SERVER", format!("{DNS_IP}:53"))
        .arg("--")
        .arg(&bins.testagent)
        .args(args);
    Ok(c)
}

/// The agent's `OK` line.
fn agent(bins: &Bins, dir: &Path, place: Place, args: &[&str]) -> anyhow::Result<String> {
    let out = command(bins, dir, place, args)?.output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find_map(|l| l.strip_prefix("OK ")) {
        Some(line) if out.status.success() => Ok(line.to_string()),
        _ => bail!(
            "{}: {text}{}",
            place.label(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// gatewayd run's resident memory (KiB) once its agent (`sleep`) has started and idles.
fn idle_rss(bins: &Bins, dir: &Path, place: Place) -> anyhow::Result<u64> {
    let marker = dir.join("proxy-idle");
    let _ = std::fs::remove_file(&marker);
    let marker_arg = marker.to_string_lossy().into_owned();
    let mut child = command(bins, dir, place, &["write", &marker_arg, "+", "sleep", "3"])?
        .stdout(Stdio::null())
        .spawn()?;
    let t0 = Instant::now();
    while !marker.exists() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The agent ran its first action: the session, its proxy included, is up.
    std::thread::sleep(Duration::from_millis(500));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?;
    let _ = child.wait();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no VmRSS")
}

/// The bench's HTTP server on `SERVER_IP:PORT`, a thread per connection: `GET /bulk` answers
/// [`BULK`] bytes, anything else `ok`; the server closes each connection after its answer.
fn http_server() -> anyhow::Result<()> {
    let listener = TcpListener::bind((SERVER_IP, PORT)).context("the bench's HTTP server")?;
    // SAFETY: listen() again on our own bound socket only raises its backlog.
    unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 4096) };
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            std::thread::spawn(move || answer(c));
        }
    });
    Ok(())
}

fn answer(mut c: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    if !head.starts_with(b"GET /bulk ") {
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        return;
    }
    let header = format!("HTTP/1.1 200 OK\r\nContent-Length: {BULK}\r\nConnection: close\r\n\r\n");
    if c.write_all(header.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..BULK / (1 << 20) {
        if c.write_all(&chunk).is_err() {
            return;
        }
    }
}
