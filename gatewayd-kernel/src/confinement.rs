//! One confinement builder for what gatewayd starts under its kernel layer: `gatewayd run`'s
//! agent and each of `gatewayd mcp`'s tool servers. [`Confinement::prepare`] takes these
//! steps, in order, and [`Report`] says what each reached:
//!
//! 1. the session's cgroup, with its `pids.max` and `memory.max` when limits are given;
//! 2. gatewayd's own files (the policy, the audit logs) added to the protected paths;
//! 3. the kernel spec derived from the policy;
//! 4. the session added to the host's one program set (loaded and pinned first when the host
//!    has none), owned by this process;
//! 5. Landlock: the tier-2 fallback, only where BPF LSM is missing ([`LandlockUse::Fallback`]),
//!    or an allowlist of the sandbox's trees in any case ([`LandlockUse::Allowlist`]).
//!
//! The front end then takes the kernel session for its event task ([`Confinement::take_kernel`]),
//! starts its child with [`Confinement::enter_fn`] and [`Confinement::restrict_fn`] in its
//! pre-exec steps, and ends with [`Confinement::finish`]: what is left in the cgroup is
//! killed and the cgroup removed (dropping it does the same, without the error).
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::{
    cgroup::{self, AgentCgroup, CgroupError},
    fs_roots::FsRoots,
    kernel::{self, KernelError, KernelSpec, Session, SharedPrograms, Tier},
    landlock::{AllowPolicy, FsPolicy, LandlockError, Ruleset},
    session_limits::{self, Limits},
};
use gatewayd_core::policy::Policy;

/// How Landlock is used.
#[derive(Debug, Clone)]
pub enum LandlockUse {
    /// Only without BPF LSM (tier 2), standing in for the file sandbox and the exec
    /// allowlist; the plan's `program` stays readable so it can be executed.
    Fallback,
    /// In any case: an allowlist of the sandbox's trees (a tool server's profile).
    Allowlist,
}

/// What to confine.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The cgroup's name (the session's id).
    pub name: &'a str,
    /// The policy the kernel layer is derived from (its sandbox, network and kernel mode).
    pub policy: &'a Policy,
    /// gatewayd's own files: protected paths of this confinement too.
    pub own_files: &'a [PathBuf],
    /// The read-only paths (`sandbox.read_only` with the built-in ones); at tier 1 those
    /// that do not exist are names the agent may not make.
    pub read_only: &'a [PathBuf],
    /// The cgroup's limits (None: none set).
    pub limits: Option<Limits>,
    /// The program that will be started, resolved (None: not found or not known).
    pub program: Option<&'a Path>,
    /// Whether `program` must be in the policy's exec allowlist when that is enforced
    /// (checked before the session is added; a program not found fails it).
    pub program_in_exec: bool,
    /// How Landlock is used.
    pub landlock: LandlockUse,
    /// Whether a step that fails is the error; otherwise it is noted in the report and the
    /// confinement goes on without it. The cgroup and the program set are required for a
    /// Landlock fallback in any case (`gatewayd run` has nothing to fall back to).
    pub require: bool,
    /// `gatewayd run --learn` and `gatewayd mcp --learn` (where a server's Landlock
    /// allowlist is left out whole): at tier 2 the Landlock ruleset leaves the roots and the exec
    /// allowlist out (their refusals are learned by [`crate::fs_learn`] instead), the
    /// agent's program need not be in the exec allowlist, and the egress programs learn
    /// ([`KernelSpec::learn`]). At tier 1 the BPF LSM programs let the same accesses
    /// through ([`gateway_common::Reason::learned_by_fanotify`]).
    pub learn: bool,
}

/// Why a confinement could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The cgroup could not be created.
    #[error("the cgroup: {0}")]
    Cgroup(#[from] CgroupError),
    /// The kernel programs could not be loaded, or the session not added.
    #[error("the kernel programs")]
    Kernel(#[from] KernelError),
    /// The Landlock ruleset could not be built.
    #[error("the Landlock ruleset: {0}")]
    Landlock(#[from] LandlockError),
    /// The exec allowlist is enforced and does not hold the program to start.
    #[error("the program is not in the policy's exec allowlist (sandbox.exec)")]
    NotInExec,
    /// Learn mode's fanotify group could not be opened (what it leaves out would be neither
    /// refused nor recorded).
    #[error(transparent)]
    Learn(#[from] crate::fs_learn::FsLearnError),
}

/// The program set as this session found it.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramSet {
    /// Where the programs are pinned.
    pub pins: PathBuf,
    /// Whether a set pinned earlier was adopted (not loaded by this process).
    pub adopted: bool,
    /// Sessions of dead owners removed on the way in.
    pub stale_sessions_removed: usize,
    /// How long opening the set took, ms.
    pub open_ms: f64,
    /// How long each phase of opening took, ms (`add`: adding this session).
    pub phases_ms: Map<String, Value>,
    /// How many inodes the session's file index holds, or why it has none.
    pub file_index: Value,
    /// The read-only paths that did not exist, which the BPF LSM programs refuse to let the
    /// agent make (at tier 2 nothing uses them).
    pub read_only_names: Vec<PathBuf>,
}

/// What a confinement reached, step by step (the `session_start` and `mcp_server_start`
/// records).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The cgroup (None: not created).
    pub cgroup: Option<PathBuf>,
    /// Its id (the kernel's records name it).
    pub cgroup_id: Option<u64>,
    /// The limits set on it, or why one is missing (None: none asked for).
    pub limits: Option<Value>,
    /// The program set (None: not opened).
    pub program_set: Option<ProgramSet>,
    /// Each piece's state: every kernel program (`attached` or why not), `landlock`, and
    /// `cgroup` or `kernel` with why, when they could not be had. Recorded as `kernel`.
    #[serde(rename = "kernel")]
    pub pieces: Map<String, Value>,
    /// The tier reached (in words in the record, as `doctor` prints it).
    #[serde(serialize_with = "tier_in_words")]
    pub tier: Tier,
    /// Its number (1 best, 0 none).
    pub tier_level: u8,
    /// Paths of the policy that do not exist (not protected by identity).
    pub warnings: Vec<String>,
}

/// A confinement in place; see the module's steps.
pub struct Confinement {
    cgroup: Option<AgentCgroup>,
    programs: Option<SharedPrograms>,
    kernel: Option<(Session, KernelSpec)>,
    ruleset: Option<Ruleset>,
    /// The policy with gatewayd's own files protected.
    pub policy: Policy,
    /// What it reached.
    pub report: Report,
}

impl Confinement {
    /// Takes the steps of the module's list for `plan`.
    pub fn prepare(plan: &Plan<'_>) -> Result<Confinement, ConfineError> {
        let mut c = Confinement {
            cgroup: None,
            programs: None,
            kernel: None,
            ruleset: None,
            policy: with_own_files_protected(plan.policy, plan.own_files),
            report: Report {
                cgroup: None,
                cgroup_id: None,
                limits: None,
                program_set: None,
                pieces: Map::new(),
                tier: Tier::None,
                tier_level: 0,
                warnings: Vec::new(),
            },
        };
        let fallback = matches!(plan.landlock, LandlockUse::Fallback);
        c.create_cgroup(plan, plan.require || fallback)?;
        if let Some(dir) = c.cgroup.as_ref().map(|cg| cg.path().to_owned()) {
            c.add_kernel_session(&dir, plan, plan.require || fallback)?;
        }
        let program_tier = Tier::resolve(c.program_status(), true);
        let landlock = c.landlock_ruleset(plan, program_tier);
        match landlock {
            None => {}
            Some(Ok((rs, state))) => {
                c.report.pieces.insert("landlock".into(), json!(state));
                c.ruleset = Some(rs);
            }
            Some(Err(e)) if plan.require && !fallback => return Err(e.into()),
            Some(Err(e)) => {
                c.report
                    .pieces
                    .insert("landlock".into(), json!(format!("not applied: {e}")));
            }
        }
        c.report.tier = Tier::resolve(c.program_status(), c.ruleset.is_some());
        c.report.tier_level = c.report.tier.level();
        Ok(c)
    }

    /// The Landlock ruleset `plan` asks for, with the state `session_start` records: none at
    /// a fallback when the programs reached tier 1.
    fn landlock_ruleset(
        &self,
        plan: &Plan<'_>,
        program_tier: Tier,
    ) -> Option<Result<(Ruleset, String), LandlockError>> {
        match &plan.landlock {
            LandlockUse::Fallback if program_tier != Tier::CgroupLandlock => None,
            LandlockUse::Fallback => Some(
                // The agent's seccomp filter refuses every mount call.
                Ruleset::build(&if plan.learn {
                    FsPolicy {
                        mounts_refused_by_seccomp: true,
                        ..FsPolicy::default()
                    }
                } else {
                    FsPolicy {
                        exec: self.policy.sandbox.exec.clone(),
                        roots: FsRoots::of(&self.policy.sandbox),
                        program: plan.program.map(Path::to_owned),
                        mounts_refused_by_seccomp: true,
                    }
                })
                .map(|rs| {
                    let scoped = if rs.scoped_signals {
                        ", signals and abstract Unix sockets scoped"
                    } else {
                        ""
                    };
                    let state = if rs.handles_files() {
                        format!("applied (ABI {}, {} rules{scoped})", rs.abi, rs.rules)
                    } else {
                        format!(
                            "applied (ABI {}, no file right restricted{scoped}; the seccomp filter keeps the mounts)",
                            rs.abi
                        )
                    };
                    (rs, state)
                }),
            ),
            // A learning tool server: nothing left out of the allowlist is refused (fanotify
            // records it instead); the ruleset still forbids changing the mounts.
            LandlockUse::Allowlist if plan.learn => {
                Some(Ruleset::build(&FsPolicy::default()).map(|rs| {
                    let state = format!(
                        "learn mode: the allowlist is left out, what it would refuse is recorded (ABI {})",
                        rs.abi
                    );
                    (rs, state)
                }))
            }
            LandlockUse::Allowlist => {
                Some(Ruleset::build_allowlist(&allowlist(&self.policy)).map(|rs| {
                    let state = format!("allowlist applied (ABI {}, {} rules)", rs.abi, rs.rules);
                    (rs, state)
                }))
            }
        }
    }

    fn create_cgroup(&mut self, plan: &Plan<'_>, require: bool) -> Result<(), ConfineError> {
        match AgentCgroup::create(plan.name) {
            Ok(cg) => {
                self.report.cgroup = Some(cg.path().to_owned());
                self.report.cgroup_id = Some(cg.id());
                if let Some(limits) = plan.limits {
                    let applied =
                        session_limits::apply(&cgroup::cgroup2_mount()?, cg.path(), limits);
                    self.report.limits = Some(applied.describe());
                }
                self.cgroup = Some(cg);
                Ok(())
            }
            Err(e) if require => Err(e.into()),
            Err(e) => {
                let why = format!("not created: {e}");
                self.report.pieces.insert("cgroup".into(), json!(why));
                Ok(())
            }
        }
    }

    fn add_kernel_session(
        &mut self,
        dir: &Path,
        plan: &Plan<'_>,
        require: bool,
    ) -> Result<(), ConfineError> {
        let (spec, warnings) =
            KernelSpec::from_policy(&self.policy, plan.read_only, dir.to_owned());
        self.report.warnings.extend(
            warnings
                .iter()
                .map(|w| format!("{}: {}", w.path.display(), w.message)),
        );
        let opening = std::time::Instant::now();
        let programs = SharedPrograms::open_or_load();
        // In learn mode the agent's program need not be listed: its exec is learned (the
        // BPF LSM programs let it through at tier 1, Landlock leaves exec out at tier 2).
        let mut spec = spec;
        spec.learn = plan.learn;
        if spec.exec_enforced && plan.program_in_exec && !spec.learn {
            let key = plan.program.and_then(|p| kernel::spec::inode_key(p).ok());
            if !key.is_some_and(|k| spec.exec_keys().contains(&k)) {
                return Err(ConfineError::NotInExec);
            }
        }
        let opened = programs.and_then(|programs| {
            let adding = std::time::Instant::now();
            let session = programs.add_session(&spec, std::process::id())?;
            Ok((programs, session, adding.elapsed().as_secs_f64() * 1000.0))
        });
        let (programs, session, add_ms) = match opened {
            Ok(o) => o,
            Err(e) if require => return Err(e.into()),
            Err(e) => {
                let why = format!("not loaded: {}", kernel::chain(&e));
                self.report.pieces.insert("kernel".into(), json!(why));
                return Ok(());
            }
        };
        for s in programs.status() {
            self.report
                .pieces
                .insert(s.program.name.into(), json!(s.state()));
        }
        self.report.program_set = Some(ProgramSet {
            pins: programs.pin_dir().to_owned(),
            adopted: programs.adopted(),
            stale_sessions_removed: programs.cleaned().len(),
            open_ms: opening.elapsed().as_secs_f64() * 1000.0,
            phases_ms: programs
                .phases()
                .iter()
                .copied()
                .chain([("add", add_ms)])
                .map(|(p, ms)| (p.to_string(), json!(ms)))
                .collect(),
            file_index: match session.file_index() {
                Ok(inodes) => json!({"indexed": inodes}),
                Err(why) => json!({"walk": why.to_string()}),
            },
            read_only_names: spec
                .read_only_names
                .iter()
                .map(|n| n.path.clone())
                .collect(),
        });
        self.programs = Some(programs);
        self.kernel = Some((session, spec));
        Ok(())
    }

    fn program_status(&self) -> &[kernel::PieceStatus] {
        self.programs.as_ref().map_or(&[], SharedPrograms::status)
    }

    /// The kernel session and its spec, for the task that reads its events (once).
    /// A Landlock ruleset that enforces the roots and the exec allowlist (not a learning
    /// one) refuses with `EACCES`, which `raw_tp/sys_exit` sees: the spec says so
    /// ([`KernelSpec::landlock_refusals`]; a caller that records Landlock's refusals from its
    /// own audit records turns it off again).
    pub fn take_kernel(&mut self) -> Option<(Session, KernelSpec)> {
        let (session, mut spec) = self.kernel.take()?;
        spec.landlock_refusals = self.ruleset.is_some() && !spec.learn;
        Some((session, spec))
    }

    /// A learning session's fanotify learner judges by `scope`: the names the agent makes,
    /// removes or renames are judged by it too ([`KernelSpec::learn_names`]).
    pub fn learn_names(&mut self, scope: &crate::fs_learn::Scope) {
        if let Some((_, spec)) = self.kernel.as_mut() {
            spec.learn_names = Some(scope.clone());
        }
    }

    /// The cgroup, when one was created.
    pub fn cgroup(&self) -> Option<&AgentCgroup> {
        self.cgroup.as_ref()
    }

    /// The Landlock ruleset, when one was built.
    pub fn ruleset(&self) -> Option<&Ruleset> {
        self.ruleset.as_ref()
    }

    /// For the child's pre-exec steps: enter the cgroup (nothing without one). Only
    /// async-signal-safe syscalls.
    pub fn enter_fn(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let enter = self.cgroup.as_ref().map(AgentCgroup::enter_fn);
        move || enter.as_ref().map_or(Ok(()), |e| e())
    }

    /// For the child's pre-exec steps: restrict to the Landlock ruleset (nothing without
    /// one). Only async-signal-safe syscalls.
    pub fn restrict_fn(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let restrict = self.ruleset.as_ref().map(Ruleset::restrict_fn);
        move || restrict.as_ref().map_or(Ok(()), |r| r())
    }

    /// Kills what is left in the cgroup: the first step of the end, before the kernel
    /// session's last events are read.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        self.cgroup.as_ref().map_or(Ok(()), AgentCgroup::kill_all)
    }

    /// Ends the confinement: the ruleset goes, what is left in the cgroup is killed, the
    /// kernel session (if not taken) is dropped and the cgroup removed.
    pub fn finish(mut self) -> Result<(), CgroupError> {
        self.ruleset = None;
        let Some(cg) = self.cgroup.take() else {
            return Ok(());
        };
        let killed = cg.kill_all();
        drop(self.kernel.take());
        killed.and(cg.remove())
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn tier_in_words<S: serde::Serializer>(tier: &Tier, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(tier.as_str())
}

/// `policy` with `own` (canonicalised; a file that does not exist is skipped) among its
/// protected paths.
fn with_own_files_protected(policy: &Policy, own: &[PathBuf]) -> Policy {
    let mut p = policy.clone();
    p.sandbox
        .protected
        .extend(own.iter().filter_map(|f| std::fs::canonicalize(f).ok()));
    p
}

/// The Landlock allowlist of a sandbox's trees.
fn allowlist(policy: &Policy) -> AllowPolicy {
    let s = &policy.sandbox;
    AllowPolicy {
        read: s.readable.iter().chain(&s.root).cloned().collect(),
        write: s.writable.clone(),
        protected: s.protected.clone(),
        exec: s.exec.clone(),
    }
}
