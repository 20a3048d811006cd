//! Landlock's audit records (`AUDIT_LANDLOCK_ACCESS`, `AUDIT_LANDLOCK_DOMAIN`), read and
//! attributed to the session whose agent's domain made them.
//!
//! Each denial is an `AUDIT_LANDLOCK_ACCESS` record naming the domain that denied it
//! (`domain=`), why (`blockers=`, e.g. `fs.execute`) and the object (`path=`, `dev=`, `ino=`,
//! ...). The first logged denial of a domain is followed, in the same audit event, by an
//! `AUDIT_LANDLOCK_DOMAIN` record (`status=allocated`) naming the process that made the
//! domain (`pid=`, in the host's PID namespace). A denial of a domain not seen before waits
//! for that record; the domain is the session's when its creator is one of the session's
//! processes that called `landlock_restrict_self` ([`Tracker::new`]). Denials of domains the
//! agent made itself (nested ones) name another creator and are not taken.
//!
//! The text of a record is the kernel's (`audit_log_format`): `audit(SECONDS.MS:SERIAL):`
//! then `key=value` pairs, where a value the kernel took from outside (a path, a command
//! name) is either in double quotes or, when it holds a quote, a space, a control or a
//! non-ASCII byte, written in hexadecimal (`audit_log_untrustedstring`). No maintained crate
//! reads netlink records under a licence this project can take (the one parser, for auditd's
//! log lines, is LGPL), and only the Landlock records' few fields are needed here.
use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

/// `AUDIT_LANDLOCK_ACCESS` (include/uapi/linux/audit.h).
pub const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN`.
pub const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
/// Denials of unknown domains kept while their domain record is awaited, at most.
const PENDING_LIMIT: usize = 256;

/// One Landlock denial of the session's domain, for its audit record.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// The audit record's reason code, from the first blocker.
    pub reason: &'static str,
    /// `blockers`, the object's fields and the kernel's event id.
    pub detail: Value,
}

/// The reason code of a denial, from its first blocker.
fn reason(blockers: &str) -> &'static str {
    let first = blockers.split(',').next().unwrap_or("");
    match first {
        "fs.execute" => "exec_not_allowed",
        "fs.read_file" | "fs.read_dir" => "outside_readable",
        b if b.starts_with("fs.write")
            || b.starts_with("fs.make_")
            || b.starts_with("fs.remove_")
            || b == "fs.truncate"
            || b == "fs.refer" =>
        {
            "outside_writable"
        }
        "scope.signal" => "self_protection",
        "scope.abstract_unix_socket" => "unix_connect",
        _ => "landlock",
    }
}

/// A record's event serial and its fields, or `None` when it is not the kernel's format.
fn parse(text: &str) -> Option<(u64, BTreeMap<String, String>)> {
    let text = text.trim_end_matches(['\0', '\n']);
    let rest = text.strip_prefix("audit(")?;
    let (id, body) = rest.split_once("):")?;
    let serial = id.split_once(':')?.1.parse().ok()?;
    let mut fields = BTreeMap::new();
    let mut s = body.trim_start();
    while !s.is_empty() {
        let (key, after) = s.split_once('=')?;
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let (v, n) = quoted.split_once('"')?;
            (v.to_string(), n)
        } else {
            let end = after.find(' ').unwrap_or(after.len());
            let raw = &after[..end];
            let v = if matches!(key, "path" | "name" | "comm" | "exe") {
                unhex(raw).unwrap_or_else(|| raw.to_string())
            } else {
                raw.to_string()
            };
            (v, &after[end..])
        };
        fields.insert(key.to_string(), value);
        s = next.trim_start();
    }
    Some((serial, fields))
}

/// An untrusted string the kernel wrote in hexadecimal.
fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect();
    Some(String::from_utf8_lossy(&bytes?).into_owned())
}

/// Which domains are the session's, from the records seen so far.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Host pids of the session's processes that made its domains.
    creators: Vec<u32>,
    /// Domain id → whether it is the session's.
    domains: HashMap<String, bool>,
    /// Denials of domains not known yet, awaiting their domain record.
    pending: Vec<(String, Denial)>,
}

impl Tracker {
    /// A tracker for the domains made by the processes `creators` (host pids).
    pub fn new(creators: Vec<u32>) -> Tracker {
        Tracker {
            creators,
            ..Tracker::default()
        }
    }

    /// Takes one record (`ty`, `text`); returns the session's denials it completes.
    pub fn take(&mut self, ty: u16, text: &str) -> Vec<Denial> {
        let Some((serial, f)) = parse(text) else {
            return Vec::new();
        };
        let Some(domain) = f.get("domain").cloned() else {
            return Vec::new();
        };
        match ty {
            AUDIT_LANDLOCK_ACCESS => {
                let blockers = f.get("blockers").cloned().unwrap_or_default();
                let mut detail = json!({"landlock_domain": domain, "event": serial});
                for (k, v) in &f {
                    if k != "domain" {
                        detail[k] = json!(v);
                    }
                }
                let denial = Denial {
                    reason: reason(&blockers),
                    detail,
                };
                match self.domains.get(&domain) {
                    Some(true) => vec![denial],
                    Some(false) => Vec::new(),
                    None => {
                        if self.pending.len() >= PENDING_LIMIT {
                            self.pending.remove(0);
                        }
                        self.pending.push((domain, denial));
                        Vec::new()
                    }
                }
            }
            AUDIT_LANDLOCK_DOMAIN => match f.get("status").map(String::as_str) {
                Some("allocated") => {
                    let ours = f
                        .get("pid")
                        .and_then(|p| p.parse::<u32>().ok())
                        .is_some_and(|p| self.creators.contains(&p));
                    self.domains.insert(domain.clone(), ours);
                    let (done, keep) = std::mem::take(&mut self.pending)
                        .into_iter()
                        .partition(|(d, _)| *d == domain);
                    self.pending = keep;
                    if ours {
                        done.into_iter().map(|(_, d)| d).collect()
                    } else {
                        Vec::new()
                    }
                }
                Some("deallocated") => {
                    self.domains.remove(&domain);
                    Vec::new()
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_as_the_kernel_writes_them() {
        let (serial, f) = parse(
            "audit(1729738800.349:44): domain=195ba459b blockers=fs.refer path=\"/usr/bin\" dev=\"vda2\" ino=351",
        )
        .unwrap();
        assert_eq!(serial, 44);
        assert_eq!(f["domain"], "195ba459b");
        assert_eq!(f["blockers"], "fs.refer");
        assert_eq!(f["path"], "/usr/bin");
        assert_eq!(f["dev"], "vda2");
        assert_eq!(f["ino"], "351");
        // An untrusted string with a space in it comes in hexadecimal.
        let (_, f) = parse("audit(1.2:3): domain=1 blockers=fs.execute path=2F746D702F6120622E7368 dev=\"tmpfs\" ino=9\0").unwrap();
        assert_eq!(f["path"], "/tmp/a b.sh");
        assert!(parse("not a record").is_none());
        assert!(parse("audit(1.2:3): domain=\"unterminated").is_none());
    }

    #[test]
    fn only_the_sessions_domains_are_taken_once_their_creator_is_known() {
        let mut t = Tracker::new(vec![300]);
        let access = |d: &str, s: u32| {
            format!(
                "audit(1.0:{s}): domain={d} blockers=fs.execute path=\"/tmp/x\" dev=\"vda\" ino=5"
            )
        };
        let domain = |d: &str, s: u32, pid: u32| {
            format!(
                "audit(1.0:{s}): domain={d} status=allocated mode=enforcing pid={pid} uid=0 exe=\"/bin/sh\" comm=\"sh\""
            )
        };
        // The first denial waits for its domain record, which says it is ours.
        assert!(t.take(AUDIT_LANDLOCK_ACCESS, &access("aa", 1)).is_empty());
        let got = t.take(AUDIT_LANDLOCK_DOMAIN, &domain("aa", 1, 300));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].reason, "exec_not_allowed");
        assert_eq!(got[0].detail["path"], "/tmp/x");
        assert_eq!(got[0].detail["landlock_domain"], "aa");
        // Later denials of a known domain come at once.
        assert_eq!(t.take(AUDIT_LANDLOCK_ACCESS, &access("aa", 2)).len(), 1);
        // Another process's domain (another session, or one the agent nested): never.
        assert!(t.take(AUDIT_LANDLOCK_ACCESS, &access("bb", 3)).is_empty());
        assert!(
            t.take(AUDIT_LANDLOCK_DOMAIN, &domain("bb", 3, 301))
                .is_empty()
        );
        assert!(t.take(AUDIT_LANDLOCK_ACCESS, &access("bb", 4)).is_empty());
        // A domain freed and its id met again is asked about again.
        t.take(
            AUDIT_LANDLOCK_DOMAIN,
            "audit(1.0:5): domain=aa status=deallocated denials=2",
        );
        assert!(t.take(AUDIT_LANDLOCK_ACCESS, &access("aa", 6)).is_empty());
    }

    #[test]
    fn blockers_map_to_the_reason_codes_of_tier_1() {
        for (b, r) in [
            ("fs.execute", "exec_not_allowed"),
            ("fs.read_file", "outside_readable"),
            ("fs.make_reg,fs.refer", "outside_writable"),
            ("fs.write_file", "outside_writable"),
            ("scope.signal", "self_protection"),
            ("scope.abstract_unix_socket", "unix_connect"),
            ("fs.ioctl_dev", "landlock"),
        ] {
            assert_eq!(reason(b), r, "{b}");
        }
    }

    #[test]
    fn pending_denials_are_bounded() {
        let mut t = Tracker::new(vec![1]);
        for s in 0..(PENDING_LIMIT as u32 + 10) {
            t.take(
                AUDIT_LANDLOCK_ACCESS,
                &format!("audit(1.0:{s}): domain=d{s} blockers=fs.execute"),
            );
        }
        assert_eq!(t.pending.len(), PENDING_LIMIT);
    }
}
