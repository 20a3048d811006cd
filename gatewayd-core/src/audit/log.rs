//! The writer: one [`AuditLog`] per file, holding its exclusive lock; every append is written
//! whole and synced before it returns, and any failure poisons the log.
use std::{
    fs::{File, OpenOptions},
    io::{self, BufReader, Seek, SeekFrom, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::Value;

use super::{
    record::{Entry, GENESIS, Record, rfc3339_ms},
    verify::{VerifyError, check_chain},
};
use crate::clock::Clock;

/// Why the log cannot be opened or appended to.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// An I/O operation on the log failed (at open, before any append).
    #[error("cannot {op} {path}: {error}")]
    Io {
        /// What was being done, e.g. `open`, `lock`, `read`.
        op: &'static str,
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
    /// The file is writable by group or others.
    #[error("{path} is writable by group or others (mode {mode:o}); make it 0600")]
    Permissions {
        /// The log file.
        path: PathBuf,
        /// Its permission bits (`& 0o7777`).
        mode: u32,
    },
    /// Another process holds the file's exclusive lock.
    #[error("{path} is locked by another writer (another gatewayd?); one writer per audit file")]
    Locked {
        /// The log file.
        path: PathBuf,
    },
    /// The existing file does not verify; nothing is appended to it.
    #[error("{path} does not verify, refusing to append to a broken chain: broken at {error}")]
    Broken {
        /// The log file.
        path: PathBuf,
        /// Where and how the chain is broken.
        error: VerifyError,
    },
    /// An append's write or sync failed; the log is now poisoned.
    #[error("cannot write the audit record to {path}: {error}; the log is now closed for writing")]
    Write {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        error: io::Error,
    },
    /// An earlier write failed (or `seq` overflowed): the log accepts nothing more.
    #[error("audit log {path} is poisoned by an earlier write failure; no record can be appended")]
    Poisoned {
        /// The log file.
        path: PathBuf,
    },
    /// An entry's `detail` nests deeper than [`MAX_DETAIL_DEPTH`]; nothing was written and the log
    /// stays usable.
    #[error(
        "record detail nested deeper than {MAX_DETAIL_DEPTH} levels: not written (it could not be read back)"
    )]
    TooDeep,
}

/// Deepest `detail` nesting a record may have: `serde_json` refuses to read back values nested
/// deeper than 128, which would make the log unverifiable; such an entry is refused instead.
pub const MAX_DETAIL_DEPTH: usize = 64;

pub(super) fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An audit file open for appending, holding its exclusive lock.
pub struct AuditLog {
    path: PathBuf,
    pub(super) file: File,
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
        // std's `try_lock` is `flock(LOCK_EX | LOCK_NB)` on Linux, held until the file closes.
        file.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => AuditError::Locked {
                path: path.to_path_buf(),
            },
            std::fs::TryLockError::Error(error) => io_err("lock")(error),
        })?;
        // Verified through the locked descriptor: nobody appends between the check and us.
        (&file).seek(SeekFrom::Start(0)).map_err(io_err("read"))?;
        let report = check_chain(BufReader::new(&file), path, None).map_err(|e| match e {
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
        self.append_lines(entries)
            .map(|v| v.into_iter().map(|(r, _)| r).collect())
    }

    /// [`AuditLog::append_batch`], each record returned with its line as written (no
    /// newline): what the audit writer hands its tap, so that nobody formats it again.
    pub fn append_lines(
        &mut self,
        entries: Vec<Entry>,
    ) -> Result<Vec<(Record, String)>, AuditError> {
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
            let line = rec.seal();
            buf.push_str(&line);
            buf.push('\n');
            head = Some(rec.hash.clone());
            recs.push((rec, line));
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

    /// Whether a failed write closed the log for appending.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// The log file's path, as given to [`AuditLog::open`].
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
