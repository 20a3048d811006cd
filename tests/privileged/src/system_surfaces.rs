//! What the agent sees of `/proc`, `/sys` and `/dev` (docs/KERNEL.md, "What the agent sees
//! of /proc, /sys and /dev"), at whatever tier `gatewayd doctor` reports: the same at both.
//! Each attempt of `gw-escape` (`gw-escape/system.rs`) opens for writing, never writes. It
//! works bare (this root test process), and under `gatewayd run` it fails with the errno
//! listed; the benign counterparts work for a root and an unprivileged agent.
use std::collections::{BTreeMap, BTreeSet};

use super::{
    escape::{NOBODY, Outcome, escape_bin, parse},
    *,
};

const EROFS: i32 = libc::EROFS;
const ENOENT: i32 = libc::ENOENT;
const EACCES: i32 = libc::EACCES;

/// The sysfs attribute `gw-escape sysfs_write` opens (mode 0644 wherever printk is built).
const SYSFS_ATTRIBUTE: &str = "/sys/module/printk/parameters/time";

/// The uses of `/dev` and `/proc` an agent needs.
const BENIGN: [&str; 6] = [
    "dev_null",
    "urandom_read",
    "pty",
    "shm_open",
    "sysctl_read",
    "self_status",
];

/// What `gw-escape` printed: the outcomes, and the `DEV` lines of `dev_list`.
struct Run {
    outcomes: BTreeMap<String, Outcome>,
    dev: BTreeSet<String>,
    audit: Option<PathBuf>,
}

/// Runs `gw-escape` with `args`: bare (`user` `None`) or under `gatewayd run --user`, with
/// `policy` (default: best effort, nothing else).
fn run(dir: &Scratch, args: &[&str], user: Option<&str>, policy: Option<serde_json::Value>) -> Run {
    let (out, audit) = match user {
        None => (
            Command::new(escape_bin()).args(args).output().unwrap(),
            None,
        ),
        Some(u) => {
            let body = policy
                .unwrap_or_else(|| serde_json::json!({"version": 1, "kernel": "best_effort"}));
            let policy = write_policy(dir, body);
            let audit = dir.path(&format!("audit-{u}-{}.jsonl", args.len()));
            let _ = std::fs::remove_file(&audit);
            let out = Command::new(gatewayd())
                .args(["run", "--user", u, "--policy"])
                .arg(&policy)
                .arg("--audit")
                .arg(&audit)
                .arg("--")
                .arg(escape_bin())
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "gatewayd run --user {u}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            (out, Some(audit))
        }
    };
    let text = stdout(&out);
    eprintln!("gw-escape {args:?} (--user {user:?}):\n{text}");
    let outcomes = parse(&text);
    for a in args {
        let name = a.split('=').next().unwrap_or(a);
        assert!(
            outcomes.contains_key(name),
            "no outcome for {name}:\n{text}"
        );
    }
    let dev = text
        .lines()
        .filter_map(|l| l.strip_prefix("DEV "))
        .map(str::to_string)
        .collect();
    Run {
        outcomes,
        dev,
        audit,
    }
}

/// The agent's `/dev`: the standard devices this host has, its own `pts`, `shm`, `ptmx`
/// and the links to `/proc/self/fd`; plus `extra`.
fn minimal_dev(extra: &[&str]) -> BTreeSet<String> {
    let devices = ["null", "zero", "full", "random", "urandom", "tty"];
    devices
        .iter()
        .filter(|d| Path::new("/dev").join(d).exists())
        .chain(&[
            "pts", "shm", "mqueue", "ptmx", "fd", "stdin", "stdout", "stderr",
        ])
        .chain(extra)
        .map(|s| (*s).to_string())
        .collect()
}

/// The attacks this host can show working bare, with what they must get under gatewayd as
/// root: `/proc/sysrq-trigger` only where the kernel has it.
fn attacks() -> Vec<(&'static str, i32)> {
    for needed in [
        "/proc/sys/kernel/core_pattern",
        SYSFS_ATTRIBUTE,
        "/dev/kmsg",
    ] {
        assert!(
            Path::new(needed).exists(),
            "{needed} is missing on this host: the test cannot show the attempt works bare"
        );
    }
    let mut list = vec![
        ("sysctl_write", EROFS),
        ("sysfs_write", EROFS),
        ("kmsg_write", ENOENT),
    ];
    if Path::new("/proc/sysrq-trigger").exists() {
        list.push(("sysrq_write", EROFS));
    } else {
        note("no /proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ off): sysrq_write left out");
    }
    list
}

fn check(got: &BTreeMap<String, Outcome>, want: &[(&str, Outcome)], how: &str) -> Vec<String> {
    want.iter()
        .filter(|(n, w)| got[*n] != *w)
        .map(|(n, w)| format!("{n} ({how}): {:?}, expected {w:?}", got[*n]))
        .collect()
}

#[test]
fn a_root_agent_cannot_open_kernel_interfaces_for_writing() {
    let _ = tier();
    let dir = Scratch::new("surfaces-root");
    let attacks = attacks();
    let mut args: Vec<&str> = attacks.iter().map(|(n, _)| *n).collect();
    args.push("dev_list");
    let bare = run(&dir, &args, None, None);
    let mut wrong = check(
        &bare.outcomes,
        &args.iter().map(|n| (*n, Outcome::Ok)).collect::<Vec<_>>(),
        "bare, so the test proves nothing",
    );
    assert!(bare.dev.contains("kmsg"), "the host's /dev: {:?}", bare.dev);
    let under = run(&dir, &args, Some("root"), None);
    let want: Vec<(&str, Outcome)> = attacks
        .iter()
        .map(|(n, e)| (*n, Outcome::Errno(*e)))
        .chain([("dev_list", Outcome::Ok)])
        .collect();
    wrong.extend(check(&under.outcomes, &want, "--user root"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(under.dev, minimal_dev(&[]), "the agent's /dev");

    // The start record says what was made.
    let recs = records(&under.audit.unwrap());
    let start = recs
        .iter()
        .find(|r| r["reason"] == "session_start")
        .unwrap();
    let seen = &start["detail"]["agent_privileges"]["kernel_interfaces"];
    assert!(
        seen["proc_read_only"]
            .as_array()
            .is_some_and(|a| a.contains(&serde_json::json!("/proc/sys"))),
        "{seen}"
    );
    assert_eq!(
        seen["sys"], "read-only, with every mount below it",
        "{seen}"
    );
    assert!(
        seen["dev"]["devices"]
            .as_array()
            .is_some_and(|a| a.contains(&serde_json::json!("/dev/null"))
                && !a.contains(&serde_json::json!("/dev/kmsg"))),
        "{seen}"
    );
}

#[test]
fn an_unprivileged_agent_sees_the_same_minimal_dev() {
    let _ = tier();
    let dir = Scratch::new("surfaces-user");
    let args = ["kmsg_write", "sysctl_write", "dev_list"];
    let bare = run(&dir, &args, None, None);
    assert_eq!(bare.outcomes["kmsg_write"], Outcome::Ok, "bare");
    let under = run(&dir, &args, Some(NOBODY), None);
    // The file modes refuse a sysctl to another uid before the read-only mount does.
    let want = [
        ("kmsg_write", Outcome::Errno(ENOENT)),
        ("sysctl_write", Outcome::Errno(EACCES)),
        ("dev_list", Outcome::Ok),
    ];
    let wrong = check(&under.outcomes, &want, "--user nobody");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(under.dev, minimal_dev(&[]), "the agent's /dev");
}

#[test]
fn the_agents_dev_and_proc_serve_ordinary_programs() {
    let _ = tier();
    let dir = Scratch::new("surfaces-benign");
    let ok: Vec<(&str, Outcome)> = BENIGN.iter().map(|n| (*n, Outcome::Ok)).collect();
    // Not compared bare: a host without a devpts or a /dev/shm of its own (the test
    // guests') lacks what the agent's /dev gives.
    let mut wrong = Vec::new();
    for user in ["root", NOBODY] {
        let under = run(&dir, &BENIGN, Some(user), None);
        wrong.extend(check(&under.outcomes, &ok, &format!("--user {user}")));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_listed_device_is_bound_into_the_agents_dev() {
    let _ = tier();
    let dir = Scratch::new("surfaces-devices");
    let policy = serde_json::json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"devices": ["/dev/kmsg"]}});
    let under = run(
        &dir,
        &["kmsg_write", "dev_list"],
        Some("root"),
        Some(policy),
    );
    assert_eq!(under.outcomes["kmsg_write"], Outcome::Ok);
    assert_eq!(under.dev, minimal_dev(&["kmsg"]), "the agent's /dev");
    // Not a character device: the policy does not load, nothing starts.
    let policy = write_policy(
        &dir,
        serde_json::json!({"version": 1, "kernel": "best_effort",
            "sandbox": {"devices": ["/proc/version"]}}),
    );
    let out = under_gatewayd(&policy, dir.path("refused.jsonl"), escape_bin())
        .arg("dev_list")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("sandbox.devices[0]") && err.contains("not a character device"),
        "{err}"
    );
    assert!(!stdout(&out).contains("dev_list"), "{}", stdout(&out));
}
