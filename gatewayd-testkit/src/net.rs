//! The network fixtures of the privileged suite and the egress proxy bench: an address on
//! `lo` for a while (documentation prefixes, so a connect to it is not a loopback one), and a
//! DNS server on such an address answering the names it is given, over UDP and TCP.
use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket},
    process::Command,
};

/// An address on `lo` while it lives (removed at the end only when it was added here).
pub struct ExtraAddress(String);

impl ExtraAddress {
    /// Adds `ip` to `lo` (`ip addr add`; an address already there, left by a run that was
    /// killed, is used and left there).
    pub fn try_add(ip: IpAddr) -> Result<ExtraAddress, String> {
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        let cidr = format!("{ip}/{prefix}");
        let out = Command::new("ip")
            .args(["addr", "add", &cidr, "dev", "lo"])
            .output()
            .map_err(|e| format!("ip (iproute2 or busybox): {e}"))?;
        let text = String::from_utf8_lossy(&out.stderr);
        // iproute2 says `File exists` for IPv4, `address already assigned` for IPv6.
        let there = text.contains("exists") || text.contains("already assigned");
        if !out.status.success() && !there {
            return Err(format!("ip addr add {cidr}: {text}"));
        }
        Ok(ExtraAddress(if out.status.success() {
            cidr
        } else {
            String::new()
        }))
    }

    /// [`ExtraAddress::try_add`] for a test: a failure is the test's.
    ///
    /// # Panics
    /// When the address cannot be added.
    pub fn add(ip: IpAddr) -> ExtraAddress {
        ExtraAddress::try_add(ip).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for ExtraAddress {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let _ = Command::new("ip")
                .args(["addr", "del", &self.0, "dev", "lo"])
                .status();
        }
    }
}

/// A DNS answer to `q` (one question): its A record when `known`, else none.
pub fn dns_answer(q: &[u8], known: fn(&str) -> Option<Ipv4Addr>) -> Option<Vec<u8>> {
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
    r.extend_from_slice(q.get(12..end)?);
    if let Some(ip) = ip {
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        r.extend_from_slice(&ip.octets());
    }
    Some(r)
}

/// A DNS server on `at:53`, UDP and TCP, answering the names `known` knows, in two threads
/// that live as long as the process.
pub fn dns_server(at: Ipv4Addr, known: fn(&str) -> Option<Ipv4Addr>) -> std::io::Result<()> {
    let udp = UdpSocket::bind((at, 53))?;
    let tcp = TcpListener::bind((at, 53))?;
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            if let Some(r) = dns_answer(&buf[..n], known) {
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
            if let Some(r) = dns_answer(&q, known) {
                let len = u16::try_from(r.len()).unwrap_or(u16::MAX);
                let _ = c.write_all(&len.to_be_bytes());
                let _ = c.write_all(&r);
            }
        }
    });
    Ok(())
}

/// The port a server started with its standard output piped says it listens on: its first
/// line, `PREFIX PORT`, printed once it listens (the condition to wait for, not a file).
///
/// # Panics
/// When the server has no piped output or its first line is not `prefix` and a port.
pub fn announced_port(server: &mut std::process::Child, prefix: &str) -> u16 {
    use std::io::BufRead as _;
    let mut line = String::new();
    let out = server.stdout.as_mut().expect("the server's output piped");
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("the server's first line");
    line.strip_prefix(prefix)
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("the server said {line:?}, not `{prefix}PORT`"))
}
