//! Learn mode's round trip with the real hosts (docs/POLICY.md, "Learn mode"): from a
//! profile that names the workspace and nothing of the host, the benign session fails under
//! `gatewayd run` (the kernel refuses the host's own files and its model endpoint); under
//! `gatewayd run --learn` it works, each refusal recorded `would_deny`; `gatewayd policy
//! suggest` writes a policy from that log; under that policy the same session works, and
//! `suggest` has nothing more to propose: what is still refused is what it never proposes
//! (a home as a whole, where a host makes its lock files and renames its state file over the
//! old one), each listed with its rule. Where the kernel learns no files (tier 3), the test
//! stops after checking that.
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{Host, Mode, World, loopback_only, report};
use crate::sessions::{benign, benign_expect, git_init};

fn records(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How many benign steps the model was told worked.
fn worked(run: &crate::harness::Run, host: Host) -> usize {
    benign_expect(host)
        .iter()
        .enumerate()
        .filter(|(i, want)| run.results.get(*i).is_some_and(|r| r.contains(*want)))
        .count()
}

/// Moves the session's audit log aside as `name`, for the next run to start a log of its own.
fn keep_log(w: &World, name: &str) -> std::path::PathBuf {
    let kept = w.dir.join(name);
    std::fs::rename(w.audit(), &kept).unwrap();
    kept
}

fn round_trip(host: Host) {
    loopback_only();
    let ws = World::dir_for("learn", host, Mode::Kernel).join("ws");
    let steps = benign(&ws.display().to_string(), host);
    let Some(program) = host.program() else {
        return;
    };
    let mut w = World::new("learn", host, Mode::Kernel, program, &steps);
    git_init(&w);
    // Each run starts from the project as it was made (a run commits to it).
    let fresh = |w: &World| {
        let st = Command::new("sh")
            .args([
                "-c",
                "git reset -q --hard $(git rev-list --max-parents=0 HEAD) && git clean -qfd",
            ])
            .current_dir(&w.ws)
            .status()
            .unwrap();
        assert!(st.success());
    };
    let empty = json!({"version": 1, "kernel": "best_effort",
        "sandbox": {"root": ws, "readable": [ws], "writable": [ws]}});
    std::fs::write(w.policy(), serde_json::to_string_pretty(&empty).unwrap()).unwrap();
    let empty_policy = w.dir.join("empty-policy.json");
    std::fs::copy(w.policy(), &empty_policy).unwrap();

    let run = w.run();
    let enforced = keep_log(&w, "enforced.jsonl");
    let denied = records(&enforced)
        .iter()
        .filter(|r| r["source"] == "kernel" && r["decision"] == "deny")
        .count();
    report(&format!(
        "{} learn: empty profile, benign {}/{}, kernel denials {denied}",
        host.name(),
        worked(&run, host),
        benign_expect(host).len()
    ));
    // (At tier 2 Landlock's refusals are recorded only where the host's audit is on.)
    assert!(
        worked(&run, host) < benign_expect(host).len(),
        "the empty profile refuses the host\n{}",
        run.describe()
    );

    w.learn = true;
    fresh(&w);
    let run = w.run();
    let learned_log = keep_log(&w, "learn.jsonl");
    let learned = records(&learned_log);
    let start = learned.iter().find(|r| r["reason"] == "session_start");
    let kernel_learns = start.is_some_and(|s| s["detail"]["learn"]["kernel"] == true);
    let would: Vec<&Value> = learned
        .iter()
        .filter(|r| r["decision"] == "would_deny")
        .collect();
    report(&format!(
        "{} learn: --learn, benign {}/{}, would_deny {}, kernel learns {kernel_learns}",
        host.name(),
        worked(&run, host),
        benign_expect(host).len(),
        would.len()
    ));
    if !kernel_learns {
        return;
    }
    assert_eq!(
        worked(&run, host),
        benign_expect(host).len(),
        "under --learn the session works\n{}",
        run.describe()
    );
    let egress = format!("\"port\":{}", w.port());
    assert!(
        would
            .iter()
            .any(|r| r["reason"] == "egress_not_allowed"
                && r["detail"].to_string().contains(&egress)),
        "the model endpoint is learned: {would:#?}"
    );

    let suggested = w.dir.join("suggested.json");
    let s = Command::new(crate::gatewayd())
        .args(["policy", "suggest"])
        .arg(&learned_log)
        .arg("--policy")
        .arg(&empty_policy)
        .arg("--out")
        .arg(&suggested)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&s.stdout).into_owned();
    assert!(s.status.success(), "suggest: {s:?}");
    std::fs::copy(&suggested, w.policy()).unwrap();
    assert!(
        !std::fs::read_to_string(w.policy())
            .unwrap()
            .contains(".ssh"),
        "never the home's keys"
    );

    w.learn = false;
    fresh(&w);
    let run = w.run();
    let refused: Vec<Value> = records(&w.audit())
        .into_iter()
        .filter(|r| matches!(r["decision"].as_str(), Some("deny" | "would_deny")))
        .collect();
    let again = Command::new(crate::gatewayd())
        .args(["policy", "suggest", "--json"])
        .arg(w.audit())
        .arg("--policy")
        .arg(w.policy())
        .output()
        .unwrap();
    assert!(again.status.success(), "suggest: {again:?}");
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    let rules: std::collections::BTreeSet<String> = again["suggestions"]["not_proposed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| format!("{} {}", n["rule"], n["object"]))
        .collect();
    report(&format!(
        "{} learn: suggested policy, benign {}/{}, refusals {}, not proposed: {rules:?}",
        host.name(),
        worked(&run, host),
        benign_expect(host).len(),
        refused.len()
    ));
    assert_eq!(
        again["suggestions"]["proposals"],
        json!([]),
        "nothing more to propose under the suggested policy: {refused:#?}\nsuggest said:\n{listing}"
    );
    assert_eq!(
        worked(&run, host),
        benign_expect(host).len(),
        "{}\nsuggest said:\n{listing}",
        run.describe()
    );
}

#[test]
fn claude_learns_a_policy_it_then_runs_under() {
    round_trip(Host::Claude);
}

#[test]
fn codex_learns_a_policy_it_then_runs_under() {
    round_trip(Host::Codex);
}

#[test]
fn gemini_learns_a_policy_it_then_runs_under() {
    round_trip(Host::Gemini);
}
