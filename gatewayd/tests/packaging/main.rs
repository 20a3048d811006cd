//! The Debian package and the systemd integration: what the .deb holds (`dpkg-deb --info`
//! and `--contents`), its units pass `systemd-analyze verify` (against the package's own
//! binary, in a root made of the package and this machine's units), their hardening scores,
//! and `gatewayd serve` started by socket activation (`systemd-socket-activate`) serves a
//! call, notifies `READY=1`, pings the watchdog, and says `STOPPING=1`; the README's systemd
//! quickstart (`quickstart`).
//!
//! Built with the `privileged-tests` feature and run by `cargo xtask test` on the host after
//! it built the package (`GATEWAYD_DEB` names it); without a package these tests fail: run
//! `cargo xtask deb` first. Needs systemd's tools (systemd 252
//! on the project's machines; systemd need not be PID 1) and dpkg-deb.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
use std::{
    os::unix::net::UnixDatagram,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

mod quickstart;

use gatewayd::protocol::client::Client;
use serde_json::json;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The package `cargo xtask deb` built.
fn deb() -> PathBuf {
    if let Some(p) = std::env::var_os("GATEWAYD_DEB") {
        return PathBuf::from(p);
    }
    let dir = workspace().join("target/debian");
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "deb"))
        })
        .unwrap_or_else(|| {
            panic!(
                "no .deb in {} and GATEWAYD_DEB is not set: run `cargo xtask deb` (cargo xtask test does)",
                dir.display()
            )
        })
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_package_holds_the_binary_units_policies_and_docs() {
    let deb = deb();
    let info = text(&run(Command::new("dpkg-deb").arg("--info").arg(&deb)).stdout);
    for want in [
        "Package: gatewayd",
        "Architecture: amd64",
        "Section: admin",
        "Depends: libc6",
        // `ExecReload`'s /bin/kill.
        "procps",
        "postinst",
        "conffiles",
    ] {
        assert!(info.contains(want), "`{want}` missing from:\n{info}");
    }
    let contents = text(&run(Command::new("dpkg-deb").arg("--contents").arg(&deb)).stdout);
    let files: Vec<&str> = contents
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    for want in [
        "./usr/bin/gatewayd",
        "./usr/lib/systemd/system/gatewayd.service",
        "./usr/lib/systemd/system/gatewayd.socket",
        "./etc/gatewayd/policy.json",
        "./usr/share/doc/gatewayd/examples/example.json",
        "./usr/share/doc/gatewayd/examples/client.py",
        "./usr/share/doc/gatewayd/README.md",
        "./usr/share/doc/gatewayd/PROTOCOL.md",
        "./usr/share/doc/gatewayd/KERNEL.md",
        "./usr/share/doc/gatewayd/POLICY.md",
        "./usr/share/doc/gatewayd/protocol.schema.json",
        "./usr/share/doc/gatewayd/copyright",
    ] {
        assert!(files.contains(&want), "{want} missing from:\n{contents}");
    }
    // Every document of docs/ and docs/internals/, the index as INDEX.md (the project's
    // README.md has that name), so a new one cannot be left out of the assets.
    for (dir, into) in [("docs", ""), ("docs/internals", "internals/")] {
        for entry in std::fs::read_dir(workspace().join(dir)).unwrap().flatten() {
            let name = entry.file_name().into_string().unwrap();
            if entry.path().extension().is_none_or(|x| x != "md") {
                continue;
            }
            let installed = if name == "README.md" && into.is_empty() {
                "INDEX.md"
            } else {
                name.as_str()
            };
            let want = format!("./usr/share/doc/gatewayd/{into}{installed}");
            assert!(
                files.contains(&want.as_str()),
                "{want} missing from:\n{contents}"
            );
        }
    }
    assert!(
        !files.iter().any(|f| f.contains("gw-testagent")),
        "the test agent is not shipped"
    );
    let binary = contents
        .lines()
        .find(|l| l.ends_with("./usr/bin/gatewayd"))
        .unwrap();
    assert!(binary.starts_with("-rwxr-xr-x 0/0"), "{binary}");
    // The operators' group is made on install (the socket unit gives it the socket).
    let dir = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb")
        .arg("--control")
        .arg(&deb)
        .arg(dir.path()));
    let postinst = std::fs::read_to_string(dir.path().join("postinst")).unwrap();
    assert!(
        postinst.contains("addgroup --system gatewayd"),
        "{postinst}"
    );
    assert!(!postinst.contains("#DEBHELPER#"), "{postinst}");
    let conffiles = std::fs::read_to_string(dir.path().join("conffiles")).unwrap();
    assert!(
        conffiles.contains("/etc/gatewayd/policy.json"),
        "{conffiles}"
    );
}

/// The man pages, made from the command line itself: one per command and subcommand, each
/// renders with `man` and documents every option of its command (`run`'s `--left-behind`,
/// the newest, among them).
#[test]
fn the_package_holds_man_pages_that_render() {
    let root = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb")
        .arg("--extract")
        .arg(deb())
        .arg(root.path()));
    let man1 = root.path().join("usr/share/man/man1");
    for page in [
        "gatewayd",
        "gatewayd-run",
        "gatewayd-policy-init",
        "gatewayd-hook-install",
    ] {
        let path = man1.join(format!("{page}.1.gz"));
        assert!(path.is_file(), "{} missing", path.display());
        let shown = run(Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "200"));
        let t = without_overstrike(&text(&shown.stdout));
        assert!(t.contains("NAME") && t.contains("OPTIONS"), "{page}:\n{t}");
        if page == "gatewayd-run" {
            assert!(
                t.contains("--left-behind") && t.contains("--preserve-fd"),
                "{t}"
            );
        }
        if page == "gatewayd" {
            assert!(
                t.contains("Examples:") && t.contains("gatewayd-run(1)"),
                "{t}"
            );
        }
    }
}

/// `man`'s output to a pipe without its overstrikes (`X\x08X` for bold, `_\x08X` for
/// underline): the text a reader sees.
fn without_overstrike(t: &str) -> String {
    let mut out: Vec<char> = Vec::with_capacity(t.len());
    for c in t.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    // After a backspace the next char replaces the one popped.
    out.into_iter().collect()
}

/// A root for `systemd-analyze --root`: the package unpacked over a copy of this machine's
/// system units (so `sysinit.target` and friends resolve).
fn unpacked_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let units = root.path().join("usr/lib/systemd");
    std::fs::create_dir_all(&units).unwrap();
    run(Command::new("cp")
        .args(["-a", "/usr/lib/systemd/system"])
        .arg(&units));
    run(Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb())
        .arg(root.path()));
    root
}

#[test]
fn the_packaged_units_pass_systemd_analyze_verify() {
    let root = unpacked_root();
    let unit = root.path().join("usr/lib/systemd/system/gatewayd.service");
    let shipped = std::fs::read_to_string(&unit).unwrap();
    assert_eq!(
        shipped,
        std::fs::read_to_string(workspace().join("packaging/gatewayd.service")).unwrap(),
        "the package holds packaging/gatewayd.service as it is"
    );
    // `ExecReload` runs `/bin/kill`, from procps (a dependency of the package): the root
    // holds it as an installed system does.
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/kill", bin.join("kill")).unwrap();
    let out = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.path().display()))
        .args(["gatewayd.socket", "gatewayd.service"]));
    // Unknown keys and unparsable values are warnings with exit code 0: any output fails.
    assert_eq!(
        text(&out.stdout) + &text(&out.stderr),
        "",
        "systemd-analyze verify"
    );

    // A unit with a misspelt directive is caught the same way (the check can fail).
    std::fs::write(
        &unit,
        shipped.replace("ProtectClock=yes", "ProtectClocks=yes"),
    )
    .unwrap();
    let out = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.path().display()))
        .arg("gatewayd.service"));
    assert!(
        text(&out.stderr).contains("Unknown key"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_service_is_hardened() {
    let root = unpacked_root();
    let out = run(Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(format!("--root={}", root.path().display()))
        .arg("gatewayd.service"));
    let report = text(&out.stdout) + &text(&out.stderr);
    let score: f64 = report
        .lines()
        .find_map(|l| l.split("exposure level for gatewayd.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    eprintln!("systemd-analyze security: exposure {score} (0 = fully locked, 10 = none)");
    // A root service that loads BPF and manages cgroups cannot reach 0; this is the
    // packaged unit's score (2.8 on systemd 252) with a little room.
    assert!(score <= 3.2, "exposure {score}:\n{report}");
    let unit = std::fs::read_to_string(workspace().join("packaging/gatewayd.service")).unwrap();
    for line in [
        "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_NET_ADMIN CAP_SYS_ADMIN",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "SystemCallFilter=@system-service bpf perf_event_open",
        "RestrictAddressFamilies=AF_UNIX",
        "ProtectKernelTunables=no",
        "ProtectControlGroups=no",
        "Type=notify",
        "WatchdogSec=30s",
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "{line} missing from the unit"
        );
    }
}

fn policy(dir: &Path) -> PathBuf {
    let p = dir.join("policy.json");
    std::fs::write(
        &p,
        json!({"version": 1, "tools": [
            {"name": "translate", "description": "Translate a text."}
        ]})
        .to_string(),
    )
    .unwrap();
    p
}

/// One notification datagram, as text, within `timeout`.
fn next_notification(n: &UnixDatagram, timeout: Duration) -> String {
    n.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 4096];
    let len = n
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no notification within {timeout:?}: {e}"));
    text(&buf[..len])
}

/// A client of the daemon at `path`, once a connection is accepted: the socket file is
/// bound before anything listens on it, so its existence proves nothing.
fn connect_when_listening(path: &Path) -> Client {
    let t0 = Instant::now();
    loop {
        match Client::connect(path) {
            Ok(c) => return c,
            Err(e) => assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{}: {e}",
                path.display()
            ),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn socket_activation_serves_calls_and_notifies_systemd() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("gatewayd.sock");
    let audit = dir.path().join("audit.jsonl");
    let notify = UnixDatagram::bind(dir.path().join("notify")).unwrap();
    let mut child = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .arg("-E")
        .arg(format!(
            "NOTIFY_SOCKET={}",
            dir.path().join("notify").display()
        ))
        .args(["-E", "WATCHDOG_USEC=200000"])
        .arg(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["serve", "--group", "root", "--policy"])
        .arg(policy(dir.path()))
        .arg("--audit")
        .arg(&audit)
        .arg("--socket")
        .arg(&socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // systemd-socket-activate listens at once and execs gatewayd on the first connection,
    // handing it the listening socket as fd 3.
    let t0 = Instant::now();
    let mut c = connect_when_listening(&socket);
    let hello = c.call("hello", json!({})).unwrap();
    eprintln!(
        "first answer through socket activation after {:?}",
        t0.elapsed()
    );
    assert_eq!(hello["protocol"], 1);
    c.call("session/open", json!({"session": "s", "user": "alice"}))
        .unwrap();
    let d = c
        .call(
            "call/decide",
            json!({"session": "s", "call": {"tool": "translate", "arguments": {"text": "hallo"}}}),
        )
        .unwrap();
    assert_eq!(d["decision"], "allow", "{d}");

    let ready = next_notification(&notify, Duration::from_secs(10));
    assert!(ready.starts_with("READY=1\nSTATUS=serving on "), "{ready}");
    assert!(ready.contains("passed by systemd"), "{ready}");
    // Pings every half WATCHDOG_USEC (100 ms), only after READY=1.
    let t1 = Instant::now();
    for _ in 0..3 {
        assert_eq!(
            next_notification(&notify, Duration::from_secs(2)),
            "WATCHDOG=1\n"
        );
    }
    assert!(
        t1.elapsed() < Duration::from_millis(900),
        "{:?}",
        t1.elapsed()
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let stopping = (0..20)
        .map(|_| next_notification(&notify, Duration::from_secs(5)))
        .find(|m| m != "WATCHDOG=1\n")
        .unwrap();
    assert_eq!(stopping, "STOPPING=1\n");
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{status}\n{err}");
    assert!(err.contains("Execing"), "{err}");
    // The socket file belongs to whoever passed it: gatewayd leaves it.
    assert!(socket.exists(), "gatewayd removed a socket it did not bind");
    let recs: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs[0]["reason"], "daemon_start");
    assert_eq!(recs[0]["detail"]["socket_activated"], true);
    assert_eq!(recs[0]["detail"]["socket"], json!(socket.to_str().unwrap()));
    assert_eq!(recs.last().unwrap()["reason"], "daemon_stop");
}

#[test]
fn a_passed_socket_must_be_the_one_named() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("passed.sock");
    let mut child = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .arg(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["serve", "--group", "root", "--policy"])
        .arg(policy(dir.path()))
        .arg("--audit")
        .arg(dir.path().join("audit.jsonl"))
        .arg("--socket")
        .arg(dir.path().join("other.sock"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first accepted connection starts gatewayd (systemd-socket-activate listens first).
    let t0 = Instant::now();
    let _c = loop {
        match std::os::unix::net::UnixStream::connect(&socket) {
            Ok(c) => break c,
            Err(e) => assert!(t0.elapsed() < Duration::from_secs(10), "{e}"),
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("systemd passed the socket") && err.contains("other.sock"),
        "{err}"
    );
}
