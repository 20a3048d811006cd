//! Kernel denials as the audit log records them.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use gateway_common::{
    AF_INET, EV_BPF, EV_CONNECT4, EV_CONNECT6, EV_EXEC, EV_FILE_OPEN, EV_KILL, EV_MOUNT, EV_PTRACE,
    EV_RENAME, EV_RMDIR, EV_SENDMSG4, EV_SENDMSG6, EV_SETATTR, EV_UNLINK, Event,
    REASON_EGRESS_LOCKDOWN, REASON_EGRESS_NOT_ALLOWED, REASON_EXEC_NOT_ALLOWED,
    REASON_PROTECTED_PATH, REASON_SELF_PROTECTION, REASON_UNRESOLVABLE,
};
use serde_json::json;

use super::KernelSpec;

/// A decoded kernel denial.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// Program, e.g. `lsm/file_open` (the audit record's `hook`).
    pub hook: &'static str,
    /// Reason code (the audit record's `reason`).
    pub reason: &'static str,
    /// Specifics (the audit record's `detail`).
    pub detail: serde_json::Value,
}

/// Reads one event out of a ring-buffer item; `None` for a short item.
pub fn parse(item: &[u8]) -> Option<Event> {
    if item.len() < size_of::<Event>() {
        return None;
    }
    // SAFETY: Event is repr(C) plain data; length checked; read_unaligned copes with alignment.
    Some(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) })
}

/// A kernel `dev_t` (`MAJOR << 20 | MINOR`) as `major:minor`.
fn major_minor(dev: u32) -> String {
    format!("{}:{}", dev >> 20, dev & 0xfffff)
}

pub fn hook_name(kind: u32) -> &'static str {
    match kind {
        EV_FILE_OPEN => "lsm/file_open",
        EV_CONNECT4 => "cgroup/connect4",
        EV_CONNECT6 => "cgroup/connect6",
        EV_SENDMSG4 => "cgroup/sendmsg4",
        EV_SENDMSG6 => "cgroup/sendmsg6",
        EV_BPF => "lsm/bpf",
        EV_MOUNT => "lsm/sb_mount",
        EV_PTRACE => "lsm/ptrace_access_check",
        EV_KILL => "lsm/task_kill",
        EV_EXEC => "lsm/bprm_check_security",
        EV_UNLINK => "lsm/inode_unlink",
        EV_RMDIR => "lsm/inode_rmdir",
        EV_RENAME => "lsm/inode_rename",
        EV_SETATTR => "lsm/inode_setattr",
        _ => "unknown",
    }
}

pub fn reason_name(reason: u32) -> &'static str {
    match reason {
        REASON_PROTECTED_PATH => "protected_path",
        REASON_EGRESS_NOT_ALLOWED => "egress_not_allowed",
        REASON_EGRESS_LOCKDOWN => "egress_lockdown",
        REASON_UNRESOLVABLE => "unresolvable",
        REASON_SELF_PROTECTION => "self_protection",
        REASON_EXEC_NOT_ALLOWED => "exec_not_allowed",
        _ => "unknown",
    }
}

/// Decodes an event into what the audit log records, naming the protected path when the
/// matched inode is one of the spec's.
pub fn describe(ev: &Event, spec: &KernelSpec) -> Denial {
    let comm_len = ev
        .comm
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(ev.comm.len());
    let comm = String::from_utf8_lossy(&ev.comm[..comm_len]).into_owned();
    let hook = hook_name(ev.kind);
    let reason = reason_name(ev.reason);
    let mut detail = json!({ "pid": ev.pid, "comm": comm, "cgroup_id": ev.cgroup_id });
    if matches!(
        ev.kind,
        EV_FILE_OPEN | EV_UNLINK | EV_RMDIR | EV_RENAME | EV_SETATTR
    ) {
        detail["ino"] = json!(ev.ino);
        detail["dev"] = json!(major_minor(ev.dev));
        if ev.reason == REASON_PROTECTED_PATH {
            detail["protected_ino"] = json!(ev.matched_ino);
            if let Some(p) = spec.protected_path(u64::from(ev.dev), ev.matched_ino) {
                detail["protected_path"] = json!(p.display().to_string());
            }
        }
        detail["message"] = json!(match ev.reason {
            REASON_PROTECTED_PATH if ev.kind == EV_FILE_OPEN =>
                "opening a protected file (or a file under a protected directory) is denied by the kernel",
            REASON_PROTECTED_PATH =>
                "deleting, renaming, replacing or changing a protected path (or anything under a protected directory) is denied by the kernel",
            REASON_SELF_PROTECTION =>
                "writing to cgroup files is denied: the agent may not leave or reconfigure its cgroup",
            _ =>
                "the kernel could not resolve this file's path within its depth limit, so the operation is denied",
        });
    } else if ev.kind == EV_EXEC {
        detail["ino"] = json!(ev.ino);
        detail["dev"] = json!(major_minor(ev.dev));
        detail["message"] = json!(match ev.reason {
            REASON_EXEC_NOT_ALLOWED =>
                "executing this file is denied: it is not in the policy's exec allowlist",
            _ => "the kernel could not identify the executed file, so the exec is denied",
        });
    } else if matches!(ev.kind, EV_BPF | EV_MOUNT | EV_PTRACE | EV_KILL) {
        if matches!(ev.kind, EV_PTRACE | EV_KILL) {
            detail["target_pid"] = json!(ev.ino);
        }
        if ev.kind == EV_KILL {
            detail["signal"] = json!(ev.port);
        }
        detail["message"] = json!(match ev.kind {
            EV_BPF =>
                "bpf() is denied inside the agent's cgroup: the agent may not touch the kernel layer",
            EV_MOUNT => "mount() is denied inside the agent's cgroup",
            EV_PTRACE =>
                "ptrace attach, and any ptrace access to gatewayd, is denied inside the agent's cgroup",
            _ => "the agent may not signal gatewayd",
        });
    } else {
        let ip = if ev.family == AF_INET {
            IpAddr::V4(Ipv4Addr::new(
                ev.addr[0], ev.addr[1], ev.addr[2], ev.addr[3],
            ))
        } else {
            IpAddr::V6(Ipv6Addr::from(ev.addr))
        };
        detail["addr"] = json!(ip.to_string());
        detail["port"] = json!(ev.port);
        detail["message"] = json!(match ev.reason {
            REASON_EGRESS_LOCKDOWN => "all egress is denied: this session tripped the Rule of Two",
            _ => "this destination is not in the policy's egress allowlist",
        });
    }
    Denial {
        hook,
        reason,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_common::AF_INET6;

    fn ev(kind: u32, reason: u32) -> Event {
        Event {
            kind,
            reason,
            pid: 42,
            family: 0,
            cgroup_id: 9,
            ino: 0,
            matched_ino: 0,
            dev: 0,
            port: 0,
            addr: [0; 16],
            comm: *b"curl\0\0\0\0\0\0\0\0\0\0\0\0",
        }
    }

    fn spec() -> KernelSpec {
        KernelSpec {
            cgroup_dir: "/x".into(),
            cgroup_id: 9,
            protected: vec![super::super::spec::ProtectedInode {
                path: "/home/u/.ssh".into(),
                key: gateway_common::InodeKey {
                    dev: (8 << 20) | 1,
                    ino: 77,
                },
            }],
            exec: vec![],
            exec_enforced: false,
            egress: vec![],
            require: true,
        }
    }

    #[test]
    fn file_denial_names_the_protected_path() {
        let mut e = ev(EV_FILE_OPEN, REASON_PROTECTED_PATH);
        e.ino = 100;
        e.matched_ino = 77;
        e.dev = (8 << 20) | 1;
        let d = describe(&e, &spec());
        assert_eq!((d.hook, d.reason), ("lsm/file_open", "protected_path"));
        assert_eq!(d.detail["protected_path"], "/home/u/.ssh");
        assert_eq!(d.detail["dev"], "8:1");
        assert_eq!(d.detail["comm"], "curl");
    }

    #[test]
    fn connect_denials_decode_addresses() {
        let mut e = ev(EV_CONNECT4, REASON_EGRESS_NOT_ALLOWED);
        e.family = AF_INET;
        e.addr[..4].copy_from_slice(&[10, 1, 2, 3]);
        e.port = 443;
        let d = describe(&e, &spec());
        assert_eq!(d.detail["addr"], "10.1.2.3");
        assert_eq!(d.detail["port"], 443);
        let mut e = ev(EV_SENDMSG6, REASON_EGRESS_LOCKDOWN);
        e.family = AF_INET6;
        e.addr[15] = 1;
        let d = describe(&e, &spec());
        assert_eq!((d.hook, d.reason), ("cgroup/sendmsg6", "egress_lockdown"));
        assert_eq!(d.detail["addr"], "::1");
    }

    #[test]
    fn self_protection_denials() {
        let d = describe(&ev(EV_BPF, REASON_SELF_PROTECTION), &spec());
        assert_eq!((d.hook, d.reason), ("lsm/bpf", "self_protection"));
        let mut e = ev(EV_KILL, REASON_SELF_PROTECTION);
        e.ino = 1234;
        e.port = 9;
        let d = describe(&e, &spec());
        assert_eq!(d.hook, "lsm/task_kill");
        assert_eq!(
            (d.detail["target_pid"].as_u64(), d.detail["signal"].as_u64()),
            (Some(1234), Some(9))
        );
        let d = describe(&ev(EV_FILE_OPEN, REASON_SELF_PROTECTION), &spec());
        assert!(d.detail["message"].as_str().unwrap().contains("cgroup"));
    }

    #[test]
    fn exec_denial() {
        let mut e = ev(EV_EXEC, REASON_EXEC_NOT_ALLOWED);
        e.ino = 5;
        e.dev = (8 << 20) | 2;
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason),
            ("lsm/bprm_check_security", "exec_not_allowed")
        );
        assert_eq!(d.detail["dev"], "8:2");
        assert!(
            d.detail["message"]
                .as_str()
                .unwrap()
                .contains("exec allowlist")
        );
    }

    #[test]
    fn short_item_is_not_an_event() {
        assert!(parse(&[0u8; 10]).is_none());
    }
}
