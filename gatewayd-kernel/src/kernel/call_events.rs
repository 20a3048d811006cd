//! A path call's event ([`CallEvent`], `raw_tp/sys_exit`) as the audit log records it: the
//! call, its error and the paths it named; for an `EACCES`, whether the refusal was gatewayd's
//! ([`access_refused`]); for a learning session's call that succeeded, whether the policy
//! would have refused it ([`learned_name`]).
use gateway_common::{
    AT_FDCWD, CallEvent, EACCES, EBUSY, EROFS, Event, EventKind, Reason, changes_names, path_call,
};
use serde_json::json;

use super::{KernelSpec, call_paths, events::Denial, programs::Program};

/// The rest of a [`Payload::Call`](super::programs::Payload::Call) item, into `denial`:
/// `None` when the call is not gatewayd's to record (an `EACCES` of the file's own
/// permissions, a learned name inside the writable roots).
pub(super) fn call_item(
    ev: &Event,
    item: &[u8],
    spec: &KernelSpec,
    denial: &mut Denial,
) -> Option<()> {
    let Some(call) = call_detail(item, &mut denial.detail) else {
        return Some(());
    };
    match call.errno {
        EACCES => access_refused(ev, &call, spec, denial),
        0 if denial.learned => learned_name(ev, &call, spec, denial),
        _ => Some(()),
    }
}

/// A call refused with `EACCES` is gatewayd's under a protected path (at tier 2 hidden), and
/// where the session's Landlock ruleset enforces them, outside the roots or the exec
/// allowlist ([`call_paths::landlock_reason`]; a name made, removed or renamed outside the
/// writable roots is judged by its directory, as Landlock does, and the record names it):
/// `None` for any other, which the file's own permissions refused and is not recorded.
fn access_refused(
    ev: &Event,
    call: &CallEvent,
    spec: &KernelSpec,
    denial: &mut Denial,
) -> Option<()> {
    let path = String::from_utf8_lossy(cstr(&call.path)).into_owned();
    let resolved = call_paths::resolve(ev.pid, call.dirfd, &path)?;
    denial.detail["resolved_path"] = json!(resolved.display().to_string());
    if let Some(by) = call_paths::protected_by(&resolved, &spec.protected) {
        denial.detail["protected_path"] = json!(by.display().to_string());
        return Some(());
    }
    if !spec.landlock_refusals {
        return None;
    }
    let reason = if changes_names(call.nr) {
        let dir = changed_names(ev.pid, call, &mut denial.detail)
            .into_iter()
            .find_map(|p| call_paths::outside_writable_dir(&p, spec))?;
        denial.detail["directory"] = json!(dir.display().to_string());
        Reason::OutsideWritable
    } else {
        call_paths::landlock_reason(&resolved, path_call(call.nr)?.name, spec)?
    };
    let message = Program::for_event(EventKind::CallRefused)?.message(reason)?;
    denial.reason = Some(reason);
    denial.detail["message"] = json!(message);
    Some(())
}

/// A learning session's name made, removed or renamed (the call succeeded): kept when the
/// directory of a name it changed lies outside the writable side of what the session learns
/// ([`crate::fs_learn::Scope::judge_name`]), that directory being the record's object
/// (`directory`): Landlock and the file programs judge such a call by it. `None` for any
/// other, and for a session that learns no files.
fn learned_name(
    ev: &Event,
    call: &CallEvent,
    spec: &KernelSpec,
    denial: &mut Denial,
) -> Option<()> {
    let scope = spec.learn_names.as_ref()?;
    let dir = changed_names(ev.pid, call, &mut denial.detail)
        .into_iter()
        .find_map(|p| scope.judge_name(&p))?;
    denial.detail["directory"] = json!(dir.display().to_string());
    Some(())
}

/// The names `call` (one of [`changes_names`]) made, removed or renamed, absolute: both of a
/// rename's, the new one of a link's (`path2`), else its one path. A name relative to another
/// directory descriptor than the first path's (`renameat`'s new one) is taken relative to the
/// first's. The name a rename or link made goes into `detail` as `new_name`: the file the
/// host means to write (`policy suggest` proposes it as well as the directory).
fn changed_names(
    pid: u32,
    call: &CallEvent,
    detail: &mut serde_json::Value,
) -> Vec<std::path::PathBuf> {
    let name = path_call(call.nr).map_or("", |a| a.name);
    let resolve = |bytes: &[u8]| {
        let named = cstr(bytes);
        (!named.is_empty())
            .then(|| call_paths::resolve(pid, call.dirfd, &String::from_utf8_lossy(named)))
            .flatten()
    };
    let new = resolve(&call.path2);
    if let (Some(new), true) = (&new, name.starts_with("rename") || name.starts_with("link")) {
        detail["new_name"] = json!(new.display().to_string());
    }
    let first = (!name.starts_with("link"))
        .then(|| resolve(&call.path))
        .flatten();
    first.into_iter().chain(new).collect()
}

/// The bytes of a NUL-terminated buffer before its NUL.
fn cstr(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
}

/// What a refused call's item says beyond its event: the call's name, its error, its directory
/// descriptor and the paths it named (`path_cut` when a path filled the program's buffer).
/// The call, when the item holds it whole.
fn call_detail(item: &[u8], detail: &mut serde_json::Value) -> Option<CallEvent> {
    if item.len() < size_of::<CallEvent>() {
        detail["call"] = json!("unknown: the record was cut short");
        return None;
    }
    // SAFETY: CallEvent is repr(C) plain data (integers and byte arrays: every bit pattern
    // is valid); the length is checked; read_unaligned copes with alignment.
    let call = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<CallEvent>()) };
    detail["syscall"] = json!(path_call(call.nr).map_or("unknown", |a| a.name));
    detail["syscall_nr"] = json!(call.nr);
    if call.errno != 0 {
        detail["errno"] = json!(match call.errno {
            EROFS => "EROFS".to_owned(),
            EBUSY => "EBUSY".to_owned(),
            EACCES => "EACCES".to_owned(),
            n => n.to_string(),
        });
    }
    if call.dirfd != AT_FDCWD {
        detail["dirfd"] = json!(call.dirfd);
    }
    for (key, bytes) in [("path", &call.path[..]), ("path2", &call.path2[..])] {
        let named = cstr(bytes);
        if !named.is_empty() {
            detail[key] = json!(String::from_utf8_lossy(named));
        }
        // The program's buffer full: the name may go on.
        if named.len() >= bytes.len() - 1 {
            detail["path_cut"] = json!(true);
        }
    }
    Some(call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::events::{
        describe_item,
        tests::{ev, spec},
    };

    /// A refused call of system call `nr` with `errno`, reported for `reason`, no path yet.
    fn call_event(reason: Reason, nr: u32, errno: u32) -> CallEvent {
        CallEvent {
            event: ev(EventKind::CallRefused, reason),
            nr,
            errno,
            dirfd: AT_FDCWD,
            pad: 0,
            path: [0; gateway_common::CALL_PATH_BYTES],
            path2: [0; gateway_common::CALL_PATH_BYTES],
        }
    }

    /// The ring-buffer item the program writes for `call`.
    fn item(call: &CallEvent) -> [u8; size_of::<CallEvent>()] {
        // SAFETY: CallEvent is repr(C) plain data without padding (asserted in gateway-common).
        unsafe { std::mem::transmute(*call) }
    }

    #[test]
    fn a_refused_call_names_its_call_error_and_paths() {
        let mut call = call_event(Reason::ReadOnlyPath, 316, EBUSY);
        call.path[..4].copy_from_slice(b".git");
        call.path2[..8].copy_from_slice(b".git-old");
        let bytes = item(&call);
        let d = describe_item(&bytes, &spec()).unwrap();
        assert_eq!(
            (d.hook, d.reason_code()),
            ("raw_tp/sys_exit", "read_only_path")
        );
        assert_eq!(
            (&d.detail["syscall"], &d.detail["errno"]),
            (&json!("renameat2"), &json!("EBUSY"))
        );
        assert_eq!(
            (&d.detail["path"], &d.detail["path2"]),
            (&json!(".git"), &json!(".git-old"))
        );
        assert!(d.detail.get("path_cut").is_none());
        let d = describe_item(&bytes[..size_of::<Event>()], &spec()).unwrap();
        assert!(d.detail["call"].as_str().unwrap().contains("cut short"));
        call.path = [b'a'; gateway_common::CALL_PATH_BYTES];
        call.errno = EROFS;
        let d = describe_item(&item(&call), &spec()).unwrap();
        assert_eq!(
            (&d.detail["errno"], &d.detail["path_cut"]),
            (&json!("EROFS"), &json!(true))
        );
    }

    #[test]
    fn an_eacces_is_kept_only_under_a_protected_path() {
        let mut call = call_event(Reason::ProtectedPath, 257, EACCES);
        let under = b"/home/u/.ssh/../.ssh/id_rsa";
        call.path[..under.len()].copy_from_slice(under);
        let d = describe_item(&item(&call), &spec()).expect("kept");
        assert_eq!(
            (d.hook, d.reason_code()),
            ("raw_tp/sys_exit", "protected_path")
        );
        assert_eq!(d.detail["protected_path"], "/home/u/.ssh");
        assert_eq!(d.detail["resolved_path"], "/home/u/.ssh/id_rsa");
        assert_eq!(d.detail["errno"], "EACCES");
        call.path = [0; gateway_common::CALL_PATH_BYTES];
        call.path[..11].copy_from_slice(b"/etc/shadow");
        assert!(
            describe_item(&item(&call), &spec()).is_none(),
            "not gatewayd's refusal"
        );
    }

    /// The event of `call` (`nr`) refused with `EACCES` on `path`.
    fn eacces(nr: u32, path: &str) -> CallEvent {
        let mut call = call_event(Reason::ProtectedPath, nr, EACCES);
        call.path[..path.len()].copy_from_slice(path.as_bytes());
        call
    }

    #[test]
    fn where_landlock_enforces_the_roots_an_eacces_outside_them_is_its_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (work, tool, other) = (root.join("work"), root.join("tool"), root.join("other"));
        std::fs::create_dir(&work).unwrap();
        std::fs::write(&tool, "").unwrap();
        std::fs::write(&other, "").unwrap();
        let mut s = spec();
        s.roots_enforced = gateway_common::ROOT_READ | gateway_common::ROOT_WRITE;
        s.roots = vec![super::super::spec::RootInode {
            path: work.clone(),
            key: gateway_common::InodeKey { dev: 1, ino: 2 },
            rights: gateway_common::ROOT_READ | gateway_common::ROOT_WRITE,
        }];
        s.exec_enforced = true;
        s.exec = vec![super::super::spec::ProtectedInode {
            path: tool.clone(),
            key: super::super::spec::inode_key(&tool).unwrap(),
        }];
        let reason = |nr: u32, path: &std::path::Path, s: &KernelSpec| {
            describe_item(&item(&eacces(nr, path.to_str().unwrap())), s).map(|d| d.reason_code())
        };
        // Without the flag (tier 1's BPF LSM, or Landlock's own records on), none is kept.
        assert_eq!(reason(257, &root.join("elsewhere"), &s), None);
        s.landlock_refusals = true;
        let outside = root.join("elsewhere");
        assert_eq!(reason(257, &outside, &s), Some("outside_readable"));
        assert_eq!(reason(83, &outside, &s), Some("outside_writable"));
        assert_eq!(reason(59, &other, &s), Some("exec_not_allowed"));
        // Allowed by the roots and the allowlist: the file's own permissions refused it.
        assert_eq!(reason(257, &work.join("f"), &s), None);
        assert_eq!(reason(83, &work.join("d"), &s), None);
        assert_eq!(reason(59, &tool, &s), None);
        // Without an exec allowlist, a program outside the read roots is refused as a read.
        s.exec_enforced = false;
        assert_eq!(reason(59, &other, &s), Some("outside_readable"));
        assert_eq!(reason(59, &work.join("app"), &s), None);
        s.exec_enforced = true;
        // The kernel's trees and calls Landlock does not restrict.
        assert_eq!(
            reason(257, std::path::Path::new("/proc/1/environ"), &s),
            None
        );
        assert_eq!(reason(90, &outside, &s), None, "chmod");
        let d = describe_item(&item(&eacces(257, outside.to_str().unwrap())), &s).unwrap();
        assert!(
            d.detail["message"]
                .as_str()
                .unwrap()
                .contains("readable roots"),
            "{d:?}"
        );
        assert_eq!(d.detail["syscall"], "openat");
    }

    /// A write root makes the names of the file it names no one's to make: Landlock judges
    /// a name by its directory, so a rename over a writable file in a directory outside the
    /// roots is refused, and recorded with that directory.
    #[test]
    fn a_name_is_judged_by_its_directory() {
        let mut s = spec();
        s.landlock_refusals = true;
        s.roots_enforced = gateway_common::ROOT_WRITE;
        s.roots = vec![super::super::spec::RootInode {
            path: "/h/.state.json".into(),
            key: gateway_common::InodeKey { dev: 1, ino: 3 },
            rights: gateway_common::ROOT_WRITE,
        }];
        let mut call = eacces(82, "/h/.state.json.tmp.1");
        call.path2[..14].copy_from_slice(b"/h/.state.json");
        let d = describe_item(&item(&call), &s).expect("kept");
        assert_eq!(d.reason_code(), "outside_writable");
        assert_eq!(d.detail["directory"], "/h");
        assert_eq!(d.detail["new_name"], "/h/.state.json");
        // A link makes only its new name: its first path is not changed.
        s.roots.push(super::super::spec::RootInode {
            path: "/w".into(),
            key: gateway_common::InodeKey { dev: 1, ino: 4 },
            rights: gateway_common::ROOT_WRITE,
        });
        let mut link = eacces(86, "/elsewhere/f");
        link.path2[..6].copy_from_slice(b"/w/new");
        assert!(describe_item(&item(&link), &s).is_none());
    }

    /// A learning session's successful call is kept when the directory of a name it changed
    /// lies outside what it learns as writable, with that directory; never for a session that
    /// learns no files.
    #[test]
    fn a_learned_name_is_kept_outside_the_writable_side_with_its_directory() {
        let w = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(w.path()).unwrap();
        let learned = |nr: u32, path: &str, s: &KernelSpec| {
            let mut call = call_event(Reason::OutsideWritable, nr, 0);
            call.event.reason |= gateway_common::LEARNED;
            call.path[..path.len()].copy_from_slice(path.as_bytes());
            describe_item(&item(&call), s)
        };
        let mut s = spec();
        assert!(learned(83, "/h/.lock", &s).is_none(), "learns no files");
        let sandbox: gatewayd_core::policy::Sandbox =
            serde_json::from_value(json!({"writable": [w]})).unwrap();
        s.learn_names = Some(crate::fs_learn::Scope::of(&sandbox, None, &[]));
        let d = learned(83, "/h/.lock", &s).expect("kept");
        assert!(d.learned);
        assert_eq!(
            (d.hook, d.reason_code(), &d.detail["directory"]),
            ("raw_tp/sys_exit", "outside_writable", &json!("/h"))
        );
        assert!(d.detail.get("errno").is_none(), "{d:?}");
        assert!(
            d.detail["message"]
                .as_str()
                .unwrap()
                .starts_with("learn mode let this through")
        );
        let inside = w.join("d");
        assert!(learned(83, inside.to_str().unwrap(), &s).is_none());
        assert!(learned(263, "/tmp/x", &s).is_some(), "no private /tmp here");
    }
}
