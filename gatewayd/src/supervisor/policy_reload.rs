//! A policy reload under `gatewayd run` (docs/POLICY.md, "Reloading the policy"): the agent's
//! gateway decides under the new policy, and the kernel's egress allowlist of the agent's
//! cgroup follows (its `cidr` entries; the cgroup connect and sendmsg programs read the
//! session's `EGRESS` entry on every connect). What the kernel set up when the agent
//! started (Landlock, the mounts of tier 2, the seccomp filter, the agent's user, the
//! protected and read-only inodes, the Unix sockets, the host names resolved) stays as it is
//! until the next session: the record lists those changes under `kernel.until_restart`.
use std::{path::PathBuf, sync::Arc};

use serde_json::json;

use super::egress_hosts::host_entries;
use crate::{
    daemon::{Gateway, ReloadFuture, ReloadHook, ReloadOptions, policy_watch},
    shutdown::Shutdown,
};
use gatewayd_core::policy::{Policy, diff};
use gatewayd_kernel::kernel::{self, spec::egress_rules};

/// The fields whose kernel form is fixed at the agent's start.
const FIXED_AT_START: [&str; 4] = ["sandbox", "agent", "kernel", "network.unix"];

/// The hook that moves the kernel's egress allowlist with the policy.
pub(super) struct KernelFollows {
    pub(super) kernel: kernel::task::Handle,
}

impl ReloadHook for KernelFollows {
    fn policy_reloading<'a>(&'a self, old: &'a Policy, new: &'a Policy) -> ReloadFuture<'a> {
        Box::pin(async move {
            let rules = egress_rules(new);
            let count = rules.len();
            let dropped = self.kernel.set_egress(rules).await.map_err(|e| {
                format!("the kernel's egress allowlist could not follow the new policy: {e}")
            })?;
            let stays = until_restart(old, new);
            if !stays.is_empty() {
                eprintln!(
                    "gatewayd: the reloaded policy changes what the kernel set up when the agent started ({}): the gateway decides under the new policy, the kernel keeps the old until the next session. Next: restart the session to apply them to the kernel",
                    stays.join(", ")
                );
            }
            Ok(json!({"egress_rules": count, "egress_dropped": dropped, "until_restart": stays}))
        })
    }
}

/// The changed fields the kernel keeps as they were at the agent's start.
fn until_restart(old: &Policy, new: &Policy) -> Vec<String> {
    let mut stays: Vec<String> = diff::diff(old, new)
        .changes
        .into_iter()
        .map(|c| c.path)
        .filter(|p| {
            FIXED_AT_START.iter().any(|f| {
                p == f || p.starts_with(&format!("{f}.")) || p.starts_with(&format!("{f}["))
            })
        })
        .collect();
    if host_entries(old) != host_entries(new) {
        stays.push("network.egress (host names)".into());
    }
    stays.dedup();
    stays
}

/// Reloads the agent's gateway when `path` changes (no SIGHUP: `gatewayd run` passes it on
/// to the agent), with the kernel following, until `stop`.
pub(super) fn watch(
    gw: &Arc<Gateway>,
    kernel: kernel::task::Handle,
    path: PathBuf,
    stop: Shutdown,
) {
    gw.set_reload_hook(Arc::new(KernelFollows { kernel }));
    let opts = ReloadOptions {
        sighup: false,
        watch: true,
    };
    policy_watch::spawn(gw.clone(), path, opts, stop);
}
