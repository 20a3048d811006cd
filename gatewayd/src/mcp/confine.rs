//! A tool server's own kernel profile (`mcp_servers.NAME` in the policy): a cgroup of its
//! own with gatewayd's kernel programs attached for the server's sandbox and egress (as
//! `gatewayd run` does for the agent), and a Landlock allowlist of the server's trees, all
//! in place before the server's program starts: the child enters the cgroup and restricts
//! itself between fork and exec ([`Confinement::pre_exec`]).
//!
//! The one entry point is [`Confinement::prepare`]; what it reached is in
//! [`Confinement::pieces`] (the `mcp_server_start` record).
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use gatewayd_core::policy::{KernelMode, McpServer, Policy, ServerKernel};
use gatewayd_kernel::{
    cgroup::AgentCgroup,
    kernel::{self, KernelSpec, SharedPrograms},
    landlock::{AllowPolicy, Ruleset},
};

/// Why a server's profile could not be put in place (with `kernel: require`).
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The server's cgroup could not be created.
    #[error("the server's cgroup: {0}")]
    Cgroup(#[from] gatewayd_kernel::cgroup::CgroupError),
    /// The kernel programs could not be loaded or attached to the server's cgroup.
    #[error("the server's kernel programs")]
    Kernel(#[from] kernel::KernelError),
    /// The Landlock ruleset of the server's trees could not be built.
    #[error("the server's Landlock ruleset: {0}")]
    Landlock(#[from] gatewayd_kernel::landlock::LandlockError),
}

/// A server's profile, ready before it starts; dropping it detaches the programs and removes
/// the cgroup (killing what is left in it).
pub struct Confinement {
    cgroup: Option<AgentCgroup>,
    layer: Option<(kernel::Session, KernelSpec)>,
    ruleset: Option<Ruleset>,
    /// What is in force, piece by piece (for the start record).
    pub pieces: Map<String, Value>,
    /// Paths from the profile that do not exist (not protected by identity).
    pub warnings: Vec<String>,
}

impl Confinement {
    /// Prepares the profile of server `name`. `own` lists files no server may touch (the
    /// policy and the audit logs): protected in its profile too. With [`ServerKernel::Off`]
    /// nothing is applied; with `BestEffort` what fails is recorded in [`Self::pieces`];
    /// with `Require` any piece that fails is the error.
    pub fn prepare(
        name: &str,
        server: &McpServer,
        mode: ServerKernel,
        own: &[PathBuf],
    ) -> Result<Confinement, ConfineError> {
        let mut c = Confinement {
            cgroup: None,
            layer: None,
            ruleset: None,
            pieces: Map::new(),
            warnings: Vec::new(),
        };
        if mode == ServerKernel::Off {
            c.pieces.insert("kernel".into(), json!("off"));
            return Ok(c);
        }
        let require = mode == ServerKernel::Require;
        let mut sandbox = server.sandbox.clone();
        sandbox
            .protected
            .extend(own.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
        let cgroup_name = format!("mcp-{name}-{}", std::process::id());
        match AgentCgroup::create(&cgroup_name) {
            Ok(cg) => {
                c.pieces.insert("cgroup".into(), json!(cg.path()));
                c.cgroup = Some(cg);
            }
            Err(e) if require => return Err(e.into()),
            Err(e) => {
                c.pieces
                    .insert("cgroup".into(), json!(format!("not created: {e}")));
            }
        }
        if let Some(cg) = &c.cgroup {
            // The kernel layer of `gatewayd run`, for the server's sandbox and egress.
            let as_policy = Policy {
                version: 1,
                kernel: if require {
                    KernelMode::Require
                } else {
                    KernelMode::BestEffort
                },
                sandbox: sandbox.clone(),
                network: server.network.clone(),
                ..Policy::default()
            };
            let (spec, warnings) = KernelSpec::from_policy(&as_policy, cg.path().to_owned());
            c.warnings.extend(
                warnings
                    .iter()
                    .map(|w| format!("{}: {}", w.path.display(), w.message)),
            );
            // The server's session in the host's one program set (loaded and pinned first
            // when the host has none), owned by this process.
            let opened = SharedPrograms::open_or_load().and_then(|programs| {
                let session = programs.add_session(&spec, std::process::id())?;
                Ok((programs, session))
            });
            match opened {
                Ok((programs, session)) => {
                    for s in programs.status() {
                        c.pieces.insert(s.program.name.into(), json!(s.state()));
                    }
                    c.layer = Some((session, spec));
                }
                Err(e) if require => return Err(e.into()),
                Err(e) => {
                    c.pieces.insert(
                        "kernel".into(),
                        json!(format!("not loaded: {}", kernel::chain(&e))),
                    );
                }
            }
        }
        let allow = AllowPolicy {
            read: {
                let mut r = sandbox.readable.clone();
                r.extend(sandbox.root.iter().cloned());
                r
            },
            write: sandbox.writable.clone(),
            protected: sandbox.protected.clone(),
            exec: sandbox.exec.clone(),
        };
        match Ruleset::build_allowlist(&allow) {
            Ok(rs) => {
                c.pieces.insert(
                    "landlock".into(),
                    json!(format!(
                        "allowlist applied (ABI {}, {} rules)",
                        rs.abi, rs.rules
                    )),
                );
                c.ruleset = Some(rs);
            }
            Err(e) if require => return Err(e.into()),
            Err(e) => {
                c.pieces
                    .insert("landlock".into(), json!(format!("not applied: {e}")));
            }
        }
        Ok(c)
    }

    /// The server's kernel session and its spec, for the task that reads its events.
    pub fn take_layer(&mut self) -> Option<(kernel::Session, KernelSpec)> {
        self.layer.take()
    }

    /// The server's cgroup, when one was created.
    pub fn cgroup(&self) -> Option<&AgentCgroup> {
        self.cgroup.as_ref()
    }

    /// For `Command::pre_exec`: enter the cgroup, then restrict to the Landlock ruleset.
    /// Only async-signal-safe syscalls.
    pub fn pre_exec(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let enter = self.cgroup.as_ref().map(AgentCgroup::enter_fn);
        let restrict = self.ruleset.as_ref().map(Ruleset::restrict_fn);
        move || {
            if let Some(e) = &enter {
                e()?;
            }
            if let Some(r) = &restrict {
                r()?;
            }
            Ok(())
        }
    }

    /// Kills what is left in the server's cgroup and removes it.
    pub fn finish(mut self) -> Result<(), gatewayd_kernel::cgroup::CgroupError> {
        self.ruleset = None;
        match self.cgroup.take() {
            Some(cg) => {
                cg.kill_all()?;
                drop(self.layer.take());
                cg.remove()
            }
            None => Ok(()),
        }
    }
}
