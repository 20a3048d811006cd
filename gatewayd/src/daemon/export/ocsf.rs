//! The OCSF class a record maps to, where one fits (docs/FLEET.md, "OCSF classes"): a tool
//! call's decision is API Activity; a kernel denial is File System, Process or Network
//! Activity by the hook that denied; the daemon's start and stop are Application
//! Lifecycle. Other records (sessions, reloads, export notes) have no class.
use serde_json::{Value, json};

use gatewayd_core::audit::{Decision, Record, Source};

/// An OCSF class: uid, name, category uid and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Class {
    pub(super) uid: u32,
    pub(super) name: &'static str,
    category_uid: u32,
    category: &'static str,
}

const API_ACTIVITY: Class = Class {
    uid: 6003,
    name: "API Activity",
    category_uid: 6,
    category: "Application Activity",
};
const APPLICATION_LIFECYCLE: Class = Class {
    uid: 6002,
    name: "Application Lifecycle",
    category_uid: 6,
    category: "Application Activity",
};
const FILE_SYSTEM_ACTIVITY: Class = Class {
    uid: 1001,
    name: "File System Activity",
    category_uid: 1,
    category: "System Activity",
};
const PROCESS_ACTIVITY: Class = Class {
    uid: 1007,
    name: "Process Activity",
    category_uid: 1,
    category: "System Activity",
};
const NETWORK_ACTIVITY: Class = Class {
    uid: 4001,
    name: "Network Activity",
    category_uid: 4,
    category: "Network Activity",
};

/// The class of `r`, if one fits.
pub(super) fn class(r: &Record) -> Option<Class> {
    match r.source {
        Source::Gateway if r.tool.is_some() && r.decision != Decision::Info => Some(API_ACTIVITY),
        Source::Gateway => match r.reason.as_str() {
            "daemon_start" | "daemon_stop" => Some(APPLICATION_LIFECYCLE),
            _ => None,
        },
        Source::Kernel => Some(kernel_class(r.hook.as_deref().unwrap_or(""))),
    }
}

fn kernel_class(hook: &str) -> Class {
    let network = hook.starts_with("cgroup/")
        || hook.starts_with("cgroup_skb/")
        || hook.starts_with("lsm/unix_")
        || hook.starts_with("lsm/socket");
    let process = [
        "lsm/bprm_check_security",
        "lsm/task_kill",
        "lsm/ptrace_access_check",
        "lsm/mmap_file",
        "lsm/file_mprotect",
        "seccomp",
    ]
    .contains(&hook);
    if network {
        NETWORK_ACTIVITY
    } else if process {
        PROCESS_ACTIVITY
    } else {
        FILE_SYSTEM_ACTIVITY
    }
}

/// The OCSF attributes of `r` (null when no class fits): class and category, the
/// disposition of a decision, a severity.
pub(super) fn attributes(r: &Record) -> Value {
    let Some(c) = class(r) else {
        return Value::Null;
    };
    let (disposition_id, disposition, severity_id) = match r.decision {
        Decision::Allow => (1, "Allowed", 1),
        Decision::Deny => (2, "Blocked", 3),
        Decision::WouldDeny => (15, "Detected", 2),
        Decision::Hold => (99, "Held for approval", 2),
        Decision::Info => (0, "Unknown", 1),
    };
    let mut v = json!({
        "class_uid": c.uid,
        "class_name": c.name,
        "category_uid": c.category_uid,
        "category_name": c.category,
        "severity_id": severity_id,
    });
    if r.decision != Decision::Info
        && let Some(m) = v.as_object_mut()
    {
        m.insert("disposition_id".into(), disposition_id.into());
        m.insert("disposition".into(), disposition.into());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(source: Source, tool: Option<&str>, hook: Option<&str>, reason: &str) -> Record {
        Record {
            seq: 1,
            prev: String::new(),
            ts: String::new(),
            source,
            session: "s".into(),
            tool: tool.map(str::to_owned),
            hook: hook.map(str::to_owned),
            decision: if source == Source::Kernel || tool.is_some() {
                Decision::Deny
            } else {
                Decision::Info
            },
            reason: reason.into(),
            detail: json!({}),
            hash: String::new(),
        }
    }

    #[test]
    fn classes_by_layer_and_hook() {
        let k = |hook| class(&rec(Source::Kernel, None, Some(hook), "x")).map(|c| c.uid);
        assert_eq!(k("cgroup/connect4"), Some(4001));
        assert_eq!(k("lsm/unix_stream_connect"), Some(4001));
        assert_eq!(k("lsm/bprm_check_security"), Some(1007));
        assert_eq!(k("lsm/file_open"), Some(1001));
        assert_eq!(k("landlock"), Some(1001));
        let g = |tool, reason| class(&rec(Source::Gateway, tool, None, reason)).map(|c| c.uid);
        assert_eq!(g(Some("send_email"), "sandbox"), Some(6003));
        assert_eq!(g(None, "daemon_start"), Some(6002));
        assert_eq!(g(None, "session_open"), None);
        let a = attributes(&rec(Source::Gateway, Some("t"), None, "x"));
        assert_eq!(a["disposition"], "Blocked");
        assert_eq!(a["class_name"], "API Activity");
        assert!(attributes(&rec(Source::Gateway, None, None, "session_open")).is_null());
    }
}
