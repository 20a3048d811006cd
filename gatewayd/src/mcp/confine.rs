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

use gatewayd_core::policy::{KernelMode, McpServer, Policy, ServerKernel};
use gatewayd_kernel::{
    cgroup::CgroupError,
    confinement::{Confinement, LandlockUse, Plan},
    kernel::{KernelSpec, Session},
};

pub(crate) use gatewayd_kernel::confinement::ConfineError;

/// A server's profile, ready before it starts (none with `kernel: off`); dropping it detaches
/// the programs and removes the cgroup (killing what is left in it).
pub(crate) struct ServerConfinement {
    confinement: Option<Confinement>,
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
    ) -> Result<ServerConfinement, ConfineError> {
        if mode == ServerKernel::Off {
            let mut pieces = Map::new();
            pieces.insert("kernel".into(), json!("off"));
            return Ok(ServerConfinement {
                confinement: None,
                pieces,
            });
        }
        let require = mode == ServerKernel::Require;
        let as_policy = Policy {
            version: 1,
            kernel: if require {
                KernelMode::Require
            } else {
                KernelMode::BestEffort
            },
            sandbox: server.sandbox.clone(),
            network: server.network.clone(),
            ..Policy::default()
        };
        let mut c = Confinement::prepare(&Plan {
            name: &format!("mcp-{name}-{}", std::process::id()),
            policy: &as_policy,
            own_files: own,
            read_only: &[],
            limits: None,
            program: None,
            program_in_exec: false,
            landlock: LandlockUse::Allowlist,
            require,
            learn: false,
        })?;
        if c.report.tier != gatewayd_kernel::kernel::Tier::Full
            && !server.sandbox.protected_names.is_empty()
        {
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
            pieces,
        })
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
        move || match &steps {
            Some((enter, restrict)) => enter().and_then(|()| restrict()),
            None => Ok(()),
        }
    }

    /// Kills what is left in the server's cgroup and removes it.
    pub(crate) fn finish(self) -> Result<(), CgroupError> {
        self.confinement.map_or(Ok(()), Confinement::finish)
    }
}
