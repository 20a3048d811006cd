//! Tier 2's denials in the session's audit log: Landlock (ABI 7, Linux 6.15+) logs each
//! denial to the kernel's audit subsystem, which gatewayd reads on its read-only multicast
//! group ([`gatewayd_kernel::landlock_audit::Subscription`]) while audit is enabled on the host
//! (gatewayd never enables it: that is the host's choice, `auditctl -e 1`). The records of
//! the session's own Landlock domain, the one the agent's init made
//! ([`crate::agent_privileges`]), become `source: kernel` records with hook `landlock`.
//!
//! The reader is a thread of its own (blocking reads, never on the runtime that forwards
//! signals). It joins the group before the agent is spawned, learns the init's pid from the
//! spawned child through a pipe, and hands the session's denials to the kernel records'
//! path ([`super::records::forward_kernel_records`]). At the session's end it reads on until
//! the channel has been quiet for a moment, so the last denials are not lost.
use std::{
    os::fd::{AsRawFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::json;
use tokio::sync::mpsc;

use gatewayd_core::audit::Entry;
use gatewayd_kernel::landlock_audit::{
    Subscription,
    records::{Denial, Tracker},
};

/// The longest the reader goes on after the session's end while records keep coming.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long the reader waits for the init's pid between looks at the stop flag.
const PID_POLL_MS: libc::c_int = 100;

/// The running reader.
pub(super) struct LandlockRecords {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// What the reader needs from the session.
pub(super) struct Sink {
    /// The session's id, for the records.
    pub(super) session: String,
    /// The kernel records' path to the audit writer.
    pub(super) records: mpsc::Sender<super::records::KernelRecord>,
    /// The session's count of kernel denials.
    pub(super) denials: Arc<AtomicU64>,
}

impl LandlockRecords {
    /// Joins the audit group and starts the reader. Returns it and the pipe's write end for
    /// the spawned child to tell the init's pid on (`AgentPrivileges::pre_exec_fn`), or why
    /// Landlock's denials cannot be read here (for the session's start record).
    pub(super) fn start(abi: u32, sink: Sink) -> Result<(LandlockRecords, OwnedFd), String> {
        let subscription = Subscription::open(Some(abi))?;
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("landlock-records".into())
                .spawn(move || read_records(&subscription, &read, &stop, &sink))
                .map_err(|e| format!("starting the reader thread: {e}"))?
        };
        Ok((LandlockRecords { stop, thread }, write))
    }

    /// After the agent and everything in its cgroup are gone: reads what is still queued,
    /// then ends the reader (which drops its sender of kernel records).
    pub(super) async fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread;
        if let Ok(Err(_)) = tokio::task::spawn_blocking(move || thread.join()).await {
            eprintln!("gatewayd: the Landlock records reader failed");
        }
    }
}

/// The reader: the init's pid, then every record until the session ends and the channel is
/// quiet (or [`DRAIN_LIMIT`] has passed since).
fn read_records(subscription: &Subscription, pid_pipe: &OwnedFd, stop: &AtomicBool, sink: &Sink) {
    let Some(init) = init_pid(pid_pipe, stop) else {
        if !stop.load(Ordering::Relaxed) {
            eprintln!(
                "gatewayd: the agent's init did not say its pid: Landlock's denials of this session are not recorded"
            );
        }
        return;
    };
    let mut tracker = Tracker::new(vec![init]);
    let mut buf = vec![0u8; 16 * 1024];
    let mut stopped_at: Option<Instant> = None;
    loop {
        if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
            stopped_at = Some(Instant::now());
        }
        match subscription.next(&mut buf) {
            Ok(Some((ty, text))) => {
                for d in tracker.take(ty, &text) {
                    sink.denials.fetch_add(1, Ordering::Relaxed);
                    let record = super::records::KernelRecord {
                        entry: entry(&sink.session, d),
                        reason: None,
                    };
                    if sink.records.blocking_send(record).is_err() {
                        return;
                    }
                }
            }
            // Quiet for a moment after the end: nothing of the session is left to come.
            Ok(None) if stopped_at.is_some() => return,
            Ok(None) => {}
            Err(e) => {
                eprintln!("gatewayd: reading Landlock's audit records: {e}");
                return;
            }
        }
        if stopped_at.is_some_and(|t| t.elapsed() > DRAIN_LIMIT) {
            return;
        }
    }
}

/// The init's pid from the pipe, or `None` when the child never wrote it (the spawn failed)
/// or the session stopped first.
fn init_pid(pipe: &OwnedFd, stop: &AtomicBool) -> Option<u32> {
    let mut word = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, for its length.
        let r = unsafe { libc::poll(&raw mut pfd, 1, PID_POLL_MS) };
        if r == 0 {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            continue;
        }
        // SAFETY: the rest of a stack buffer, for its length.
        let n = unsafe { libc::read(pipe.as_raw_fd(), word[got..].as_mut_ptr().cast(), 4 - got) };
        match usize::try_from(n) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
            }
            Err(_) => return None,
        }
    }
    u32::try_from(i32::from_ne_bytes(word))
        .ok()
        .filter(|p| *p > 0)
}

/// A Landlock denial as a kernel record of the session.
fn entry(session: &str, d: Denial) -> Entry {
    let mut detail = d.detail;
    let blockers = detail["blockers"].as_str().unwrap_or("?").to_string();
    let object = ["path", "name", "opid", "ocomm"]
        .iter()
        .find_map(|k| detail[*k].as_str().map(|v| format!(" on {v}")))
        .unwrap_or_default();
    detail["message"] = json!(format!(
        "the kernel's Landlock sandbox of this session denied {blockers}{object}: outside what the policy allows the agent"
    ));
    Entry::kernel(session, "landlock", d.reason, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatewayd_core::audit::{Decision, Source};

    #[test]
    fn a_denial_becomes_a_kernel_record_a_model_can_read() {
        let d = Denial {
            reason: "exec_not_allowed",
            detail: json!({"blockers": "fs.execute", "path": "/tmp/x", "landlock_domain": "a1"}),
        };
        let e = entry("s1", d);
        assert_eq!(e.source, Source::Kernel);
        assert_eq!(e.hook.as_deref(), Some("landlock"));
        assert_eq!(e.reason, "exec_not_allowed");
        assert_eq!(e.decision, Decision::Deny);
        let m = e.detail["message"].as_str().unwrap();
        assert!(m.contains("fs.execute on /tmp/x"), "{m}");
    }

    #[test]
    fn the_init_pid_is_read_from_the_pipe_and_a_closed_pipe_is_none() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        nix::unistd::write(&w, &4242i32.to_ne_bytes()).unwrap();
        let stop = AtomicBool::new(false);
        assert_eq!(init_pid(&r, &stop), Some(4242));
        drop(w);
        assert_eq!(init_pid(&r, &stop), None);
    }
}
