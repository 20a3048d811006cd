//! The bypass suite: every escape attempt of `gw-escape` is made three ways. Bare (by this
//! root test process), where it must work or at least reach the kernel code it aims at
//! (anything but `EPERM`/`EACCES`), so a denial below is gatewayd's; under `gatewayd run
//! --user root` (uid 0 without capabilities: the hardest case for the filters); and, for the
//! attempts on gatewayd itself, under an unprivileged user. Each must then fail with the
//! errno listed; the benign counterparts must work. What still works is listed in
//! [`KNOWN_OPEN`] (and in docs/KERNEL.md, "What an agent can still do"): the test fails when
//! one of them starts being denied, so the list stays true. Expectations branch on the tier
//! `gatewayd doctor --json` reports.
use std::collections::BTreeMap;

use super::*;

const EPERM: i32 = libc::EPERM;
const EACCES: i32 = libc::EACCES;
const ENOSYS: i32 = libc::ENOSYS;
/// gatewayd's pid names no process in the agent's PID namespace.
const ESRCH: i32 = libc::ESRCH;
const ENOENT: i32 = libc::ENOENT;
const SIGSYS: i32 = libc::SIGSYS;

/// The uid of the unprivileged runs (`nobody`; no entry in the user database needed).
pub(super) const NOBODY: &str = "65534";

/// One line of `gw-escape`'s output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Ok,
    Errno(i32),
    Killed(i32),
}

/// What an attempt must do under gatewayd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Under {
    /// Fail with this errno.
    Errno(i32),
    /// Be killed by this signal.
    Killed(i32),
}

/// An attempt gatewayd closes, and how, per tier where that differs.
struct Closed {
    name: &'static str,
    /// At tier 1 and at tier 2.
    under: [Under; 2],
    /// `true`: bare, it must work; `false`: it must reach the kernel (any errno but
    /// `EPERM`/`EACCES`; e.g. `finit_module` of `/dev/null` is refused by the loader).
    bare_works: bool,
}

const fn closed(name: &'static str, under: Under, bare_works: bool) -> Closed {
    Closed {
        name,
        under: [under, under],
        bare_works,
    }
}

/// Closed for `--user root` (uid 0 without capabilities) at both tiers: by the seccomp
/// filter, by the empty capability sets, by the BPF LSM / Landlock, or by the agent's PID
/// namespace (gatewayd's pid names nothing there: `ESRCH`, and its `/proc` entries do not
/// exist: `ENOENT`).
const CLOSED_FOR_ROOT: [Closed; 33] = [
    closed("mount", Under::Errno(EPERM), true),
    closed("fsopen", Under::Errno(EPERM), true),
    closed("open_tree", Under::Errno(EPERM), true),
    closed("perf_event_open", Under::Errno(EPERM), true),
    closed("userfaultfd", Under::Errno(EPERM), true),
    closed("finit_module", Under::Errno(EPERM), false),
    closed("delete_module", Under::Errno(EPERM), false),
    closed("raw_socket", Under::Errno(EPERM), true),
    closed("raw_socket6", Under::Errno(EPERM), true),
    closed("packet_socket", Under::Errno(EPERM), true),
    closed("vsock_socket", Under::Errno(EPERM), false),
    closed("netlink_audit", Under::Errno(EPERM), true),
    closed("bpf", Under::Errno(EPERM), true),
    closed("io_uring", Under::Errno(EPERM), false),
    closed("keyctl", Under::Errno(EPERM), false),
    closed("open_by_handle", Under::Errno(EPERM), true),
    closed("unshare_userns", Under::Errno(EPERM), true),
    closed("clone_userns", Under::Errno(EPERM), true),
    closed("clone3", Under::Errno(ENOSYS), true),
    closed("memfd_exec", Under::Errno(EPERM), true),
    closed("memfd_mfd_exec", Under::Errno(EPERM), false),
    closed("x32", Under::Killed(SIGSYS), false),
    closed("int80", Under::Killed(SIGSYS), false),
    closed("sethostname", Under::Errno(EPERM), true),
    closed("capset_raise", Under::Errno(EPERM), true),
    closed("ptrace_parent", Under::Errno(ESRCH), true),
    closed("kill_parent", Under::Errno(ESRCH), true),
    closed("prlimit_parent", Under::Errno(ESRCH), true),
    closed("renice_parent", Under::Errno(ESRCH), true),
    closed("oom_parent", Under::Errno(ENOENT), true),
    closed("parent_environ", Under::Errno(ENOENT), true),
    closed("parent_mem", Under::Errno(ESRCH), false),
    // A hard link, made during the session, to a protected file: at tier 1 the link is made
    // but the inode stays unreadable; at tier 2 the file is hidden under a bind mount of
    // `/dev/null`, and a link from a mount to another directory crosses mounts (`EXDEV`).
    Closed {
        name: "hardlink_read",
        under: [Under::Errno(EPERM), Under::Errno(libc::EXDEV)],
        bare_works: true,
    },
];

/// Closed for an unprivileged agent user (and not only by what closes them for root).
const CLOSED_FOR_USER: [Closed; 10] = [
    closed("setuid0", Under::Errno(EPERM), true),
    closed("sethostname", Under::Errno(EPERM), true),
    closed("capset_raise", Under::Errno(EPERM), true),
    closed("ptrace_parent", Under::Errno(ESRCH), true),
    closed("kill_parent", Under::Errno(ESRCH), true),
    closed("prlimit_parent", Under::Errno(ESRCH), true),
    closed("renice_parent", Under::Errno(ESRCH), true),
    closed("oom_parent", Under::Errno(ENOENT), true),
    closed("parent_environ", Under::Errno(ENOENT), true),
    closed("parent_mem", Under::Errno(ESRCH), false),
];

/// Closed where the kernel has `vm.memfd_noexec` (6.3+), which the agent's PID namespace
/// sets to 2: the memfd is made non-executable, its exec refused.
const CLOSED_BY_MEMFD_NOEXEC: Closed = closed("memfd_exec_proc", Under::Errno(EACCES), true);
/// Without it, closed at tier 1: `lsm/bprm_check_security` refuses to execute a file with no
/// link (`exec_unlinked`; `code_loading.rs` checks the record).
const CLOSED_BY_BPRM_CHECK: Closed = closed("memfd_exec_proc", Under::Errno(EPERM), true);

/// Attempts that still work under `gatewayd run --user root`, at the tiers listed, and
/// only on kernels without the feature named (`gatewayd doctor --json`), if one is; each is
/// in docs/KERNEL.md ("What an agent can still do"). The test fails when one is denied.
const KNOWN_OPEN: [(&str, &[u8], Option<&str>, &str); 1] = [(
    "memfd_exec_proc",
    &[2],
    Some("memfd_noexec"),
    "exec of a memfd through /proc/self/fd/N at tier 2 on a kernel without vm.memfd_noexec (with no sandbox.exec list, any binary may run anyway)",
)];

/// Benign counterparts: they must work under gatewayd.
const BENIGN: [&str; 6] = [
    "tcp_socket",
    "netlink_route",
    "clone",
    "memfd",
    "read",
    "write",
];

pub(super) fn escape_bin() -> String {
    crate::testkit_bin("GW_ESCAPE", "gw-escape")
}

/// The arguments of the attempts that need one.
struct Fixture {
    dir: Scratch,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = Scratch::new("escape");
        std::fs::write(dir.path("secret"), "top secret").unwrap();
        std::fs::write(dir.path("other"), "harmless").unwrap();
        std::fs::create_dir_all(dir.path("mnt")).unwrap();
        // A directory that holds nothing protected, for the files the attempts make.
        std::fs::create_dir_all(dir.path("work")).unwrap();
        Fixture { dir }
    }

    fn arg(&self, name: &str, run: &str) -> String {
        let p = |rel: &str| self.dir.path(rel).display().to_string();
        match name {
            "mount" => format!("mount={}", p("mnt")),
            "open_by_handle" => format!("open_by_handle={},{}", p("secret"), p("work")),
            "read" => format!("read={}", p("other")),
            "write" => format!("write={}", p(&format!("work/new-{run}"))),
            "hardlink_read" => format!(
                "hardlink_read={},{}",
                p("secret"),
                p(&format!("work/link-{run}"))
            ),
            n => n.to_string(),
        }
    }

    fn policy(&self) -> PathBuf {
        write_policy(
            &self.dir,
            serde_json::json!({"version": 1, "kernel": "best_effort",
                "sandbox": {"protected": [self.dir.path("secret")]}}),
        )
    }
}

pub(super) fn parse(text: &str) -> BTreeMap<String, Outcome> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.to_string();
            let how = w.next()?;
            let n = w.next().and_then(|n| n.parse().ok());
            let o = match (how, n) {
                ("ok", _) => Outcome::Ok,
                ("errno", Some(n)) => Outcome::Errno(n),
                ("killed", Some(n)) => Outcome::Killed(n),
                _ => return None,
            };
            Some((name, o))
        })
        .collect()
}

/// Runs `names` through gw-escape: bare (`user` `None`) or under `gatewayd run --user`.
fn attempts(
    fx: &Fixture,
    names: &[&str],
    user: Option<&str>,
    run: &str,
) -> BTreeMap<String, Outcome> {
    let args: Vec<String> = names.iter().map(|n| fx.arg(n, run)).collect();
    let out = match user {
        None => Command::new(escape_bin()).args(&args).output().unwrap(),
        Some(u) => {
            let audit = fx.dir.path(&format!("audit-{run}.jsonl"));
            // gatewayd's own pid is the attempts' target (GW_ESCAPE_TARGET): the shell
            // execs gatewayd, which keeps the shell's pid.
            let out = Command::new("sh")
                .args(["-c", "export GW_ESCAPE_TARGET=$$; exec \"$@\"", "sh"])
                .arg(gatewayd())
                .args(["run", "--user", u, "--policy"])
                .arg(fx.policy())
                .arg("--audit")
                .arg(&audit)
                .arg("--")
                .arg(escape_bin())
                .args(&args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "gatewayd run --user {u}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            out
        }
    };
    let text = stdout(&out);
    eprintln!("gw-escape ({run}):\n{text}");
    let got = parse(&text);
    for n in names {
        assert!(got.contains_key(*n), "no outcome for {n} ({run}):\n{text}");
    }
    got
}

fn reaches(o: Outcome) -> bool {
    matches!(o, Outcome::Ok) || matches!(o, Outcome::Errno(e) if e != EPERM && e != EACCES)
}

fn want(u: Under) -> Outcome {
    match u {
        Under::Errno(e) => Outcome::Errno(e),
        Under::Killed(s) => Outcome::Killed(s),
    }
}

/// Checks one list of closed attempts: bare, then under gatewayd as `user`.
fn check_closed(fx: &Fixture, list: &[Closed], user: &str, tier_index: usize) -> Vec<String> {
    let names: Vec<&str> = list.iter().map(|c| c.name).collect();
    let bare = attempts(fx, &names, None, &format!("bare-{user}"));
    let under = attempts(fx, &names, Some(user), &format!("under-{user}"));
    let mut wrong = Vec::new();
    for c in list {
        let b = bare[c.name];
        let bare_ok = if c.bare_works {
            b == Outcome::Ok
        } else {
            reaches(b)
        };
        if !bare_ok {
            wrong.push(format!(
                "{}: bare {b:?}, so the test proves nothing",
                c.name
            ));
        }
        let w = want(c.under[tier_index]);
        if under[c.name] != w {
            wrong.push(format!(
                "{} (--user {user}): under gatewayd {:?}, expected {w:?}",
                c.name, under[c.name]
            ));
        }
    }
    wrong
}

fn tier_index() -> (usize, u8) {
    match tier() {
        Tier::BpfLsm => (0, 1),
        Tier::Landlock => (1, 2),
    }
}

#[test]
fn escape_attempts_are_denied_for_a_root_agent() {
    let (index, level) = tier_index();
    let fx = Fixture::new();
    let mut list: Vec<Closed> = CLOSED_FOR_ROOT.into_iter().collect();
    if doctor()["features"]["memfd_noexec"] == true {
        list.push(CLOSED_BY_MEMFD_NOEXEC);
    } else if level == 1 {
        list.push(CLOSED_BY_BPRM_CHECK);
    } else {
        note("no vm.memfd_noexec: memfd exec through /proc/self/fd is listed as open");
    }
    let wrong = check_closed(&fx, &list, "root", index);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    eprintln!(
        "ESCAPE tier {level} --user root: {} attempts closed",
        list.len()
    );
}

#[test]
fn escape_attempts_on_gatewayd_are_denied_for_an_unprivileged_agent() {
    let (index, level) = tier_index();
    let fx = Fixture::new();
    let wrong = check_closed(&fx, &CLOSED_FOR_USER, NOBODY, index);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    eprintln!(
        "ESCAPE tier {level} --user {NOBODY}: {} attempts closed",
        CLOSED_FOR_USER.len()
    );
}

#[test]
fn known_open_attempts_still_work_and_benign_ones_do() {
    let (_, level) = tier_index();
    let fx = Fixture::new();
    let features = &doctor()["features"];
    let open: Vec<&str> = KNOWN_OPEN
        .iter()
        .filter(|(_, tiers, unless, _)| {
            tiers.contains(&level) && unless.is_none_or(|f| features[f] != true)
        })
        .map(|(n, ..)| *n)
        .collect();
    let mut names = open.clone();
    names.extend(BENIGN);
    let bare = attempts(&fx, &names, None, "bare-open");
    let under = attempts(&fx, &names, Some("root"), "under-open");
    for n in &names {
        assert_eq!(bare[*n], Outcome::Ok, "{n} bare");
        let why = KNOWN_OPEN.iter().find(|(k, ..)| k == n).map(|(.., w)| *w);
        assert_eq!(
            under[*n],
            Outcome::Ok,
            "{n} under gatewayd: {}",
            why.map_or("a benign counterpart must work".to_string(), |w| format!(
                "listed as open ({w}); if it is now denied, move it to the closed list and update docs/KERNEL.md"
            ))
        );
    }
    eprintln!(
        "ESCAPE tier {level}: {} known open, {} benign counterparts work",
        open.len(),
        BENIGN.len()
    );
}

/// The agent runs as the user who ran sudo by default; without one, nothing starts.
#[test]
fn the_agent_user_defaults_to_the_sudo_user_and_is_required() {
    let _ = tier();
    let fx = Fixture::new();
    let run = |env: &[(&str, &str)], audit: &str| {
        let mut c = Command::new(gatewayd());
        c.args(["run", "--policy"])
            .arg(fx.policy())
            .arg("--audit")
            .arg(fx.dir.path(audit))
            .arg("--")
            .arg(escape_bin())
            .args(["setuid0", "tcp_socket"])
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&[("SUDO_UID", NOBODY), ("SUDO_GID", NOBODY)], "sudo.jsonl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = parse(&stdout(&out));
    assert_eq!(
        got["setuid0"],
        Outcome::Errno(EPERM),
        "runs as the sudo user"
    );
    assert_eq!(got["tcp_socket"], Outcome::Ok);
    let start = &records(&fx.dir.path("sudo.jsonl"))[0];
    let p = &start["detail"]["agent_privileges"];
    assert_eq!(
        (p["uid"].as_u64(), p["gid"].as_u64()),
        (Some(65534), Some(65534)),
        "{p}"
    );
    assert_eq!(p["from"], "SUDO_UID");

    let out = run(&[], "none.jsonl");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--user root"), "{err}");
    assert!(stdout(&out).is_empty(), "the agent must not have run");
    let recs = records(&fx.dir.path("none.jsonl"));
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["reason"], "agent_user");
    assert_eq!(recs[0]["decision"], "deny");
}

/// The agent's credentials as /proc reports them: no capability in any set, every
/// securebit locked, `no_new_privs`, seccomp filtering, its own mount namespace, and its own
/// PID namespace, whose init is its parent and whose procfs is the one it sees.
#[test]
fn a_root_agent_has_no_capability_and_its_own_mount_namespace() {
    let _ = tier();
    let dir = Scratch::new("creds");
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    );
    let out = under_gatewayd(&policy, dir.path("audit.jsonl"), escape_bin())
        .args(["show=/proc/self/status", "link=/proc/self/ns/mnt"])
        .args(["link=/proc/self/ns/pid"])
        .output()
        .unwrap();
    let text = stdout(&out);
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .map_or_else(|| panic!("no {k} in {text}"), str::trim)
            .to_string()
    };
    assert_eq!(field("Uid").split_whitespace().next(), Some("0"));
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(set), "0000000000000000", "{set}");
    }
    assert_eq!(field("NoNewPrivs"), "1");
    assert_eq!(field("Seccomp"), "2", "filter mode");
    let links: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("link "))
        .filter(|l| *l != "ok")
        .collect();
    assert_eq!(links.len(), 2, "{text}");
    for (kind, agent_ns) in ["mnt", "pid"].into_iter().zip(links) {
        let host_ns = std::fs::read_link(format!("/proc/self/ns/{kind}")).unwrap();
        assert!(agent_ns.starts_with(&format!("{kind}:[")), "{text}");
        assert_ne!(
            agent_ns,
            host_ns.display().to_string(),
            "a {kind} namespace of its own"
        );
    }
    // Its procfs is its namespace's: one pid level. gw-escape reads it in a child of its
    // own (pid 3), and gw-escape is the init's first child (pid 2).
    assert_eq!(
        field("NSpid"),
        "3",
        "one level, the namespace's own numbers"
    );
    assert_eq!(field("PPid"), "2");
}

/// `kill(-1, SIGKILL)` reaches every process of the caller's uid (every process, for root);
/// in the agent's PID namespace it reaches nothing outside. Bare, as a uid of its own, it
/// kills a bystander of that uid; under gatewayd, as that uid and as root, the bystander and
/// gatewayd survive (gatewayd records the session's end).
#[test]
fn kill_of_every_process_reaches_nothing_outside_the_agents_namespace() {
    use std::os::unix::process::CommandExt as _;
    let _ = tier();
    const UID: u32 = 64_123;
    let fx = Fixture::new();
    let bystander = || crate::bystander(|c| c.uid(UID).gid(UID));
    let dead_soon = crate::dead_soon;
    let mut b = bystander();
    let out = Command::new(escape_bin())
        .arg("kill_all")
        .uid(UID)
        .gid(UID)
        .output()
        .unwrap();
    assert!(
        dead_soon(&mut b),
        "bare, kill(-1) must kill the bystander: {out:?}"
    );
    for user in [UID.to_string(), "root".into()] {
        let mut b = bystander();
        let audit = fx.dir.path(&format!("kill-all-{user}.jsonl"));
        let out = Command::new(gatewayd())
            .args(["run", "--user", &user, "--policy"])
            .arg(fx.policy())
            .arg("--audit")
            .arg(&audit)
            .arg("--")
            .arg(escape_bin())
            .arg("kill_all")
            .output()
            .unwrap();
        assert!(
            !dead_soon(&mut b),
            "--user {user}: the bystander was killed"
        );
        let _ = b.kill();
        let _ = b.wait();
        let end = records(&audit).pop().unwrap();
        assert_eq!(end["reason"], "session_end", "--user {user}: {end}");
        // gw-escape itself was among what its attempt killed: the kill was made.
        assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{out:?}");
    }
}
