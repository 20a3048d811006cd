//! Privileged tests of the kernel layer, against a real kernel: the host's (cgroup egress,
//! cgroup lifecycle, fail-closed refusal without BPF LSM, Landlock in its place) and, inside
//! the QEMU guest booting Debian's kernel, the same file plus the BPF LSM denials.
//!
//! Tests branch on the tier `gatewayd doctor --json` reports (1: BPF LSM, 2: cgroup +
//! Landlock; any other tier fails them), and `GATEWAYD_EXPECT_TIER` says which tier the
//! environment must have: unset, that test fails rather than anything being skipped.
//! Tests of a kernel feature only some kernels have branch on doctor's `features` (see
//! `features.rs`); where a kernel lacks one, the test asserts what that kernel does instead
//! and prints a `KERNEL-NOTE` line saying so, which `cargo xtask test` repeats per kernel.
//! Needs root, cgroup v2 and BPF. Run by `cargo xtask test`.
// A test binary sees every dependency of the package; the lint guards the library's list.
#![allow(unused_crate_dependencies)]
mod audit_failure;
mod code_loading;
mod egress_hosts;
mod escape;
mod features;
mod file_tree;
mod inbound;
mod inet_protocols;
mod landlock_records;
mod lifetime;
mod limits;
mod private_tmp;
mod read_only;

use std::{
    io::Read as _,
    net::{TcpListener, UdpSocket},
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{OnceLock, mpsc},
    time::Duration,
};

// `gatewayd run` serving the protocol to its agent: the Rule-of-Two lockdown, suspicion.
mod gateway;
mod mcp_servers;
mod sandbox_roots;
mod sessions;
mod shared_objects;
mod system_surfaces;
mod terminal;
mod tier2_usable;
mod unix_sockets;

/// The tier these tests know how to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    /// 1: BPF LSM + cgroup programs.
    BpfLsm,
    /// 2: cgroup programs + Landlock.
    Landlock,
}

/// How long a test waits for something that must happen while gatewayd runs alongside it:
/// its start loads every program, which takes seconds in a TCG guest on a busy host. (What
/// must not happen is still given a short window: a longer one would only be stricter.)
const MUST_HAPPEN_WITHIN: Duration = Duration::from_mins(1);

/// `gatewayd doctor --json`, as run once for this test binary.
fn doctor() -> &'static serde_json::Value {
    static DOCTOR: OnceLock<serde_json::Value> = OnceLock::new();
    DOCTOR.get_or_init(|| {
        let out = Command::new(gatewayd())
            .args(["doctor", "--json"])
            .output()
            .expect("spawn gatewayd doctor");
        assert!(out.status.success(), "gatewayd doctor: {}", out.status);
        serde_json::from_slice(&out.stdout).expect("doctor --json prints one JSON object")
    })
}

/// The tier of this environment, as `gatewayd doctor` finds it.
fn tier() -> Tier {
    use gatewayd_kernel::kernel::Tier as T;
    let v = doctor();
    match v["tier"].as_u64() {
        Some(n) if n == u64::from(T::Full.level()) => Tier::BpfLsm,
        Some(n) if n == u64::from(T::CgroupLandlock.level()) => Tier::Landlock,
        _ => panic!("these tests need tier 1 or 2; gatewayd doctor reports {v}"),
    }
}

/// Says, in the output even of a passing test, what this kernel lacks and what the test
/// asserted in its place. Written to stderr directly: libtest captures only `print!`.
fn note(what: &str) {
    use std::io::Write as _;
    let line = format!("KERNEL-NOTE {what}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn gatewayd() -> PathBuf {
    std::env::var_os("GATEWAYD_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_gatewayd").into(), PathBuf::from)
}

fn agent() -> String {
    testkit_bin("GW_TESTAGENT", "gw-testagent")
}

/// A program of `gatewayd-testkit`: `$VAR` (the guest suite sets it), else the program of that
/// name beside this test's profile directory (`target/<profile>/`), which `cargo xtask test`
/// builds before it runs this suite.
fn testkit_bin(var: &str, name: &str) -> String {
    if let Ok(path) = std::env::var(var) {
        return path;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/privileged-HASH -> target/<profile>/NAME
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile.join(name);
    assert!(
        bin.is_file(),
        "{} is missing: build it first (cargo build -p gatewayd-testkit --bins, as cargo xtask test does), or set {var}",
        bin.display()
    );
    bin.to_string_lossy().into_owned()
}

/// `sleep 60` as a bystander of a signal test, `how` choosing its user or process group.
fn bystander(how: impl FnOnce(&mut Command) -> &mut Command) -> std::process::Child {
    how(Command::new("sleep").arg("60")).spawn().unwrap()
}

/// Whether `c` exits within two seconds.
fn dead_soon(c: &mut std::process::Child) -> bool {
    (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        c.try_wait().unwrap().is_some()
    })
}

/// A scratch directory under the temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("gwtest-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_policy(dir: &Scratch, body: serde_json::Value) -> PathBuf {
    let p = dir.path("policy.json");
    std::fs::write(&p, serde_json::to_string_pretty(&body).unwrap()).unwrap();
    p
}

/// `gatewayd run --user root`: the one place the tests say whom the agent runs as. These
/// tests run as root without `SUDO_UID`; the agent keeps uid 0 without any capability
/// (`escape.rs` tests the other users).
fn gatewayd_run() -> Command {
    let mut c = Command::new(gatewayd());
    c.args(["run", "--user", "root"]);
    c
}

/// `gatewayd run --user root --policy POLICY --audit AUDIT -- PROGRAM`, for the caller to
/// add the program's arguments to.
fn under_gatewayd(
    policy: impl AsRef<std::ffi::OsStr>,
    audit: impl AsRef<std::ffi::OsStr>,
    program: impl AsRef<std::ffi::OsStr>,
) -> Command {
    let mut c = gatewayd_run();
    c.arg("--policy")
        .arg(policy)
        .arg("--audit")
        .arg(audit)
        .arg("--")
        .arg(program);
    c
}

/// Waits until the session writing `audit` has recorded its start.
fn wait_for_start(audit: &Path) {
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(audit).is_ok_and(|t| t.contains("session_start")) {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the session did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_agent(policy: &Path, audit: &Path, args: &[&str]) -> Output {
    let out = under_gatewayd(policy, audit, agent())
        .args(args)
        .output()
        .expect("spawn gatewayd");
    eprintln!(
        "gatewayd run {args:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `gatewayd run --policy P --audit A -- gw-escape ARGS...` (as root, `gatewayd_run`).
fn escape_under(policy: &Path, audit: &Path, args: &[impl AsRef<std::ffi::OsStr>]) -> Output {
    under_gatewayd(policy, audit, escape::escape_bin())
        .args(args)
        .output()
        .expect("spawn gatewayd")
}

/// `gw-escape`'s lines (`NAME OUTCOME`) by attempt name.
fn escape_outcomes(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, o)| (n.to_string(), o.to_string()))
        .collect()
}

/// "hook reason" of every kernel denial the records stand for (a `denials_aggregated`
/// record as its count of its kind), sorted.
fn kernel_kinds(recs: &[serde_json::Value]) -> Vec<String> {
    let mut kinds: Vec<String> = recs
        .iter()
        .filter(|r| r["source"] == "kernel")
        .flat_map(|r| {
            let hook = r["hook"].as_str().unwrap_or("?");
            let (reason, n) = if r["reason"] == "denials_aggregated" {
                (
                    &r["detail"]["reason"],
                    r["detail"]["count"].as_u64().unwrap(),
                )
            } else {
                (&r["reason"], 1)
            };
            let kind = format!("{hook} {}", reason.as_str().unwrap_or("?"));
            std::iter::repeat_n(kind, usize::try_from(n).unwrap())
        })
        .collect();
    kinds.sort_unstable();
    kinds
}

/// How many kernel denials `kernel` records stand for: one each, or a `denials_aggregated`
/// record's count.
fn denials_in(kernel: &[serde_json::Value]) -> u64 {
    kernel
        .iter()
        .map(|r| r["detail"]["count"].as_u64().unwrap_or(1))
        .sum()
}

fn records(audit: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn verify(audit: &Path) -> Output {
    Command::new(gatewayd())
        .args(["audit", "verify"])
        .arg(audit)
        .output()
        .unwrap()
}

/// A listener that reports every byte received, per connection.
fn listener(addr: &str) -> (u16, mpsc::Receiver<Vec<u8>>) {
    let l = TcpListener::bind(addr).unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut c = c;
            let mut buf = Vec::new();
            let _ = c.read_to_end(&mut buf);
            if tx.send(buf).is_err() {
                return;
            }
        }
    });
    (port, rx)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn best_effort(egress: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"version": 1, "kernel": "best_effort", "network": {"egress": egress}})
}

#[test]
fn egress_outside_allowlist_is_denied_and_audited() {
    let _ = tier();
    let dir = Scratch::new("egress");
    let (allowed, allowed_rx) = listener("127.0.0.1:0");
    let (denied, denied_rx) = listener("127.0.0.1:0");
    let policy = write_policy(
        &dir,
        best_effort(serde_json::json!([{"cidr": "127.0.0.1/32", "port": allowed}])),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "send",
            &format!("127.0.0.1:{denied}"),
            "stolen",
            "+",
            "send",
            &format!("127.0.0.1:{allowed}"),
            "hello",
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("FAIL send: Operation not permitted"),
        "{text}"
    );
    assert!(
        text.contains(&format!("OK send: sent to 127.0.0.1:{allowed}")),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "one failed action");
    assert_eq!(
        allowed_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        b"hello"
    );
    assert!(
        denied_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "denied listener got a connection"
    );

    let recs = records(&audit);
    let k: Vec<_> = recs.iter().filter(|r| r["source"] == "kernel").collect();
    assert_eq!(k.len(), 1, "{recs:#?}");
    assert_eq!(k[0]["hook"], "cgroup/connect4");
    assert_eq!(k[0]["reason"], "egress_not_allowed");
    assert_eq!(k[0]["decision"], "deny");
    assert_eq!(k[0]["detail"]["port"], denied);
    assert_eq!(k[0]["detail"]["addr"], "127.0.0.1");
    assert!(verify(&audit).status.success());
}

#[test]
fn ipv6_and_udp_egress_are_denied() {
    let _ = tier();
    let dir = Scratch::new("egress6");
    let (port6, rx6) = listener("[::1]:0");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let uport = udp.local_addr().unwrap().port();
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "send",
            &format!("[::1]:{port6}"),
            "x",
            "+",
            "udp",
            &format!("127.0.0.1:{uport}"),
            "y",
        ],
    );
    let text = stdout(&out);
    assert_eq!(text.matches("Operation not permitted").count(), 2, "{text}");
    assert!(rx6.recv_timeout(Duration::from_millis(300)).is_err());
    assert!(
        udp.recv(&mut [0u8; 16]).is_err(),
        "UDP datagram got through"
    );
    let hooks: Vec<String> = records(&audit)
        .iter()
        .filter(|r| r["source"] == "kernel")
        .map(|r| r["hook"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hooks, ["cgroup/connect6", "cgroup/sendmsg4"]);
}

#[test]
fn agent_runs_in_its_own_cgroup_which_is_removed_after() {
    let _ = tier();
    let dir = Scratch::new("cgroup");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let out = run_agent(&policy, &audit, &["cgroup"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let cg = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line in {text}"));
    assert!(cg.starts_with("/gatewayd/run-"), "{cg}");
    let mount = gatewayd_kernel::cgroup::cgroup2_mount().unwrap();
    let path = mount.join(cg.trim_start_matches('/'));
    assert!(!path.exists(), "{} still exists", path.display());
}

#[test]
fn exit_code_passes_through() {
    let _ = tier();
    let dir = Scratch::new("exit");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    let out = run_agent(&policy, &audit, &["exit", "42"]);
    assert_eq!(out.status.code(), Some(42));
    let recs = records(&audit);
    let end = recs.last().unwrap();
    assert_eq!(end["reason"], "session_end");
    assert_eq!(end["detail"]["exit_code"], 42);
}

fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
    }
}

/// The host pid of the process that has pid `ns_pid` in the PID namespace of the agent of
/// the gatewayd `gatewayd` (the agent sees pids of its namespace only).
fn host_pid(gatewayd: u32, ns_pid: i32) -> i32 {
    let field = |status: &str, name: &str| -> Vec<i32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let status = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Some(st) = status(pid) else { continue };
        let ns = field(&st, "NSpid:");
        if ns.len() < 2 || ns.last() != Some(&ns_pid) {
            continue;
        }
        // One of gatewayd's descendants?
        let mut up = field(&st, "PPid:").first().copied().unwrap_or(0);
        for _ in 0..16 {
            if up <= 1 {
                break;
            }
            if up == gatewayd as i32 {
                return pid;
            }
            up = status(up)
                .and_then(|s| field(&s, "PPid:").first().copied())
                .unwrap_or(0);
        }
    }
    panic!("no process {ns_pid} in the PID namespace of gatewayd {gatewayd}'s agent");
}

/// Spawns `gatewayd run -- gw-testagent pid + sleep 30` and returns (gatewayd child, agent
/// pid on the host) once the agent is running.
fn start_sleeper(dir: &Scratch, policy: serde_json::Value) -> (std::process::Child, i32) {
    let policy = write_policy(dir, policy);
    let mut child = under_gatewayd(&policy, dir.path("audit.jsonl"), agent())
        .args(["pid", "+", "sleep", "30"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let pid: i32 = line
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{line}"));
    let pid = host_pid(child.id(), pid);
    (child, pid)
}

#[test]
fn sigterm_and_sigint_are_forwarded_to_the_agent() {
    let _ = tier();
    for sig in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let dir = Scratch::new(&format!("sig{}", sig as i32));
        let (mut child, agent_pid) = start_sleeper(&dir, best_effort(serde_json::json!([])));
        assert!(pid_alive(agent_pid));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(128 + sig as i32),
            "agent killed by {sig} -> 128 + {}",
            sig as i32
        );
        assert!(!pid_alive(agent_pid));
    }
}

#[test]
fn agent_dies_when_gatewayd_dies() {
    let _ = tier();
    let dir = Scratch::new("pdeath");
    let (mut child, agent_pid) = start_sleeper(&dir, best_effort(serde_json::json!([])));
    assert!(pid_alive(agent_pid));
    child.kill().unwrap(); // SIGKILL: no cleanup code runs in gatewayd
    child.wait().unwrap();
    for _ in 0..100 {
        if !pid_alive(agent_pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agent {agent_pid} survived gatewayd");
}

fn protected_fixture(dir: &Scratch) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let secret = dir.path("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let vault = dir.path("vault");
    std::fs::create_dir_all(vault.join("deep/er")).unwrap();
    let inner = vault.join("deep/er/key");
    std::fs::write(&inner, "key").unwrap();
    let other = dir.path("other.txt");
    std::fs::write(&other, "harmless").unwrap();
    let link = dir.path("hardlink-to-secret");
    std::fs::hard_link(&secret, &link).unwrap();
    (secret, inner, other, link)
}

#[test]
fn require_mode_and_file_open() {
    let tier = tier();
    let dir = Scratch::new("require");
    let (secret, inner, other, link) = protected_fixture(&dir);
    let marker = dir.path("agent-ran");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "require",
            "sandbox": {"protected": [secret, dir.path("vault")]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "write",
            marker.to_str().unwrap(),
            "+",
            "read",
            secret.to_str().unwrap(),
            "+",
            "read",
            inner.to_str().unwrap(),
            "+",
            "read",
            link.to_str().unwrap(),
            "+",
            "read",
            other.to_str().unwrap(),
        ],
    );
    let recs = records(&audit);
    match tier {
        Tier::Landlock => {
            // This kernel refuses BPF LSM programs: the agent must not start.
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("lsm/file_open"), "{err}");
            assert!(err.contains("Operation not permitted"), "{err}");
            assert!(
                !marker.exists(),
                "the agent ran although the policy requires BPF LSM"
            );
            assert_eq!(recs.len(), 1);
            assert_eq!(recs[0]["reason"], "kernel_unavailable");
            assert_eq!(recs[0]["decision"], "deny");
        }
        Tier::BpfLsm => {
            assert!(marker.exists());
            let text = stdout(&out);
            let lines: Vec<&str> = text.lines().filter(|l| l.contains("read")).collect();
            assert_eq!(lines.len(), 4, "{text}");
            assert!(
                lines[0].starts_with("FAIL") && lines[0].contains("Operation not permitted"),
                "{text}"
            );
            assert!(
                lines[1].starts_with("FAIL"),
                "file under a protected directory: {text}"
            );
            assert!(
                lines[2].starts_with("FAIL"),
                "hard link to a protected file: {text}"
            );
            assert!(lines[3].starts_with("OK"), "unprotected file: {text}");
            assert_eq!(out.status.code(), Some(3));
            // The hard link's open is of the same kind as the file's (path and inode): in the
            // window of the first, it is counted, not recorded again.
            assert_eq!(
                kernel_kinds(&recs),
                ["lsm/file_open protected_path"; 3],
                "{recs:#?}"
            );
            let k: Vec<_> = recs
                .iter()
                .filter(|r| r["source"] == "kernel" && r["reason"] != "denials_aggregated")
                .collect();
            assert_eq!(k[0]["detail"]["protected_path"], secret.to_str().unwrap());
            assert_eq!(
                k[1]["detail"]["protected_path"],
                dir.path("vault").to_str().unwrap()
            );
            assert!(verify(&audit).status.success());
        }
    }
}

#[test]
fn protected_files_stay_readable_outside_the_agent_cgroup() {
    let _ = tier();
    let dir = Scratch::new("outside");
    let (secret, ..) = protected_fixture(&dir);
    let (mut child, _pid) = start_sleeper(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    // While an agent runs under gatewayd (programs attached), this process is outside its cgroup.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn best_effort_records_the_tier_reached() {
    let tier = tier();
    let dir = Scratch::new("tier");
    let (secret, ..) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(&policy, &audit, &["read", secret.to_str().unwrap()]);
    let recs = records(&audit);
    assert_eq!(recs[0]["reason"], "session_start");
    let recorded = recs[0]["detail"]["tier"].as_str().unwrap();
    let lsm = recs[0]["detail"]["kernel"]["lsm/file_open"]
        .as_str()
        .unwrap();
    let level = recs[0]["detail"]["tier_level"].as_u64();
    assert_eq!(level, doctor()["tier"].as_u64(), "run and doctor agree");
    match tier {
        Tier::Landlock => {
            // No BPF LSM here: Landlock stands in for the file sandbox (tier 2).
            assert!(recorded.starts_with('2'), "{recorded}");
            assert!(lsm.contains("Operation not permitted"), "{lsm}");
            let landlock = recs[0]["detail"]["kernel"]["landlock"].as_str().unwrap();
            assert!(landlock.starts_with("applied"), "{landlock}");
            assert!(
                stdout(&out).contains("FAIL read: Permission denied"),
                "{}",
                stdout(&out)
            );
            assert_eq!(out.status.code(), Some(1));
        }
        Tier::BpfLsm => {
            assert!(recorded.starts_with('1'), "{recorded}");
            assert_eq!(lsm, "attached");
            assert_eq!(out.status.code(), Some(1));
        }
    }
}

#[test]
fn tampered_audit_log_is_detected() {
    let _ = tier();
    let dir = Scratch::new("tamper");
    let (denied, _rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    run_agent(
        &policy,
        &audit,
        &["send", &format!("127.0.0.1:{denied}"), "x"],
    );
    assert!(verify(&audit).status.success());
    // The kernel's record (after `session_start` and the agent's `session_open`) is edited.
    let seq = records(&audit)
        .iter()
        .find(|r| r["reason"] == "egress_not_allowed")
        .map(|r| r["seq"].as_u64().unwrap())
        .unwrap();
    assert_eq!(seq, 3);
    let text = std::fs::read_to_string(&audit).unwrap();
    let edited = text.replacen("egress_not_allowed", "egress_allowed_ok", 1);
    assert_ne!(edited, text);
    std::fs::write(&audit, edited).unwrap();
    let out = verify(&audit);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("seq {seq}")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_environment_has_the_tier_it_expects() {
    let want: u64 = std::env::var("GATEWAYD_EXPECT_TIER")
        .expect(
            "GATEWAYD_EXPECT_TIER must say which tier this environment has (cargo xtask test \
             sets it: 2 on the host, 1 in the guest)",
        )
        .parse()
        .expect("GATEWAYD_EXPECT_TIER is a tier number");
    let v = doctor();
    assert_eq!(v["tier"].as_u64(), Some(want), "{v}");
}

#[test]
fn doctor_reports_what_this_kernel_enforces() {
    let tier = tier();
    let v = doctor();
    for p in [
        "cgroup/connect4",
        "cgroup/connect6",
        "cgroup/sendmsg4",
        "cgroup/sendmsg6",
    ] {
        assert_eq!(v[p]["ok"], true, "{p}: {v}");
    }
    assert_eq!(v["eBPF object + ring buffer"]["ok"], true);
    // One row per program of the table, and nothing the table lacks.
    for p in &gatewayd_kernel::kernel::PROGRAMS {
        assert!(v[p.name]["ok"].is_boolean(), "{}: {v}", p.name);
    }
    let lsm_rows = v
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("lsm/"))
        .count();
    assert_eq!(
        lsm_rows,
        gatewayd_kernel::kernel::PROGRAMS
            .iter()
            .filter(|p| p.is_lsm())
            .count()
    );
    assert_eq!(v["lsm/file_open"]["ok"], tier == Tier::BpfLsm, "{v}");
    let text = v["tier_text"].as_str().unwrap();
    match tier {
        Tier::BpfLsm => assert!(text.starts_with("1 "), "{text}"),
        Tier::Landlock => assert!(text.starts_with("2 (cgroup egress + Landlock"), "{text}"),
    }
    // Below tier 1, doctor says how to get there, naming the program the kernel refused.
    let advice = v["tier1_advice"]
        .as_array()
        .expect("tier1_advice is an array");
    match tier {
        Tier::BpfLsm => assert!(advice.is_empty(), "{v}"),
        Tier::Landlock => assert!(
            advice
                .iter()
                .any(|a| a.as_str().is_some_and(|a| a.contains("lsm/"))),
            "{v}"
        ),
    }
}

#[test]
fn agent_cannot_weaken_its_own_confinement() {
    let tier = tier();
    let dir = Scratch::new("selfprot");
    // A root agent that keeps every capability: what stops it here is the kernel programs
    // (tier 1) or Landlock and the seccomp filter (tier 2), not the missing capabilities
    // (escape.rs tests those).
    let mut body = best_effort(serde_json::json!([]));
    body["agent"] =
        serde_json::json!({"capabilities": &gatewayd_core::policy::names::CAPABILITIES[..]});
    let policy = write_policy(&dir, body);
    let audit = dir.path("audit.jsonl");
    let parent_procs = gatewayd_kernel::cgroup::cgroup2_mount()
        .unwrap()
        .join("gatewayd/cgroup.procs");
    let mnt = dir.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // killparent and ptraceparent aim at gatewayd's pid (GW_TESTAGENT_TARGET): the shell
    // execs gatewayd, which keeps its pid. In the agent's PID namespace it names nothing.
    let out = Command::new("sh")
        .args(["-c", "export GW_TESTAGENT_TARGET=$$; exec \"$@\"", "sh"])
        .arg(gatewayd())
        .args(["run", "--user", "root", "--policy"])
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .arg("--")
        .arg(agent())
        .args([
            "bpf",
            "+",
            "escape",
            parent_procs.to_str().unwrap(),
            "+",
            "cgroup",
            "+",
            "mount",
            mnt.to_str().unwrap(),
            "+",
            "killparent",
            "15",
            "+",
            "ptraceparent",
        ])
        .output()
        .unwrap();
    let text = stdout(&out);
    let denied = |action: &str, how: &str| {
        assert!(
            text.contains(&format!("FAIL {action}: {how}")),
            "{action} was not denied with `{how}`:\n{text}"
        );
    };
    assert!(
        text.contains(" 0::/gatewayd/run-"),
        "the agent left its cgroup:\n{text}"
    );
    denied("mount", "Operation not permitted");
    // At both tiers the cgroup filesystem is read-only in the agent's namespace (all of
    // `/sys` is); tier 1's `lsm/file_open` stands behind (lifetime.rs shows it with a
    // process of the session outside that namespace).
    denied("escape", "Read-only file system");
    // gatewayd is out of the agent's sight (its PID namespace), capabilities or not;
    // `a_process_of_the_session_outside_its_namespace_cannot_touch_gatewayd` (lifetime.rs)
    // shows the programs that stand behind.
    denied("killparent", "No such process");
    denied("ptraceparent", "No such process");
    let start = &records(&audit)[0];
    match tier {
        Tier::BpfLsm => {
            denied("bpf", "Operation not permitted");
            assert_eq!(
                out.status.code(),
                Some(5),
                "gatewayd survived the signal and passed the code through"
            );
            let hooks: Vec<(String, String)> = records(&audit)
                .iter()
                .filter(|r| r["source"] == "kernel")
                .map(|r| {
                    (
                        r["hook"].as_str().unwrap().into(),
                        r["reason"].as_str().unwrap().into(),
                    )
                })
                .collect();
            let want = ["lsm/bpf", "lsm/sb_mount"];
            assert_eq!(hooks.len(), want.len(), "{hooks:?}");
            for (h, w) in hooks.iter().zip(want) {
                assert_eq!((h.0.as_str(), h.1.as_str()), (w, "self_protection"));
            }
        }
        Tier::Landlock => {
            // Tier 2: no BPF LSM. The cgroup filesystem is a read-only mount in the agent's
            // namespace (EROFS); Landlock forbids mount and ptrace outside its domain and
            // (ABI >= 6) signals to gatewayd; the seccomp filter denies bpf() (no audit
            // record: seccomp reports nothing).
            denied("bpf", "Operation not permitted");
            for p in [
                "lsm/bpf",
                "lsm/sb_mount",
                "lsm/ptrace_access_check",
                "lsm/task_kill",
            ] {
                let state = start["detail"]["kernel"][p].as_str().unwrap();
                assert!(state.starts_with("not loaded"), "{p}: {state}");
            }
        }
    }
}

#[test]
fn sigusr1_locks_all_egress_down() {
    let _ = tier();
    let dir = Scratch::new("lockdown");
    let (allowed, allowed_rx) = listener("127.0.0.1:0");
    let policy = write_policy(
        &dir,
        best_effort(serde_json::json!([{"cidr": "127.0.0.1/32", "port": allowed}])),
    );
    let audit = dir.path("audit.jsonl");
    let go = dir.path("go");
    let to = format!("127.0.0.1:{allowed}");
    let child = under_gatewayd(&policy, &audit, agent())
        .args([
            "send",
            &to,
            "before",
            "+",
            "pid",
            "+",
            "waitfile",
            go.to_str().unwrap(),
            "+",
            "send",
            &to,
            "after",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(
        allowed_rx.recv_timeout(MUST_HAPPEN_WITHIN).unwrap(),
        b"before"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    // The switch is recorded once it is set; only then let the agent try again.
    let mut recorded = false;
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .contains("\"egress_lockdown\"")
        {
            recorded = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(recorded, "no egress_lockdown record");
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("FAIL send: Operation not permitted"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(allowed_rx.recv_timeout(Duration::from_millis(300)).is_err());
    let k: Vec<_> = records(&audit)
        .into_iter()
        .filter(|r| r["source"] == "kernel")
        .collect();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0]["reason"], "egress_lockdown");
    assert_eq!(k[0]["hook"], "cgroup/connect4");
}

#[test]
fn exec_allowlist() {
    let tier = tier();
    let dir = Scratch::new("exec");
    let me = std::fs::canonicalize(agent()).unwrap();
    let audit = dir.path("audit.jsonl");

    // The agent's own program is not on the list: refused before anything runs.
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"exec": ["/bin/true"]}}),
    );
    let out = run_agent(&policy, &audit, &["exit", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in the policy's exec allowlist"));
    assert_eq!(
        records(&audit).last().unwrap()["reason"],
        "exec_not_allowed"
    );

    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"exec": [me]}}),
    );
    let audit = dir.path("audit2.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "run",
            "/bin/true",
            "+",
            "run",
            me.to_str().unwrap(),
            "exit",
            "0",
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].starts_with("OK run"),
        "a listed binary runs: {text}"
    );
    match tier {
        Tier::BpfLsm => {
            assert!(
                lines[0].starts_with("FAIL run: Operation not permitted"),
                "{text}"
            );
            let k: Vec<_> = records(&audit)
                .into_iter()
                .filter(|r| r["source"] == "kernel")
                .collect();
            assert_eq!(k.len(), 1, "{k:?}");
            assert_eq!(k[0]["hook"], "lsm/bprm_check_security");
            assert_eq!(k[0]["reason"], "exec_not_allowed");
        }
        Tier::Landlock => {
            // Tier 2: Landlock's EXECUTE right stands in for the exec allowlist; it has no
            // event channel, so there is no kernel record.
            assert!(
                lines[0].starts_with("FAIL run: Permission denied"),
                "{text}"
            );
            let start = &records(&audit)[0];
            let state = start["detail"]["kernel"]["lsm/bprm_check_security"]
                .as_str()
                .unwrap();
            assert!(state.starts_with("not loaded"), "{state}");
        }
    }
}

#[test]
fn landlock_stands_in_without_bpf_lsm() {
    let tier = tier();
    let dir = Scratch::new("landlock");
    let (secret, inner, other, link) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret, dir.path("vault")]}}),
    );
    let audit = dir.path("audit.jsonl");
    let read = |p: &PathBuf| p.to_str().unwrap().to_string();
    let out = run_agent(
        &policy,
        &audit,
        &[
            "read",
            &read(&secret),
            "+",
            "read",
            &read(&inner),
            "+",
            "read",
            &read(&link),
            "+",
            "read",
            &read(&other),
            "+",
            "read",
            &read(&audit),
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    let start = &records(&audit)[0];
    let landlock = start["detail"]["kernel"]["landlock"].as_str();
    match tier {
        Tier::Landlock => {
            assert!(
                landlock.is_some_and(|s| s.starts_with("applied")),
                "{landlock:?}"
            );
            for (i, what) in [
                "protected file",
                "file under a protected directory",
                "hard link to a protected file",
            ]
            .iter()
            .enumerate()
            {
                assert!(
                    lines[i].starts_with("FAIL read: Permission denied"),
                    "{what}: {text}"
                );
            }
        }
        Tier::BpfLsm => {
            assert_eq!(landlock, None, "tier 1 does not need Landlock");
            assert!(
                lines[..3]
                    .iter()
                    .all(|l| l.starts_with("FAIL read: Operation not permitted")),
                "{text}"
            );
        }
    }
    assert!(lines[3].starts_with("OK read"), "unprotected file: {text}");
    assert!(
        lines[4].starts_with("FAIL read"),
        "the audit log is protected too: {text}"
    );
}

#[test]
fn protected_paths_cannot_be_deleted_renamed_or_truncated() {
    let tier = tier();
    let dir = Scratch::new("modify");
    let (secret, inner, other, _link) = protected_fixture(&dir);
    let vault = dir.path("vault");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"protected": [secret, vault]}}),
    );
    let audit = dir.path("audit.jsonl");
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let moved = dir.path("moved");
    let into_vault = vault.join("planted");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "rm",
            &s(&secret),
            "+",
            "rm",
            &s(&inner),
            "+",
            "mv",
            &s(&secret),
            &s(&moved),
            "+",
            "mv",
            &s(&other),
            &s(&into_vault),
            "+",
            "mv",
            &s(&other),
            &s(&secret),
            "+",
            "truncate",
            &s(&secret),
            "+",
            "truncate",
            &s(&other),
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    // Tier 2: the protected file is a mount point (a read-only bind of `/dev/null`), which
    // cannot be deleted, renamed or replaced (`EBUSY`), nor truncated (not a regular file:
    // `EINVAL`); the protected directory is an empty tmpfs of mode 0000 (`EACCES`).
    let how: [&str; 6] = match tier {
        Tier::BpfLsm => ["Operation not permitted"; 6],
        Tier::Landlock => [
            "Device or resource busy",
            "Permission denied",
            "Device or resource busy",
            "Permission denied",
            "Device or resource busy",
            "Invalid argument",
        ],
    };
    for (i, (line, how)) in lines[..6].iter().zip(how).enumerate() {
        assert!(
            line.starts_with("FAIL") && line.contains(how),
            "action {i} was not denied with `{how}`:\n{text}"
        );
    }
    assert!(
        lines[6].starts_with("OK truncate"),
        "an unprotected file: {text}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret");
    assert_eq!(std::fs::read_to_string(&inner).unwrap(), "key");
    if tier == Tier::BpfLsm {
        // A repeat of one kind (the same path and inode) within a second is counted in a
        // `denials_aggregated` record: compared as denials, in any order.
        let mut want = [
            "lsm/inode_unlink protected_path",
            "lsm/inode_unlink protected_path",
            "lsm/inode_rename protected_path",
            "lsm/inode_rename protected_path",
            "lsm/inode_rename protected_path",
            "lsm/inode_setattr protected_path",
        ];
        want.sort_unstable();
        assert_eq!(kernel_kinds(&records(&audit)), want);
    }
}

#[test]
fn files_deeper_than_the_walk_limit_are_denied_at_tier_1() {
    let tier = tier();
    let dir = Scratch::new("deep");
    let (secret, ..) = protected_fixture(&dir);
    let mut deep = dir.path("d");
    for i in 0..gateway_common::MAX_PATH_DEPTH {
        deep.push(format!("{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let file = deep.join("f");
    std::fs::write(&file, "deep").unwrap();
    let vault = dir.path("vault");
    std::fs::create_dir_all(dir.path("elsewhere/sub")).unwrap();
    std::fs::create_dir_all(&vault).unwrap();
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret, vault]}}),
    );
    // Indexed: the file is in neither the session's index nor `TREE`, so no walk is needed
    // to know it is not protected, however deep it lies.
    let audit = dir.path("audit-indexed.jsonl");
    let out = run_agent(&policy, &audit, &["read", file.to_str().unwrap()]);
    assert!(stdout(&out).starts_with("OK read"), "{}", stdout(&out));
    // A directory moved into a protected directory during the session (by this process,
    // outside it) makes every session walk: then the walk's depth limit holds.
    let audit = dir.path("audit.jsonl");
    let go = dir.path("go");
    let child = under_gatewayd(&policy, &audit, agent())
        .args([
            "waitfile",
            go.to_str().unwrap(),
            "+",
            "read",
            file.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&audit).is_ok_and(|t| t.contains("session_start")) {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the session did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::rename(dir.path("elsewhere/sub"), dir.path("vault/sub")).unwrap();
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    let read = text.lines().nth(1).unwrap_or_default();
    match tier {
        Tier::BpfLsm => {
            // The ancestor walk cannot reach the filesystem root within its limit: fail closed.
            assert!(
                read.starts_with("FAIL read: Operation not permitted"),
                "{text}"
            );
            let k: Vec<_> = records(&audit)
                .into_iter()
                .filter(|r| r["source"] == "kernel")
                .collect();
            assert_eq!(k.len(), 1, "{k:?}");
            assert_eq!(k[0]["hook"], "lsm/file_open");
            assert_eq!(k[0]["reason"], "unresolvable");
        }
        // Landlock matches hierarchies and has no depth limit.
        Tier::Landlock => assert!(read.starts_with("OK read"), "{text}"),
    }
}

#[test]
fn children_in_sub_cgroups_are_still_confined() {
    let _ = tier();
    let dir = Scratch::new("subcg");
    let (secret, _, other, _) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    let audit = dir.path("audit.jsonl");
    let out = run_agent(
        &policy,
        &audit,
        &[
            "subread",
            secret.to_str().unwrap(),
            "+",
            "subread",
            other.to_str().unwrap(),
        ],
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // At both tiers `/sys`, the cgroup filesystem with it, is read-only in the agent's
    // namespace: no sub-cgroup at all (and clone3, with it CLONE_INTO_CGROUP, gets ENOSYS
    // from the seccomp filter: escape.rs). Moved into one from outside, it is still
    // confined: `sub_cgroup_moved_from_outside` below.
    for l in &lines {
        assert!(
            l.starts_with("FAIL subread: mkdir") && l.contains("Read-only file system"),
            "{text}"
        );
    }
}

/// An agent process moved (by root, from outside) into a cgroup below the session's is
/// still confined: the LSM programs look for the session among the cgroup's ancestors
/// (tier 1), Landlock stays with the process (tier 2).
#[test]
fn sub_cgroup_moved_from_outside() {
    let tier = tier();
    let dir = Scratch::new("subcg-out");
    let (secret, _, other, _) = protected_fixture(&dir);
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort", "sandbox": {"protected": [secret]}}),
    );
    let go = dir.path("go");
    let mut child = under_gatewayd(&policy, dir.path("audit.jsonl"), agent())
        .args(["pid", "+", "waitfile", go.to_str().unwrap(), "+", "read"])
        .arg(&secret)
        .args(["+", "read"])
        .arg(&other)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let pid = line.rsplit(' ').next().unwrap().parse().unwrap();
    let pid = host_pid(child.id(), pid).to_string();
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
    let sub = gatewayd_kernel::cgroup::cgroup2_mount()
        .unwrap()
        .join(rel.trim_start_matches('/'))
        .join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("cgroup.procs"), &pid).unwrap();
    std::fs::write(&go, "").unwrap();
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1), "one failed read");
    assert!(
        !sub.exists(),
        "gatewayd removes the sub-cgroup with the session's"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let how = match tier {
        Tier::BpfLsm => "Operation not permitted",
        Tier::Landlock => "Permission denied",
    };
    assert!(
        lines[1].starts_with("FAIL read") && lines[1].contains(how),
        "{text}"
    );
    assert!(lines[2].starts_with("OK read"), "{text}");
}

#[test]
fn a_burst_of_denials_loses_no_count() {
    let _ = tier();
    let dir = Scratch::new("burst");
    let (port, _rx) = listener("127.0.0.1:0");
    let policy = write_policy(&dir, best_effort(serde_json::json!([])));
    let audit = dir.path("audit.jsonl");
    const N: u64 = 5000;
    let out = run_agent(
        &policy,
        &audit,
        &["tryconnect", &format!("127.0.0.1:{port}"), &N.to_string()],
    );
    assert!(
        stdout(&out).contains(&format!("{N} attempts, {N} failed")),
        "{}",
        stdout(&out)
    );
    // Every denial is its own record, or counted in a `denials_aggregated` record (a flood
    // of one kind) or in the `events_dropped` record (a full ring buffer).
    let recs = records(&audit);
    let k: Vec<serde_json::Value> = recs
        .iter()
        .filter(|r| r["source"] == "kernel")
        .cloned()
        .collect();
    let kernel = denials_in(&k);
    let dropped = recs
        .iter()
        .find(|r| r["reason"] == "events_dropped")
        .map_or(0, |r| r["detail"]["count"].as_u64().unwrap());
    assert_eq!(kernel + dropped, N, "{kernel} recorded + {dropped} dropped");
    let end = recs.last().unwrap();
    assert_eq!(end["detail"]["kernel_denials"].as_u64(), Some(kernel));
    assert!(verify(&audit).status.success());
}
