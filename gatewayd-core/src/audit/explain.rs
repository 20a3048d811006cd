//! What `gatewayd explain` says of a refusal: in plain words, the part of the policy that
//! caused it, and the smallest change that would allow it (or why no policy change can).
//! Built from the audit record alone (reason code, hook, tool, detail), so it explains a log
//! whatever the policy says now; [`Explanation::field`] is where to look in the policy.
use serde_json::Value;

/// One refusal, explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// What was refused, in plain words: who, what, on what.
    pub what: String,
    /// Why: the record's own message.
    pub why: String,
    /// The policy field that decided (`sandbox.protected`, `network.egress`, ...), as a path
    /// of keys from the top; empty when no field did (gatewayd's self-protection).
    pub field: Vec<&'static str>,
    /// The smallest change that would allow it, or what to do instead.
    pub change: String,
}

fn text<'a>(detail: &'a Value, key: &str) -> Option<&'a str> {
    detail.get(key).and_then(Value::as_str)
}

/// The object a record names: a path, an address and port, a socket, a peer.
pub(crate) fn object(detail: &Value) -> Option<String> {
    if let Some(p) = text(detail, "protected_path")
        .or_else(|| text(detail, "read_only_path"))
        .or_else(|| text(detail, "path"))
    {
        return Some(p.to_owned());
    }
    if let (Some(a), Some(p)) = (text(detail, "addr"), detail.get("port")) {
        return Some(format!("{a} port {p}"));
    }
    text(detail, "name")
        .or_else(|| text(detail, "from"))
        .map(str::to_owned)
}

/// The record's subject: the kernel's program and the process, or the gateway's tool; a
/// learn mode's `would_deny` "would have refused" (it was let through).
fn subject(record: &Value) -> String {
    let detail = &record["detail"];
    let refused = if record["decision"] == "would_deny" {
        "would have refused"
    } else {
        "refused"
    };
    match record["source"].as_str() {
        Some("kernel") => {
            let comm = text(detail, "comm").unwrap_or("a process");
            let pid = detail
                .get("pid")
                .map_or(String::new(), |p| format!(" (pid {p})"));
            let call = text(detail, "syscall").map_or(String::new(), |c| format!(" {c}"));
            format!("the kernel {refused} `{comm}`{pid}{call}")
        }
        _ => match record["tool"].as_str() {
            Some(t) => format!("the gateway {refused} a call to `{t}`"),
            None => format!("the gateway {refused}"),
        },
    }
}

/// The policy field and the change, by reason code.
fn advice(reason: &str, object: Option<&str>) -> (Vec<&'static str>, String) {
    let it = object.map_or("it".to_owned(), |o| format!("`{o}`"));
    let (field, change): (&[&'static str], String) = match reason {
        "protected_path" => (&["sandbox", "protected"], format!(
            "{it} is a protected path (a secret): only if the agent must read it, remove the entry that covers it from sandbox.protected")),
        "protected_name" => (&["sandbox", "protected_names"], format!(
            "{it} has a protected name (a secret by its name, such as .env or a key): only if the agent must read it, remove the pattern that matches it from sandbox.protected_names")),
        "outside_readable" => (&["sandbox", "readable"], format!("add a directory that holds {it} to sandbox.readable")),
        "outside_writable" => (&["sandbox", "writable"], format!("add a directory that holds {it} to sandbox.writable")),
        "read_only_path" | "read_only_name" => (&["sandbox", "read_only"], format!(
            "{it} is read-only so that the user's own tools do not run what the agent wrote; to let the agent change it, take it out of sandbox.read_only, or set sandbox.read_only_defaults to false for the built-in ones (git's config and hooks, rc files)")),
        "exec_not_allowed" => (&["sandbox", "exec"], format!("add the program {it} to sandbox.exec")),
        "exec_listed" => (&["sandbox", "exec"], "the file is on the exec allowlist, so it is kept from being changed: leave it, or take it off sandbox.exec".to_owned()),
        "egress_not_allowed" => (&["network", "egress"], format!("add the destination {it} to network.egress (`{{\"host\": NAME, \"port\": PORT}}` or `{{\"cidr\": \"ADDR/32\", \"port\": PORT}}`)")),
        "egress_lockdown" | "trifecta" => (&["trifecta"], "the session holds untrusted input and private data together (the Rule of Two): its egress stays closed; start a new session for work that sends data out, or set trifecta to hold so a person approves such a call".to_owned()),
        "unix_connect" => (&["network", "unix"], format!("add the socket {it} to network.unix")),
        "inbound_not_allowed" => (&[], "connections from outside the host to the agent are never let in: serve on loopback only".to_owned()),
        "self_protection" | "signal_outside_session" | "exec_unlinked" | "unresolvable" => (&[], "gatewayd refuses this to every agent to protect itself and the host: no policy change allows it".to_owned()),
        "not_allowlisted" => (&["tools"], "add an entry for the tool to tools (`gatewayd policy add-mcp` for an MCP server's tools)".to_owned()),
        "rug_pull" => (&["tools"], "the tool's definition changed since it was pinned: review the new one, then `gatewayd policy pin P --from LISTING`".to_owned()),
        "description_scan" => (&["tools"], "the tool's description looks like an instruction to the model: review it; pin it only if it is harmless".to_owned()),
        "missing_scope" => (&["tools"], "the session lacks a scope the tool needs: open the session with that scope (`--scope`), or take it off the tool's scopes".to_owned()),
        "arg_rule" => (&["tools"], "an argument broke the tool's schema or argument rules, or a deny rule matched: change the call, or the rule the message names".to_owned()),
        "sandbox" => (&["sandbox"], "a path argument is protected or outside the roots, or a URL's host is not in network.egress: the message names which".to_owned()),
        "shell" => (&["sandbox", "exec"], "the command line runs a program not allowed or does what is known only when it runs: write it as plain commands, or add the program to the shell tool's exec list".to_owned()),
        "rate_limit" | "budget" | "action_limit" => (&["limits"], "a limit of the session was reached: wait, start a new session, or raise the limit in limits".to_owned()),
        "untrusted_echo" => (&["tools"], "the arguments repeat untrusted text word for word: rephrase, or set echo_ok on a tool that legitimately quotes".to_owned()),
        "canary" => (&["canaries"], "a decoy credential gatewayd placed for the agent was sent out: treat the session as compromised (its egress is closed); find out what led the agent to send it (the records before this one) before running that work again".to_owned()),
        "secret_egress" => (&["secrets"], "a secret was about to leave: take it out of the call".to_owned()),
        "approval_required" => (&[], "a person must approve: `gatewayd approvals list`, then `gatewayd approvals approve ID`".to_owned()),
        "approval_denied" => (&[], "the approval given is unknown, used, expired, rejected or for another call: ask for a new one".to_owned()),
        _ => (&[], "see the reason code in docs/POLICY.md (Reason codes) or docs/KERNEL.md (Programs)".to_owned()),
    };
    (field.to_vec(), change)
}

/// The gateway's `sandbox` refusals by what their message says (the roots, a protected
/// path, egress), so each names its own field; any other reason as it is.
pub(crate) fn sandbox_kind<'a>(reason: &'a str, message: &str) -> &'a str {
    if reason != "sandbox" {
        return reason;
    }
    if message.contains("egress allowlist") {
        "egress_not_allowed"
    } else if message.contains("writable root") {
        "outside_writable"
    } else if message.contains("readable root") {
        "outside_readable"
    } else if message.contains("sandbox.protected_names") {
        "protected_name"
    } else if message.contains("protected") {
        "protected_path"
    } else if message.contains("read-only") {
        "read_only_path"
    } else {
        reason
    }
}

/// Whether the record is a refusal `gatewayd explain` lists (a denial, a held call, or a
/// refusal learn mode let through: `would_deny`).
pub fn is_refusal(record: &Value) -> bool {
    matches!(
        record["decision"].as_str(),
        Some("deny" | "hold" | "would_deny")
    ) && record["reason"] != "denials_aggregated"
}

/// Explains one refusal record.
pub fn explain(record: &Value) -> Explanation {
    let detail = &record["detail"];
    let reason = record["reason"].as_str().unwrap_or("unknown");
    let object = object(detail);
    let what = match &object {
        Some(o) => format!("{} on `{o}` ({reason})", subject(record)),
        None => format!("{} ({reason})", subject(record)),
    };
    let why = text(detail, "message").unwrap_or("");
    let (field, change) = advice(sandbox_kind(reason, why), object.as_deref());
    Explanation {
        what,
        why: why.to_owned(),
        field,
        change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kernel_refusal_names_the_process_the_path_and_the_field() {
        let r = json!({"source": "kernel", "decision": "deny", "reason": "read_only_path",
            "hook": "raw_tp/sys_exit", "detail": {"comm": "sh", "pid": 7, "syscall": "openat",
            "path": ".git/config", "message": "this path is read-only"}});
        let e = explain(&r);
        assert_eq!(
            e.what,
            "the kernel refused `sh` (pid 7) openat on `.git/config` (read_only_path)"
        );
        assert_eq!(e.field, ["sandbox", "read_only"]);
        assert!(e.change.contains("read_only_defaults"), "{}", e.change);
        assert_eq!(e.why, "this path is read-only");
    }

    #[test]
    fn egress_names_the_destination_and_self_protection_no_change() {
        let r = json!({"source": "kernel", "decision": "deny", "reason": "egress_not_allowed",
            "detail": {"comm": "curl", "addr": "203.0.113.9", "port": 443}});
        let e = explain(&r);
        assert!(e.what.contains("`203.0.113.9 port 443`"), "{}", e.what);
        assert_eq!(e.field, ["network", "egress"]);
        let r = json!({"source": "kernel", "decision": "deny", "reason": "self_protection",
            "detail": {}});
        let e = explain(&r);
        assert!(e.field.is_empty() && e.change.contains("no policy change"));
    }

    #[test]
    fn gateway_refusals_and_what_is_not_one() {
        let r = json!({"source": "gateway", "decision": "deny", "reason": "not_allowlisted",
            "tool": "send_email", "detail": {"message": "not in the policy"}});
        let e = explain(&r);
        assert_eq!(
            e.what,
            "the gateway refused a call to `send_email` (not_allowlisted)"
        );
        assert_eq!(e.field, ["tools"]);
        assert!(is_refusal(&r));
        let hold = json!({"decision": "hold", "reason": "approval_required"});
        assert!(is_refusal(&hold));
        assert!(explain(&hold).change.contains("approvals approve"));
        assert!(!is_refusal(
            &json!({"decision": "allow", "reason": "allowed"})
        ));
        assert!(!is_refusal(
            &json!({"decision": "deny", "reason": "denials_aggregated"})
        ));
    }

    #[test]
    fn a_learn_mode_would_deny_is_listed_as_would_have_been_refused() {
        let r = json!({"source": "gateway", "decision": "would_deny", "reason": "not_allowlisted",
            "tool": "send_email", "detail": {"message": "not in the policy"}});
        assert!(is_refusal(&r));
        assert_eq!(
            explain(&r).what,
            "the gateway would have refused a call to `send_email` (not_allowlisted)"
        );
        let k = json!({"source": "kernel", "decision": "would_deny", "reason": "exec_not_allowed",
            "detail": {"comm": "sh", "path": "/usr/bin/make"}});
        assert!(
            explain(&k)
                .what
                .starts_with("the kernel would have refused `sh`")
        );
        assert!(!is_refusal(
            &json!({"decision": "would_deny", "reason": "denials_aggregated"})
        ));
    }

    #[test]
    fn a_gateway_sandbox_refusal_names_the_field_its_message_points_at() {
        let r = |m: &str| {
            json!({"source": "gateway", "decision": "deny", "reason": "sandbox",
                   "tool": "fetch_url", "detail": {"message": m}})
        };
        let e = explain(&r(
            "`url`: destination evil.example:443 is not in the network egress allowlist",
        ));
        assert_eq!(e.field, ["network", "egress"]);
        let e = explain(&r("`path`: outside every writable root of the sandbox"));
        assert_eq!(e.field, ["sandbox", "writable"]);
        assert_eq!(explain(&r("something else")).field, ["sandbox"]);
    }
}
