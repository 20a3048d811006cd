//! `gatewayd run` serves the daemon's protocol (docs/PROTOCOL.md) to its own agent: one
//! [`Gateway`] embedded in the supervisor, on a socket in a private runtime directory, with
//! the agent's session opened for the agent's cgroup before the agent starts. The agent finds
//! both in its environment ([`ENV_SOCKET`], [`ENV_SESSION`]).
//!
//! Taint locks the kernel: when any session owned by the agent's cgroup (or below it) trips
//! the Rule of Two, [`LockdownHook`] turns all of the cgroup's egress off through the kernel
//! task (`kernel::task::Handle::lockdown`) and records `egress_lockdown` naming the session
//! and the tool, all before the tripping call is answered.
use std::{
    ffi::OsString,
    os::unix::fs::DirBuilderExt as _,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use tokio::task::JoinHandle;

use crate::{
    daemon::{
        Gateway, GatewayConfig, ServerOptions,
        kernel_lock::{EgressLock, LockFuture, LockdownHook},
        peer::{Peer, is_within},
        server, socket,
    },
    protocol::SessionOpen,
    shutdown::{self, Trigger},
};
use gatewayd_core::{
    audit::writer::WriterHandle, clock::Clock, engine::EngineError, policy::Policy,
};
use gatewayd_kernel::kernel;

/// The variable that tells the agent where its gateway listens.
pub const ENV_SOCKET: &str = "GATEWAYD_SOCKET";
/// The variable that names the agent's session (already open, bound to its cgroup).
pub const ENV_SESSION: &str = "GATEWAYD_SESSION";
/// Overrides where `gatewayd run` makes its per-session runtime directories.
pub const ENV_RUNTIME_DIR: &str = "GATEWAYD_RUNTIME_DIR";
/// The socket's file name inside the session's runtime directory.
const SOCKET_NAME: &str = "gatewayd.sock";

/// Why the agent's gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentGatewayError {
    /// The engine could not be built from the policy.
    #[error("the gateway for the agent: {0}")]
    Engine(#[from] EngineError),
    /// The runtime directory or the session's own directory in it could not be made.
    #[error("the agent's runtime directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// The socket could not be bound.
    #[error(transparent)]
    Socket(#[from] socket::SocketError),
    /// The agent's cgroup is not under the cgroup v2 mount.
    #[error("the agent's cgroup {0} is not under the cgroup v2 mount")]
    Cgroup(PathBuf),
    /// The gateway refused to open the agent's session.
    #[error("opening the agent's session: {0}")]
    Open(String),
}

/// Lets an agent that runs as another user reach its socket, and nothing else in the
/// directory: the socket becomes the agent's (mode 0600) and the directory, still gatewayd's,
/// may be passed through (0711) but not listed or written.
fn give_to_agent(dir: &Path, socket: &Path, (uid, gid): (u32, u32)) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if uid == nix::unistd::geteuid().as_raw() {
        return Ok(());
    }
    std::os::unix::fs::chown(socket, Some(uid), Some(gid))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
}

/// Where per-session runtime directories go: `$GATEWAYD_RUNTIME_DIR`, else `/run/gatewayd`
/// for root, else `$XDG_RUNTIME_DIR/gatewayd`, else `gatewayd-UID` in the temporary directory.
pub fn default_runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(ENV_RUNTIME_DIR) {
        return PathBuf::from(d);
    }
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/gatewayd");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("gatewayd"),
        None => std::env::temp_dir().join(format!("gatewayd-{uid}")),
    }
}

/// The session's private directory and its socket.
pub(super) fn paths(runtime_dir: &Path, session: &str) -> (PathBuf, PathBuf) {
    let dir = runtime_dir.join(session);
    let socket = dir.join(SOCKET_NAME);
    (dir, socket)
}

/// What the agent's gateway is built from.
pub(super) struct Setup<'a> {
    pub(super) policy: &'a Policy,
    /// The policy file: watched, and reloaded when it changes.
    pub(super) policy_path: &'a Path,
    /// Paths no tool argument may touch (policy, audit log; the runtime directory is added).
    pub(super) protect: Vec<PathBuf>,
    pub(super) audit: WriterHandle,
    pub(super) clock: Arc<dyn Clock>,
    /// The agent's cgroup directory (under the cgroup v2 mount).
    pub(super) cgroup_dir: &'a Path,
    pub(super) session: &'a str,
    pub(super) user: &'a str,
    /// The uid and gid the agent runs as: the socket is given to them when they are not
    /// gatewayd's own.
    pub(super) agent_owner: (u32, u32),
    pub(super) scopes: &'a [String],
    pub(super) runtime_dir: &'a Path,
    pub(super) kernel: kernel::task::Handle,
    /// Learn mode of the gateway.
    pub(super) learn: gatewayd_core::engine::Learn,
    /// The session's cgroup connect programs are attached: loopback destinations are theirs
    /// to judge (the agent reaches its own servers there, nothing else).
    pub(super) loopback_by_kernel: bool,
    /// `--export`: the gateway's heads go there too.
    pub(super) export: Option<&'a crate::daemon::export::Export>,
    /// Canary credentials: every call is looked at for the session's decoys.
    pub(super) canary: Option<Arc<dyn crate::daemon::CanaryCheck>>,
}

/// The running gateway of one `gatewayd run` session.
pub(super) struct AgentGateway {
    dir: PathBuf,
    socket: PathBuf,
    session: String,
    trigger: Trigger,
    server: JoinHandle<()>,
    hook: Arc<LockdownHook<RunSession>>,
    gateway: Arc<Gateway>,
    cgroup: String,
}

impl AgentGateway {
    /// The agent's socket, bound in a directory of its own (0700, created fresh under
    /// `runtime_dir`, stale ones swept) and given to the agent's user.
    fn bind_for_agent(
        runtime_dir: &Path,
        dir: &Path,
        socket_path: &Path,
        agent_owner: (u32, u32),
    ) -> Result<tokio::net::UnixListener, AgentGatewayError> {
        let dir_err = |source| AgentGatewayError::Dir {
            path: dir.to_owned(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(runtime_dir)
            .map_err(dir_err)?;
        sweep_stale(runtime_dir);
        // Not recursive: a directory that already exists is refused, never reused.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(dir_err)?;
        let listener = match socket::bind(socket_path, nix::unistd::getgid().as_raw()) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir(dir);
                return Err(e.into());
            }
        };
        if let Err(e) = give_to_agent(dir, socket_path, agent_owner) {
            drop(listener);
            remove(socket_path, dir);
            return Err(dir_err(e));
        }
        Ok(listener)
    }

    /// Builds the gateway, binds its socket (directory 0700, created fresh), opens the
    /// agent's session for the agent's cgroup (a `session_open` record), wires the lockdown
    /// hook, and starts serving. Must run inside the supervisor's runtime.
    pub(super) async fn start(s: Setup<'_>) -> Result<AgentGateway, AgentGatewayError> {
        let cgroup = cgroup_path(s.cgroup_dir)?;
        let (dir, socket_path) = paths(s.runtime_dir, s.session);
        let mut protect = s.protect;
        protect.push(dir.clone());
        let gw = Arc::new(Gateway::new(GatewayConfig {
            policy: s.policy.clone(),
            protect,
            audit: Some(s.audit.clone()),
            clock: s.clock,
            operator_gid: nix::unistd::getgid().as_raw(),
            learn: s.learn,
            loopback_by_kernel: s.loopback_by_kernel,
            policy_digest: std::fs::read(s.policy_path)
                .ok()
                .map(|b| crate::daemon::policy_digest(&b)),
        })?);
        for w in gw.engine().warnings() {
            eprintln!("gatewayd: note: {w}");
        }
        gw.agent_cgroups().add(&cgroup);
        let kernel = s.kernel.clone();
        let hook = Arc::new(LockdownHook {
            lock: RunSession {
                kernel: Mutex::new(Some(s.kernel)),
                agent_cgroup: cgroup.clone(),
            },
            audit: Some(s.audit),
        });
        gw.set_trip_hook(hook.clone());
        if let Some(c) = s.canary {
            gw.set_canary_check(c);
        }

        let listener = Self::bind_for_agent(s.runtime_dir, &dir, &socket_path, s.agent_owner)?;
        let me = Peer::from_parts(
            std::process::id() as i32,
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let open = SessionOpen {
            session: Some(s.session.to_owned()),
            user: s.user.to_owned(),
            scopes: s.scopes.to_vec(),
        };
        if let Err(e) = gw.open_for(&cgroup, &me, open).await {
            drop(listener);
            remove(&socket_path, &dir);
            return Err(AgentGatewayError::Open(e.message));
        }
        let (trigger, stop) = shutdown::channel();
        super::policy_reload::watch(&gw, kernel, s.policy_path.to_owned(), stop.clone());
        if let Some(x) = s.export {
            x.attach(&gw, stop.clone());
        }
        let server = tokio::spawn(server::run(
            listener,
            gw.clone(),
            stop,
            ServerOptions::default(),
        ));
        Ok(AgentGateway {
            dir,
            socket: socket_path,
            session: s.session.to_owned(),
            trigger,
            server,
            hook,
            gateway: gw,
            cgroup,
        })
    }

    /// The gateway (kernel denials feed its sessions' suspicion).
    pub(super) fn gateway(&self) -> Arc<Gateway> {
        self.gateway.clone()
    }

    /// The agent's cgroup, as peers see it (`/proc/PID/cgroup`).
    pub(super) fn cgroup(&self) -> &str {
        &self.cgroup
    }

    /// The agent's environment: where to connect, and its session.
    pub(super) fn env(&self) -> [(&'static str, OsString); 2] {
        [
            (ENV_SOCKET, self.socket.clone().into_os_string()),
            (ENV_SESSION, OsString::from(&self.session)),
        ]
    }

    /// Stops serving (connections finish the request they handle), lets go of the kernel
    /// task's handles (the lockdown hook's and the reload hook's, so the kernel layer can be
    /// detached), removes the socket and its
    /// directory.
    pub(super) async fn stop(self) {
        self.hook
            .lock
            .kernel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        // The reload hook holds a kernel task handle too.
        self.gateway.clear_reload_hook();
        self.gateway.clear_canary_check();
        self.trigger.fire();
        let _ = self.server.await;
        remove(&self.socket, &self.dir);
    }
}

fn remove(socket: &Path, dir: &Path) {
    let _ = std::fs::remove_file(socket);
    let _ = std::fs::remove_dir(dir);
}

/// Removes the directories of sessions whose gatewayd is gone (killed with SIGKILL, so it
/// could not clean up): `run-PID-MS` entries whose PID no longer exists, holding nothing but
/// their socket. A PID that exists (even reused by another process) keeps its entry.
fn sweep_stale(runtime_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(runtime_dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("run-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let dir = e.path();
            remove(&dir.join(SOCKET_NAME), &dir);
        }
    }
}

/// The cgroup as peers see it (`/proc/PID/cgroup`): the directory relative to the mount.
fn cgroup_path(dir: &Path) -> Result<String, AgentGatewayError> {
    let mount = gatewayd_kernel::cgroup::cgroup2_mount()
        .map_err(|_| AgentGatewayError::Cgroup(dir.to_owned()))?;
    let rel = dir
        .strip_prefix(&mount)
        .map_err(|_| AgentGatewayError::Cgroup(dir.to_owned()))?;
    Ok(format!("/{}", rel.display()))
}

/// `gatewayd run`'s lock: the agent cgroup's own kernel session.
struct RunSession {
    /// Taken out when the gateway stops, so the kernel task can end.
    kernel: Mutex<Option<kernel::task::Handle>>,
    /// The agent's cgroup, as peers see it.
    agent_cgroup: String,
}

impl EgressLock for RunSession {
    fn lock<'a>(&'a self, cgroup: &'a str) -> LockFuture<'a> {
        Box::pin(async move {
            // A session opened from outside the agent's cgroup has no egress of ours to lock.
            if !is_within(cgroup, &self.agent_cgroup) {
                return Ok(None);
            }
            let kernel = self
                .kernel
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
                .ok_or("the kernel layer has stopped")?;
            kernel.lockdown(true).await.map_err(|e| kernel::chain(&e))?;
            Ok(Some(serde_json::Map::new()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_lives_in_the_sessions_own_directory() {
        let (dir, sock) = paths(Path::new("/run/gatewayd"), "run-1-2");
        assert_eq!(dir, Path::new("/run/gatewayd/run-1-2"));
        assert_eq!(sock, Path::new("/run/gatewayd/run-1-2/gatewayd.sock"));
    }

    #[test]
    fn directories_of_dead_sessions_are_swept_live_ones_kept() {
        let rt = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let d = rt.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join(SOCKET_NAME), "").unwrap();
            d
        };
        // Beyond any pid_max (2^22): no such process.
        let dead = make("run-4294967295-1");
        let live = make(&format!("run-{}-1", std::process::id()));
        let other = make("something-else");
        let busy = make("run-4294967294-1");
        std::fs::write(busy.join("more"), "").unwrap();
        sweep_stale(rt.path());
        assert!(!dead.exists());
        assert!(live.join(SOCKET_NAME).exists());
        assert!(other.join(SOCKET_NAME).exists());
        assert!(busy.join("more").exists(), "only a bare socket is removed");
    }
}
