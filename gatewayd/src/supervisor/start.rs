//! `gatewayd run`, phases 2 and 3: start what serves the session (the `session_start` record,
//! the kernel task and the path of its records, the egress host names, the agent's gateway),
//! then run the agent to its end under all of it.
use std::{
    ffi::OsString,
    os::fd::OwnedFd,
    sync::{Arc, atomic::AtomicU64},
    time::Instant,
};

use serde_json::{Value, json};
use tokio::{sync::mpsc, task::JoinHandle};

use super::{
    RunError, agent_gateway,
    agent_process::{Agent, SpawnError, spawn_and_wait},
    canary::CanaryAlarm,
    egress_hosts, egress_proxy, landlock_records, left_behind,
    prepare::{Ctx, Prepared},
    records::{self, AUDIT_QUEUE, KernelRecord, Suspicion, append, forward_kernel_records},
};
use gatewayd_core::{
    audit::{Decision, Entry},
    policy::AuditFailure,
};
use gatewayd_kernel::kernel::{self, Tier};

/// A session whose agent can start: what phase 2 started, for phase 3 and the teardown.
pub(super) struct Live {
    pub(super) prepared: Prepared,
    pub(super) handle: kernel::task::Handle,
    pub(super) kernel_task: JoinHandle<kernel::Session>,
    /// Keeps the egress allowlist's host names current (aborted at the end).
    pub(super) resolving: Option<JoinHandle<()>>,
    /// The session's egress proxy and resolver, for egress by name (aborted at the end).
    pub(super) proxy: Option<JoinHandle<()>>,
    pub(super) gateway: Option<agent_gateway::AgentGateway>,
    /// Canary credentials: watched for by the gateway and the proxy (released at the end).
    pub(super) canary: Option<Arc<CanaryAlarm>>,
    /// Why the gateway could not start (then the agent is not started).
    pub(super) gateway_failed: Option<agent_gateway::AgentGatewayError>,
    /// Hands kernel records to the writer; ends once every sender is gone.
    pub(super) forwarder: JoinHandle<()>,
    /// Tier 2's Landlock denials, when the kernel logs them to audit.
    pub(super) landlock_reader: Option<landlock_records::LandlockRecords>,
    /// Tier 2: refuses the protected names' opens (ended before the forwarder).
    pub(super) name_guard: Option<gatewayd_kernel::name_guard::Serving>,
    /// Tier 2 under `--learn`: learns the agent's files (ended before the forwarder).
    pub(super) fs_learn: Option<gatewayd_kernel::name_guard::Serving>,
    /// Tells the reader the agent's init pid (taken by the agent's pre-exec steps).
    pub(super) tell_init: Option<OwnedFd>,
    /// Kernel denials recorded so far.
    pub(super) denials: Arc<AtomicU64>,
    /// The files the agent could leave for the user's own tools, as they were.
    pub(super) left: left_behind::Snapshot,
}

/// Phase 2: records `session_start` (what the confinement reached, the tier), then starts
/// the kernel task, the egress host names, the agent's gateway and the records' forwarder.
pub(super) async fn start(
    ctx: &Ctx<'_>,
    mut prepared: Prepared,
    started: Instant,
) -> Result<Live, RunError> {
    let denials = Arc::new(AtomicU64::new(0));
    let (records, kernel_records) = mpsc::channel(AUDIT_QUEUE);
    let (landlock_reader, tell_init) = landlock_reader(ctx, &mut prepared, &records, &denials);
    let name_guard = serve_names(ctx, &mut prepared, &records, &denials)?;
    let fs_learn = serve_learn(ctx, &mut prepared, &records)?;
    let detail = session_start(ctx, &prepared, started);
    append(
        &ctx.audit,
        Entry::gateway(&ctx.session, Decision::Info, "session_start", detail),
    )
    .await?;
    let c = &mut prepared.confinement;
    let (ksession, mut spec) = c
        .take_kernel()
        .ok_or(RunError::Internal("the confinement has no kernel session"))?;
    // Landlock's own records carry its refusals: not a second time from their results.
    spec.landlock_refusals &= landlock_reader.is_none();
    let proxy_maps = ksession.proxy_maps();
    let (handle, kernel_task) = spawn_kernel_task(ctx, ksession, spec, records, &denials)?;
    let canary = prepared.decoys.as_ref().and_then(|d| {
        CanaryAlarm::new(d, handle.clone(), ctx.audit.clone(), ctx.session.clone()).map(Arc::new)
    });
    let watch = egress_proxy::Watch {
        inspection: prepared.inspection.clone(),
        canary: canary.clone(),
    };
    let (proxy, resolving) = start_egress(ctx, &c.policy, proxy_maps, &handle, watch).await?;
    let check = canary
        .clone()
        .map(|c| c as Arc<dyn crate::daemon::CanaryCheck>);
    let (gateway, gateway_failed) = match start_gateway(ctx, &prepared, handle.clone(), check).await
    {
        Ok(gw) => (Some(gw), None),
        Err(e) => (None, Some(e)),
    };
    let suspicion = gateway.as_ref().map(|gw| Suspicion {
        gateway: gw.gateway(),
        cgroup: gw.cgroup().to_owned(),
    });
    let c = &prepared.confinement;
    let forwarder = tokio::spawn(forward_kernel_records(
        kernel_records,
        ctx.audit.clone(),
        suspicion,
        records::WhenUnrecorded {
            stop: ctx.opts.policy.on_audit_failure == AuditFailure::Stop,
            cgroup: c.report.cgroup.clone().unwrap_or_default(),
            stopped: false,
        },
    ));
    let left = left_behind_snapshot(&c.policy.sandbox);
    Ok(Live {
        prepared,
        handle,
        kernel_task,
        resolving,
        proxy,
        gateway,
        canary,
        gateway_failed,
        forwarder,
        landlock_reader,
        name_guard,
        fs_learn,
        tell_init,
        denials,
        left,
    })
}

/// The files the agent could leave for the user's own tools, under its writable roots and
/// its root, as they are before it starts.
fn left_behind_snapshot(sandbox: &gatewayd_core::policy::Sandbox) -> left_behind::Snapshot {
    let trees: Vec<_> = sandbox
        .writable
        .iter()
        .chain(&sandbox.root)
        .cloned()
        .collect();
    left_behind::Snapshot::take(&trees)
}

/// The task that reads the session's kernel events into records, counting denials (a
/// learned operation was allowed: no denial, and no suspicion).
fn spawn_kernel_task(
    ctx: &Ctx<'_>,
    ksession: kernel::Session,
    spec: kernel::KernelSpec,
    records: mpsc::Sender<KernelRecord>,
    denials: &Arc<AtomicU64>,
) -> Result<(kernel::task::Handle, JoinHandle<kernel::Session>), RunError> {
    let session = ctx.session.clone();
    let denials = denials.clone();
    Ok(kernel::task::spawn(ksession, spec, records, move |d| {
        let reason = d.reason.filter(|_| !d.learned);
        if !d.learned {
            denials.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        KernelRecord {
            reason,
            entry: d.into_entry(&session),
        }
    })?)
}

/// Egress by name: the proxy and resolver, in place before the agent runs (learn mode
/// learns by name, so it turns the proxy on unless the policy turns it off). Otherwise the
/// host names of the egress allowlist, resolved into the kernel before the agent runs.
async fn start_egress(
    ctx: &Ctx<'_>,
    policy: &gatewayd_core::policy::Policy,
    proxy_maps: kernel::egress_proxy::ProxyMaps,
    handle: &kernel::task::Handle,
    watch: egress_proxy::Watch,
) -> Result<(Option<JoinHandle<()>>, Option<JoinHandle<()>>), RunError> {
    let learn = ctx.opts.learn.is_on();
    // Learn mode turns the proxy on too (unless the policy turns it off), where the proxy
    // can work; else it learns by address. A policy that asks for the proxy needs it.
    let asked = policy.network.by_name();
    let by_name = (asked || (learn && policy.network.proxy != Some(false)))
        && match kernel::egress_proxy::ProxyMaps::check_socket_diag() {
            Ok(()) => true,
            Err(e) if asked => {
                return Err(RunError::EgressProxy(format!(
                    "the egress proxy finds each connection's destination through the kernel's socket diagnostics for TCP (modules inet_diag and tcp_diag), which failed here: {e}. Load them (`modprobe tcp_diag`), or decide egress by address (network.proxy: false and no `*.domain` entry)"
                )));
            }
            Err(e) => {
                eprintln!(
                    "gatewayd: learn mode learns egress by address, not by name: the egress proxy needs the kernel's socket diagnostics for TCP (modules inet_diag and tcp_diag), which failed here ({e})"
                );
                false
            }
        };
    let proxy = if by_name {
        let started = egress_proxy::start(
            &policy.network,
            proxy_maps,
            handle,
            ctx.audit.clone(),
            ctx.session.clone(),
            learn,
            watch,
        )
        .await
        .map_err(RunError::EgressProxy)?;
        Some(started)
    } else {
        None
    };
    let hosts = if by_name {
        Vec::new()
    } else {
        egress_hosts::host_entries(policy)
    };
    let resolving = egress_hosts::start(
        hosts,
        handle.clone(),
        egress_hosts::Reporting {
            audit: ctx.audit.clone(),
            session: ctx.session.clone(),
        },
    )
    .await;
    Ok((proxy, resolving))
}

/// Tier 2's protected names: each refused open becomes a kernel record (`protected_name`,
/// which counts toward the Rule of Two as a protected path does).
fn serve_names(
    ctx: &Ctx<'_>,
    prepared: &mut Prepared,
    records: &mpsc::Sender<KernelRecord>,
    denials: &Arc<AtomicU64>,
) -> Result<Option<gatewayd_kernel::name_guard::Serving>, RunError> {
    let Some(guard) = prepared.name_guard.take() else {
        return Ok(None);
    };
    let (session, records, denials) = (ctx.session.clone(), records.clone(), denials.clone());
    let serving = guard
        .serve(move |d| {
            denials.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let record = KernelRecord {
                entry: name_denial_entry(&session, &d),
                reason: Some(gateway_common::Reason::ProtectedName),
            };
            // The forwarder is gone only at the very end: nothing is left to record.
            let _ = records.blocking_send(record);
        })
        .map_err(RunError::NamesNotEnforced)?;
    Ok(Some(serving))
}

/// Tier 2 under `--learn`: each file access the policy would have refused becomes a kernel
/// `would_deny` record (not a denial: no count, no suspicion).
fn serve_learn(
    ctx: &Ctx<'_>,
    prepared: &mut Prepared,
    records: &mpsc::Sender<KernelRecord>,
) -> Result<Option<gatewayd_kernel::name_guard::Serving>, RunError> {
    let Some(learn) = prepared.fs_learn.take() else {
        return Ok(None);
    };
    let (session, records) = (ctx.session.clone(), records.clone());
    let serving = learn.serve(move |l| {
        let record = KernelRecord {
            entry: l.into_entry(&session),
            reason: None,
        };
        // The forwarder is gone only at the very end: nothing is left to record.
        let _ = records.blocking_send(record);
    })?;
    Ok(Some(serving))
}

/// The audit entry of an open refused by name at tier 2.
fn name_denial_entry(session: &str, d: &gatewayd_kernel::name_guard::NameDenial) -> Entry {
    let message = if d.by_name {
        "this file's name is one of the policy's sandbox.protected_names (a secret by its name, such as .env or a key): opening it is denied; ask the user for what you need from it"
    } else {
        "this file was seen under a name of the policy's sandbox.protected_names and was renamed or linked since: opening it under another name is denied too"
    };
    let detail = json!({
        "pid": d.pid, "path": d.path, "protected_name": d.pattern, "by_name": d.by_name,
        "channel": "fanotify", "message": message,
    });
    Entry::kernel(session, "fanotify/open_perm", "protected_name", detail)
}

/// Tier 2's denials, where the kernel logs them to audit and audit is on.
fn landlock_reader(
    ctx: &Ctx<'_>,
    prepared: &mut Prepared,
    records: &mpsc::Sender<KernelRecord>,
    denials: &Arc<AtomicU64>,
) -> (Option<landlock_records::LandlockRecords>, Option<OwnedFd>) {
    let c = &mut prepared.confinement;
    let Some(abi) = c.ruleset().map(|rs| rs.abi) else {
        return (None, None);
    };
    let sink = landlock_records::Sink {
        session: ctx.session.clone(),
        records: records.clone(),
        denials: denials.clone(),
    };
    let (state, started) = match landlock_records::LandlockRecords::start(abi, sink) {
        Ok((reader, tell)) => (json!("recorded"), (Some(reader), Some(tell))),
        Err(why) => (json!(format!("not recorded: {why}")), (None, None)),
    };
    c.report.pieces.insert("landlock_audit".into(), state);
    started
}

/// The `session_start` record's detail: the confinement's report, and the run's own.
fn session_start(ctx: &Ctx<'_>, prepared: &Prepared, started: Instant) -> Value {
    let opts = ctx.opts;
    let (_, socket) = agent_gateway::paths(&opts.runtime_dir, &ctx.session);
    let mut detail = serde_json::to_value(&prepared.confinement.report).unwrap_or_default();
    if let Some(d) = detail.as_object_mut() {
        d.insert("agent".into(), json!(opts.agent));
        d.insert("policy".into(), json!(opts.policy_path));
        d.insert("socket".into(), json!(socket));
        d.insert(
            "gatewayd_oom_score_adj".into(),
            prepared.oom_score_adj.clone(),
        );
        d.insert(
            "startup_ms".into(),
            json!(started.elapsed().as_secs_f64() * 1000.0),
        );
        d.insert("agent_privileges".into(), prepared.privileges.describe());
        if let Some(decoys) = &prepared.decoys {
            d.insert("canaries".into(), decoys.describe());
        }
        if opts.learn.is_on() {
            let kernel = prepared
                .confinement
                .report
                .pieces
                .contains_key("learn_files");
            d.insert("learn".into(), opts.learn.detail(kernel));
        }
    }
    detail
}

/// The agent's gateway: its socket, its open session, the Rule-of-Two lockdown. The policy
/// as written: its protected files are read for the session's secrets, and the audit log
/// (which names the session) must not be one of them; the gateway protects the policy file
/// and the audit log from tool arguments on its own.
async fn start_gateway(
    ctx: &Ctx<'_>,
    prepared: &Prepared,
    kernel: kernel::task::Handle,
    canary: Option<Arc<dyn crate::daemon::CanaryCheck>>,
) -> Result<agent_gateway::AgentGateway, agent_gateway::AgentGatewayError> {
    let opts = ctx.opts;
    let privileges = &prepared.privileges;
    let cgroup_dir = prepared
        .confinement
        .report
        .cgroup
        .clone()
        .unwrap_or_default();
    agent_gateway::AgentGateway::start(agent_gateway::Setup {
        policy: &opts.policy,
        policy_path: &opts.policy_path,
        protect: vec![opts.policy_path.clone(), opts.audit_path.clone()],
        audit: ctx.audit.clone(),
        clock: ctx.clock.clone(),
        cgroup_dir: &cgroup_dir,
        session: &ctx.session,
        user: privileges.name.as_deref().unwrap_or(&opts.session_user),
        agent_owner: (privileges.uid, privileges.gid),
        scopes: &opts.scopes,
        runtime_dir: &opts.runtime_dir,
        kernel,
        learn: opts.learn,
        loopback_by_kernel: prepared.confinement.report.tier != Tier::None,
        export: ctx.export,
        canary,
    })
    .await
}

impl Live {
    /// Phase 3: the agent, confined before exec (the private mount namespace, the cgroup,
    /// Landlock, the credentials, seccomp), run to its end with signals forwarded. Without a
    /// gateway it is not started.
    pub(super) async fn run_agent(
        &mut self,
        ctx: &Ctx<'_>,
    ) -> Result<std::process::ExitStatus, SpawnError> {
        let Some(gw) = &self.gateway else {
            return match self.gateway_failed.take() {
                Some(e) => Err(SpawnError::Gateway(e)),
                None => Err(SpawnError::Spawn(std::io::Error::other("no gateway"))),
            };
        };
        let p = &self.prepared;
        let confine = p.privileges.pre_exec_fn(
            p.confinement.enter_fn(),
            p.confinement.restrict_fn(),
            self.tell_init.take(),
        );
        // The policy's first (`agent.env`): gatewayd's own below take precedence.
        let mut env: Vec<(String, OsString)> = ctx
            .opts
            .policy
            .agent
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.into()))
            .collect();
        env.extend(gw.env().into_iter().map(|(k, v)| (k.to_owned(), v)));
        env.extend(
            p.privileges
                .env()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.into())),
        );
        // Inspected hosts: the CA bundle's variables and the credentials' placeholders.
        if let Some(i) = &p.inspection {
            env.extend(i.env().into_iter().map(|(k, v)| (k, v.into())));
        }
        // Canary credentials: the decoys, where the agent has no variable of that name.
        if let Some(d) = &p.decoys {
            env.extend(d.env().iter().map(|(k, v)| (k.clone(), v.into())));
        }
        let agent = Agent {
            argv: &ctx.opts.agent,
            program: p.program.as_deref(),
            confine,
            env: &env,
        };
        spawn_and_wait(agent, &self.handle, &ctx.audit, &ctx.session).await
    }
}
