//! Kernel denials as the audit log records them. What each event means comes from the
//! program table ([`super::programs`]); codes this gatewayd does not know are recorded as
//! `unknown` with their raw value, never dropped and never a panic.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use gateway_common::{AF_INET, Event, EventKind, LEARNED, Reason};
use serde_json::json;

use super::{
    KernelSpec, call_events,
    programs::{Payload, Program},
};

/// A decoded kernel denial.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// Program, e.g. `lsm/file_open` (the audit record's `hook`); `unknown` for an event kind
    /// gatewayd does not know.
    pub hook: &'static str,
    /// Why, as decoded; None for a code gatewayd does not know (its raw value is in
    /// `detail.reason_code`).
    pub reason: Option<Reason>,
    /// Specifics (the audit record's `detail`).
    pub detail: serde_json::Value,
    /// A learning session's operation that was allowed and only recorded
    /// ([`gateway_common::LEARNED`]): the record is a `would_deny`.
    pub learned: bool,
}

impl Denial {
    /// The audit record's reason code: the reason's name, or `unknown`.
    pub fn reason_code(&self) -> &'static str {
        self.reason.map_or("unknown", Reason::name)
    }

    /// The denial's audit entry in `session` (the one constructor of kernel entries).
    pub fn into_entry(self, session: &str) -> gatewayd_core::audit::Entry {
        let mut e = gatewayd_core::audit::Entry::kernel(
            session,
            self.hook,
            self.reason_code(),
            self.detail,
        );
        if self.learned {
            e.decision = gatewayd_core::audit::Decision::WouldDeny;
        }
        e
    }
}

/// Reads one event out of a ring-buffer item; `None` for a short item.
pub fn parse(item: &[u8]) -> Option<Event> {
    if item.len() < size_of::<Event>() {
        return None;
    }
    // SAFETY: Event is repr(C) plain data (integers and byte arrays: every bit pattern is
    // valid); the length is checked; read_unaligned copes with alignment.
    Some(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) })
}

/// Decodes one ring-buffer item: [`describe`] its event, and for a refused call
/// ([`Payload::Call`]) what the rest of the item says of the call. `None` for a short item.
pub fn describe_item(item: &[u8], spec: &KernelSpec) -> Option<Denial> {
    let ev = parse(item)?;
    let mut denial = describe(&ev, spec);
    if Program::for_event(EventKind::try_from(ev.kind).ok()?).map(|p| p.payload)
        == Some(Payload::Call)
    {
        call_events::call_item(&ev, item, spec, &mut denial)?;
    }
    Some(denial)
}

/// A kernel `dev_t` (`MAJOR << 20 | MINOR`) as `major:minor`.
fn major_minor(dev: u32) -> String {
    format!("{}:{}", dev >> 20, dev & 0xfffff)
}

/// What a Unix socket event says of the peer: a socket file (`file_ino`), an abstract name
/// (`dst_port` = 1 + its length, its first 16 bytes in `dst_addr`), or neither.
fn unix_peer(ev: &Event, spec: &KernelSpec, detail: &mut serde_json::Value) {
    if ev.file_ino != 0 {
        detail["peer"] = json!("path");
        detail["ino"] = json!(ev.file_ino);
        detail["dev"] = json!(major_minor(ev.file_dev));
        if let Some(p) = spec.unix_path(u64::from(ev.file_dev), ev.file_ino) {
            detail["path"] = json!(p.display().to_string());
        }
    } else if ev.dst_port > 0 {
        let len = (ev.dst_port - 1) as usize;
        let shown = &ev.dst_addr[..len.min(ev.dst_addr.len())];
        let more = if len > shown.len() { "…" } else { "" };
        detail["peer"] = json!("abstract");
        detail["name"] = json!(format!("@{}{more}", String::from_utf8_lossy(shown)));
        detail["name_len"] = json!(len);
    } else {
        detail["peer"] = json!("unnamed");
    }
}

/// Said when a program reports a reason the table does not list for it.
const UNLISTED_REASON: &str = "the kernel denied this operation";

/// The event's network address (`dst_family`, `dst_addr`).
fn event_ip(ev: &Event) -> IpAddr {
    if ev.dst_family == AF_INET {
        let a = ev.dst_addr;
        IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(ev.dst_addr))
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
    let mut detail = json!({
        "pid": ev.pid, "comm": comm, "cgroup_id": ev.cgroup_id, "session_cgroup_id": ev.session_id,
    });
    let learned = ev.reason & LEARNED != 0;
    let reason = Reason::try_from(ev.reason & !LEARNED).ok();
    if reason.is_none() {
        detail["reason_code"] = json!(ev.reason);
    }
    let Some(program) = EventKind::try_from(ev.kind)
        .ok()
        .and_then(Program::for_event)
    else {
        detail["kind"] = json!(ev.kind);
        detail["message"] =
            json!("the kernel denied an operation of a kind this gatewayd does not know");
        return Denial {
            hook: "unknown",
            reason,
            detail,
            learned,
        };
    };
    payload_detail(ev, spec, program.payload, reason, &mut detail);
    let message = reason
        .and_then(|r| program.message(r))
        .unwrap_or(UNLISTED_REASON);
    detail["message"] = if learned {
        json!(format!(
            "learn mode let this through (recorded, not refused); without --learn: {message}"
        ))
    } else {
        json!(message)
    };
    Denial {
        hook: program.name,
        reason,
        detail,
        learned,
    }
}

/// What the event's payload says, into `detail`: the file, the target, the destination, the
/// peer, and for the reasons that name one, the protected path, name or read-only path.
fn payload_detail(
    ev: &Event,
    spec: &KernelSpec,
    payload: Payload,
    reason: Option<Reason>,
    detail: &mut serde_json::Value,
) {
    match payload {
        Payload::File | Payload::Exec => {
            detail["ino"] = json!(ev.file_ino);
            detail["dev"] = json!(major_minor(ev.file_dev));
        }
        Payload::Target | Payload::Signal => detail["target_pid"] = json!(ev.target_pid),
        Payload::Nothing
        | Payload::Destination
        | Payload::Inbound
        | Payload::UnixPeer
        | Payload::Call => {}
    }
    match payload {
        Payload::File if reason == Some(Reason::ProtectedPath) => {
            detail["protected_ino"] = json!(ev.protected_ino);
            if let Some(p) = spec.protected_path(u64::from(ev.file_dev), ev.protected_ino) {
                detail["protected_path"] = json!(p.display().to_string());
            }
        }
        Payload::File if reason == Some(Reason::ProtectedName) => {
            let pattern = usize::try_from(ev.protected_ino)
                .ok()
                .and_then(|i| spec.protected_names.patterns.get(i));
            if let Some((written, _)) = pattern {
                detail["protected_name"] = json!(written);
            }
        }
        Payload::File if reason == Some(Reason::ReadOnlyName) => {
            let named = usize::try_from(ev.protected_ino)
                .ok()
                .and_then(|i| spec.read_only_names.get(i));
            if let Some(n) = named {
                detail["read_only_path"] = json!(n.path.display().to_string());
            }
        }
        Payload::Signal => detail["signal"] = json!(ev.signal),
        Payload::Destination => {
            detail["addr"] = json!(event_ip(ev).to_string());
            detail["port"] = json!(ev.dst_port);
        }
        Payload::Inbound => {
            detail["from"] = json!(event_ip(ev).to_string());
            detail["port"] = json!(ev.dst_port);
        }
        Payload::UnixPeer => unix_peer(ev, spec, detail),
        _ => {}
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use gateway_common::AF_INET6;

    pub(in crate::kernel) fn ev(kind: EventKind, reason: Reason) -> Event {
        Event {
            pid: 42,
            cgroup_id: 9,
            session_id: 8,
            comm: *b"curl\0\0\0\0\0\0\0\0\0\0\0\0",
            ..Event::new(kind, reason)
        }
    }

    pub(in crate::kernel) fn spec() -> KernelSpec {
        KernelSpec {
            cgroup_dir: "/x".into(),
            protected: vec![super::super::spec::ProtectedInode {
                path: "/home/u/.ssh".into(),
                key: gateway_common::InodeKey {
                    dev: (8 << 20) | 1,
                    ino: 77,
                },
            }],
            exec: vec![],
            exec_enforced: false,
            exec_map: vec![],
            egress: vec![],
            unix_paths: vec![],
            unix_names: vec![],
            read_only_names: vec![],
            roots_enforced: 0,
            roots: vec![],
            protected_names: gatewayd_core::policy::protected_names::ProtectedNames::default(),
            require: true,
            learn: false,
            landlock_refusals: false,
            learn_names: None,
        }
    }

    #[test]
    fn file_denial_names_the_protected_path() {
        let mut e = ev(EventKind::FileOpen, Reason::ProtectedPath);
        e.file_ino = 100;
        e.protected_ino = 77;
        e.file_dev = (8 << 20) | 1;
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
            ("lsm/file_open", "protected_path")
        );
        assert_eq!(d.detail["protected_path"], "/home/u/.ssh");
        assert_eq!(d.detail["dev"], "8:1");
        assert_eq!(d.detail["comm"], "curl");
        assert_eq!(
            (
                d.detail["cgroup_id"].as_u64(),
                d.detail["session_cgroup_id"].as_u64()
            ),
            (Some(9), Some(8))
        );
    }

    #[test]
    fn connect_denials_decode_addresses() {
        let mut e = ev(EventKind::Connect4, Reason::EgressNotAllowed);
        e.dst_family = AF_INET;
        e.dst_addr[..4].copy_from_slice(&[10, 1, 2, 3]);
        e.dst_port = 443;
        let d = describe(&e, &spec());
        assert_eq!(d.detail["addr"], "10.1.2.3");
        assert_eq!(d.detail["port"], 443);
        let mut e = ev(EventKind::SendMsg6, Reason::EgressLockdown);
        e.dst_family = AF_INET6;
        e.dst_addr[15] = 1;
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
            ("cgroup/sendmsg6", "egress_lockdown")
        );
        assert_eq!(d.detail["addr"], "::1");
        assert!(!d.learned);
    }

    #[test]
    fn a_learned_connect_is_a_would_deny_with_its_reason() {
        let mut e = ev(EventKind::Connect4, Reason::EgressNotAllowed);
        e.reason |= LEARNED;
        e.dst_family = AF_INET;
        e.dst_addr[..4].copy_from_slice(&[203, 0, 113, 9]);
        e.dst_port = 443;
        let d = describe(&e, &spec());
        assert!(d.learned);
        assert_eq!(d.reason_code(), "egress_not_allowed");
        assert!(d.detail.get("reason_code").is_none());
        let entry = d.into_entry("s");
        assert_eq!(entry.decision, gatewayd_core::audit::Decision::WouldDeny);
        assert_eq!(entry.detail["addr"], "203.0.113.9");
        let message = entry.detail["message"].as_str().unwrap();
        assert!(
            message.starts_with("learn mode let this through"),
            "{message}"
        );
    }

    #[test]
    fn unix_socket_denials_name_the_peer() {
        let mut e = ev(EventKind::UnixConnect, Reason::UnixConnect);
        e.dst_family = gateway_common::AF_UNIX;
        let name = b"a-rather-long-abstract-name";
        e.dst_port = name.len() as u32 + 1;
        e.dst_addr.copy_from_slice(&name[..16]);
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
            ("lsm/unix_stream_connect", "unix_connect")
        );
        assert_eq!(d.detail["peer"], "abstract");
        assert_eq!(d.detail["name"], "@a-rather-long-ab…");
        assert_eq!(d.detail["name_len"], name.len());
        assert!(
            d.detail["message"]
                .as_str()
                .unwrap()
                .contains("network.unix")
        );
        let mut e = ev(EventKind::UnixSend, Reason::UnixConnect);
        e.file_ino = 5;
        e.file_dev = (8 << 20) | 1;
        let d = describe(&e, &spec());
        assert_eq!(d.hook, "lsm/unix_may_send");
        assert_eq!(
            (d.detail["peer"].as_str(), d.detail["dev"].as_str()),
            (Some("path"), Some("8:1"))
        );
        let d = describe(&ev(EventKind::UnixSend, Reason::UnixConnect), &spec());
        assert_eq!(d.detail["peer"], "unnamed");
    }

    #[test]
    fn self_protection_denials() {
        let d = describe(&ev(EventKind::Bpf, Reason::SelfProtection), &spec());
        assert_eq!((d.hook, d.reason_code()), ("lsm/bpf", "self_protection"));
        let mut e = ev(EventKind::Kill, Reason::SelfProtection);
        e.target_pid = 1234;
        e.signal = 9;
        let d = describe(&e, &spec());
        assert_eq!(d.hook, "lsm/task_kill");
        assert_eq!(
            (d.detail["target_pid"].as_u64(), d.detail["signal"].as_u64()),
            (Some(1234), Some(9))
        );
        let d = describe(&ev(EventKind::FileOpen, Reason::SelfProtection), &spec());
        assert!(d.detail["message"].as_str().unwrap().contains("cgroup"));
    }

    #[test]
    fn link_creation_and_mount_denials() {
        let mut e = ev(EventKind::Link, Reason::ProtectedPath);
        e.file_ino = 100;
        e.protected_ino = 77;
        e.file_dev = (8 << 20) | 1;
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
            ("lsm/inode_link", "protected_path")
        );
        assert_eq!(d.detail["protected_path"], "/home/u/.ssh");
        let d = describe(&ev(EventKind::Mknod, Reason::ProtectedPath), &spec());
        assert_eq!(d.hook, "lsm/inode_mknod");
        assert!(d.detail["message"].as_str().unwrap().contains("creating"));
        let d = describe(&ev(EventKind::Umount, Reason::SelfProtection), &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
            ("lsm/sb_umount", "self_protection")
        );
        let mut e = ev(EventKind::Setattr, Reason::ExecListed);
        e.file_ino = 5;
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
            ("lsm/inode_setattr", "exec_listed")
        );
        assert_eq!(d.detail["ino"], 5);
        assert!(d.detail.get("protected_ino").is_none());
    }

    #[test]
    fn exec_denial() {
        let mut e = ev(EventKind::Exec, Reason::ExecNotAllowed);
        e.file_ino = 5;
        e.file_dev = (8 << 20) | 2;
        let d = describe(&e, &spec());
        assert_eq!(
            (d.hook, d.reason_code()),
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

    #[test]
    fn unknown_codes_are_recorded_not_dropped() {
        let mut e = ev(EventKind::Bpf, Reason::SelfProtection);
        e.kind = 999;
        let d = describe(&e, &spec());
        assert_eq!((d.hook, d.reason_code()), ("unknown", "self_protection"));
        assert_eq!(d.detail["kind"], 999);
        let mut e = ev(EventKind::Connect4, Reason::EgressLockdown);
        e.reason = 77;
        let d = describe(&e, &spec());
        assert_eq!((d.hook, d.reason_code()), ("cgroup/connect4", "unknown"));
        assert_eq!(d.detail["reason_code"], 77);
        assert_eq!(d.detail["message"], UNLISTED_REASON);
    }

    #[test]
    fn every_program_and_reason_it_lists_has_its_message() {
        for p in &crate::kernel::PROGRAMS {
            for (reason, message) in p.messages {
                let d = describe(&ev(p.event, *reason), &spec());
                assert_eq!((d.hook, d.reason_code()), (p.name, reason.name()));
                assert_eq!(d.detail["message"], *message);
            }
        }
    }

    #[test]
    fn an_item_round_trips_through_parse() {
        let mut e = ev(EventKind::Ptrace, Reason::SelfProtection);
        e.target_pid = 31337;
        // SAFETY: Event is repr(C) plain data without padding (asserted in gateway-common).
        let bytes: [u8; size_of::<Event>()] = unsafe { std::mem::transmute(e) };
        let back = parse(&bytes).unwrap();
        let d = describe(&back, &spec());
        assert_eq!(d.hook, "lsm/ptrace_access_check");
        assert_eq!(d.detail["target_pid"], 31337);
        assert_eq!(d.detail["comm"], "curl");
    }
}
