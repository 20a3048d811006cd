//! Anchored chain heads: the head of a log (seq, hash, host, policy digest), exported as it
//! grows to a place the host cannot rewrite ([`Anchor`], one JSON line each), and
//! [`check_anchors`], which names the first exported head a log no longer holds. A log
//! rewritten with a recomputed chain still verifies on its own; it cannot match the heads
//! exported before the rewrite. A log cut short lacks the records they name.
use std::{
    collections::HashMap,
    io::{self, BufRead, BufReader},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// One exported head of the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// Always `anchor`: tells these lines from others in a mixed export stream.
    #[serde(rename = "type")]
    pub kind: String,
    /// The head record's seq.
    pub seq: u64,
    /// The head record's hash.
    pub hash: String,
    /// The host that writes the log (`/etc/machine-id`, else the host name).
    #[serde(default)]
    pub host: String,
    /// The log's path on that host.
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// The digest of the policy in force.
    #[serde(default)]
    pub policy: Option<String>,
    /// When exported, ms since the Unix epoch.
    #[serde(default)]
    pub ms: u64,
    /// Why: `interval`, `session_close`, `stop`.
    #[serde(default)]
    pub why: String,
}

/// What [`check_anchors`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorsReport {
    /// Anchors read.
    pub anchors: u64,
    /// The first anchor the log no longer matches (None: it matches every one).
    pub first_mismatch: Option<Mismatch>,
}

/// An anchor the log does not match, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("anchor {number} (line {line} of the anchors, seq {seq}, exported at {ms} ms): {how}")]
pub struct Mismatch {
    /// 1-based, among the anchors.
    pub number: u64,
    /// 1-based line in the anchors file.
    pub line: u64,
    /// The seq it names.
    pub seq: u64,
    /// When it was exported.
    pub ms: u64,
    /// What is wrong.
    pub how: MismatchKind,
}

/// How a log differs from an anchor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MismatchKind {
    /// The log has the seq with another hash: rewritten.
    #[error(
        "the log's record {seq} has hash {found}, the anchor {expected}: the log was rewritten"
    )]
    Rewritten {
        /// The seq.
        seq: u64,
        /// The hash in the log.
        found: String,
        /// The hash in the anchor.
        expected: String,
    },
    /// The log ends before the seq: truncated.
    #[error("the log ends at seq {last}: records after it were removed (truncated)")]
    Truncated {
        /// The last seq in the log (0: empty).
        last: u64,
    },
}

/// Why the anchors could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum AnchorsError {
    /// A file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: io::Error,
    },
    /// A line of the anchors file is not an anchor.
    #[error("{path}:{line}: not an anchor: {why}")]
    Malformed {
        /// The anchors file.
        path: PathBuf,
        /// 1-based line.
        line: u64,
        /// The parse error.
        why: String,
    },
}

#[derive(Deserialize)]
struct SeqHash {
    seq: u64,
    hash: String,
}

/// Compares the log at `log` with every anchor in `anchors` (JSON lines; lines whose `type`
/// is not `anchor` are skipped, so a mixed export stream can be given as it is), in file
/// order, stopping at the first the log does not match.
pub fn check_anchors(log: &Path, anchors: &Path) -> Result<AnchorsReport, AnchorsError> {
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |error| AnchorsError::Io { path, error }
    };
    let mut hashes = HashMap::new();
    let mut last = 0;
    let file = std::fs::File::open(log).map_err(io_err(log))?;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(io_err(log))?;
        // A line that is not a record is the chain verifier's to report.
        if let Ok(r) = serde_json::from_str::<SeqHash>(&line) {
            last = last.max(r.seq);
            hashes.insert(r.seq, r.hash);
        }
    }
    let file = std::fs::File::open(anchors).map_err(io_err(anchors))?;
    let mut number = 0;
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io_err(anchors))?;
        let lineno = i as u64 + 1;
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) if line.trim().is_empty() => continue,
            Err(e) => return Err(malformed(anchors, lineno, &e)),
        };
        if v.get("type").and_then(serde_json::Value::as_str) != Some("anchor") {
            continue;
        }
        let a: Anchor = serde_json::from_value(v).map_err(|e| malformed(anchors, lineno, &e))?;
        number += 1;
        let how = match hashes.get(&a.seq) {
            Some(h) if h.eq_ignore_ascii_case(&a.hash) => continue,
            Some(h) => MismatchKind::Rewritten {
                seq: a.seq,
                found: h.clone(),
                expected: a.hash,
            },
            None => MismatchKind::Truncated { last },
        };
        let first_mismatch = Some(Mismatch {
            number,
            line: lineno,
            seq: a.seq,
            ms: a.ms,
            how,
        });
        return Ok(AnchorsReport {
            anchors: number,
            first_mismatch,
        });
    }
    Ok(AnchorsReport {
        anchors: number,
        first_mismatch: None,
    })
}

fn malformed(path: &Path, line: u64, e: &serde_json::Error) -> AnchorsError {
    AnchorsError::Malformed {
        path: path.to_owned(),
        line,
        why: e.to_string(),
    }
}
