//! `gatewayd run`: one agent, in a fresh cgroup, under both layers.
//!
//! Order: open the audit log → create the cgroup → open the host's shared kernel program set
//! (loading and pinning it when the host has none) and add this session's entries to it
//! (refusing to start when the policy requires a piece this kernel lacks) → record the
//! session start and the tier reached → spawn the agent, which moves itself into the cgroup
//! before exec, drops root's powers and takes its seccomp filter ([`crate::agent_privileges`]),
//! and dies with gatewayd (`PR_SET_PDEATHSIG`) → forward SIGINT/SIGTERM/SIGHUP/
//! SIGQUIT; SIGUSR1 turns all of the agent's egress off for the rest of the session (the
//! kernel's lockdown switch, the same one the Rule of Two uses) → on exit: drain kernel
//! events, kill what is left in the cgroup, remove the session's entries (the programs stay,
//! pinned, for the next session), remove the cgroup, record the session end. The agent's
//! exit code passes through (128 + signal when it was killed by one).
//!
//! While the agent runs, the runtime only forwards signals and reads kernel events: audit
//! records go through `audit_writer`, which appends (and fsyncs) off the runtime.
use std::{
    os::unix::process::ExitStatusExt as _,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use serde_json::json;
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::mpsc,
    task::JoinHandle,
};

use crate::{
    agent_privileges::{AgentPrivileges, PrivilegesError},
    audit::{AuditLog, Decision, Entry, Source},
    cgroup::AgentCgroup,
    clock::{Clock, SystemClock},
    kernel::{self, KernelSpec, Session, SharedPrograms, Tier},
    landlock,
    policy::Policy,
};

/// Why `gatewayd run` did not start the agent, or lost track of it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The audit log could not be opened or written.
    #[error("audit log: {0}")]
    Audit(#[from] crate::audit::AuditError),
    /// The agent's cgroup could not be created.
    #[error("agent cgroup: {0}")]
    Cgroup(#[from] crate::cgroup::CgroupError),
    /// A kernel program the policy requires did not load or attach.
    #[error("refusing to start the agent")]
    Kernel(#[from] kernel::KernelError),
    /// The agent process could not be spawned.
    #[error("cannot start the agent `{agent}`: {error}")]
    Spawn {
        /// The program, as given.
        agent: String,
        /// The spawn error.
        error: std::io::Error,
    },
    /// Waiting for the agent to exit failed.
    #[error("waiting for the agent: {0}")]
    Wait(std::io::Error),
    /// The agent command line is empty.
    #[error("no agent command given")]
    NoAgent,
    /// The agent's user or privileges could not be settled; nothing was started.
    #[error("refusing to start the agent: {0}")]
    Privileges(#[from] PrivilegesError),
    /// The policy's exec allowlist does not contain the agent's own program; nothing was started.
    #[error(
        "refusing to start the agent: `{agent}` ({resolved}) is not in the policy's exec allowlist (sandbox.exec), so the kernel would refuse to run it"
    )]
    AgentNotInExec {
        /// The program, as given.
        agent: String,
        /// Its canonical path (looked up in `PATH` for a bare name), or `not found`.
        resolved: String,
    },
}

/// What `gatewayd run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The policy, already loaded.
    pub policy: Policy,
    /// The policy file (protected from the agent).
    pub policy_path: PathBuf,
    /// The audit log file (protected from the agent).
    pub audit_path: PathBuf,
    /// The agent's command line: program and arguments.
    pub agent: Vec<String>,
    /// `--user`: whom the agent runs as (a name, a uid or `root`); `None`: the policy's
    /// `agent.user`, else the user who ran `sudo`.
    pub user: Option<String>,
}

/// How the session went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// The agent's exit code (128 + signal number when a signal ended it).
    pub exit_code: i32,
    /// Enforcement tier reached.
    pub tier: Tier,
    /// Kernel denials recorded.
    pub kernel_denials: u64,
}

type SharedAudit = Arc<Mutex<AuditLog>>;

fn append(audit: &SharedAudit, entry: Entry) -> Result<(), crate::audit::AuditError> {
    let mut log = audit
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    log.append(entry).map(|_| ())
}

/// Entries the writer may hold before senders wait (the kernel task then leaves events in
/// the kernel's ring buffer, which counts what it cannot hold).
const AUDIT_QUEUE: usize = 1024;

/// Appends the entries sent to it, in order, on a blocking-pool thread, so an append's
/// fsync never stalls the runtime that forwards signals. The task ends, with everything
/// written, once every sender is dropped. A failed write loses that record (the kernel has
/// already decided) and is reported on stderr.
fn audit_writer(audit: SharedAudit) -> (mpsc::Sender<Entry>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Entry>(AUDIT_QUEUE);
    let join = tokio::task::spawn_blocking(move || {
        while let Some(entry) = rx.blocking_recv() {
            let what = format!(
                "{} {}",
                entry.hook.as_deref().unwrap_or("gateway"),
                entry.reason
            );
            if let Err(e) = append(&audit, entry) {
                eprintln!("gatewayd: audit write failed for {what}: {e}");
            }
        }
    });
    (tx, join)
}

/// A gateway record of something refused on the agent's behalf (not a tool call).
fn denial(session: &str, reason: &str, detail: serde_json::Value) -> Entry {
    Entry {
        decision: Decision::Deny,
        ..info(session, reason, detail)
    }
}

fn info(session: &str, reason: &str, detail: serde_json::Value) -> Entry {
    Entry {
        source: Source::Gateway,
        session: session.to_string(),
        tool: None,
        hook: None,
        decision: Decision::Info,
        reason: reason.to_string(),
        detail,
    }
}

/// Runs the agent to completion. Must be called on a current-thread runtime from the main
/// thread: `PR_SET_PDEATHSIG` fires when the *thread* that forked the agent exits.
pub async fn run(opts: RunOptions) -> Result<RunOutcome, RunError> {
    let started = std::time::Instant::now();
    let program = opts.agent.first().ok_or(RunError::NoAgent)?.clone();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let session = format!("run-{}-{}", std::process::id(), clock.now_ms());
    let audit: SharedAudit = Arc::new(Mutex::new(AuditLog::open(&opts.audit_path, clock.clone())?));
    let mut privileges =
        match AgentPrivileges::resolve(opts.user.as_deref(), &opts.policy.agent, |k| {
            std::env::var(k).ok()
        }) {
            Ok(p) => p,
            Err(e) => {
                let entry = denial(
                    &session,
                    "agent_user",
                    json!({"agent": opts.agent, "error": e.to_string(),
                    "message": "the agent's user could not be settled; it was not started"}),
                );
                append(&audit, entry)?;
                return Err(e.into());
            }
        };

    let cgroup = AgentCgroup::create(&session)?;
    // The policy and the audit log are protected paths too (self-protection).
    let mut policy = opts.policy.clone();
    for own in [&opts.policy_path, &opts.audit_path] {
        if let Ok(p) = std::fs::canonicalize(own) {
            policy.sandbox.protected.push(p);
        }
    }
    let (spec, warnings) = KernelSpec::from_policy(&policy, cgroup.path().to_owned());
    if spec.exec_enforced {
        let resolved = resolve_program(&program);
        let key = resolved
            .as_ref()
            .and_then(|p| kernel::spec::inode_key(p).ok());
        if !key.is_some_and(|k| spec.exec_keys().contains(&k)) {
            let resolved = resolved.map_or_else(|| "not found".into(), |p| p.display().to_string());
            let entry = denial(
                &session,
                "exec_not_allowed",
                json!({
                    "agent": opts.agent, "resolved": resolved,
                    "message": "the agent's own program is not in the policy's exec allowlist; it was not started",
                }),
            );
            append(&audit, entry)?;
            return Err(RunError::AgentNotInExec {
                agent: program,
                resolved,
            });
        }
    }
    let opening = std::time::Instant::now();
    let (programs, ksession) = match open_session(&spec) {
        Ok(p) => p,
        Err(e) => {
            let message = if matches!(e, kernel::KernelError::Required { .. }) {
                "the policy requires kernel enforcement this kernel cannot give; the agent was not started"
            } else {
                "the kernel layer could not take this session; the agent was not started"
            };
            let entry = denial(
                &session,
                "kernel_unavailable",
                json!({
                    "agent": opts.agent, "policy": opts.policy_path, "error": kernel::chain(&e),
                    "message": message,
                }),
            );
            append(&audit, entry)?;
            return Err(e.into());
        }
    };
    let open_ms = opening.elapsed().as_secs_f64() * 1000.0;
    let mut pieces: serde_json::Map<String, serde_json::Value> = programs
        .status()
        .iter()
        .map(|s| (s.program.name.to_string(), json!(s.state())))
        .collect();
    // Without BPF LSM, Landlock stands in for the file sandbox and the exec allowlist.
    let ruleset = if Tier::resolve(programs.status(), true) == Tier::CgroupLandlock {
        landlock_fallback(&policy, &mut pieces)
    } else {
        None
    };
    let tier = Tier::resolve(programs.status(), ruleset.is_some());
    if tier == Tier::Full {
        privileges.leave_to_bpf_lsm();
    }
    append(
        &audit,
        info(
            &session,
            "session_start",
            json!({
                "agent": opts.agent,
                "policy": opts.policy_path,
                "cgroup": cgroup.path(),
                "cgroup_id": cgroup.id(),
                "program_set": {
                    "pins": programs.pin_dir(),
                    "adopted": programs.adopted(),
                    "stale_sessions_removed": programs.cleaned().len(),
                    "open_ms": open_ms,
                },
                "startup_ms": started.elapsed().as_secs_f64() * 1000.0,
                "tier": tier.as_str(),
                "tier_level": tier.level(),
                "kernel": pieces,
                "agent_privileges": privileges.describe(),
                "warnings": warnings.iter().map(|w| format!("{}: {}", w.path.display(), w.message)).collect::<Vec<_>>(),
            }),
        ),
    )?;

    let denials = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (records, writer) = audit_writer(audit.clone());
    let (handle, kernel_task) = {
        let session = session.clone();
        let denials = denials.clone();
        kernel::task::spawn(ksession, spec, records.clone(), move |d| {
            denials.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Entry {
                source: Source::Kernel,
                session: session.clone(),
                tool: None,
                hook: Some(d.hook.to_string()),
                decision: Decision::Deny,
                reason: d.reason.to_string(),
                detail: d.detail,
            }
        })?
    };

    let restrict = ruleset.as_ref().map(super::landlock::Ruleset::restrict_fn);
    // The private mount namespace, the cgroup, Landlock, the credentials, seccomp.
    let confine = privileges.pre_exec_fn(cgroup.enter_fn(), move || {
        restrict.as_ref().map_or(Ok(()), |r| r())
    });
    let status = spawn_and_wait(
        &opts.agent,
        &privileges.env(),
        confine,
        &handle,
        &records,
        &session,
    )
    .await;
    drop(ruleset);
    let dropped = handle.drain().await;
    let kill = cgroup.kill_all();
    drop(handle);
    // Now that nothing runs in the cgroup, the session's entries go; the programs stay.
    let entries = match kernel_task.await {
        Ok(ks) => ks.remove().map_err(|e| kernel::chain(&e)),
        Err(e) => Err(format!("the kernel task failed: {e}")),
    };
    let removed = cgroup.remove();
    // Every sender is gone once the kernel task has ended: wait until all is written.
    drop(records);
    let _ = writer.await;

    let status = status.map_err(|e| match e {
        SpawnError::Spawn(error) => RunError::Spawn {
            agent: program.clone(),
            error,
        },
        SpawnError::Wait(e) => RunError::Wait(e),
    });
    let exit_code = match &status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 127,
    };
    if dropped > 0 {
        append(
            &audit,
            info(
                &session,
                "events_dropped",
                json!({
                    "count": dropped,
                    "message": "the kernel denied these but this session's event buffer was full, so they have no record of their own",
                }),
            ),
        )?;
    }
    append(
        &audit,
        info(
            &session,
            "session_end",
            json!({
                "exit_code": exit_code,
                "error": status.as_ref().err().map(std::string::ToString::to_string),
                "kernel_denials": denials.load(std::sync::atomic::Ordering::Relaxed),
                "cleanup": kill.and(removed).err().map(|e| e.to_string()).or(entries.err()),
            }),
        ),
    )?;
    status?;
    Ok(RunOutcome {
        exit_code,
        tier,
        kernel_denials: denials.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// Opens the host's program set and adds this session (owned by this process) to it.
fn open_session(spec: &KernelSpec) -> Result<(SharedPrograms, Session), kernel::KernelError> {
    let programs = SharedPrograms::open_or_load()?;
    let session = programs.add_session(spec, std::process::id())?;
    Ok((programs, session))
}

/// Builds the tier-2 Landlock ruleset and notes the outcome in `pieces` (the start record).
fn landlock_fallback(
    policy: &Policy,
    pieces: &mut serde_json::Map<String, serde_json::Value>,
) -> Option<landlock::Ruleset> {
    let fs = landlock::FsPolicy {
        protected: policy.sandbox.protected.clone(),
        read_only: vec![PathBuf::from("/sys/fs/cgroup")],
        exec: policy.sandbox.exec.clone(),
    };
    match landlock::Ruleset::build(&fs) {
        Ok(rs) => {
            let signals = if rs.scoped_signals {
                ", signals scoped"
            } else {
                ""
            };
            let state = format!("applied (ABI {}, {} rules{signals})", rs.abi, rs.rules);
            pieces.insert("landlock".into(), json!(state));
            Some(rs)
        }
        Err(e) => {
            pieces.insert("landlock".into(), json!(format!("not applied: {e}")));
            None
        }
    }
}

/// Where `execvp` would find `program`: itself when it contains a `/`, else the first
/// executable match on `$PATH`.
fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return std::fs::canonicalize(program).ok();
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::X_OK).is_ok() && p.is_file()
        })
        .and_then(|p| std::fs::canonicalize(p).ok())
}

enum SpawnError {
    Spawn(std::io::Error),
    Wait(std::io::Error),
}

/// Signals gatewayd forwards to the agent.
const FORWARDED: [fn() -> SignalKind; 4] = [
    SignalKind::interrupt,
    SignalKind::terminate,
    SignalKind::hangup,
    SignalKind::quit,
];

async fn spawn_and_wait(
    agent: &[String],
    env: &[(&str, String)],
    confine: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
    kernel: &kernel::task::Handle,
    records: &mpsc::Sender<Entry>,
    session: &str,
) -> Result<std::process::ExitStatus, SpawnError> {
    // Registered before the agent exists, so no signal finds gatewayd without its handler.
    let mut sigs = Vec::new();
    for kind in FORWARDED.map(|k| k()) {
        sigs.push((kind, signal(kind).map_err(SpawnError::Spawn)?));
    }
    let mut lockdown = signal(SignalKind::user_defined1()).map_err(SpawnError::Spawn)?;
    let mut cmd = tokio::process::Command::new(&agent[0]);
    cmd.args(&agent[1..]);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let parent = nix::unistd::getpid();
    // SAFETY: the closure only makes async-signal-safe syscalls in the forked child (prctl,
    // getppid, unshare, mount, open, write, close, landlock, setgroups/setres[ug]id, capset,
    // seccomp), on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // gatewayd died between fork and prctl: do not run unsupervised.
            if libc::getppid() != parent.as_raw() {
                libc::_exit(137);
            }
            // Into the cgroup (Landlock then forbids writing cgroup files), and the agent's
            // privileges dropped (`agent_privileges`).
            confine()
        });
    }
    let mut child = cmd.spawn().map_err(SpawnError::Spawn)?;
    let pid = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    loop {
        let forward = async {
            let futs = sigs
                .iter_mut()
                .map(|(k, s)| Box::pin(async move { s.recv().await.map(|()| *k) }));
            futures_select_all(futs).await
        };
        tokio::select! {
            st = child.wait() => return st.map_err(SpawnError::Wait),
            Some(kind) = forward => {
                if let (Some(pid), Ok(sig)) = (pid, nix::sys::signal::Signal::try_from(kind.as_raw_value())) {
                    let _ = nix::sys::signal::kill(pid, sig);
                }
            }
            Some(()) = lockdown.recv() => {
                // The operator's switch: deny all egress of the agent's cgroup from now on.
                let result = kernel.lockdown(true).await;
                let entry = denial(session, "egress_lockdown", json!({
                    "trigger": "SIGUSR1",
                    "error": result.as_ref().err().map(|e| kernel::chain(e)),
                    "message": "all egress of the agent's cgroup is denied from now on",
                }));
                if records.send(entry).await.is_err() {
                    eprintln!("gatewayd: the audit writer has stopped; the egress lockdown is not recorded");
                }
            }
        }
    }
}

/// The first of several signal streams to fire.
async fn futures_select_all<F>(
    futs: impl Iterator<Item = std::pin::Pin<Box<F>>>,
) -> Option<SignalKind>
where
    F: std::future::Future<Output = Option<SignalKind>>,
{
    let mut futs: Vec<_> = futs.collect();
    std::future::poll_fn(move |cx| {
        for f in &mut futs {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}
