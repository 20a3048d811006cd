//! The suite's harness: the tier this environment has, the programs under test (gatewayd,
//! the test agent), scratch directories, policies, running an agent under `gatewayd run`, and
//! reading what it recorded.
use std::{
    io::Read as _,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{OnceLock, mpsc},
    time::Duration,
};

/// The tier these tests know how to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    /// 1: BPF LSM + cgroup programs.
    BpfLsm,
    /// 2: cgroup programs + Landlock.
    Landlock,
}

/// How long a test waits for something that must happen while gatewayd runs alongside it:
/// its start loads every program, which takes seconds in a TCG guest on a busy host. (What
/// must not happen is still given a short window: a longer one would only be stricter.)
pub(crate) const MUST_HAPPEN_WITHIN: Duration = Duration::from_mins(1);

/// `gatewayd doctor --json`, as run once for this test binary.
pub(crate) fn doctor() -> &'static serde_json::Value {
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
pub(crate) fn tier() -> Tier {
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
pub(crate) fn note(what: &str) {
    use std::io::Write as _;
    let line = format!("KERNEL-NOTE {what}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The gatewayd under test: `$GATEWAYD_BIN` (the guest suite sets it), else the one beside
/// this test's profile directory, which `cargo xtask test` builds first.
pub(crate) fn gatewayd() -> PathBuf {
    PathBuf::from(testkit_bin("GATEWAYD_BIN", "gatewayd"))
}

pub(crate) fn agent() -> String {
    testkit_bin("GW_TESTAGENT", "gw-testagent")
}

/// A program of `gatewayd-testkit`: `$VAR` (the guest suite sets it), else the program of that
/// name beside this test's profile directory (`target/<profile>/`), which `cargo xtask test`
/// builds before it runs this suite.
pub(crate) fn testkit_bin(var: &str, name: &str) -> String {
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
pub(crate) fn bystander(how: impl FnOnce(&mut Command) -> &mut Command) -> std::process::Child {
    how(Command::new("sleep").arg("60")).spawn().unwrap()
}

/// Whether `c` exits within two seconds.
pub(crate) fn dead_soon(c: &mut std::process::Child) -> bool {
    (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        c.try_wait().unwrap().is_some()
    })
}

/// A scratch directory under the temp dir (or another base), removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        Scratch::at(&std::env::temp_dir(), name)
    }
    /// `BASE/gwtest-NAME-PID`, made empty: for a test that needs it in `/tmp` or out of it.
    pub(crate) fn at(base: &Path, name: &str) -> Scratch {
        let p = base.join(format!("gwtest-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn write_policy(dir: &Scratch, body: serde_json::Value) -> PathBuf {
    let p = dir.path("policy.json");
    std::fs::write(&p, serde_json::to_string_pretty(&body).unwrap()).unwrap();
    p
}

/// `gatewayd run --user root`: the one place the tests say whom the agent runs as. These
/// tests run as root without `SUDO_UID`; the agent keeps uid 0 without any capability
/// (`escape.rs` tests the other users).
pub(crate) fn gatewayd_run() -> Command {
    let mut c = Command::new(gatewayd());
    c.args(["run", "--user", "root"]);
    c
}

/// `gatewayd run --user root --policy POLICY --audit AUDIT -- PROGRAM`, for the caller to
/// add the program's arguments to.
pub(crate) fn under_gatewayd(
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
pub(crate) fn wait_for_start(audit: &Path) {
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(audit).is_ok_and(|t| t.contains("session_start")) {
        assert!(
            t0.elapsed() < MUST_HAPPEN_WITHIN,
            "the session did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn run_agent(policy: &Path, audit: &Path, args: &[&str]) -> Output {
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
pub(crate) fn escape_under(
    policy: &Path,
    audit: &Path,
    args: &[impl AsRef<std::ffi::OsStr>],
) -> Output {
    under_gatewayd(policy, audit, crate::escape::escape_bin())
        .args(args)
        .output()
        .expect("spawn gatewayd")
}

/// `gw-escape`'s lines (`NAME OUTCOME`) by attempt name.
pub(crate) fn escape_outcomes(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, o)| (n.to_string(), o.to_string()))
        .collect()
}

/// "hook reason" of every kernel denial the records stand for (a `denials_aggregated`
/// record as its count of its kind), sorted.
pub(crate) fn kernel_kinds(recs: &[serde_json::Value]) -> Vec<String> {
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
pub(crate) fn denials_in(kernel: &[serde_json::Value]) -> u64 {
    kernel
        .iter()
        .map(|r| r["detail"]["count"].as_u64().unwrap_or(1))
        .sum()
}

pub(crate) fn records(audit: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits (for [`MUST_HAPPEN_WITHIN`] at most) until `cond` holds.
pub(crate) fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + MUST_HAPPEN_WITHIN;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited in vain: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first record with `reason` in `audit`, waiting for it (a log being written: its last
/// line may be partial).
pub(crate) fn wait_for_record(audit: &Path, reason: &str) -> serde_json::Value {
    let mut found = None;
    wait_until(&format!("a {reason} record"), || {
        let text = std::fs::read_to_string(audit).unwrap_or_default();
        found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|r| r["reason"] == reason);
        found.is_some()
    });
    found.unwrap_or_default()
}

pub(crate) fn verify(audit: &Path) -> Output {
    Command::new(gatewayd())
        .args(["audit", "verify"])
        .arg(audit)
        .output()
        .unwrap()
}

/// A listener that reports every byte received, per connection.
pub(crate) fn listener(addr: &str) -> (u16, mpsc::Receiver<Vec<u8>>) {
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

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `gatewayd policy suggest AUDIT --policy POLICY --out OUT`: the policy drafted from a
/// learning run's records.
pub(crate) fn suggest(audit: &Path, policy: &Path, out: &Path) -> Output {
    Command::new(gatewayd())
        .args(["policy", "suggest"])
        .arg(audit)
        .arg("--policy")
        .arg(policy)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

pub(crate) fn best_effort(egress: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"version": 1, "kernel": "best_effort", "network": {"egress": egress}})
}

pub(crate) fn pid_alive(pid: i32) -> bool {
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
pub(crate) fn host_pid(gatewayd: u32, ns_pid: i32) -> i32 {
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
pub(crate) fn start_sleeper(
    dir: &Scratch,
    policy: serde_json::Value,
) -> (std::process::Child, i32) {
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

pub(crate) fn protected_fixture(dir: &Scratch) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
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
