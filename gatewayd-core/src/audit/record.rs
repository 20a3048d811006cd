//! One line of the audit log: the record, what callers append, and the canonical form and
//! hash the chain is built on (the format is described in the module above).
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::canonical::canonical_json;
use crate::canonical::{into_string, sha256_hex_of_parts, write_canonical, write_str};

/// `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Which layer made the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Decided by the daemon on a tool call.
    Gateway,
    /// Decided by an eBPF program on a syscall.
    Kernel,
}

impl Source {
    /// The serialised name: `gateway` or `kernel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Gateway => "gateway",
            Source::Kernel => "kernel",
        }
    }
}

/// What was decided, by the tool-call engine (`Allow`, `Hold`, `Deny`: a call's
/// [`Verdict`](crate::engine::Verdict)) or by the kernel layer; `Info` for records that are not
/// decisions (session start, tier reached); `WouldDeny` for what learn mode let through.
/// Serialised as `allow|deny|hold|info|would_deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The call may proceed.
    Allow,
    /// The call or syscall was refused.
    Deny,
    /// The call waits for an operator's approval.
    Hold,
    /// Not a decision: a fact worth recording (session start, tier reached).
    Info,
    /// Learn mode: the call (or syscall) would have been refused or held, and was allowed;
    /// the record keeps the refusal's reason code, message and matched rules.
    #[serde(rename = "would_deny")]
    WouldDeny,
}

impl Decision {
    /// The serialised name: `allow`, `deny`, `hold`, `info` or `would_deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Hold => "hold",
            Decision::Info => "info",
            Decision::WouldDeny => "would_deny",
        }
    }
}

/// What a caller appends; [`AuditLog::append`](super::AuditLog::append) adds `seq`, `prev`, `ts` and `hash`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Which layer decided.
    pub source: Source,
    /// Id of the session the record belongs to.
    pub session: String,
    /// Gateway records: the tool name.
    pub tool: Option<String>,
    /// Kernel records: the program's hook, e.g. `lsm/file_open`, `cgroup/connect4`.
    pub hook: Option<String>,
    /// What was decided.
    pub decision: Decision,
    /// Reason code, e.g. `sandbox`, `egress_not_allowed`, `session_start`.
    pub reason: String,
    /// An object with specifics. Digests, never secret values.
    pub detail: Value,
}

impl Entry {
    /// A record of the gateway that is not a tool call's decision (a session opened, a
    /// refusal on the agent's behalf, a lockdown); [`Entry::tool`] sets the tool it is about.
    pub fn gateway(session: &str, decision: Decision, reason: &str, detail: Value) -> Entry {
        Entry {
            source: Source::Gateway,
            session: session.to_owned(),
            tool: None,
            hook: None,
            decision,
            reason: reason.to_owned(),
            detail,
        }
    }

    /// A kernel denial: the program's `hook`, its reason code and specifics.
    pub fn kernel(session: &str, hook: &str, reason: &str, detail: Value) -> Entry {
        Entry {
            source: Source::Kernel,
            session: session.to_owned(),
            tool: None,
            hook: Some(hook.to_owned()),
            decision: Decision::Deny,
            reason: reason.to_owned(),
            detail,
        }
    }

    /// `egress_lockdown`: every connect and send of the agent's cgroup is denied from now on.
    /// `tool` is the call that caused it, when a call did; `detail` says what did (the
    /// message is added).
    pub fn egress_lockdown(session: &str, tool: Option<&str>, mut detail: Value) -> Entry {
        if let Some(d) = detail.as_object_mut() {
            d.insert(
                "message".into(),
                "all egress of the agent's cgroup is denied from now on".into(),
            );
        }
        Entry::gateway(session, Decision::Deny, "egress_lockdown", detail).tool(tool)
    }

    /// `canary`: a decoy credential of the session was seen leaving (`detail` names it and
    /// the route, never its value); `severity: "high"` and `message` are added.
    pub fn canary(session: &str, tool: Option<&str>, mut detail: Value, message: &str) -> Entry {
        if let Some(d) = detail.as_object_mut() {
            d.insert("severity".into(), "high".into());
            d.insert("message".into(), message.into());
        }
        Entry::gateway(session, Decision::Deny, "canary", detail).tool(tool)
    }

    /// This entry, about `tool`.
    #[must_use]
    pub fn tool(mut self, tool: Option<&str>) -> Entry {
        self.tool = tool.map(str::to_owned);
        self
    }
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Position in the chain, from 1.
    pub seq: u64,
    /// `hash` of the previous record; [`GENESIS`] for the first.
    pub prev: String,
    /// When appended: RFC 3339 UTC with milliseconds ([`rfc3339_ms`]).
    pub ts: String,
    /// Which layer decided.
    pub source: Source,
    /// Id of the session the record belongs to.
    pub session: String,
    /// Gateway records: the tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Kernel records: the program's hook, e.g. `lsm/file_open`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// What was decided.
    pub decision: Decision,
    /// Reason code, e.g. `sandbox`, `egress_not_allowed`, `session_start`.
    pub reason: String,
    /// An object with specifics. Digests, never secret values.
    pub detail: Value,
    /// Lowercase hex SHA-256 of the canonical JSON of the record without `hash`
    /// ([`Record::compute_hash`]).
    pub hash: String,
}

impl Record {
    /// The record as a JSON object; `hash` included or not. The chain's definition: a
    /// record's line is the canonical JSON of this, its hash that of it without `hash`
    /// ([`Record::canonical_parts`] writes the same bytes from the fields, as tests check).
    #[cfg(test)]
    pub(super) fn to_value(&self, with_hash: bool) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("seq".into(), self.seq.into());
        m.insert("prev".into(), self.prev.clone().into());
        m.insert("ts".into(), self.ts.clone().into());
        m.insert("source".into(), self.source.as_str().into());
        m.insert("session".into(), self.session.clone().into());
        if let Some(t) = &self.tool {
            m.insert("tool".into(), t.clone().into());
        }
        if let Some(h) = &self.hook {
            m.insert("hook".into(), h.clone().into());
        }
        m.insert("decision".into(), self.decision.as_str().into());
        m.insert("reason".into(), self.reason.clone().into());
        m.insert("detail".into(), self.detail.clone());
        if with_hash {
            m.insert("hash".into(), self.hash.clone().into());
        }
        Value::Object(m)
    }

    /// SHA-256 (lowercase hex) of the canonical JSON of the record without `hash`.
    pub fn compute_hash(&self) -> String {
        let (head, tail) = self.canonical_parts();
        sha256_hex_of_parts(&[&head, &tail])
    }

    /// The line as written to the file, without the trailing newline.
    pub fn canonical_line(&self) -> String {
        let (head, tail) = self.canonical_parts();
        Self::line_of(head, &self.hash, &tail)
    }

    /// Sets `hash` and returns the line as written to the file (no newline).
    pub fn seal(&mut self) -> String {
        let (hash, line) = self.hash_and_line();
        self.hash = hash;
        line
    }

    /// The hash the record's fields give ([`Record::compute_hash`]) and its line with that
    /// hash ([`Record::canonical_line`] once `hash` is set), the record written out once.
    pub fn hash_and_line(&self) -> (String, String) {
        let (head, tail) = self.canonical_parts();
        let hash = sha256_hex_of_parts(&[&head, &tail]);
        let line = Self::line_of(head, &hash, &tail);
        (hash, line)
    }

    /// The canonical JSON of the record without `hash`, cut where `hash` goes: the keys
    /// before it (`decision`, `detail`) and those after it, from the comma on. Written
    /// straight from the fields, in the order the keys sort in (the same bytes as
    /// [`canonical_json`] of [`Record::to_value`], which a test checks).
    fn canonical_parts(&self) -> (Vec<u8>, Vec<u8>) {
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(b"{\"decision\":");
        write_str(self.decision.as_str(), &mut head);
        head.extend_from_slice(b",\"detail\":");
        write_canonical(&self.detail, &mut head);
        let mut tail = Vec::with_capacity(256);
        if let Some(h) = &self.hook {
            push_field(&mut tail, "hook", h);
        }
        push_field(&mut tail, "prev", &self.prev);
        push_field(&mut tail, "reason", &self.reason);
        tail.extend_from_slice(format!(",\"seq\":{}", self.seq).as_bytes());
        push_field(&mut tail, "session", &self.session);
        push_field(&mut tail, "source", self.source.as_str());
        if let Some(t) = &self.tool {
            push_field(&mut tail, "tool", t);
        }
        push_field(&mut tail, "ts", &self.ts);
        tail.push(b'}');
        (head, tail)
    }

    /// `head`, the `hash` key and value, `tail`.
    fn line_of(mut head: Vec<u8>, hash: &str, tail: &[u8]) -> String {
        head.extend_from_slice(b",\"hash\":");
        write_str(hash, &mut head);
        head.extend_from_slice(tail);
        into_string(head)
    }
}

/// `,"KEY":"VALUE"` (both written as JSON strings) at the end of `out`.
fn push_field(out: &mut Vec<u8>, key: &str, value: &str) {
    out.push(b',');
    write_str(key, out);
    out.push(b':');
    write_str(value, out);
}

/// `ms` since the Unix epoch as RFC 3339 UTC with milliseconds: `2023-11-14T22:13:20.123Z`.
pub fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, sod) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms % 1000
    )
}

/// The ms since the Unix epoch of a timestamp as [`rfc3339_ms`] writes it (None for any
/// other form).
pub fn parse_rfc3339_ms(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[23] != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| ts.get(from..to)?.parse::<u64>().ok();
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y < 1970 || hh > 23 || mm > 59 || ss > 60
    {
        return None;
    }
    // H. Hinnant's `days_from_civil`, the inverse of `civil_from_days`.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y % 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + ms)
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_back_as_written() {
        for ms in [0, 1_700_000_000_123, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms), "{ms}");
        }
        assert_eq!(parse_rfc3339_ms("2023-11-14T22:13:20Z"), None);
        assert_eq!(parse_rfc3339_ms("2023-13-14T22:13:20.000Z"), None);
    }
}
