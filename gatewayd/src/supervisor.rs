//! `gatewayd run`: one agent, in a fresh cgroup, under both layers.
//!
//! Order: open the audit log → create the cgroup → open the host's shared kernel program set
//! (loading and pinning it when the host has none) and add this session's entries to it
//! (refusing to start when the policy requires a piece this kernel lacks) → record the
//! session start and the tier reached → spawn the agent, which before exec moves into a PID
//! namespace of its own below a small init and into the cgroup, drops root's powers and takes
//! its seccomp filter ([`crate::agent_privileges`]); the init and everything in the namespace
//! die with gatewayd (`PR_SET_PDEATHSIG`) → forward SIGINT/SIGTERM/SIGHUP/
//! SIGQUIT; SIGUSR1 turns all of the agent's egress off for the rest of the session (the
//! kernel's lockdown switch, the same one the Rule of Two uses) → on exit: drain kernel
//! events, kill what is left in the cgroup, remove the session's entries (the programs stay,
//! pinned, for the next session), remove the cgroup, record the session end. The agent's
//! exit code passes through (128 + signal when it was killed by one).
//!
//! The agent also gets the daemon's protocol on a socket of its own, with its session open
//! ([`agent_gateway`]): a session that trips the Rule of Two locks the cgroup's egress, and
//! a kernel denial of a protected file counts toward its Rule of Two (`suspicion`).
//!
//! One audit log: kernel denials and the gateway's decisions go through one group-commit
//! writer thread ([`AuditWriter`]); the runtime that forwards signals never waits on a disk.
//!
//! Module map: [`agent_gateway`] (the agent's gateway, its socket, the lockdown hook),
//! `agent_process` (spawn, signals, SIGUSR1), `records` (run's own records, kernel records
//! to the writer), [`egress_hosts`] (the egress allowlist's host names, resolved into the
//! kernel and kept current with their TTL), `landlock_records` (tier 2's Landlock denials,
//! read from the kernel's audit subsystem).
use std::{os::unix::process::ExitStatusExt as _, path::PathBuf, sync::Arc};

use serde_json::json;
use tokio::sync::mpsc;

use gatewayd_core::{
    audit::{
        AuditLog, Decision, Entry,
        writer::{AuditWriter, WriteError},
    },
    clock::{Clock, SystemClock},
    policy::{AuditFailure, Policy, UnixEntry},
};
use gatewayd_kernel::{
    agent_privileges::{AgentPrivileges, PrivilegesError, hide, private_tmp},
    cgroup::{self, AgentCgroup},
    kernel::{self, KernelSpec, Session, SharedPrograms, Tier},
    landlock, session_limits,
};

pub mod agent_gateway;
mod agent_process;
pub mod egress_hosts;
mod landlock_records;
pub mod left_behind;
mod records;

use agent_process::{Agent, SpawnError, spawn_and_wait};
use records::{AUDIT_QUEUE, Suspicion, append, forward_kernel_records};

/// Why `gatewayd run` did not start the agent, or lost track of it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The audit log could not be opened or written.
    #[error("audit log: {0}")]
    Audit(#[from] gatewayd_core::audit::AuditError),
    /// The audit writer failed to make a record durable.
    #[error("audit log: {0}")]
    AuditWrite(#[from] WriteError),
    /// The audit writer thread could not be started.
    #[error("cannot start the audit writer thread: {0}")]
    AuditThread(std::io::Error),
    /// The agent's gateway (its socket and session) could not be set up.
    #[error("refusing to start the agent: {0}")]
    Gateway(#[from] agent_gateway::AgentGatewayError),
    /// The agent's cgroup could not be created.
    #[error("agent cgroup: {0}")]
    Cgroup(#[from] gatewayd_kernel::cgroup::CgroupError),
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
    /// The session's own `/tmp` could not be made (`sandbox.private_tmp`).
    #[error("refusing to start the agent: {0}")]
    PrivateTmp(#[from] private_tmp::PrivateTmpError),
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
    /// The user the agent's gateway session acts for when the agent's own user has no name
    /// (recorded; docs/PROTOCOL.md).
    pub session_user: String,
    /// The gateway session's scopes (docs/POLICY.md).
    pub scopes: Vec<String>,
    /// Where the session's socket directory is made
    /// ([`agent_gateway::default_runtime_dir`]).
    pub runtime_dir: PathBuf,
    /// `--preserve-fd`: descriptors above 2 passed to the agent; every other is closed at
    /// its exec.
    pub preserve_fds: Vec<i32>,
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

/// Runs the agent to completion. Must be called on a current-thread runtime from the main
/// thread: `PR_SET_PDEATHSIG` fires when the *thread* that forked the agent exits.
pub async fn run(opts: RunOptions) -> Result<RunOutcome, RunError> {
    let started = std::time::Instant::now();
    let program = opts.agent.first().ok_or(RunError::NoAgent)?.clone();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let session = format!("run-{}-{}", std::process::id(), clock.now_ms());
    let writer = AuditWriter::start(AuditLog::open(&opts.audit_path, clock.clone())?)
        .map_err(RunError::AuditThread)?;
    let audit = writer.handle();
    let mut privileges =
        match AgentPrivileges::resolve(opts.user.as_deref(), &opts.policy.agent, |k| {
            std::env::var(k).ok()
        })
        .and_then(|mut p| p.preserve_fds(&opts.preserve_fds).map(|()| p))
        {
            Ok(p) => p,
            Err(e) => {
                let entry = Entry::gateway(
                    &session,
                    Decision::Deny,
                    "agent_user",
                    json!({"agent": opts.agent, "error": e.to_string(),
                    "message": "the agent's user could not be settled; it was not started"}),
                );
                append(&audit, entry).await?;
                return Err(e.into());
            }
        };

    privileges.devices(&opts.policy.sandbox.devices);
    let read_only = opts
        .policy
        .sandbox
        .read_only_with_defaults(privileges.home.as_deref().map(std::path::Path::new));
    privileges.read_only(&read_only, &opts.policy.sandbox.writable);
    let oom_score_adj = session_limits::protect_from_oom_killer()
        .map_or_else(|e| json!({"not_lowered": e.to_string()}), |()| json!(-999));
    let cgroup = AgentCgroup::create(&session)?;
    let limits = session_limits::apply(
        &cgroup::cgroup2_mount()?,
        cgroup.path(),
        session_limits::Limits::for_agent(&opts.policy.agent),
    );
    // The policy and the audit log are protected paths too (self-protection).
    let mut policy = opts.policy.clone();
    for own in [&opts.policy_path, &opts.audit_path] {
        if let Ok(p) = std::fs::canonicalize(own) {
            policy.sandbox.protected.push(p);
        }
    }
    // Removed when `run` returns, after the cgroup is empty.
    let session_tmp = private_tmp::for_sandbox(&mut policy.sandbox, &session)?;
    if let Some(t) = &session_tmp {
        privileges.private_tmp(t.dir());
    }
    let (spec, mut warnings) = KernelSpec::from_policy(&policy, cgroup.path().to_owned());
    if spec.exec_enforced {
        let resolved = crate::mcp::server::resolve_program(&program);
        let key = resolved
            .as_ref()
            .and_then(|p| kernel::spec::inode_key(p).ok());
        if !key.is_some_and(|k| spec.exec_keys().contains(&k)) {
            let resolved = resolved.map_or_else(|| "not found".into(), |p| p.display().to_string());
            let entry = Entry::gateway(
                &session,
                Decision::Deny,
                "exec_not_allowed",
                json!({
                    "agent": opts.agent, "resolved": resolved,
                    "message": "the agent's own program is not in the policy's exec allowlist; it was not started",
                }),
            );
            append(&audit, entry).await?;
            return Err(RunError::AgentNotInExec {
                agent: program,
                resolved,
            });
        }
    }
    let opening = std::time::Instant::now();
    let (programs, ksession, add_ms) = match open_session(&spec) {
        Ok(p) => p,
        Err(e) => {
            let message = if matches!(e, kernel::KernelError::Required { .. }) {
                "the policy requires kernel enforcement this kernel cannot give; the agent was not started"
            } else {
                "the kernel layer could not take this session; the agent was not started"
            };
            let entry = Entry::gateway(
                &session,
                Decision::Deny,
                "kernel_unavailable",
                json!({
                    "agent": opts.agent, "policy": opts.policy_path, "error": kernel::chain(&e),
                    "message": message,
                }),
            );
            append(&audit, entry).await?;
            return Err(e.into());
        }
    };
    let open_ms = opening.elapsed().as_secs_f64() * 1000.0;
    let phases: serde_json::Map<String, serde_json::Value> = programs
        .phases()
        .iter()
        .copied()
        .chain([("add", add_ms)])
        .map(|(p, ms)| (p.to_string(), json!(ms)))
        .collect();
    let mut pieces: serde_json::Map<String, serde_json::Value> = programs
        .status()
        .iter()
        .map(|s| (s.program.name.to_string(), json!(s.state())))
        .collect();
    // Without BPF LSM, Landlock stands in for the file sandbox and the exec allowlist.
    let ruleset = if Tier::resolve(programs.status(), true) == Tier::CgroupLandlock {
        landlock_fallback(&policy, &program, &mut pieces).inspect(|_| {
            // Landlock grants every path; the protected ones are hidden by mounts instead.
            let (mut hiding, links) =
                hide::Hiding::plan(&policy.sandbox.protected, &policy.sandbox.exec);
            // Landlock has no right for path-named sockets: the host's are covered instead,
            // but for the listed ones and the session's own gateway socket.
            let mut allowed: Vec<PathBuf> = policy
                .network
                .unix
                .iter()
                .filter_map(|e| match UnixEntry::parse(e) {
                    Ok(UnixEntry::Path(p)) => Some(p),
                    _ => None,
                })
                .collect();
            allowed.push(agent_gateway::paths(&opts.runtime_dir, &session).1);
            hiding.cover_sockets(&allowed);
            privileges.hide(hiding);
            warnings.extend(
                links
                    .into_iter()
                    .map(|(path, message)| kernel::spec::SpecWarning { path, message }),
            );
        })
    } else {
        None
    };
    let tier = Tier::resolve(programs.status(), ruleset.is_some());
    let denials = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (records, kernel_records) = mpsc::channel(AUDIT_QUEUE);
    // Tier 2's denials, where the kernel logs them to audit and audit is on.
    let (landlock_reader, tell_init) = match &ruleset {
        Some(rs) => {
            let sink = landlock_records::Sink {
                session: session.clone(),
                records: records.clone(),
                denials: denials.clone(),
            };
            match landlock_records::LandlockRecords::start(rs.abi, sink) {
                Ok((reader, tell)) => {
                    pieces.insert("landlock_audit".into(), json!("recorded"));
                    (Some(reader), Some(tell))
                }
                Err(why) => {
                    pieces.insert(
                        "landlock_audit".into(),
                        json!(format!("not recorded: {why}")),
                    );
                    (None, None)
                }
            }
        }
        None => (None, None),
    };
    let (_, socket) = agent_gateway::paths(&opts.runtime_dir, &session);
    if tier == Tier::Full {
        privileges.leave_to_bpf_lsm();
    }
    append(
        &audit,
        Entry::gateway(
            &session,
            Decision::Info,
            "session_start",
            json!({
                "agent": opts.agent,
                "policy": opts.policy_path,
                "socket": socket,
                "cgroup": cgroup.path(),
                "cgroup_id": cgroup.id(),
                "limits": limits.describe(),
                "gatewayd_oom_score_adj": oom_score_adj,
                "program_set": {
                    "pins": programs.pin_dir(),
                    "adopted": programs.adopted(),
                    "stale_sessions_removed": programs.cleaned().len(),
                    "open_ms": open_ms,
                    "phases_ms": phases,
                    "file_index": match ksession.file_index() {
                        Ok(inodes) => json!({"indexed": inodes}),
                        Err(why) => json!({"walk": why.to_string()}),
                    },
                },
                "startup_ms": started.elapsed().as_secs_f64() * 1000.0,
                "tier": tier.as_str(),
                "tier_level": tier.level(),
                "kernel": pieces,
                "agent_privileges": privileges.describe(),
                "warnings": warnings.iter().map(|w| format!("{}: {}", w.path.display(), w.message)).collect::<Vec<_>>(),
            }),
        ),
    )
    .await?;

    let (handle, kernel_task) = {
        let session = session.clone();
        let denials = denials.clone();
        kernel::task::spawn(ksession, spec, records, move |d| {
            denials.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            records::KernelRecord {
                reason: d.reason,
                entry: d.into_entry(&session),
            }
        })?
    };
    // The host names of the egress allowlist, resolved into the kernel before the agent runs.
    let resolving = egress_hosts::start(
        egress_hosts::host_entries(&policy),
        handle.clone(),
        egress_hosts::Reporting {
            audit: audit.clone(),
            session: session.clone(),
        },
    )
    .await;
    // The policy as written: its protected files are read for the session's secrets, and the
    // audit log (which names the session) must not be one of them. The gateway protects the
    // policy file and the audit log from tool arguments on its own.
    let gateway = agent_gateway::AgentGateway::start(agent_gateway::Setup {
        policy: &opts.policy,
        protect: vec![opts.policy_path.clone(), opts.audit_path.clone()],
        audit: audit.clone(),
        clock: clock.clone(),
        cgroup_dir: cgroup.path(),
        session: &session,
        user: privileges.name.as_deref().unwrap_or(&opts.session_user),
        agent_owner: (privileges.uid, privileges.gid),
        scopes: &opts.scopes,
        runtime_dir: &opts.runtime_dir,
        kernel: handle.clone(),
    })
    .await;
    let suspicion = gateway.as_ref().ok().map(|gw| Suspicion {
        gateway: gw.gateway(),
        cgroup: gw.cgroup().to_owned(),
    });
    let forwarder = tokio::spawn(forward_kernel_records(
        kernel_records,
        audit.clone(),
        suspicion,
        records::WhenUnrecorded {
            stop: opts.policy.on_audit_failure == AuditFailure::Stop,
            cgroup: cgroup.path().to_owned(),
            stopped: false,
        },
    ));

    let restrict = ruleset
        .as_ref()
        .map(gatewayd_kernel::landlock::Ruleset::restrict_fn);
    // The private mount namespace, the cgroup, Landlock, the credentials, seccomp.
    let confine = privileges.pre_exec_fn(
        cgroup.enter_fn(),
        move || restrict.as_ref().map_or(Ok(()), |r| r()),
        tell_init,
    );
    let left = left_behind::Snapshot::take(
        &policy
            .sandbox
            .writable
            .iter()
            .chain(&policy.sandbox.root)
            .cloned()
            .collect::<Vec<_>>(),
    );
    let (status, gateway) = match gateway {
        Ok(gw) => {
            let mut env: Vec<(&'static str, std::ffi::OsString)> = gw.env().to_vec();
            env.extend(privileges.env().into_iter().map(|(k, v)| (k, v.into())));
            let agent = Agent {
                argv: &opts.agent,
                confine,
                env: &env,
            };
            (
                spawn_and_wait(agent, &handle, &audit, &session).await,
                Some(gw),
            )
        }
        Err(e) => (Err(SpawnError::Gateway(e)), None),
    };
    drop(ruleset);
    if let Some(task) = resolving {
        task.abort();
        let _ = task.await;
    }
    let dropped = handle.drain().await;
    let kill = cgroup.kill_all();
    if let Some(gw) = gateway {
        gw.stop().await;
    }
    drop(handle);
    // Now that nothing runs in the cgroup, the session's entries go; the programs stay.
    let entries = match kernel_task.await {
        Ok(ks) => ks.remove().map_err(|e| kernel::chain(&e)),
        Err(e) => Err(format!("the kernel task failed: {e}")),
    };
    let hits = session_limits::Hits::read(cgroup.path());
    let removed = cgroup.remove();
    if let Some(reader) = landlock_reader {
        reader.finish().await;
    }
    // The kernel task and the Landlock reader dropped their senders when they ended:
    // everything they sent is submitted.
    let _ = forwarder.await;
    report_left_behind(&audit, &session, &left).await?;

    let status = status.map_err(|e| match e {
        SpawnError::Spawn(error) => RunError::Spawn {
            agent: program.clone(),
            error,
        },
        SpawnError::Wait(e) => RunError::Wait(e),
        SpawnError::Gateway(e) => RunError::Gateway(e),
    });
    let exit_code = match &status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 127,
    };
    if dropped > 0 {
        append(
            &audit,
            Entry::gateway(
                &session,
                Decision::Info,
                "events_dropped",
                json!({
                    "count": dropped,
                    "message": "the kernel denied these but this session's event buffer was full, so they have no record of their own",
                }),
            ),
        )
        .await?;
    }
    append(
        &audit,
        Entry::gateway(
            &session,
            Decision::Info,
            "session_end",
            json!({
                "exit_code": exit_code,
                "error": status.as_ref().err().map(std::string::ToString::to_string),
                "kernel_denials": denials.load(std::sync::atomic::Ordering::Relaxed),
                "cleanup": kill.and(removed).err().map(|e| e.to_string()).or(entries.err()),
                "limits_met": hits.any().then(|| hits.describe()),
            }),
        ),
    )
    .await?;
    writer.close()?;
    status?;
    Ok(RunOutcome {
        exit_code,
        tier,
        kernel_denials: denials.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// The watched files the agent created, changed or removed (`left_behind`): a record and a
/// line on the terminal, for the user to review before their own tools run them.
async fn report_left_behind(
    audit: &gatewayd_core::audit::writer::WriterHandle,
    session: &str,
    snap: &left_behind::Snapshot,
) -> Result<(), RunError> {
    let changed = snap.changed();
    if changed.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "gatewayd: the agent created or changed files that your own tools run later; review them before running git or opening an editor here: {}",
        shown.join(", ")
    );
    let detail = json!({"paths": shown,
        "message": "the agent created, changed or removed files that git, direnv, editors or hook managers run or load later"});
    append(
        audit,
        Entry::gateway(session, Decision::Info, "left_behind", detail),
    )
    .await?;
    Ok(())
}

/// Opens the host's program set and adds this session (owned by this process) to it.
/// Also returns how long adding the session took (ms).
fn open_session(spec: &KernelSpec) -> Result<(SharedPrograms, Session, f64), kernel::KernelError> {
    let programs = SharedPrograms::open_or_load()?;
    let adding = std::time::Instant::now();
    let session = programs.add_session(spec, std::process::id())?;
    Ok((programs, session, adding.elapsed().as_secs_f64() * 1000.0))
}

/// Builds the tier-2 Landlock ruleset and notes the outcome in `pieces` (the start record).
fn landlock_fallback(
    policy: &Policy,
    program: &str,
    pieces: &mut serde_json::Map<String, serde_json::Value>,
) -> Option<landlock::Ruleset> {
    let fs = landlock::FsPolicy {
        exec: policy.sandbox.exec.clone(),
        roots: gatewayd_kernel::fs_roots::FsRoots::of(&policy.sandbox),
        program: crate::mcp::server::resolve_program(program),
    };
    match landlock::Ruleset::build(&fs) {
        Ok(rs) => {
            let signals = if rs.scoped_signals {
                ", signals and abstract Unix sockets scoped"
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
