//! The OCSF class a record maps to, where one fits (docs/FLEET.md, "OCSF classes"): a tool
//! call's decision is API Activity; a kernel denial is File System, Process or Network
//! Activity by the hook that denied; the daemon's start and stop are Application
//! Lifecycle. Other records (sessions, reloads, export notes) have no class.
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

/// The OCSF attributes of a record: class and category, the disposition of a decision, a
/// severity. Its fields are declared in byte order, so that serde's output is the canonical
/// JSON of the exported line (sorted keys, no spaces) without building a map first.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(super) struct Attributes {
    category_name: &'static str,
    category_uid: u32,
    class_name: &'static str,
    class_uid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    disposition: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disposition_id: Option<u32>,
    severity_id: u32,
}

/// Every class [`class`] gives, and every decision: the keys of [`attributes_json`]'s table.
const CLASSES: [Class; 5] = [
    API_ACTIVITY,
    APPLICATION_LIFECYCLE,
    FILE_SYSTEM_ACTIVITY,
    PROCESS_ACTIVITY,
    NETWORK_ACTIVITY,
];
const DECISIONS: [Decision; 5] = [
    Decision::Allow,
    Decision::Deny,
    Decision::WouldDeny,
    Decision::Hold,
    Decision::Info,
];

/// The OCSF attributes of `r`; None when no class fits. (The exporters take them from
/// [`attributes_json`]'s table.)
#[cfg(test)]
pub(super) fn attributes(r: &Record) -> Option<Attributes> {
    Some(attributes_of(class(r)?, r.decision))
}

/// The JSON (canonical: sorted keys, no spaces) of the OCSF attributes of a record of class
/// `c` and `decision`. They depend only on those two, so each of the 25 is serialized once,
/// for the life of the process.
pub(super) fn attributes_json(c: Class, decision: Decision) -> &'static str {
    static TABLE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        CLASSES
            .iter()
            .flat_map(|c| DECISIONS.iter().map(|d| attributes_of(*c, *d)))
            .map(|a| serde_json::to_string(&a).unwrap_or_default())
            .collect()
    });
    // Every class `class` gives and every decision are keys of the table (a test holds the
    // table to serde's output for each), so the fallbacks are never taken.
    let at = CLASSES.iter().position(|k| *k == c).unwrap_or(0) * DECISIONS.len()
        + DECISIONS.iter().position(|d| *d == decision).unwrap_or(0);
    table.get(at).map_or("{}", String::as_str)
}

fn attributes_of(c: Class, decision: Decision) -> Attributes {
    let (disposition_id, disposition, severity_id) = match decision {
        Decision::Allow => (1, "Allowed", 1),
        Decision::Deny => (2, "Blocked", 3),
        Decision::WouldDeny => (15, "Detected", 2),
        Decision::Hold => (99, "Held for approval", 2),
        Decision::Info => (0, "Unknown", 1),
    };
    let decided = decision != Decision::Info;
    Attributes {
        category_name: c.category,
        category_uid: c.category_uid,
        class_name: c.name,
        class_uid: c.uid,
        disposition: decided.then_some(disposition),
        disposition_id: decided.then_some(disposition_id),
        severity_id,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use gatewayd_core::audit::canonical_json;

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
        let a =
            serde_json::to_value(attributes(&rec(Source::Gateway, Some("t"), None, "x"))).unwrap();
        assert_eq!(a["disposition"], "Blocked");
        assert_eq!(a["class_name"], "API Activity");
        assert!(attributes(&rec(Source::Gateway, None, None, "session_open")).is_none());
    }

    #[test]
    fn the_table_of_attributes_is_what_serde_writes_for_each_record() {
        let hooks = [
            None,
            Some("lsm/file_open"),
            Some("cgroup/connect4"),
            Some("seccomp"),
        ];
        for d in DECISIONS {
            for (source, tool, hook, reason) in [
                (Source::Gateway, Some("t"), None, "x"),
                (Source::Gateway, None, None, "daemon_stop"),
                (Source::Gateway, None, None, "session_open"),
            ]
            .into_iter()
            .chain(hooks.map(|h| (Source::Kernel, None, h, "x")))
            {
                let mut r = rec(source, tool, hook, reason);
                r.decision = d;
                let want = attributes(&r).map(|a| serde_json::to_string(&a).unwrap());
                let table = class(&r).map(|c| attributes_json(c, r.decision));
                assert_eq!(table, want.as_deref(), "{r:?}");
            }
        }
    }

    #[test]
    fn the_attributes_serialize_as_canonical_json() {
        let mut lifecycle = rec(Source::Gateway, None, None, "daemon_start");
        lifecycle.decision = Decision::Info;
        for r in [
            rec(Source::Gateway, Some("t"), None, "x"),
            rec(Source::Kernel, None, Some("lsm/file_open"), "x"),
            lifecycle,
        ] {
            let a = attributes(&r).unwrap();
            let line = serde_json::to_string(&a).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(line, canonical_json(&v), "not canonical: {line}");
            assert_eq!(v.get("disposition").is_some(), r.decision != Decision::Info);
        }
        assert_eq!(
            serde_json::to_value(attributes(&rec(Source::Kernel, None, Some("seccomp"), "x")))
                .unwrap(),
            json!({"category_name": "System Activity", "category_uid": 1,
                   "class_name": "Process Activity", "class_uid": 1007,
                   "disposition": "Blocked", "disposition_id": 2, "severity_id": 3})
        );
    }
}
