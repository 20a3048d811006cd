//! `suggest` on whole logs: grouping and folding, counts with aggregated records, learn
//! mode's `would_deny`, and what is never proposed.
use std::path::Path;

use serde_json::{Value, json};

use super::*;

fn policy(v: Value) -> Policy {
    let mut v = v;
    v["version"] = json!(1);
    Policy::parse(&v.to_string(), Path::new("p.json")).unwrap()
}

fn kernel(reason: &str, detail: Value) -> Value {
    json!({"session": "s1", "source": "kernel", "hook": "landlock", "decision": "deny",
           "reason": reason, "detail": detail})
}

fn values(s: &Suggestions, field: &str) -> Vec<Value> {
    s.proposals
        .iter()
        .filter(|p| p.field == field)
        .map(|p| p.value.clone())
        .collect()
}

#[test]
fn files_are_grouped_under_their_smallest_sensible_directory_with_counts() {
    let log = vec![
        kernel("outside_readable", json!({"path": "/etc/ssl/openssl.cnf"})),
        kernel(
            "outside_readable",
            json!({"path": "/etc/ssl/certs/ca-certificates.crt"}),
        ),
        kernel(
            "outside_readable",
            json!({"path": "/home/u/.config/app/a.json"}),
        ),
        kernel(
            "outside_readable",
            json!({"path": "/home/u/.config/app/b/c.json"}),
        ),
        kernel(
            "outside_readable",
            json!({"path": "/usr/lib/node_modules/@x/cli/cli.js"}),
        ),
        kernel(
            "outside_writable",
            json!({"path": "/home/u/.claude/projects/p.jsonl"}),
        ),
        kernel("outside_writable", json!({"path": "/tmp/x"})),
        json!({"session": "s1", "source": "kernel", "hook": "landlock", "decision": "deny",
               "reason": "denials_aggregated",
               "detail": {"reason": "outside_readable", "object": "/etc/ssl/openssl.cnf", "count": 40}}),
    ];
    let s = suggest(
        &log,
        None,
        &policy(json!({"sandbox": {"root": "/w", "readable": ["/w"]}})),
    );
    assert_eq!(
        values(&s, "sandbox.readable"),
        [
            json!("/home/u/.config/app"),
            json!("/usr/lib/node_modules"),
            json!("/etc/ssl")
        ]
    );
    let ssl = s.proposals.iter().find(|p| p.value == "/etc/ssl").unwrap();
    assert_eq!(
        (ssl.count, ssl.group),
        (42, Group::System),
        "the aggregated 40 counted"
    );
    assert_eq!(ssl.examples.len(), 2);
    let app = s
        .proposals
        .iter()
        .find(|p| p.value == "/home/u/.config/app")
        .unwrap();
    assert_eq!((app.count, app.group), (2, Group::HostConfig));
    assert_eq!(values(&s, "sandbox.writable"), [json!("/home/u/.claude")]);
    assert_eq!(values(&s, "sandbox.private_tmp"), [json!(true)]);
    assert_eq!((s.refusals, s.unattributed), (47, 0));
}

#[test]
fn a_learn_mode_would_deny_is_read_as_a_denial_and_other_decisions_are_not() {
    let mut r = kernel(
        "egress_not_allowed",
        json!({"addr": "203.0.113.9", "port": 443}),
    );
    r["decision"] = json!("would_deny");
    let mut allowed = kernel(
        "egress_not_allowed",
        json!({"addr": "198.51.100.1", "port": 443}),
    );
    allowed["decision"] = json!("allow");
    let s = suggest(&[r, allowed], None, &policy(json!({})));
    assert_eq!(
        values(&s, "network.egress"),
        [json!({"cidr": "203.0.113.9/32", "port": 443})]
    );
    assert!(
        values(&s, "network.proxy").is_empty(),
        "an address needs no name"
    );
}

#[test]
fn a_name_proposes_egress_by_name_unless_the_policy_turned_it_off() {
    let mut r = kernel(
        "egress_not_allowed",
        json!({"addr": "192.0.2.31", "port": 443, "host": "api.example", "via": "egress_proxy"}),
    );
    r["decision"] = json!("would_deny");
    let log = [r];
    let s = suggest(&log, None, &policy(json!({})));
    assert_eq!(
        values(&s, "network.egress"),
        [json!({"host": "api.example", "port": 443})]
    );
    assert_eq!(values(&s, "network.proxy"), [json!(true)]);
    let off = policy(json!({"network": {"proxy": false}}));
    assert!(values(&suggest(&log, None, &off), "network.proxy").is_empty());
    let text = apply::apply("{\"version\": 1}", &s.proposals).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["network"]["proxy"], json!(true), "{text}");
    assert_eq!(v["network"]["egress"][0]["host"], "api.example", "{text}");
}

#[test]
fn gateway_refusals_give_egress_names_and_held_tools_and_a_session_is_chosen() {
    let gw = |session: &str, tool: &str, reason: &str, message: &str| {
        json!({"session": session, "source": "gateway", "tool": tool, "decision": "deny",
               "reason": reason, "detail": {"message": message, "arg_names": ["path"]}})
    };
    let log = vec![
        gw(
            "a",
            "fetch",
            "sandbox",
            "`url`: destination docs.example:443 is not in the network egress allowlist",
        ),
        gw("a", "read_file", "not_allowlisted", "not in the registry"),
        gw(
            "b",
            "fetch",
            "sandbox",
            "`url`: destination other.example:443 is not in the network egress allowlist",
        ),
    ];
    let s = suggest(&log, Some("a"), &policy(json!({})));
    assert_eq!(s.sessions, ["a"]);
    assert_eq!(
        values(&s, "network.egress"),
        [json!({"host": "docs.example", "port": 443})]
    );
    assert_eq!(
        values(&s, "tools"),
        [
            json!({"name": "read_file", "description": "", "default": "hold", "args": {"path": {"path": "read"}}})
        ]
    );
}

/// Each never-propose rule, end to end: the refusal is listed as not proposed, with its rule,
/// and nothing is proposed for it.
#[test]
fn protected_secret_self_protection_and_rule_of_two_are_never_proposed() {
    let p = policy(
        json!({"sandbox": {"root": "/w", "protected": ["/srv/keys"], "protected_names": ["*.token"]}}),
    );
    let cases = [
        (
            kernel("outside_readable", json!({"path": "/srv/keys/a"})),
            Rule::ProtectedPath,
        ),
        (
            kernel("outside_readable", json!({"path": "/w/sub/api.token"})),
            Rule::ProtectedName,
        ),
        (
            kernel("protected_path", json!({"protected_path": "/srv/keys"})),
            Rule::ProtectedPath,
        ),
        (
            kernel("protected_name", json!({"path": "/w/.env"})),
            Rule::ProtectedName,
        ),
        (
            kernel("outside_readable", json!({"path": "/home/u/.ssh/config"})),
            Rule::Secret,
        ),
        (
            kernel(
                "egress_not_allowed",
                json!({"addr": "169.254.169.254", "port": 80}),
            ),
            Rule::Secret,
        ),
        (
            kernel("self_protection", json!({"target_pid": 1})),
            Rule::SelfProtection,
        ),
        (
            kernel(
                "outside_readable",
                json!({"path": "/run/gatewayd/gatewayd.sock"}),
            ),
            Rule::SelfProtection,
        ),
        (
            kernel(
                "egress_lockdown",
                json!({"addr": "203.0.113.9", "port": 443}),
            ),
            Rule::RuleOfTwo,
        ),
        (
            json!({"session": "s1", "source": "gateway", "tool": "send", "decision": "deny",
                "reason": "trifecta", "detail": {}}),
            Rule::RuleOfTwo,
        ),
    ];
    for (record, rule) in cases {
        let s = suggest(std::slice::from_ref(&record), None, &p);
        assert!(s.proposals.is_empty(), "{record}: {:?}", s.proposals);
        assert_eq!(s.not_proposed.len(), 1, "{record}");
        assert_eq!(s.not_proposed[0].rule, rule, "{record}");
    }
}

#[test]
fn what_the_policy_already_allows_is_said_not_proposed() {
    let p = policy(json!({"sandbox": {"root": "/w", "readable": ["/etc/ssl"]}}));
    let s = suggest(
        &[kernel("outside_readable", json!({"path": "/etc/ssl/x"}))],
        None,
        &p,
    );
    assert!(s.proposals.is_empty());
    assert_eq!(s.not_proposed[0].rule, Rule::AlreadyAllowed);
}

/// A kernel `would_deny` of tier 2's learn mode (`fanotify/learn`), as `gatewayd run --learn`
/// writes it.
fn learned(reason: &str, access: &str, path: &str) -> Value {
    json!({"session": "s1", "source": "kernel", "hook": "fanotify/learn",
           "decision": "would_deny", "reason": reason,
           "detail": {"path": path, "access": access, "pid": 7, "channel": "fanotify"}})
}

#[test]
fn a_kernel_learn_session_gives_reads_writes_exec_and_addresses_never_a_secret() {
    let mut egress = kernel(
        "egress_not_allowed",
        json!({"addr": "203.0.113.9", "port": 443}),
    );
    egress["decision"] = json!("would_deny");
    egress["hook"] = json!("cgroup/connect4");
    let log = vec![
        learned("outside_readable", "read", "/etc/ssl/openssl.cnf"),
        learned("outside_readable", "read", "/home/u/.config/tool/a.json"),
        // A file written is opened first: its read folds into the write.
        learned("outside_readable", "read", "/home/u/.cache/tool/db"),
        learned("outside_writable", "write", "/home/u/.cache/tool/db"),
        // A program run is opened first too: its read folds into the exec entry.
        learned("outside_readable", "read", "/usr/bin/true"),
        learned("exec_not_allowed", "exec", "/usr/bin/true"),
        egress,
        // What learn mode at tier 2 never lets through, recorded as the kernel refused it.
        kernel(
            "protected_path",
            json!({"path": "/home/u/.ssh/id_ed25519", "protected_path": "/home/u/.ssh"}),
        ),
        // A secret by its name, were it ever recorded outside the roots.
        learned("outside_readable", "read", "/srv/app/.env"),
    ];
    let s = suggest(
        &log,
        None,
        &policy(
            json!({"sandbox": {"root": "/w", "readable": ["/w"], "writable": ["/w"],
                                   "exec": ["/usr/bin/env"],
                                   "protected": ["/home/u/.ssh"]}}),
        ),
    );
    assert_eq!(
        values(&s, "sandbox.readable"),
        [json!("/home/u/.config/tool"), json!("/etc/ssl")]
    );
    assert_eq!(
        values(&s, "sandbox.writable"),
        [json!("/home/u/.cache/tool")]
    );
    let cache = s
        .proposals
        .iter()
        .find(|p| p.field == "sandbox.writable")
        .unwrap();
    assert_eq!(cache.count, 2, "the read folded into the write");
    assert_eq!(values(&s, "sandbox.exec"), [json!("/usr/bin/true")]);
    assert_eq!(
        values(&s, "network.egress"),
        [json!({"cidr": "203.0.113.9/32", "port": 443})]
    );
    let groups: Vec<Group> = s.proposals.iter().map(|p| p.group).collect();
    assert!(groups.is_sorted(), "{groups:?}");
    let never: Vec<(Rule, &str)> = s
        .not_proposed
        .iter()
        .map(|n| (n.rule, n.object.as_str()))
        .collect();
    assert!(
        never.contains(&(Rule::ProtectedPath, "/home/u/.ssh")),
        "{never:?}"
    );
    assert!(
        never.contains(&(Rule::Secret, "/srv/app/.env")),
        "{never:?}"
    );
    let proposed = serde_json::to_string(&s.proposals).unwrap();
    assert!(
        !proposed.contains(".ssh") && !proposed.contains(".env"),
        "{proposed}"
    );
}

/// A tool server's refusals (session `mcp:NAME`, from `gatewayd mcp --learn`) are weighed
/// against its own profile and proposed into it; the agent's go into the policy itself.
#[test]
fn a_tool_servers_refusals_are_proposed_into_its_profile() {
    let server = |reason: &str, path: &str| {
        json!({"session": "mcp:fs", "source": "kernel", "hook": "fanotify/learn",
               "decision": "would_deny", "reason": reason, "detail": {"path": path}})
    };
    let log = vec![
        server("outside_readable", "/etc/ssl/openssl.cnf"),
        server("outside_readable", "/srv/data/a.txt"),
        server("outside_writable", "/tmp/npm-1/x"),
        server("outside_readable", "/w/secret.pem"),
        kernel("outside_readable", json!({"path": "/opt/tool/lib.so"})),
        json!({"session": "mcp:unknown", "source": "kernel", "hook": "fanotify/learn",
               "decision": "would_deny", "reason": "outside_readable",
               "detail": {"path": "/var/lib/x/y"}}),
    ];
    let p = policy(
        json!({"sandbox": {"root": "/w", "readable": ["/w", "/srv"]},
        "mcp_servers": {"fs": {"sandbox": {"readable": ["/w"], "protected": ["/w/secret.pem"]}}}}),
    );
    let s = suggest(&log, None, &p);
    let of = |server: Option<&str>, field: &str| -> Vec<Value> {
        s.proposals
            .iter()
            .filter(|x| x.server.as_deref() == server && x.field == field)
            .map(|x| x.value.clone())
            .collect()
    };
    // The agent's policy reads /srv; the server's profile does not: proposed for the server.
    let fs_reads = of(Some("fs"), "sandbox.readable");
    assert!(fs_reads.contains(&json!("/etc/ssl")), "{s:#?}");
    assert!(fs_reads.contains(&json!("/srv/data")), "{s:#?}");
    // No private /tmp for a server: its /tmp path is a writable path of its own.
    assert!(of(Some("fs"), "sandbox.private_tmp").is_empty(), "{s:#?}");
    assert_eq!(of(Some("fs"), "sandbox.writable").len(), 1, "{s:#?}");
    // The server's protected file is never proposed.
    assert!(
        s.not_proposed
            .iter()
            .any(|n| n.server.as_deref() == Some("fs") && n.rule == Rule::ProtectedPath),
        "{s:#?}"
    );
    // The agent's own refusal, and a server the policy does not name, go to the policy.
    let agent = of(None, "sandbox.readable");
    assert!(agent.contains(&json!("/opt/tool")), "{s:#?}");
    assert!(
        agent
            .iter()
            .any(|v| v.as_str().is_some_and(|p| p.starts_with("/var/lib/x"))),
        "{s:#?}"
    );
    // And the drafted text holds the server's entries in its profile.
    let text = serde_json::to_string_pretty(&json!({"version": 1,
        "sandbox": {"root": "/w", "readable": ["/w", "/srv"]},
        "mcp_servers": {"fs": {"sandbox": {"readable": ["/w"], "protected": ["/w/secret.pem"]}}}}))
    .unwrap();
    let drafted: Value = serde_json::from_str(&apply::apply(&text, &s.proposals).unwrap()).unwrap();
    let readable = &drafted["mcp_servers"]["fs"]["sandbox"]["readable"];
    assert!(
        readable.as_array().unwrap().contains(&json!("/etc/ssl")),
        "{drafted}"
    );
}

/// A name made, removed or renamed is proposed by its directory (what the kernel judges it
/// by), and the name a rename made as a file; a directory listed by itself; a home, `/home`
/// or `/` as a whole never.
#[test]
fn names_and_listings_are_proposed_by_their_directory_never_a_whole_home() {
    let name = |dir: &str, path: &str| {
        json!({"session": "s1", "source": "kernel", "hook": "raw_tp/sys_exit",
               "decision": "would_deny", "reason": "outside_writable",
               "detail": {"directory": dir, "path": path, "resolved_path": path,
                          "syscall": "mkdir"}})
    };
    let mut renamed = name("/home/u", "/home/u/.claude.json.tmp.1");
    renamed["detail"]["syscall"] = json!("rename");
    renamed["detail"]["new_name"] = json!("/home/u/.claude.json");
    let log = vec![
        name("/home/u", "/home/u/.claude.json.lock"),
        renamed,
        name("/home/u/.cache/tool/tmp", "/home/u/.cache/tool/tmp/x"),
        learned("outside_readable", "read", "/etc/profile.d"),
        learned("outside_readable", "read", "/"),
        learned("outside_readable", "read", "/home"),
    ];
    let s = suggest(
        &log,
        None,
        &policy(json!({"sandbox": {"root": "/w", "readable": ["/w"], "writable": ["/w"]}})),
    );
    // The name a rename made is the file the host writes: proposed beside its directory.
    assert_eq!(
        values(&s, "sandbox.writable"),
        [json!("/home/u/.cache/tool"), json!("/home/u/.claude.json")]
    );
    assert_eq!(values(&s, "sandbox.readable"), [json!("/etc/profile.d")]);
    let whole: Vec<&str> = s
        .not_proposed
        .iter()
        .filter(|n| n.rule == Rule::WholeTree)
        .map(|n| n.object.as_str())
        .collect();
    assert_eq!(whole, ["/", "/home", "/home/u"], "{:?}", s.not_proposed);
}

/// A checkout under `/tmp` (the agent's programs there): what the agent read or ran from the
/// host's `/tmp` is proposed as paths, bound into a `/tmp` of the session's own, which holds
/// what it made elsewhere in `/tmp`; what it wrote below the checkout is the host's.
#[test]
fn what_the_agent_reads_or_runs_from_the_hosts_tmp_is_a_path_beside_a_private_tmp() {
    let log = vec![
        kernel(
            "outside_readable",
            json!({"path": "/tmp/co/target/release/tool"}),
        ),
        kernel(
            "exec_not_allowed",
            json!({"path": "/tmp/co/target/release/tool"}),
        ),
        kernel("outside_writable", json!({"path": "/tmp/co/notes.txt"})),
        kernel("outside_writable", json!({"path": "/tmp/scratch/out.txt"})),
        kernel("outside_writable", json!({"directory": "/tmp"})),
    ];
    let s = suggest(&log, None, &policy(json!({"sandbox": {"root": "/w"}})));
    assert_eq!(private_tmp_count(&s), 2, "{s:#?}");
    // Its write in the checkout covers it, its read folded into that.
    assert_eq!(values(&s, "sandbox.writable"), [json!("/tmp/co")], "{s:#?}");
    assert!(values(&s, "sandbox.readable").is_empty(), "{s:#?}");
    assert_eq!(
        values(&s, "sandbox.exec"),
        [json!("/tmp/co/target/release/tool")]
    );
    assert!(s.not_proposed.is_empty(), "{:?}", s.not_proposed);
}

/// What the agent wrote under `/tmp` and read back is its own: a `/tmp` of the session's own,
/// with no path of the host's `/tmp` beside it.
#[test]
fn what_the_agent_writes_and_reads_back_under_tmp_is_a_private_tmp() {
    let log = vec![
        kernel("outside_writable", json!({"directory": "/tmp/cli-1"})),
        kernel("outside_readable", json!({"path": "/tmp/cli-1/state.json"})),
        kernel("outside_writable", json!({"directory": "/tmp"})),
        kernel("outside_readable", json!({"path": "/tmp/made.txt"})),
    ];
    let s = suggest(&log, None, &policy(json!({"sandbox": {"root": "/w"}})));
    assert_eq!(private_tmp_count(&s), 4, "{s:#?}");
    assert!(values(&s, "sandbox.readable").is_empty(), "{s:#?}");
    assert!(values(&s, "sandbox.writable").is_empty(), "{s:#?}");
    assert!(s.not_proposed.is_empty(), "{:?}", s.not_proposed);
}

/// How many refusals the one `sandbox.private_tmp` proposal answers.
fn private_tmp_count(s: &Suggestions) -> u64 {
    let private: Vec<&Proposal> = s
        .proposals
        .iter()
        .filter(|p| p.field == "sandbox.private_tmp")
        .collect();
    assert_eq!(private.len(), 1, "{s:#?}");
    private[0].count
}
