//! `gatewayd run`, phase 1: everything settled before anything of the agent's exists. The
//! agent's user and privileges, the session's own `/tmp`, then the one confinement builder
//! ([`gatewayd_kernel::confinement`]: cgroup and limits, gatewayd's files protected, the
//! kernel session, the tier-2 Landlock fallback), then at tier 2 the mounts that hide the
//! protected paths. A refusal is recorded with a message a person or a model can act on.
use std::{path::PathBuf, sync::Arc};

use serde_json::{Value, json};

use super::{RunError, RunOptions, agent_gateway, records::append};
use gatewayd_core::{
    audit::{Decision, Entry, writer::WriterHandle},
    clock::Clock,
    policy::{KernelMode, UnixEntry, protected_names::ProtectedNames},
};
use gatewayd_kernel::{
    agent_privileges::{
        AgentPrivileges, hide, learn_marks::LearnMarks, name_marks::NameMarks, private_tmp,
    },
    confinement::{ConfineError, Confinement, LandlockUse, Plan},
    fs_learn::{FsLearn, Scope},
    fs_roots::FsRoots,
    kernel::{self, Tier},
    name_guard::NameGuard,
    session_limits,
};

/// What every phase of a run shares.
pub(super) struct Ctx<'a> {
    pub(super) opts: &'a RunOptions,
    /// The session id (`run-PID-MS`): the cgroup's name and every record's session.
    pub(super) session: String,
    /// The agent's program, as given.
    pub(super) program: String,
    pub(super) audit: WriterHandle,
    pub(super) clock: Arc<dyn Clock>,
    /// `--export`: the session's exporters, attached to its gateway once it starts.
    pub(super) export: Option<&'a crate::daemon::export::Export>,
}

/// What phase 1 settled.
pub(super) struct Prepared {
    pub(super) privileges: AgentPrivileges,
    pub(super) confinement: Confinement,
    /// The session's own `/tmp`, removed when this is dropped (after the cgroup is empty).
    pub(super) session_tmp: Option<private_tmp::SessionTmp>,
    /// The agent's program as found on `PATH` (its links not followed): what is run, so
    /// the program gatewayd looked at is the one the agent's namespace starts.
    pub(super) program: Option<PathBuf>,
    /// gatewayd's `oom_score_adj`, or why it was not lowered.
    pub(super) oom_score_adj: Value,
    /// Tier 2 with `sandbox.protected_names`: the fanotify group that refuses them, served
    /// once the session starts.
    pub(super) name_guard: Option<NameGuard>,
    /// Under `--learn` (tier 1 or 2): the fanotify group that learns the agent's files,
    /// served once the session starts.
    pub(super) fs_learn: Option<FsLearn>,
    /// Inspected egress hosts: the session's CA, the agent's bundle, the placeholders.
    pub(super) inspection: Option<std::sync::Arc<super::egress_proxy::Inspection>>,
    /// Canary credentials: the decoys placed for the agent (the file removed when dropped).
    pub(super) decoys: Option<super::canary::Decoys>,
}

/// Phase 1; see the module.
pub(super) async fn prepare(ctx: &Ctx<'_>) -> Result<Prepared, RunError> {
    let opts = ctx.opts;
    let mut privileges = settle_privileges(ctx).await?;
    privileges.devices(&opts.policy.sandbox.devices);
    let read_only = opts
        .policy
        .sandbox
        .read_only_with_defaults(privileges.home.as_deref().map(std::path::Path::new));
    privileges.read_only(&read_only, &opts.policy.sandbox.writable);
    let oom_score_adj = session_limits::protect_from_oom_killer()
        .map_or_else(|e| json!({"not_lowered": e.to_string()}), |()| json!(-999));
    let mut policy = opts.policy.clone();
    // Run by the path gatewayd finds it at, which a private /tmp must then hold.
    let program = crate::mcp::server::find_program(&ctx.program);
    let session_tmp =
        private_tmp::for_sandbox(&mut policy.sandbox, &ctx.session, program.as_deref())?;
    if let Some(t) = &session_tmp {
        privileges.private_tmp(t);
    }
    let inspection =
        super::egress_proxy::Inspection::prepare(&policy, &opts.runtime_dir, &ctx.session)
            .map_err(RunError::EgressProxy)?
            .map(std::sync::Arc::new);
    // The agent reads its CA bundle: a kernel-bounded read list names its directory.
    if let Some(i) = &inspection
        && !policy.sandbox.readable.is_empty()
    {
        policy.sandbox.readable.push(i.dir().to_owned());
    }
    let decoys = place_decoys(&mut policy, inspection.as_deref())?;
    // What the exec allowlist takes: the program found above, its links followed.
    let resolved = program
        .as_deref()
        .and_then(|p| std::fs::canonicalize(p).ok());
    let plan = Plan {
        name: &ctx.session,
        policy: &policy,
        own_files: &[opts.policy_path.clone(), opts.audit_path.clone()],
        read_only: &read_only,
        limits: Some(session_limits::Limits::for_agent(&policy.agent)),
        program: resolved.as_deref(),
        program_in_exec: true,
        landlock: LandlockUse::Fallback,
        require: true,
        learn: opts.learn.is_on(),
    };
    let mut confinement = match Confinement::prepare(&plan) {
        Ok(c) => c,
        Err(e) => return Err(refused(ctx, e, resolved).await),
    };
    let (mut name_guard, mut fs_learn) = (None, None);
    if confinement.ruleset().is_some() {
        hide_protected(ctx, &mut confinement, &mut privileges);
        name_guard = guard_names(ctx, &mut confinement, &mut privileges)?;
    }
    // Both tiers learn files the same way: the BPF LSM programs (tier 1) and the Landlock
    // ruleset (tier 2) let the learnable accesses through, and fanotify records them.
    let enforces_files = matches!(confinement.report.tier, Tier::Full | Tier::CgroupLandlock);
    if opts.learn.is_on() && enforces_files {
        fs_learn = learn_files(ctx, &policy, resolved.as_deref(), &mut confinement)?;
        if let Some(learn) = &fs_learn {
            privileges.learn(LearnMarks::new(learn.fd()));
        }
    }
    if confinement.report.tier == Tier::Full {
        privileges.leave_to_bpf_lsm();
    }
    Ok(Prepared {
        privileges,
        confinement,
        session_tmp,
        program,
        oom_score_adj,
        name_guard,
        fs_learn,
        inspection,
        decoys,
    })
}

/// The policy's canary credentials: made, the file written (the agent reads it: a
/// kernel-bounded read list names it). A variable the agent already has (gatewayd's own
/// environment, which it inherits, or a placeholder of an injected credential) is left as
/// it is.
fn place_decoys(
    policy: &mut gatewayd_core::policy::Policy,
    inspection: Option<&super::egress_proxy::Inspection>,
) -> Result<Option<super::canary::Decoys>, RunError> {
    let Some(canaries) = &policy.canaries else {
        return Ok(None);
    };
    let added = inspection
        .map(super::egress_proxy::Inspection::env)
        .unwrap_or_default();
    let taken =
        |name: &str| std::env::var_os(name).is_some() || added.iter().any(|(k, _)| k == name);
    let decoys = super::canary::Decoys::make(canaries, taken).map_err(RunError::Canary)?;
    if let Some(f) = decoys.file()
        && !policy.sandbox.readable.is_empty()
    {
        policy.sandbox.readable.push(f.to_owned());
    }
    Ok(Some(decoys))
}

/// Tier 2 with `sandbox.protected_names`: the fanotify group, its marks in the agent's
/// namespace, and hard links refused ([`gatewayd_kernel::name_guard`]). The roots are the
/// policy's as written: the session's own `/tmp` (`private_tmp`) lies elsewhere on the host
/// than in the agent's namespace, and is not marked. Where fanotify permission events are
/// missing the names are not enforced by the kernel: an error when the policy says
/// `kernel: "require"`, a warning otherwise.
fn guard_names(
    ctx: &Ctx<'_>,
    c: &mut Confinement,
    privileges: &mut AgentPrivileges,
) -> Result<Option<NameGuard>, RunError> {
    let sandbox = &ctx.opts.policy.sandbox;
    let Some(roots) = FsRoots::of(sandbox).names else {
        return Ok(None);
    };
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    let names = ProtectedNames::parse(&sandbox.protected_names).unwrap_or_default();
    match NameGuard::open(names, roots) {
        Ok(guard) => {
            let (fd, roots) = guard.marks();
            privileges.protect_names(NameMarks::new(fd, roots))?;
            c.report
                .pieces
                .insert("protected_names".into(), guard.describe());
            Ok(Some(guard))
        }
        Err(e) if c.policy.kernel == KernelMode::Require => Err(RunError::NamesNotEnforced(e)),
        Err(e) => {
            let why = format!("not enforced by the kernel: {e}");
            c.report
                .warnings
                .push(format!("sandbox.protected_names: {why}"));
            c.report.pieces.insert("protected_names".into(), json!(why));
            Ok(None)
        }
    }
}

/// Under `--learn` (tier 1 or 2): the fanotify group that learns the agent's files
/// ([`gatewayd_kernel::fs_learn`]), when the policy restricts any of them; the
/// `session_start` record says which (`learn_files`). `policy` is the session's (its
/// private `/tmp` added).
fn learn_files(
    ctx: &Ctx<'_>,
    policy: &gatewayd_core::policy::Policy,
    program: Option<&std::path::Path>,
    c: &mut Confinement,
) -> Result<Option<FsLearn>, RunError> {
    let own = [ctx.opts.policy_path.clone(), ctx.opts.audit_path.clone()];
    let scope = Scope::of(&policy.sandbox, program, &own);
    if !scope.restricts() {
        let why = "nothing to learn: the policy restricts no reading, writing or exec";
        c.report.pieces.insert("learn_files".into(), json!(why));
        return Ok(None);
    }
    c.learn_names(&scope);
    let learn = FsLearn::open(scope)?;
    c.report
        .pieces
        .insert("learn_files".into(), learn.describe());
    Ok(Some(learn))
}

/// The agent's user and what it keeps; a failure is recorded (`agent_user`).
async fn settle_privileges(ctx: &Ctx<'_>) -> Result<AgentPrivileges, RunError> {
    let opts = ctx.opts;
    let settled = AgentPrivileges::resolve(opts.user.as_deref(), &opts.policy.agent, |k| {
        std::env::var(k).ok()
    })
    .and_then(|mut p| p.preserve_fds(&opts.preserve_fds).map(|()| p));
    match settled {
        Ok(p) => Ok(p),
        Err(e) => {
            let detail = json!({"agent": opts.agent, "error": e.to_string(),
                "message": "the agent's user could not be settled; it was not started"});
            let entry = Entry::gateway(&ctx.session, Decision::Deny, "agent_user", detail);
            append(&ctx.audit, entry).await?;
            Err(e.into())
        }
    }
}

/// Tier 2: Landlock grants every path, so the protected ones are hidden by mounts; Landlock
/// has no right for path-named sockets, so the host's are covered, but for the listed ones
/// and the session's own gateway socket.
fn hide_protected(ctx: &Ctx<'_>, c: &mut Confinement, privileges: &mut AgentPrivileges) {
    let sandbox = &c.policy.sandbox;
    let (mut hiding, links) = hide::Hiding::plan(&sandbox.protected, &sandbox.exec);
    let mut allowed: Vec<PathBuf> = c
        .policy
        .network
        .unix
        .iter()
        .filter_map(|e| match UnixEntry::parse(e) {
            Ok(UnixEntry::Path(p)) => Some(p),
            _ => None,
        })
        .collect();
    allowed.push(agent_gateway::paths(&ctx.opts.runtime_dir, &ctx.session).1);
    hiding.cover_sockets(&allowed);
    privileges.hide(hiding);
    c.report.warnings.extend(
        links
            .into_iter()
            .map(|(path, message)| format!("{}: {message}", path.display())),
    );
}

/// Records why the confinement could not be put in place, and the error to return.
async fn refused(ctx: &Ctx<'_>, e: ConfineError, resolved: Option<PathBuf>) -> RunError {
    let opts = ctx.opts;
    let (reason, detail, error) = match e {
        ConfineError::NotInExec => {
            let resolved = resolved.map_or_else(|| "not found".into(), |p| p.display().to_string());
            let detail = json!({
                "agent": opts.agent, "resolved": resolved,
                "message": "the agent's own program is not in the policy's exec allowlist; it was not started",
            });
            let error = RunError::AgentNotInExec {
                agent: ctx.program.clone(),
                resolved,
            };
            ("exec_not_allowed", detail, error)
        }
        ConfineError::Kernel(e) => {
            let message = if matches!(e, kernel::KernelError::Required { .. }) {
                "the policy requires kernel enforcement this kernel cannot give; the agent was not started"
            } else {
                "the kernel layer could not take this session; the agent was not started"
            };
            let detail = json!({
                "agent": opts.agent, "policy": opts.policy_path, "error": kernel::chain(&e),
                "message": message,
            });
            ("kernel_unavailable", detail, RunError::Kernel(e))
        }
        ConfineError::Cgroup(e) => return RunError::Cgroup(e),
        ConfineError::Landlock(e) => return RunError::Landlock(e),
        ConfineError::Learn(e) => return RunError::Learn(e),
    };
    let entry = Entry::gateway(&ctx.session, Decision::Deny, reason, detail);
    match append(&ctx.audit, entry).await {
        Ok(()) => error,
        Err(w) => RunError::AuditWrite(w),
    }
}
