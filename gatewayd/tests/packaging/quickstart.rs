//! The README's systemd quickstart on a machine whose init is not systemd (the CI host): its
//! three lines, each as close to written as such a machine allows.
//! - `sudo apt install ./target/debian/gatewayd_V_amd64.deb`: the line must name the package
//!   this build made; it is unpacked (`dpkg-deb --extract`) into a root of its own.
//! - `sudo systemctl enable --now gatewayd.socket`: the real `systemctl --root ROOT enable`
//!   (the unit's `[Install]` section makes the `sockets.target` link), then, for `--now`,
//!   `systemd-socket-activate` listens where the unit's `ListenStream=` says and starts the
//!   service's own `ExecStart=` on the first connection: its paths put under the root, its
//!   log under a scratch folder, and `--group root` (the operators' group is made by the
//!   package's `postinst`, which is not run here).
//! - `sudo gatewayd sessions list`: run as written, with the unpacked `gatewayd` first on
//!   `PATH`: it reaches the daemon through the unit's socket, and the daemon records its
//!   start in its audit log.
//!
//! docs/OPERATIONS.md's systemd block (`operations-systemd`) the same way: `sudoedit` stands
//! in as a check that the file is there to edit, the package's `/etc/gatewayd/` is the
//! unpacked root's, and `gatewayd policy validate` runs the unpacked binary on it.
use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{deb, run, text};

/// The value of `key=` in a unit file's text.
fn unit_value(unit: &str, key: &str) -> String {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
        .to_owned()
}

/// Kills the activator (and the daemon it started) and removes its socket when the test
/// ends, however it ends (systemd removes it on stop: `RemoveOnStop=yes`).
struct Activator(Child, std::path::PathBuf);

impl Drop for Activator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

/// The unit's socket path is one for the machine: one test at a time listens there.
static LISTEN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The unpacked package's socket enabled and listening, its logs in `scratch`: one test at
/// a time (the socket's path is the package's own). The activator comes first, so it stops
/// before the lock is released.
fn serve(root: &Path, scratch: &Path) -> (Activator, std::sync::MutexGuard<'static, ()>) {
    std::fs::create_dir_all(scratch).unwrap();
    let listen = LISTEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    (enable_now(root, scratch), listen)
}

/// `systemctl enable --now gatewayd.socket`, as far as this machine allows (module doc).
fn enable_now(root: &Path, scratch: &Path) -> Activator {
    run(Command::new("systemctl")
        .arg(format!("--root={}", root.display()))
        .args(["enable", "gatewayd.socket"]));
    let wants = root.join("etc/systemd/system/sockets.target.wants/gatewayd.socket");
    let link = std::fs::read_link(&wants).expect("systemctl enable made no link");
    assert_eq!(link, Path::new("/usr/lib/systemd/system/gatewayd.socket"));
    let units = root.join("usr/lib/systemd/system");
    let socket = std::fs::read_to_string(units.join("gatewayd.socket")).unwrap();
    let service = std::fs::read_to_string(units.join("gatewayd.service")).unwrap();
    let listen = unit_value(&socket, "ListenStream");
    assert!(
        !Path::new(&listen).exists(),
        "{listen} exists: a gatewayd daemon already serves on this machine"
    );
    std::fs::create_dir_all(Path::new(&listen).parent().unwrap()).unwrap();
    let exec = unit_value(&service, "ExecStart")
        .replace("/usr/bin/", &format!("{}/usr/bin/", root.display()))
        .replace(
            "/etc/gatewayd/",
            &format!("{}/etc/gatewayd/", root.display()),
        )
        .replace("/var/log/gatewayd", &scratch.display().to_string())
        .replace("--group gatewayd", "--group root");
    let activator = Activator(
        Command::new("systemd-socket-activate")
            .arg("-l")
            .arg(&listen)
            .args(exec.split_whitespace())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        listen.clone().into(),
    );
    // The socket is bound before it listens: wait until a connection is accepted.
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(&listen).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{listen} never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    activator
}

#[test]
fn the_readme_systemd_quickstart_serves_the_operators_commands() {
    let lines = gatewayd_testkit::readme::block("quickstart-systemd");
    assert_eq!(lines.len(), 3, "{lines:?}");
    let package = deb();
    let name = package.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        lines[0],
        format!("sudo apt install ./target/debian/{name}"),
        "the README names the package this build makes"
    );
    assert_eq!(lines[1], "sudo systemctl enable --now gatewayd.socket");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    run(Command::new("dpkg-deb")
        .arg("--extract")
        .arg(&package)
        .arg(&root));
    let scratch = dir.path().join("log");
    let _serving = serve(&root, &scratch);
    let path = format!("{}/usr/bin:/usr/local/bin:/usr/bin:/bin", root.display());
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(format!("sudo() {{ \"$@\"; }}\n{}", lines[2]))
        .env_clear()
        .env("PATH", &path)
        .env("HOME", dir.path()));
    assert_eq!(text(&out.stdout).trim(), "no open sessions");
    let audit = std::fs::read_to_string(scratch.join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"daemon_start\""), "{audit}");
}

#[test]
fn the_operations_doc_systemd_block_validates_and_serves() {
    let commands =
        gatewayd_testkit::readme::doc_commands("docs/OPERATIONS.md", "sh operations-systemd");
    assert_eq!(
        commands,
        [
            "sudoedit /etc/gatewayd/policy.json",
            "gatewayd policy validate /etc/gatewayd/policy.json",
            "sudo systemctl enable --now gatewayd.socket",
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    run(Command::new("dpkg-deb")
        .arg("--extract")
        .arg(deb())
        .arg(&root));
    let path = format!("{}/usr/bin:/usr/local/bin:/usr/bin:/bin", root.display());
    let sh = |line: &str| {
        let line = line.replace(
            "/etc/gatewayd/",
            &format!("{}/etc/gatewayd/", root.display()),
        );
        run(Command::new("sh")
            .arg("-c")
            .arg(format!(
                "sudoedit() {{ test -f \"$1\" && test -w \"$1\"; }}\n{line}"
            ))
            .env_clear()
            .env("PATH", &path)
            .env("HOME", dir.path()))
    };
    sh(&commands[0]);
    let valid = sh(&commands[1]);
    assert!(
        text(&valid.stdout).ends_with(": valid\n"),
        "{}",
        text(&valid.stdout)
    );
    let scratch = dir.path().join("log");
    let _serving = serve(&root, &scratch);
    let out = sh("gatewayd sessions list");
    assert_eq!(text(&out.stdout).trim(), "no open sessions");
}
