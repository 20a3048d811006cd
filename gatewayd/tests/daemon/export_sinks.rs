//! The real sinks of the export tests (export.rs): rsyslogd and systemd-journald from
//! Debian, run by the test with a configuration of its own, and the OTLP receiver on the
//! Python package `opentelemetry-proto` (`otlp_receiver.py`); each stopped when the test
//! ends.
use std::{
    io::{BufRead, BufReader},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// Waits (bounded) until `cond` holds.
pub(crate) fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when the test ends, passed or not.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real rsyslogd, in the foreground, listening on TCP and UDP on loopback and on a
/// datagram socket of its own (as `/dev/log`), and writing what it parsed (RFC 5424: MSGID,
/// structured data, MSG) to one file per transport.
pub(crate) struct Rsyslog {
    _child: Proc,
    pub(crate) tcp: u16,
    pub(crate) udp: u16,
    dir: PathBuf,
}

impl Rsyslog {
    pub(crate) fn start(dir: &Path) -> Rsyslog {
        let bin = Path::new("/usr/sbin/rsyslogd");
        assert!(
            bin.exists(),
            "rsyslogd is missing; `cargo xtask setup` installs it"
        );
        let (tcp, udp) = (free_port(), free_port());
        let conf = dir.join("rsyslog.conf");
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                r#"global(workDirectory="{d}")
module(load="imtcp")
module(load="imudp")
module(load="imuxsock" SysSock.Use="off")
template(name="parsed" type="string" string="%msgid% %structured-data% %msg%\n")
ruleset(name="tcp") {{ action(type="omfile" file="{d}/tcp.log" template="parsed") }}
ruleset(name="udp") {{ action(type="omfile" file="{d}/udp.log" template="parsed") }}
ruleset(name="unix") {{ action(type="omfile" file="{d}/unix.log" template="parsed") }}
input(type="imtcp" address="127.0.0.1" port="{tcp}" ruleset="tcp")
input(type="imudp" address="127.0.0.1" port="{udp}" ruleset="udp")
input(type="imuxsock" Socket="{d}/log" Ruleset="unix" UseSpecialParser="off" ParseHostname="on")
"#
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.join("rsyslog.pid"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("rsyslogd to listen on TCP", 20, || {
            std::net::TcpStream::connect(("127.0.0.1", tcp)).is_ok()
        });
        // UDP and the local socket: a probe, sent until rsyslog wrote it.
        let probe = b"<14>1 2026-01-01T00:00:00Z h probe - probe - probe";
        let udp_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let unix_sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
        wait_for("rsyslogd to take UDP and local datagrams", 20, || {
            let _ = udp_sock.send_to(probe, ("127.0.0.1", udp));
            let _ = unix_sock.send_to(probe, dir.join("log"));
            ["udp.log", "unix.log"]
                .iter()
                .all(|f| std::fs::metadata(dir.join(f)).is_ok_and(|m| m.len() > 0))
        });
        Rsyslog {
            _child: Proc(child),
            tcp,
            udp,
            dir: dir.to_path_buf(),
        }
    }

    /// The records rsyslog wrote for one transport: MSG parsed as JSON, with MSGID and SD.
    pub(crate) fn received(&self, transport: &str) -> Vec<(String, String, Value)> {
        std::fs::read_to_string(self.dir.join(format!("{transport}.log")))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (msgid, rest) = l.split_once(' ')?;
                let at = rest.find('{')?;
                let v = serde_json::from_str(rest[at..].trim()).ok()?;
                Some((msgid.to_owned(), rest[..at].trim().to_owned(), v))
            })
            .collect()
    }
}

/// A systemd-journald of the test's own: a journal namespace, its socket under
/// /run/systemd/journal.NS/, read back with `journalctl --namespace NS`.
pub(crate) struct Journald {
    child: Child,
    ns: String,
}

impl Journald {
    pub(crate) fn start() -> Journald {
        let bin = Path::new("/lib/systemd/systemd-journald");
        assert!(
            bin.exists(),
            "systemd-journald is missing; `cargo xtask setup` installs systemd"
        );
        let ns = format!("gwtest{}", std::process::id());
        let child = Command::new(bin)
            .arg(&ns)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let j = Journald { child, ns };
        wait_for("journald's socket", 20, || {
            let s = std::os::unix::net::UnixDatagram::unbound().unwrap();
            s.send_to(b"MESSAGE=probe\n", j.socket()).is_ok()
        });
        j
    }

    pub(crate) fn socket(&self) -> PathBuf {
        PathBuf::from(format!("/run/systemd/journal.{}/socket", self.ns))
    }

    pub(crate) fn entries(&self) -> Vec<Value> {
        let out = Command::new("journalctl")
            .args(["--namespace", &self.ns, "-o", "json", "--no-pager"])
            .arg("SYSLOG_IDENTIFIER=gatewayd")
            .output()
            .unwrap();
        BufReader::new(&out.stdout[..])
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect()
    }
}

impl Drop for Journald {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(format!("/run/systemd/journal.{}", self.ns));
        let id = std::fs::read_to_string("/etc/machine-id").unwrap_or_default();
        for base in ["/var/log/journal", "/run/log/journal"] {
            let _ = std::fs::remove_dir_all(format!("{base}/{}.{}", id.trim(), self.ns));
        }
    }
}

pub(crate) fn python() -> PathBuf {
    let p = std::env::var_os("GATEWAYD_MCP_PYTHON").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/gatewayd/venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        p.exists(),
        "{} is missing; `cargo xtask setup` makes it",
        p.display()
    );
    p
}

/// The receiver in `mode` on `port` (0: any); returns it and the port it listens on.
pub(crate) fn receiver(mode: &str, port: u16, out: &Path) -> (Proc, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/daemon/otlp_receiver.py");
    let c = Command::new(python())
        .arg(script)
        .args([mode, &port.to_string()])
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    listening(c)
}

/// A server started with its standard output piped, once it printed `listening PORT`: it
/// and its port.
pub(crate) fn listening(mut c: Child) -> (Proc, u16) {
    let port = gatewayd_testkit::net::announced_port(&mut c, "listening ");
    (Proc(c), port)
}

pub(crate) fn received(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
