//! The hash-chained audit log: JSON Lines, one [`Record`] per decision from either layer
//! (`source: gateway|kernel`), and its verifier.
//!
//! # Format
//! One record per line, each line the canonical JSON of the record followed by `\n`:
//! - `seq` starts at 1 and grows by one; `prev` is the `hash` of the previous record, 64 zeros
//!   ([`GENESIS`]) for the first;
//! - `ts` is RFC 3339 UTC with milliseconds, from the injected [`Clock`];
//! - `tool` (gateway records) and `hook` (kernel records) are omitted when absent;
//! - `hash` = lowercase hex SHA-256 of the canonical JSON of the record without `hash`.
//!
//! Canonical JSON: object keys sorted (byte order) at every depth, including inside `detail`,
//! no whitespace, strings and numbers as `serde_json` writes them. The writer writes exactly the
//! canonical form, and [`verify`] requires it: a line that means the same but is spelled
//! differently (re-ordered keys, extra spaces, `"tool":null`) was not written by this code.
//!
//! # Durability (fsync policy)
//! [`AuditLog::append`] writes the whole line with one `write_all` on an `O_APPEND` descriptor
//! and then calls `fdatasync`; it returns the record only after both succeeded, so a decision
//! the caller returns has its record on disk. [`AuditLog::append_batch`] writes several records
//! with one `write_all` and one `fdatasync` (group commit: [`writer::AuditWriter`] batches
//! concurrent decisions on a thread of its own). When a new
//! file is created, its directory is synced too, so the file itself survives a crash.
//! If the write or the sync fails, `append` returns `Err` and the log becomes *poisoned*: every
//! later `append` fails without touching the file. Callers deny (`audit_unavailable`). A failed
//! write may leave a partial last line; [`verify`] then reports it and [`AuditLog::open`]
//! refuses the file until a person has looked at it.
//!
//! # Concurrency
//! One [`AuditLog`] per file, per host: `open` takes `flock(LOCK_EX | LOCK_NB)` and refuses a
//! file another writer holds, so two writers never interleave one chain. Inside the process the
//! caller wraps the log in a `Mutex`. [`verify`] takes no lock and may run at any time: a
//! concurrent append shows up at worst as a partial last line.
use std::{
    fs::{File, OpenOptions},
    io::{self, BufRead, BufReader, Seek, SeekFrom, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::Arc,
};

use nix::{
    errno::Errno,
    fcntl::{Flock, FlockArg},
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::clock::Clock;

pub mod writer;

/// `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Which layer made the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Gateway,
    Kernel,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Gateway => "gateway",
            Source::Kernel => "kernel",
        }
    }
}

/// What was decided; `Info` for records that are not decisions (session start, tier reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
    Hold,
    Info,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Hold => "hold",
            Decision::Info => "info",
        }
    }
}

/// What a caller appends; [`AuditLog::append`] adds `seq`, `prev`, `ts` and `hash`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub source: Source,
    pub session: String,
    /// Gateway records: the tool name.
    pub tool: Option<String>,
    /// Kernel records: the program's hook, e.g. `lsm/file_open`, `cgroup/connect4`.
    pub hook: Option<String>,
    pub decision: Decision,
    /// Reason code, e.g. `sandbox`, `egress_not_allowed`, `session_start`.
    pub reason: String,
    /// An object with specifics. Digests, never secret values.
    pub detail: Value,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: u64,
    pub prev: String,
    pub ts: String,
    pub source: Source,
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    pub decision: Decision,
    pub reason: String,
    pub detail: Value,
    pub hash: String,
}

impl Record {
    /// The record as a JSON object; `hash` included or not.
    fn to_value(&self, with_hash: bool) -> Value {
        let mut m = Map::new();
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
        sha256_hex(canonical_json(&self.to_value(false)).as_bytes())
    }

    /// The line as written to the file, without the trailing newline.
    pub fn canonical_line(&self) -> String {
        canonical_json(&self.to_value(true))
    }
}

pub use crate::canonical::canonical_json;
use crate::canonical::sha256_hex;

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

/// Why the log cannot be opened or appended to.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot {op} {path}: {error}")]
    Io {
        op: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    #[error("{path} is not a regular file")]
    NotRegular { path: PathBuf },
    #[error("{path} is writable by group or others (mode {mode:o}); make it 0600")]
    Permissions { path: PathBuf, mode: u32 },
    #[error("{path} is locked by another writer (another gatewayd?); one writer per audit file")]
    Locked { path: PathBuf },
    #[error("{path} does not verify, refusing to append to a broken chain: broken at {error}")]
    Broken { path: PathBuf, error: VerifyError },
    #[error("cannot write the audit record to {path}: {error}; the log is now closed for writing")]
    Write { path: PathBuf, error: io::Error },
    #[error("audit log {path} is poisoned by an earlier write failure; no record can be appended")]
    Poisoned { path: PathBuf },
    #[error(
        "record detail nested deeper than {MAX_DETAIL_DEPTH} levels: not written (it could not be read back)"
    )]
    TooDeep,
}

/// Deepest `detail` nesting a record may have: serde_json refuses to read back values nested
/// deeper than 128, which would make the log unverifiable; such an entry is refused instead.
pub const MAX_DETAIL_DEPTH: usize = 64;

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An audit file open for appending, holding its exclusive lock.
pub struct AuditLog {
    path: PathBuf,
    file: Flock<File>,
    clock: Arc<dyn Clock>,
    last_seq: u64,
    head: Option<String>,
    poisoned: bool,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("last_seq", &self.last_seq)
            .field("head", &self.head)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens (creating if absent, mode 0600) an audit file for appending. An existing file is
    /// verified to continue `seq` and `prev`; if it does not verify, the open is refused with
    /// an error naming the first broken seq (never append to a broken chain). Refuses a file
    /// another writer has locked, a non-regular file, and a group- or world-writable file.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<AuditLog, AuditError> {
        let io_err = |op: &'static str| {
            move |error: io::Error| AuditError::Io {
                op,
                path: path.to_path_buf(),
                error,
            }
        };
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(io_err("open"))?;
        let meta = file.metadata().map_err(io_err("stat"))?;
        if !meta.is_file() {
            return Err(AuditError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(AuditError::Permissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let file = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
            if errno == Errno::EWOULDBLOCK {
                AuditError::Locked {
                    path: path.to_path_buf(),
                }
            } else {
                io_err("lock")(io::Error::from(errno))
            }
        })?;
        // Verified through the locked descriptor: nobody appends between the check and us.
        (&*file).seek(SeekFrom::Start(0)).map_err(io_err("read"))?;
        let report = check_chain(BufReader::new(&*file), path, None).map_err(|e| match e {
            VerifyError::Io { error, .. } => io_err("read")(error),
            other => AuditError::Broken {
                path: path.to_path_buf(),
                error: other,
            },
        })?;
        if meta.len() == 0 {
            sync_parent_dir(path).map_err(io_err("sync the directory of"))?;
        }
        Ok(AuditLog {
            path: path.to_path_buf(),
            file,
            clock,
            last_seq: report.records,
            head: report.head,
            poisoned: false,
        })
    }

    /// Appends one record and returns it only after it is durable (write + fdatasync).
    /// Any failure poisons the log: this and every later call return `Err`.
    pub fn append(&mut self, entry: Entry) -> Result<Record, AuditError> {
        let mut recs = self.append_batch(vec![entry])?;
        recs.pop().ok_or(AuditError::Poisoned {
            path: self.path.clone(),
        })
    }

    /// Appends records in order with one `write_all` and one `fdatasync` (group commit);
    /// returns them only after all are durable. An entry nested too deep refuses the whole
    /// batch (nothing written, the log stays usable); a write or sync failure poisons the log.
    pub fn append_batch(&mut self, entries: Vec<Entry>) -> Result<Vec<Record>, AuditError> {
        if self.poisoned {
            return Err(AuditError::Poisoned {
                path: self.path.clone(),
            });
        }
        if entries.iter().any(|e| depth(&e.detail) > MAX_DETAIL_DEPTH) {
            return Err(AuditError::TooDeep);
        }
        let ts = rfc3339_ms(self.clock.now_ms());
        let (mut seq, mut head) = (self.last_seq, self.head.clone());
        let mut recs = Vec::with_capacity(entries.len());
        let mut buf = String::new();
        for entry in entries {
            let Some(next) = seq.checked_add(1) else {
                self.poisoned = true;
                return Err(AuditError::Poisoned {
                    path: self.path.clone(),
                });
            };
            seq = next;
            let mut rec = Record {
                seq,
                prev: head.unwrap_or_else(|| GENESIS.to_string()),
                ts: ts.clone(),
                source: entry.source,
                session: entry.session,
                tool: entry.tool,
                hook: entry.hook,
                decision: entry.decision,
                reason: entry.reason,
                detail: entry.detail,
                hash: String::new(),
            };
            rec.hash = rec.compute_hash();
            buf.push_str(&rec.canonical_line());
            buf.push('\n');
            head = Some(rec.hash.clone());
            recs.push(rec);
        }
        let mut f: &File = &self.file;
        if let Err(error) = f.write_all(buf.as_bytes()).and_then(|()| f.sync_data()) {
            self.poisoned = true;
            return Err(AuditError::Write {
                path: self.path.clone(),
                error,
            });
        }
        self.last_seq = seq;
        self.head = head;
        Ok(recs)
    }

    /// Hash of the last record: the anchor to keep elsewhere. `None` for an empty log.
    pub fn head(&self) -> Option<&str> {
        self.head.as_deref()
    }

    /// `seq` of the last record (0 for an empty log).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// An intact log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    pub records: u64,
    /// Hash of the last record; `None` for an empty log.
    pub head: Option<String>,
    /// Where the anchor was found, when one was given.
    pub anchored: Option<Anchored>,
}

/// The record whose hash is the anchor, and how many records were appended after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchored {
    pub seq: u64,
    pub following: u64,
}

/// Why a log does not verify. Every variant but `Io`, `NotRegular` and `BadAnchor` is a broken
/// chain ([`VerifyError::is_broken`]); its message starts with `seq S:` or `line L:`.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read {path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error("{path} is not a regular file")]
    NotRegular { path: PathBuf },
    #[error("anchor `{0}` is not a record hash (64 hex digits)")]
    BadAnchor(String),
    #[error("line {line}: not a valid audit record (expected seq {seq}): {why}")]
    Malformed { line: u64, seq: u64, why: String },
    #[error(
        "seq {seq}: partial record at line {line} (no final newline): a write was cut short \
         (crash mid-append?); cut the partial line after checking it"
    )]
    PartialLine { seq: u64, line: u64 },
    #[error("seq {seq}: record edited: its hash does not match its content (line {line})")]
    Edited { seq: u64, line: u64 },
    #[error(
        "seq {seq}: record re-encoded: its content matches its hash but the line is not in the \
         canonical form the writer produces (line {line})"
    )]
    NotCanonical { seq: u64, line: u64 },
    #[error("seq {seq}: {} deleted: line {line} holds seq {found}", missing(*seq, *found))]
    Deleted { seq: u64, line: u64, found: u64 },
    #[error("seq {seq}: records reordered: {}", reordered(*line, *found, *later_line))]
    Reordered {
        seq: u64,
        line: u64,
        found: u64,
        later_line: Option<u64>,
    },
    #[error(
        "seq {seq}: prev does not link to the hash of the record before it (line {line}): \
         the previous record was rewritten with a recomputed hash, or records were replaced"
    )]
    BrokenLink { seq: u64, line: u64 },
    #[error(
        "seq {seq}: anchor not found: log truncated or rewritten (the {records} records form a \
         valid chain, head {}, but none has the anchor hash: records after seq {records} were \
         removed, or the whole log was replaced)",
        head.as_deref().unwrap_or("none")
    )]
    AnchorNotFound {
        seq: u64,
        records: u64,
        head: Option<String>,
    },
}

fn missing(seq: u64, found: u64) -> String {
    if found == seq + 1 {
        format!("record {seq}")
    } else {
        format!("records {seq} to {}", found.saturating_sub(1))
    }
}

fn reordered(line: u64, found: u64, later_line: Option<u64>) -> String {
    match later_line {
        Some(l) => format!("line {line} holds seq {found}, the expected record is at line {l}"),
        None => format!("line {line} holds seq {found}: seq goes backwards (moved or duplicated)"),
    }
}

impl VerifyError {
    /// A broken chain (as opposed to a file that cannot be read or a bad anchor argument).
    pub fn is_broken(&self) -> bool {
        !matches!(
            self,
            VerifyError::Io { .. } | VerifyError::NotRegular { .. } | VerifyError::BadAnchor(_)
        )
    }

    /// The first broken seq, when the error names one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            VerifyError::Io { .. } | VerifyError::NotRegular { .. } | VerifyError::BadAnchor(_) => {
                None
            }
            VerifyError::Malformed { seq, .. }
            | VerifyError::PartialLine { seq, .. }
            | VerifyError::Edited { seq, .. }
            | VerifyError::NotCanonical { seq, .. }
            | VerifyError::Deleted { seq, .. }
            | VerifyError::Reordered { seq, .. }
            | VerifyError::BrokenLink { seq, .. }
            | VerifyError::AnchorNotFound { seq, .. } => Some(*seq),
        }
    }
}

/// Verifies the whole chain of `path`, and with `anchor` (a head hash kept elsewhere) that the
/// chain contains that record. Names the first broken seq (or line, for unparseable lines).
pub fn verify(path: &Path, anchor: Option<&str>) -> Result<VerifyReport, VerifyError> {
    let anchor = match anchor {
        Some(a) if a.len() == 64 && a.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(a.to_ascii_lowercase())
        }
        Some(a) => return Err(VerifyError::BadAnchor(a.to_string())),
        None => None,
    };
    let io_err = |error| VerifyError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::open(path).map_err(io_err)?;
    if !file.metadata().map_err(io_err)?.is_file() {
        return Err(VerifyError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    check_chain(BufReader::new(file), path, anchor.as_deref())
}

fn parse_line(bytes: &[u8]) -> Result<(&str, Record), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let rec = serde_json::from_str::<Record>(text).map_err(|e| e.to_string())?;
    Ok((text, rec))
}

fn check_chain<R: BufRead>(
    mut r: R,
    path: &Path,
    anchor: Option<&str>,
) -> Result<VerifyReport, VerifyError> {
    let io_err = |error| VerifyError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut buf = Vec::new();
    let mut line = 0u64;
    let mut last_seq = 0u64;
    let mut head: Option<String> = None;
    let mut anchor_seq = None;
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf).map_err(io_err)? == 0 {
            break;
        }
        line += 1;
        let seq = last_seq + 1;
        if buf.pop() != Some(b'\n') {
            return Err(VerifyError::PartialLine { seq, line });
        }
        let (text, rec) =
            parse_line(&buf).map_err(|why| VerifyError::Malformed { line, seq, why })?;
        if rec.compute_hash() != rec.hash {
            return Err(VerifyError::Edited { seq, line });
        }
        if rec.canonical_line() != text {
            return Err(VerifyError::NotCanonical { seq, line });
        }
        if rec.seq < seq {
            return Err(VerifyError::Reordered {
                seq,
                line,
                found: rec.seq,
                later_line: None,
            });
        }
        if rec.seq > seq {
            return Err(match find_seq(&mut r, seq, line).map_err(io_err)? {
                Some(l) => VerifyError::Reordered {
                    seq,
                    line,
                    found: rec.seq,
                    later_line: Some(l),
                },
                None => VerifyError::Deleted {
                    seq,
                    line,
                    found: rec.seq,
                },
            });
        }
        if rec.prev != head.as_deref().unwrap_or(GENESIS) {
            return Err(VerifyError::BrokenLink { seq, line });
        }
        if anchor == Some(rec.hash.as_str()) {
            anchor_seq = Some(seq);
        }
        last_seq = seq;
        head = Some(rec.hash);
    }
    let anchored = match (anchor, anchor_seq) {
        (None, _) => None,
        (Some(_), Some(s)) => Some(Anchored {
            seq: s,
            following: last_seq - s,
        }),
        (Some(_), None) => {
            return Err(VerifyError::AnchorNotFound {
                seq: last_seq + 1,
                records: last_seq,
                head,
            });
        }
    };
    Ok(VerifyReport {
        records: last_seq,
        head,
        anchored,
    })
}

/// After a seq gap: the line number at which record `seq` appears later, if it does
/// (reordering rather than deletion). Unparseable lines are skipped here.
fn find_seq<R: BufRead>(r: &mut R, seq: u64, mut line: u64) -> io::Result<Option<u64>> {
    #[derive(Deserialize)]
    struct SeqOnly {
        seq: u64,
    }
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            return Ok(None);
        }
        line += 1;
        if serde_json::from_slice::<SeqOnly>(&buf).is_ok_and(|s| s.seq == seq) {
            return Ok(Some(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use super::*;
    use crate::clock::ManualClock;

    const T0: u64 = 1_700_000_000_123;

    fn entry(i: u64) -> Entry {
        Entry {
            source: if i.is_multiple_of(2) {
                Source::Kernel
            } else {
                Source::Gateway
            },
            session: "s1".into(),
            tool: (i % 2 == 1).then(|| "read_file".to_string()),
            hook: i.is_multiple_of(2).then(|| "lsm/file_open".to_string()),
            decision: Decision::Deny,
            reason: format!("r{i}"),
            detail: json!({"z": 1, "a": {"y": [3, {"k": "v", "b": null}], "x": "é\"\n"}, "i": i}),
        }
    }

    fn clock() -> Arc<ManualClock> {
        Arc::new(ManualClock::new(T0))
    }

    /// A log of `n` records; returns its path (inside `dir`) and the records.
    fn make_log(dir: &tempfile::TempDir, n: u64) -> (PathBuf, Vec<Record>) {
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&path, clock()).expect("open");
        let recs = (1..=n)
            .map(|i| log.append(entry(i)).expect("append"))
            .collect();
        (path, recs)
    }

    fn lines(path: &Path) -> Vec<String> {
        fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn write_lines(path: &Path, lines: &[String]) {
        let mut s = lines.join("\n");
        s.push('\n');
        fs::write(path, s).expect("write");
    }

    #[test]
    fn timestamps_are_rfc3339_utc_millis() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(T0), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_ms(951_868_799_001), "2000-02-29T23:59:59.001Z");
    }

    #[test]
    fn canonical_json_sorts_nested_keys() {
        let v = json!({"b": 1, "a": {"d": [ {"z": 0, "y": 1} ], "c": "x y"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"x y","d":[{"y":1,"z":0}]},"b":1}"#
        );
    }

    #[test]
    fn append_writes_a_chain_with_clock_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.jsonl");
        let clk = clock();
        let mut log = AuditLog::open(&path, clk.clone()).expect("open");
        assert_eq!(log.head(), None);
        let r1 = log.append(entry(1)).expect("append");
        clk.advance_ms(1500);
        let r2 = log.append(entry(2)).expect("append");
        assert_eq!((r1.seq, r2.seq), (1, 2));
        assert_eq!(r1.prev, GENESIS);
        assert_eq!(r2.prev, r1.hash);
        assert_eq!(r1.ts, "2023-11-14T22:13:20.123Z");
        assert_eq!(r2.ts, "2023-11-14T22:13:21.623Z");
        assert_eq!(log.head(), Some(r2.hash.as_str()));
        assert_eq!(r1.hash.len(), 64);
        assert!(
            r1.hash
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        );
        // Written lines are the records, canonical, with tool/hook omitted when absent.
        let ls = lines(&path);
        assert_eq!(ls, vec![r1.canonical_line(), r2.canonical_line()]);
        assert!(ls[0].contains(r#""tool":"read_file""#) && !ls[0].contains("hook"));
        assert!(ls[1].contains(r#""hook":"lsm/file_open""#) && !ls[1].contains("tool"));
        let parsed: Record = serde_json::from_str(&ls[0]).expect("parse");
        assert_eq!(parsed, r1);
        // The derived Serialize says the same thing as the canonical form.
        assert_eq!(serde_json::to_value(&r1).expect("value"), r1.to_value(true));
        // The hash is SHA-256 of the canonical record without `hash`.
        let mut v: Value = serde_json::from_str(&ls[0]).expect("value");
        v.as_object_mut().expect("object").remove("hash");
        assert_eq!(sha256_hex(canonical_json(&v).as_bytes()), r1.hash);
    }

    #[cfg(unix)]
    #[test]
    fn new_file_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 1);
        let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn reopen_continues_the_chain() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, recs) = make_log(&dir, 3);
        let mut log = AuditLog::open(&path, clock()).expect("reopen");
        assert_eq!(log.last_seq(), 3);
        assert_eq!(log.head(), Some(recs[2].hash.as_str()));
        let r4 = log.append(entry(4)).expect("append");
        assert_eq!(r4.seq, 4);
        assert_eq!(r4.prev, recs[2].hash);
        let rep = verify(&path, None).expect("verify");
        assert_eq!(rep.records, 4);
        assert_eq!(rep.head.as_deref(), Some(r4.hash.as_str()));
    }

    #[test]
    fn second_writer_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.jsonl");
        let _first = AuditLog::open(&path, clock()).expect("open");
        let err = AuditLog::open(&path, clock()).expect_err("second open");
        assert!(matches!(err, AuditError::Locked { .. }), "{err}");
    }

    #[test]
    fn refuses_world_writable_and_non_regular_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.jsonl");
        fs::write(&path, "").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
        let err = AuditLog::open(&path, clock()).expect_err("world-writable");
        assert!(matches!(err, AuditError::Permissions { .. }), "{err}");
        let err = AuditLog::open(dir.path(), clock()).expect_err("directory");
        assert!(
            matches!(err, AuditError::Io { .. } | AuditError::NotRegular { .. }),
            "{err}"
        );
        let err = verify(Path::new("/dev/null"), None).expect_err("device");
        assert!(matches!(err, VerifyError::NotRegular { .. }), "{err}");
    }

    #[test]
    fn empty_file_verifies_but_not_against_an_anchor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 0);
        let rep = verify(&path, None).expect("verify");
        assert_eq!((rep.records, rep.head), (0, None));
        let err = verify(&path, Some(&"a".repeat(64))).expect_err("anchor on empty log");
        assert!(
            matches!(
                err,
                VerifyError::AnchorNotFound {
                    seq: 1,
                    records: 0,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn bad_anchor_is_a_usage_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 1);
        let err = verify(&path, Some("abc")).expect_err("bad anchor");
        assert!(matches!(err, VerifyError::BadAnchor(_)) && !err.is_broken());
    }

    #[test]
    fn anchor_inside_the_chain_reports_what_follows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, recs) = make_log(&dir, 5);
        let rep = verify(&path, Some(&recs[2].hash)).expect("verify");
        assert_eq!(
            rep.anchored,
            Some(Anchored {
                seq: 3,
                following: 2
            })
        );
        let rep = verify(&path, Some(&recs[4].hash.to_uppercase())).expect("verify");
        assert_eq!(
            rep.anchored,
            Some(Anchored {
                seq: 5,
                following: 0
            })
        );
    }

    fn broken(path: &Path, anchor: Option<&str>) -> VerifyError {
        let err = verify(path, anchor).expect_err("must not verify");
        assert!(err.is_broken(), "{err}");
        err
    }

    #[test]
    fn edited_field_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls[2] = ls[2].replace(r#""decision":"deny""#, r#""decision":"allow""#);
        write_lines(&path, &ls);
        let err = broken(&path, None);
        assert!(
            matches!(err, VerifyError::Edited { seq: 3, line: 3 }),
            "{err}"
        );
        assert!(err.to_string().starts_with("seq 3: record edited"), "{err}");
    }

    #[test]
    fn edited_nested_detail_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls[2] = ls[2].replace(r#""k":"v""#, r#""k":"w""#);
        write_lines(&path, &ls);
        assert!(matches!(
            broken(&path, None),
            VerifyError::Edited { seq: 3, .. }
        ));
    }

    #[test]
    fn re_encoded_line_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls[2] = ls[2].replacen(',', ", ", 1);
        write_lines(&path, &ls);
        assert!(matches!(
            broken(&path, None),
            VerifyError::NotCanonical { seq: 3, .. }
        ));
    }

    #[test]
    fn edit_with_recomputed_hash_breaks_the_next_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, mut recs) = make_log(&dir, 5);
        recs[2].decision = Decision::Allow;
        recs[2].hash = recs[2].compute_hash();
        let mut ls = lines(&path);
        ls[2] = recs[2].canonical_line();
        write_lines(&path, &ls);
        let err = broken(&path, None);
        assert!(
            matches!(err, VerifyError::BrokenLink { seq: 4, line: 4 }),
            "{err}"
        );
    }

    #[test]
    fn deleted_record_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls.remove(2);
        write_lines(&path, &ls);
        let err = broken(&path, None);
        assert!(
            matches!(
                err,
                VerifyError::Deleted {
                    seq: 3,
                    line: 3,
                    found: 4
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().starts_with("seq 3: record 3 deleted"),
            "{err}"
        );
    }

    #[test]
    fn deleted_first_records_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let ls = lines(&path);
        write_lines(&path, &ls[2..]);
        let err = broken(&path, None);
        assert!(
            matches!(
                err,
                VerifyError::Deleted {
                    seq: 1,
                    found: 3,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("records 1 to 2 deleted"), "{err}");
    }

    #[test]
    fn swapped_records_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls.swap(1, 2);
        write_lines(&path, &ls);
        let err = broken(&path, None);
        assert!(
            matches!(
                err,
                VerifyError::Reordered {
                    seq: 2,
                    line: 2,
                    found: 3,
                    later_line: Some(3)
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn duplicated_record_goes_backwards() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 3);
        let mut ls = lines(&path);
        ls.push(ls[1].clone());
        write_lines(&path, &ls);
        let err = broken(&path, None);
        assert!(
            matches!(
                err,
                VerifyError::Reordered {
                    seq: 4,
                    found: 2,
                    later_line: None,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn truncation_is_caught_by_the_anchor_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, recs) = make_log(&dir, 5);
        let anchor = recs[4].hash.clone();
        let ls = lines(&path);
        write_lines(&path, &ls[..4]);
        // Without the anchor a truncated chain is a valid, shorter chain.
        assert_eq!(verify(&path, None).expect("verify").records, 4);
        let err = broken(&path, Some(&anchor));
        assert!(
            matches!(
                err,
                VerifyError::AnchorNotFound {
                    seq: 5,
                    records: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("anchor not found: log truncated or rewritten")
        );
    }

    #[test]
    fn full_rewrite_is_caught_by_the_anchor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, recs) = make_log(&dir, 5);
        let anchor = recs[4].hash.clone();
        fs::remove_file(&path).expect("rm");
        let mut log = AuditLog::open(&path, Arc::new(ManualClock::new(T0 + 1))).expect("open");
        for i in 1..=5 {
            log.append(entry(i)).expect("append");
        }
        drop(log);
        assert_eq!(
            verify(&path, None).expect("fresh chain verifies").records,
            5
        );
        let err = broken(&path, Some(&anchor));
        assert!(
            matches!(err, VerifyError::AnchorNotFound { records: 5, .. }),
            "{err}"
        );
    }

    #[test]
    fn partial_trailing_line_is_broken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 3);
        let mut ls = lines(&path);
        let half = ls[2].len() / 2;
        ls[2].truncate(half);
        fs::write(&path, ls.join("\n")).expect("write");
        let err = broken(&path, None);
        assert!(
            matches!(err, VerifyError::PartialLine { seq: 3, line: 3 }),
            "{err}"
        );
        // Even a complete record without its newline was not confirmed durable.
        let dir2 = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir2, 3);
        let full = fs::read_to_string(&path).expect("read");
        fs::write(&path, full.trim_end_matches('\n')).expect("write");
        assert!(matches!(
            broken(&path, None),
            VerifyError::PartialLine { seq: 3, line: 3 }
        ));
    }

    #[test]
    fn garbage_line_is_named_by_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls.insert(3, "this is not json".into());
        write_lines(&path, &ls);
        let err = broken(&path, None);
        assert!(
            matches!(
                err,
                VerifyError::Malformed {
                    line: 4,
                    seq: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("line 4: not a valid audit record"),
            "{err}"
        );
        // A JSON object that is not a record (extra field) is malformed too.
        let mut ls = lines(&path);
        ls[3] = ls[4].replacen('{', r#"{"extra":1,"#, 1);
        write_lines(&path, &ls);
        assert!(matches!(
            broken(&path, None),
            VerifyError::Malformed { line: 4, .. }
        ));
    }

    #[test]
    fn broken_file_refuses_to_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 5);
        let mut ls = lines(&path);
        ls[2] = ls[2].replace(r#""reason":"r3""#, r#""reason":"ok""#);
        write_lines(&path, &ls);
        let before = fs::read(&path).expect("read");
        let err = AuditLog::open(&path, clock()).expect_err("broken");
        assert!(
            matches!(
                err,
                AuditError::Broken {
                    error: VerifyError::Edited { seq: 3, .. },
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("broken at seq 3"), "{err}");
        assert_eq!(fs::read(&path).expect("read"), before, "file untouched");
    }

    #[test]
    fn too_deep_detail_is_refused_and_the_log_stays_usable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 2);
        let mut log = AuditLog::open(&path, clock()).expect("open");
        let mut deep = Value::Null;
        for _ in 0..=MAX_DETAIL_DEPTH {
            deep = Value::Array(vec![deep]);
        }
        let mut e = entry(3);
        e.detail = deep;
        assert!(matches!(log.append(e), Err(AuditError::TooDeep)));
        log.append(entry(3)).expect("the next record is written");
        assert_eq!(verify(&path, None).expect("verifies").records, 3);
    }

    #[test]
    fn failed_write_poisons_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, _) = make_log(&dir, 2);
        let mut log = AuditLog::open(&path, clock()).expect("open");
        // Swap in a descriptor that cannot be written (read-only, locked, another file).
        let other = dir.path().join("ro");
        fs::write(&other, "").expect("write");
        let ro = File::open(&other).expect("open ro");
        log.file = Flock::lock(ro, FlockArg::LockExclusiveNonblock).expect("lock");
        let err = log.append(entry(3)).expect_err("write fails");
        assert!(matches!(err, AuditError::Write { .. }), "{err}");
        assert!(log.is_poisoned());
        assert_eq!(log.last_seq(), 2);
        // Later appends fail too, even if the cause went away.
        let writable = dir.path().join("rw");
        log.file = Flock::lock(
            OpenOptions::new()
                .append(true)
                .create(true)
                .open(&writable)
                .expect("open rw"),
            FlockArg::LockExclusiveNonblock,
        )
        .expect("lock");
        let err = log.append(entry(3)).expect_err("poisoned");
        assert!(matches!(err, AuditError::Poisoned { .. }), "{err}");
        assert_eq!(
            fs::read(&writable).expect("read").len(),
            0,
            "nothing written once poisoned"
        );
    }
}
