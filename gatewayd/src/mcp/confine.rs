//! A tool server's own kernel profile (`mcp_servers.NAME` in the policy): the confinement
//! `gatewayd run` gives its agent ([`gatewayd_kernel::confinement`]), built for the server's
//! sandbox and egress, with a Landlock allowlist of the server's trees, all in place before the
//! server's program starts: the child enters the cgroup and restricts itself between fork
//! and exec ([`ServerConfinement::pre_exec`]).
//!
//! The one entry point is [`ServerConfinement::prepare`]; what it reached is in
//! [`ServerConfinement::pieces`] (the `mcp_server_start` record).
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use gatewayd_core::policy::{KernelMode, McpServer, ServerKernel};
use gatewayd_kernel::{
    cgroup::CgroupError,
    confinement::{Confinement, LandlockUse, Plan},
    fs_learn::{FsLearn, Scope},
    kernel::{KernelSpec, Session, Tier},
    server_learn::ServerLearn,
};

pub(crate) use gatewayd_kernel::confinement::ConfineError;

/// A server's profile, ready before it starts (none with `kernel: off`); dropping it detaches
/// the programs and removes the cgroup (killing what is left in it).
pub(crate) struct ServerConfinement {
    confinement: Option<Confinement>,
    /// `--learn`: the group that records what the left-out allowlist would refuse, until
    /// [`Self::take_learn`], and what the child does around its cgroup.
    learn: Option<(Option<FsLearn>, ServerLearn)>,
    /// What is in force, piece by piece, with `warnings` when paths of the profile do not
    /// exist (for the start record).
    pub pieces: Map<String, Value>,
}

impl ServerConfinement {
    /// Prepares the profile of server `name`. `own` lists files no server may touch (the
    /// policy and the audit logs): protected in its profile too. With [`ServerKernel::Off`]
    /// nothing is applied; with `BestEffort` what fails is recorded in [`Self::pieces`];
    /// with `Require` any piece that fails is the error.
    pub(crate) fn prepare(
        name: &str,
        server: &McpServer,
        mode: ServerKernel,
        own: &[PathBuf],
        learn: bool,
    ) -> Result<ServerConfinement, ConfineError> {
        if mode == ServerKernel::Off {
            let mut pieces = Map::new();
            pieces.insert("kernel".into(), json!("off"));
            return Ok(ServerConfinement {
                confinement: None,
                learn: None,
                pieces,
            });
        }
        let require = mode == ServerKernel::Require;
        let as_policy = server.profile(if require {
            KernelMode::Require
        } else {
            KernelMode::BestEffort
        });
        // One cgroup a server: a `--listen` proxy starts one for each client session.
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let cgroup = match STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
            0 => format!("mcp-{name}-{}", std::process::id()),
            n => format!("mcp-{name}-{}-{n}", std::process::id()),
        };
        let plan = Plan {
            name: &cgroup,
            policy: &as_policy,
            own_files: own,
            read_only: &[],
            limits: None,
            program: None,
            program_in_exec: false,
            landlock: LandlockUse::Allowlist,
            require,
            learn,
        };
        let mut c = Confinement::prepare(&plan)?;
        let learning = if learn {
            learn_files(server, own, &mut c)?
        } else {
            None
        };
        if c.report.tier != Tier::Full && !server.sandbox.protected_names.is_empty() {
            // Tier 2's fanotify guard is `gatewayd run`'s; a server's profile has none.
            c.report.warnings.push(
                "sandbox.protected_names: without BPF LSM the kernel does not refuse these names to a tool server (the gateway still refuses them in its arguments)".into(),
            );
        }
        let mut pieces = c.report.pieces.clone();
        if let Some(cg) = &c.report.cgroup {
            pieces.insert("cgroup".into(), json!(cg));
        }
        if !c.report.warnings.is_empty() {
            pieces.insert("warnings".into(), json!(c.report.warnings));
        }
        Ok(ServerConfinement {
            confinement: Some(c),
            learn: learning,
            pieces,
        })
    }

    /// `--learn`: the group to serve once the server runs.
    pub(crate) fn take_learn(&mut self) -> Option<FsLearn> {
        self.learn.as_mut()?.0.take()
    }

    /// The server's kernel session and its spec, for the task that reads its events.
    pub(crate) fn take_layer(&mut self) -> Option<(Session, KernelSpec)> {
        self.confinement.as_mut()?.take_kernel()
    }

    /// Kills what is left in the server's cgroup.
    pub(crate) fn kill_all(&self) -> Result<(), CgroupError> {
        self.confinement
            .as_ref()
            .map_or(Ok(()), Confinement::kill_all)
    }

    /// For `Command::pre_exec`: enter the cgroup, then restrict to the Landlock ruleset.
    /// Only async-signal-safe syscalls.
    pub(crate) fn pre_exec(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let steps = self
            .confinement
            .as_ref()
            .map(|c| (c.enter_fn(), c.restrict_fn()));
        let learn = self.learn.as_ref().map(|(_, l)| l.clone());
        move || {
            let Some((enter, restrict)) = &steps else {
                return Ok(());
            };
            // The numbered steps of `gatewayd_kernel::server_learn`.
            if let Some(l) = &learn {
                l.own_mounts()?;
            }
            enter()?;
            if let Some(l) = &learn {
                l.hide_and_mark()?;
            }
            restrict()
        }
    }

    /// Kills what is left in the server's cgroup and removes it.
    pub(crate) fn finish(self) -> Result<(), CgroupError> {
        self.confinement.map_or(Ok(()), Confinement::finish)
    }
}

/// `--learn` where the kernel confines the server's files (tier 1 or 2): the fanotify group
/// that records what its left-out allowlist would refuse, and at tier 2 the mounts that hide
/// its protected paths meanwhile. `None` when the profile restricts no file, or the kernel
/// confines none (then the start record says so).
fn learn_files(
    server: &McpServer,
    own: &[PathBuf],
    c: &mut Confinement,
) -> Result<Option<(Option<FsLearn>, ServerLearn)>, ConfineError> {
    let tier = c.report.tier;
    if !matches!(tier, Tier::Full | Tier::CgroupLandlock) {
        let why = "the kernel confines no file of the server here: nothing to learn";
        c.report.pieces.insert("learn_files".into(), json!(why));
        return Ok(None);
    }
    let scope = Scope::of_allowlist(&server.sandbox, own);
    if !scope.restricts() {
        let why = "nothing to learn: the profile restricts no reading, writing or exec";
        c.report.pieces.insert("learn_files".into(), json!(why));
        return Ok(None);
    }
    c.learn_names(&scope);
    let group = FsLearn::open(scope)?;
    // At tier 2 the allowlist that refused the protected paths is left out, so mounts hide
    // them. At tier 1 the BPF LSM programs keep refusing them, and would refuse any mount
    // made in the cgroup: no mounts.
    let (learn, unhidden) = if tier == Tier::CgroupLandlock {
        ServerLearn::new(group.fd(), &server.sandbox.protected)
    } else {
        (ServerLearn::without_mounts(group.fd()), Vec::new())
    };
    c.report
        .pieces
        .insert("learn_files".into(), group.describe());
    if tier == Tier::CgroupLandlock {
        c.report.pieces.insert("hidden".into(), learn.describe());
    }
    c.report.warnings.extend(
        unhidden
            .into_iter()
            .map(|(p, why)| format!("{}: not hidden while learning: {why}", p.display())),
    );
    Ok(Some((Some(group), learn)))
}
