//! The agent's process: spawned into its cgroup (and, at tier 2, its Landlock ruleset), tied
//! to gatewayd's life, and waited for while gatewayd forwards signals to it and answers
//! SIGUSR1 with the egress lockdown.
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use gatewayd_core::audit::{Entry, writer::WriterHandle};
use gatewayd_kernel::kernel;

/// Why the agent could not be run or waited for.
pub(super) enum SpawnError {
    Spawn(std::io::Error),
    Wait(std::io::Error),
    Gateway(super::agent_gateway::AgentGatewayError),
}

impl SpawnError {
    /// The run's error, naming `agent` when it could not be started.
    pub(super) fn into_run_error(self, agent: &str) -> super::RunError {
        match self {
            SpawnError::Spawn(error) => super::RunError::Spawn {
                agent: agent.to_owned(),
                error,
            },
            SpawnError::Wait(e) => super::RunError::Wait(e),
            SpawnError::Gateway(e) => super::RunError::Gateway(e),
        }
    }
}

/// Signals gatewayd forwards to the agent.
const FORWARDED: [fn() -> SignalKind; 4] = [
    SignalKind::interrupt,
    SignalKind::terminate,
    SignalKind::hangup,
    SignalKind::quit,
];

/// What the agent is started with.
pub(super) struct Agent<'a, R> {
    /// Program and arguments.
    pub(super) argv: &'a [String],
    /// The program as gatewayd found it on `PATH` (`argv[0]` stays as given), else
    /// `argv[0]` is looked up in the agent's namespace.
    pub(super) program: Option<&'a std::path::Path>,
    /// Run in the child before exec: the private mount namespace, the PID namespace and its
    /// init, the cgroup, tier 2's Landlock ruleset, the agent's credentials and its seccomp
    /// filter (`AgentPrivileges::pre_exec_fn`).
    pub(super) confine: R,
    /// Variables added to the agent's environment (its gateway's socket and session).
    pub(super) env: &'a [(String, std::ffi::OsString)],
}

/// Spawns the agent and waits for it, forwarding signals; SIGUSR1 turns all of the agent's
/// egress off (the kernel task's lockdown), recorded as `egress_lockdown`.
pub(super) async fn spawn_and_wait<R>(
    agent: Agent<'_, R>,
    kernel: &kernel::task::Handle,
    audit: &WriterHandle,
    session: &str,
) -> Result<std::process::ExitStatus, SpawnError>
where
    R: Fn() -> std::io::Result<()> + Send + Sync + 'static,
{
    // Registered before the agent exists, so no signal finds gatewayd without its handler.
    let mut sigs = Vec::new();
    for kind in FORWARDED.map(|k| k()) {
        sigs.push((kind, signal(kind).map_err(SpawnError::Spawn)?));
    }
    let mut lockdown = signal(SignalKind::user_defined1()).map_err(SpawnError::Spawn)?;
    let mut cmd = match agent.program {
        Some(found) => tokio::process::Command::new(found),
        None => tokio::process::Command::new(&agent.argv[0]),
    };
    cmd.arg0(&agent.argv[0]).args(&agent.argv[1..]);
    cmd.envs(agent.env.iter().map(|(k, v)| (k, v)));
    // SAFETY: `confine` (`AgentPrivileges::pre_exec_fn`) makes only async-signal-safe
    // syscalls (unshare, mount, fork, sigprocmask, sigwaitinfo, waitpid, kill, open, write,
    // close, landlock, setgroups/setres[ug]id, capset, prctl, seccomp), on memory prepared
    // before the fork.
    unsafe { gatewayd_kernel::child::supervise(&mut cmd, agent.confine) };
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
                let entry = Entry::egress_lockdown(session, None, json!({
                    "trigger": "SIGUSR1",
                    "error": result.as_ref().err().map(|e| kernel::chain(e)),
                }));
                if let Err(e) = audit.submit(entry) {
                    eprintln!("gatewayd: the egress lockdown is not recorded: {e}");
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
