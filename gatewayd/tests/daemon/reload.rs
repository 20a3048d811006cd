//! Policy reload without a restart: a file written in place, renamed over, a Kubernetes-style
//! `..data` symlink swap, SIGHUP to the real binary; a bad file keeps the old policy (with
//! its record); decisions made while reloads happen are all answered, each under one policy
//! version named in its record.
use std::{
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use gatewayd::{daemon::policy_digest, protocol::client::Client};
use serde_json::{Value, json};

use crate::support::{Daemon, policy, records};

/// How long a condition may take on a loaded machine before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `f` until it gives a value, failing after [`PATIENCE`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn decide(c: &mut Client, s: &str, tool: &str) -> Value {
    c.call(
        "call/decide",
        json!({"session": s, "call": {"tool": tool, "arguments": {}}}),
    )
    .unwrap()
}

/// The standard policy without the tool `count`.
fn without_count(root: &Path) -> Value {
    let mut p = policy(root);
    p["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "count");
    p
}

/// Writes `text` to `path` as editors do: a new file renamed over the old.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn reason_records(audit: &Path, reason: &str) -> Vec<Value> {
    records(audit)
        .into_iter()
        .filter(|r| r["reason"] == reason)
        .collect()
}

/// The first `policy_reload_failed` record, once written: it names the policy kept (`old`)
/// and the file in its error.
fn reload_failed(audit: &Path, old: &str) -> Value {
    let failed = wait_for("a policy_reload_failed record", || {
        reason_records(audit, "policy_reload_failed").pop()
    });
    assert_eq!(failed["detail"]["old"], old);
    assert!(
        failed["detail"]["error"]
            .as_str()
            .unwrap()
            .contains("policy.json"),
        "{failed}"
    );
    failed
}

fn digest_of(path: &Path) -> String {
    policy_digest(&std::fs::read(path).unwrap())
}

/// A daemon on the standard policy, with session `s` open.
struct Started {
    d: Daemon,
    pfile: std::path::PathBuf,
    audit: std::path::PathBuf,
    /// The digest of the policy it started with.
    old: String,
    c: Client,
}

fn started() -> Started {
    let d = Daemon::start();
    let pfile = d.root().join("policy.json");
    let audit = d.audit.clone().unwrap();
    let old = digest_of(&pfile);
    let mut c = d.client();
    c.call("session/open", json!({"session": "s", "user": "alice"}))
        .unwrap();
    Started {
        d,
        pfile,
        audit,
        old,
        c,
    }
}

#[test]
fn a_changed_file_is_in_force_for_the_next_call_and_the_records_name_the_digests() {
    let Started {
        d,
        pfile,
        audit,
        old,
        mut c,
    } = started();
    assert_eq!(decide(&mut c, "s", "count")["decision"], "allow");
    let text = without_count(&d.root()).to_string();
    let new = policy_digest(text.as_bytes());
    let written = Instant::now();
    replace(&pfile, &text);
    // The session stays open; its next calls are decided under the new policy.
    let r = wait_for("`count` refused under the new policy", || {
        let r = decide(&mut c, "s", "count");
        (r["decision"] == "deny").then_some(r)
    });
    let latency = written.elapsed();
    eprintln!("reload latency (rename to the first call decided under it): {latency:?}");
    assert_eq!(r["reason"], "not_allowlisted");
    let reload = &reason_records(&audit, "policy_reload")[0];
    assert_eq!(reload["detail"]["old"], old.as_str());
    assert_eq!(reload["detail"]["new"], new.as_str());
    assert_eq!(reload["detail"]["trigger"], "file");
    assert_eq!(reload["detail"]["sessions_open"], 1);
    assert!(
        reload["detail"]["changes"][0]
            .as_str()
            .unwrap()
            .starts_with("- tools[count]"),
        "{reload}"
    );
    // Each decision names the policy it was decided under: the old ones, then (after the
    // reload record) the new ones.
    let recs = records(&audit);
    let at = |r: &Value| r["seq"].as_u64().unwrap();
    let under: Vec<(u64, &str)> = recs
        .iter()
        .filter(|r| r["tool"] == "count")
        .map(|r| (at(r), r["detail"]["policy"].as_str().unwrap()))
        .collect();
    let first_new = under.iter().position(|(_, p)| *p == new).unwrap();
    assert!(
        under[..first_new].iter().all(|(_, p)| *p == old),
        "{under:?}"
    );
    assert!(
        under[first_new..].iter().all(|(_, p)| *p == new),
        "{under:?}"
    );
    assert!(under[first_new].0 > at(reload));
    // A write in place (closed whole) is seen too.
    std::fs::write(&pfile, policy(&d.root()).to_string()).unwrap();
    wait_for("`count` allowed again", || {
        (decide(&mut c, "s", "count")["decision"] == "allow").then_some(())
    });
}

#[test]
fn a_bad_file_keeps_the_old_policy_and_is_recorded_with_both_digests() {
    let Started {
        d,
        pfile,
        audit,
        old,
        mut c,
    } = started();
    // Half-written: the first half of a good file, then closed.
    let good = without_count(&d.root()).to_string();
    let half = &good[..good.len() / 2];
    std::fs::write(&pfile, half).unwrap();
    let failed = reload_failed(&audit, &old);
    assert_eq!(
        failed["detail"]["new"],
        policy_digest(half.as_bytes()).as_str()
    );
    assert_eq!(decide(&mut c, "s", "count")["decision"], "allow");
    // Valid JSON, not a valid policy: the same.
    replace(&pfile, &json!({"version": 2, "tools": []}).to_string());
    let failed = wait_for("a second policy_reload_failed record", || {
        let v = reason_records(&audit, "policy_reload_failed");
        (v.len() == 2).then(|| v[1].clone())
    });
    assert_eq!(failed["detail"]["old"], old.as_str());
    let r = decide(&mut c, "s", "count");
    assert_eq!(r["decision"], "allow");
    assert!(reason_records(&audit, "policy_reload").is_empty());
    let last = records(&audit).pop().unwrap();
    assert_eq!(last["detail"]["policy"], old.as_str());
}

/// Kubernetes mounts a `ConfigMap` as `policy.json -> ..data/policy.json`, `..data ->
/// ..TIMESTAMP`, and updates it by renaming a new `..data` symlink over the old one.
#[test]
fn a_configmap_style_symlink_swap_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let version = |name: &str, text: String| {
        std::fs::create_dir(root.join(name)).unwrap();
        std::fs::write(root.join(name).join("policy.json"), text).unwrap();
    };
    version("..2026_01", policy(&root).to_string());
    std::os::unix::fs::symlink("..2026_01", root.join("..data")).unwrap();
    let pfile = root.join("policy.json");
    std::os::unix::fs::symlink("..data/policy.json", &pfile).unwrap();
    let d = Daemon::start_file(dir, pfile.clone());
    let mut c = d.client();
    c.call("session/open", json!({"session": "s", "user": "alice"}))
        .unwrap();
    assert_eq!(decide(&mut c, "s", "count")["decision"], "allow");
    version("..2026_02", without_count(&root).to_string());
    std::os::unix::fs::symlink("..2026_02", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    wait_for("`count` refused after the swap", || {
        (decide(&mut c, "s", "count")["decision"] == "deny").then_some(())
    });
    let reload = &reason_records(d.audit.as_ref().unwrap(), "policy_reload")[0];
    assert_eq!(reload["detail"]["new"], digest_of(&pfile).as_str());
}

/// A `ConfigMap` update whose file is half written when `..data` is swapped to it: refused
/// with its record, the old policy goes on deciding, and the next (whole) update is taken.
#[test]
fn a_half_written_configmap_update_keeps_the_old_policy_until_a_whole_one_comes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let version = |name: &str, text: &str| {
        std::fs::create_dir(root.join(name)).unwrap();
        std::fs::write(root.join(name).join("policy.json"), text).unwrap();
        std::os::unix::fs::symlink(name, root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    };
    std::fs::create_dir(root.join("..2026_01")).unwrap();
    std::fs::write(
        root.join("..2026_01/policy.json"),
        policy(&root).to_string(),
    )
    .unwrap();
    std::os::unix::fs::symlink("..2026_01", root.join("..data")).unwrap();
    let pfile = root.join("policy.json");
    std::os::unix::fs::symlink("..data/policy.json", &pfile).unwrap();
    let old = digest_of(&pfile);
    let d = Daemon::start_file(dir, pfile.clone());
    let audit = d.audit.clone().unwrap();
    let mut c = d.client();
    c.call("session/open", json!({"session": "s", "user": "alice"}))
        .unwrap();
    let good = without_count(&root).to_string();
    version("..2026_02", &good[..good.len() / 2]);
    reload_failed(&audit, &old);
    let r = decide(&mut c, "s", "count");
    assert_eq!(r["decision"], "allow", "{r}");
    assert_eq!(
        records(&audit).pop().unwrap()["detail"]["policy"],
        old.as_str()
    );
    version("..2026_03", &good);
    wait_for("`count` refused after the whole update", || {
        (decide(&mut c, "s", "count")["decision"] == "deny").then_some(())
    });
    let reload = &reason_records(&audit, "policy_reload")[0];
    assert_eq!(reload["detail"]["old"], old.as_str());
    assert_eq!(reload["detail"]["new"], digest_of(&pfile).as_str());
    // Nothing recorded before is lost: the chain is whole, from its first record.
    let all = records(&audit);
    assert_eq!(all[0]["seq"], 1);
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1, "{r}");
    }
}

#[test]
fn decisions_while_the_policy_is_reloaded_are_all_answered_under_one_version_each() {
    let d = Daemon::start_policy(|root| {
        let mut p = policy(root);
        p["limits"] = json!({});
        p
    });
    let pfile = d.root().join("policy.json");
    let audit = d.audit.clone().unwrap();
    // Two versions that allow `count` alike.
    let version = |n: u32| {
        let mut p = policy(&d.root());
        p["limits"] = json!({});
        p["name"] = json!(format!("v{n}"));
        p.to_string()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|i| {
            let mut c = d.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let s = format!("load{i}");
                c.call("session/open", json!({"session": s, "user": "alice"}))
                    .unwrap();
                let mut answered = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = decide(&mut c, &s, "count");
                    assert_eq!(r["decision"], "allow", "{r}");
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    const RELOADS: usize = 10;
    let mut digests = vec![digest_of(&pfile)];
    for n in 1..=RELOADS {
        let text = version(n as u32);
        digests.push(policy_digest(text.as_bytes()));
        replace(&pfile, &text);
        wait_for("the reload record", || {
            (reason_records(&audit, "policy_reload").len() == n).then_some(())
        });
    }
    stop.store(true, Ordering::Relaxed);
    let answered: u64 = callers.into_iter().map(|t| t.join().unwrap()).sum();
    let recs = records(&audit);
    let decided: Vec<&Value> = recs.iter().filter(|r| r["tool"] == "count").collect();
    eprintln!("{answered} calls answered during {RELOADS} reloads");
    assert_eq!(decided.len() as u64, answered, "one record per answer");
    assert!(decided.iter().all(|r| r["decision"] == "allow"));
    let mut under: Vec<&str> = decided
        .iter()
        .map(|r| r["detail"]["policy"].as_str().unwrap())
        .collect();
    assert!(under.iter().all(|p| digests.iter().any(|d| d == p)));
    under.dedup();
    assert!(
        under.len() > RELOADS / 2,
        "calls were decided under {} versions while {RELOADS} reloads happened",
        under.len()
    );
}

#[test]
fn sighup_reloads_the_real_binary_and_without_the_watch_a_file_change_alone_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let pfile = root.join("policy.json");
    std::fs::write(&pfile, policy(&root).to_string()).unwrap();
    let socket = root.join("gatewayd.sock");
    let audit = root.join("audit.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["serve", "--no-watch", "--group", "root", "--policy"])
        .arg(&pfile)
        .arg("--socket")
        .arg(&socket)
        .arg("--audit")
        .arg(&audit)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut c = wait_for("the daemon's socket", || Client::connect(&socket).ok());
    c.call("session/open", json!({"session": "s", "user": "alice"}))
        .unwrap();
    replace(&pfile, &without_count(&root).to_string());
    // No watch: the file alone changes nothing; this call was made after the rename.
    assert_eq!(decide(&mut c, "s", "count")["decision"], "allow");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    wait_for("`count` refused after SIGHUP", || {
        (decide(&mut c, "s", "count")["decision"] == "deny").then_some(())
    });
    let reload = &reason_records(&audit, "policy_reload")[0];
    assert_eq!(reload["detail"]["trigger"], "sighup");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}
