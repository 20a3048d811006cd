//! The verifier: reads a log back, checks every line is a canonical record whose hash
//! matches, that `seq` and `prev` form one chain, and, given an anchor, that it is in it.
use std::{
    fs::File,
    io::{self, BufRead, BufReader},
    path::{Path, PathBuf},
};

use serde::Deserialize;

use super::record::{GENESIS, Record};

/// An intact log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Number of records in the chain.
    pub records: u64,
    /// Hash of the last record; `None` for an empty log.
    pub head: Option<String>,
    /// Where the anchor was found, when one was given.
    pub anchored: Option<Anchored>,
}

/// The record whose hash is the anchor, and how many records were appended after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchored {
    /// Seq of the record whose hash is the anchor.
    pub seq: u64,
    /// Number of records after it.
    pub following: u64,
}

/// Why a log does not verify. Every variant but `Io`, `NotRegular` and `BadAnchor` is a broken
/// chain ([`VerifyError::is_broken`]); its message starts with `seq S:` or `line L:`.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The log could not be opened or read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        error: io::Error,
    },
    /// The path exists but is not a regular file.
    #[error("{path} is not a regular file")]
    NotRegular {
        /// The path given.
        path: PathBuf,
    },
    /// The anchor argument is not 64 hex digits; carries it as given.
    #[error("anchor `{0}` is not a record hash (64 hex digits)")]
    BadAnchor(String),
    /// A line is not UTF-8 or not a JSON audit record.
    #[error("line {line}: not a valid audit record (expected seq {seq}): {why}")]
    Malformed {
        /// 1-based line number.
        line: u64,
        /// The seq expected on that line.
        seq: u64,
        /// The parse error.
        why: String,
    },
    /// The last line has no final newline: an append was cut short.
    #[error(
        "seq {seq}: partial record at line {line} (no final newline): a write was cut short \
         (crash mid-append?); cut the partial line after checking it"
    )]
    PartialLine {
        /// The seq expected on that line.
        seq: u64,
        /// 1-based line number.
        line: u64,
    },
    /// A record's hash does not match its content.
    #[error("seq {seq}: record edited: its hash does not match its content (line {line})")]
    Edited {
        /// The seq expected on that line.
        seq: u64,
        /// 1-based line number.
        line: u64,
    },
    /// A record's hash matches its content but the line is not in canonical form.
    #[error(
        "seq {seq}: record re-encoded: its content matches its hash but the line is not in the \
         canonical form the writer produces (line {line})"
    )]
    NotCanonical {
        /// The seq expected on that line.
        seq: u64,
        /// 1-based line number.
        line: u64,
    },
    /// Seq jumps forward and the missing record is nowhere later in the log.
    #[error("seq {seq}: {} deleted: line {line} holds seq {found}", missing(*seq, *found))]
    Deleted {
        /// The first missing seq.
        seq: u64,
        /// 1-based line number where the gap shows.
        line: u64,
        /// The seq that line holds.
        found: u64,
    },
    /// Records are out of order: the expected one appears later, or seq goes backwards.
    #[error("seq {seq}: records reordered: {}", reordered(*line, *found, *later_line))]
    Reordered {
        /// The seq expected on that line.
        seq: u64,
        /// 1-based line number.
        line: u64,
        /// The seq that line holds.
        found: u64,
        /// Line where record `seq` appears later; `None` when seq went backwards.
        later_line: Option<u64>,
    },
    /// A record's `prev` is not the hash of the record before it.
    #[error(
        "seq {seq}: prev does not link to the hash of the record before it (line {line}): \
         the previous record was rewritten with a recomputed hash, or records were replaced"
    )]
    BrokenLink {
        /// The seq of the record whose `prev` is wrong.
        seq: u64,
        /// 1-based line number.
        line: u64,
    },
    /// The chain is intact but no record has the anchor hash.
    #[error(
        "seq {seq}: anchor not found: log truncated or rewritten (the {records} records form a \
         valid chain, head {}, but none has the anchor hash: records after seq {records} were \
         removed, or the whole log was replaced)",
        head.as_deref().unwrap_or("none")
    )]
    AnchorNotFound {
        /// One past the last seq in the log.
        seq: u64,
        /// Number of records in the (intact) chain.
        records: u64,
        /// Hash of the last record; `None` for an empty log.
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

pub(super) fn check_chain<R: BufRead>(
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
        let rec = check_record(&mut r, &buf, At { seq, line }, head.as_deref())
            .map_err(|e| e.into_error(path))?;
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

/// Where a record is expected: its seq and its line.
#[derive(Clone, Copy)]
struct At {
    seq: u64,
    line: u64,
}

/// A record's failure, or the read that failed while looking past it.
enum RecordError {
    Verify(VerifyError),
    Io(io::Error),
}

impl RecordError {
    fn into_error(self, path: &Path) -> VerifyError {
        match self {
            RecordError::Verify(e) => e,
            RecordError::Io(error) => VerifyError::Io {
                path: path.to_path_buf(),
                error,
            },
        }
    }
}

/// Checks the record on `text` (its line, without the newline) at `at`, chained to `head`:
/// its hash, canonical form, seq (a gap is a reordering when `seq` appears later in `r`, else
/// a deletion) and link.
fn check_record<R: BufRead>(
    r: &mut R,
    text: &[u8],
    at: At,
    head: Option<&str>,
) -> Result<Record, RecordError> {
    let At { seq, line } = at;
    let fail = |e| Err(RecordError::Verify(e));
    let (text, rec) = match parse_line(text) {
        Ok(parsed) => parsed,
        Err(why) => return fail(VerifyError::Malformed { line, seq, why }),
    };
    // The line is made with the hash the fields give: past the first check, the record's own.
    let (hash, canonical) = rec.hash_and_line();
    if hash != rec.hash {
        return fail(VerifyError::Edited { seq, line });
    }
    if canonical != text {
        return fail(VerifyError::NotCanonical { seq, line });
    }
    if rec.seq < seq {
        return fail(VerifyError::Reordered {
            seq,
            line,
            found: rec.seq,
            later_line: None,
        });
    }
    if rec.seq > seq {
        return fail(match find_seq(r, seq, line).map_err(RecordError::Io)? {
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
    if rec.prev != head.unwrap_or(GENESIS) {
        return fail(VerifyError::BrokenLink { seq, line });
    }
    Ok(rec)
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
