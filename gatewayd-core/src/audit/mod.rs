//! The hash-chained audit log: JSON Lines, one [`Record`] per decision from either layer
//! (`source: gateway|kernel`), and its verifier.
//!
//! # Format
//! One record per line, each line the canonical JSON of the record followed by `\n`:
//! - `seq` starts at 1 and grows by one; `prev` is the `hash` of the previous record, 64 zeros
//!   ([`GENESIS`]) for the first;
//! - `ts` is RFC 3339 UTC with milliseconds, from the injected [`Clock`](crate::clock::Clock);
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
//! concurrent decisions on a thread of its own). When a new file is created, its directory is synced too, so the file itself survives a crash.
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
//!
//! # Layout
//! - `record.rs`: what a line holds ([`Record`], [`Entry`], [`Source`], [`Decision`]), its
//!   canonical form and hash, and the timestamp format;
//! - `log.rs`: [`AuditLog`], the locked, append-only writer (write + fdatasync, poisoning);
//! - `verify.rs`: the chain verifier ([`verify()`], [`VerifyError`]);
//! - `anchors.rs`: exported chain heads ([`anchors::Anchor`]) and the check of a log against
//!   them ([`anchors::check_anchors`]);
//! - `writer.rs`: the daemon's one writer thread, group commit ([`writer::AuditWriter`]);
//! - `aggregate.rs`: kernel denials, the first of each kind per window in full, the rest
//!   counted ([`aggregate::Aggregator`]);
//! - `explain.rs`, `suggest/`: a refusal in plain words; refusals turned into proposed policy
//!   entries (`gatewayd explain`, `gatewayd policy suggest`);
//! - `tests.rs`: the writer and the verifier together.
pub mod aggregate;
pub mod anchors;
pub mod explain;
mod log;
mod record;
pub mod suggest;
mod verify;
pub mod writer;

#[cfg(test)]
mod tests;

pub use log::{AuditError, AuditLog, MAX_DETAIL_DEPTH};
pub use record::{
    Decision, Entry, GENESIS, Record, Source, canonical_json, parse_rfc3339_ms, rfc3339_ms,
};
pub use verify::{Anchored, VerifyError, VerifyReport, verify};
