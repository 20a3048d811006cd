//! Starting the tool server: its program checked against the policy's SHA-256 pin, its
//! kernel profile put in place ([`super::confine`]), then the process spawned with its stdin
//! and stdout piped to the proxy (stderr passes through). It dies with the proxy
//! (`PR_SET_PDEATHSIG`).
use std::{
    io::Read as _,
    path::{Path, PathBuf},
    process::Stdio,
};

use sha2::{Digest as _, Sha256};
use tokio::{
    process::{Child, ChildStdin, ChildStdout},
    sync::mpsc,
    task::JoinHandle,
};

use super::confine::{ConfineError, ServerConfinement};
use gatewayd_core::{
    audit::{Entry, aggregate, writer::WriterHandle},
    policy::{McpServer, Policy},
};
use gatewayd_kernel::kernel;

/// Why the server was not started.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The server's command line is empty.
    #[error("no server command given")]
    NoCommand,
    /// The program's path does not resolve, or no executable of that name is on `PATH`.
    #[error("the server's program `{0}` was not found")]
    NotFound(String),
    /// The program could not be read to hash it.
    #[error("cannot read the server's program {path}: {source}")]
    Read {
        /// The program's resolved path.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The program's SHA-256 is not the one the policy pins.
    #[error(
        "refusing to start the server: its program {path} has SHA-256 {got}, the policy pins {want} (mcp_servers.{name}.command_sha256)"
    )]
    PinMismatch {
        /// The server's name in `mcp_servers`.
        name: String,
        /// The program's resolved path.
        path: PathBuf,
        /// The program's SHA-256, lower-case hex.
        got: String,
        /// The pinned SHA-256, lower-case hex.
        want: String,
    },
    /// The server's kernel profile could not be put in place (with `kernel: require`).
    #[error("refusing to start the server `{name}`: its kernel profile cannot be applied")]
    Confine {
        /// The server's name in `mcp_servers`.
        name: String,
        /// What failed.
        #[source]
        source: Box<ConfineError>,
    },
    /// The process could not be spawned, or came up without its stdin and stdout pipes.
    #[error("cannot start the server `{program}`: {source}")]
    Spawn {
        /// The program as given on the command line.
        program: String,
        /// Why it could not be started.
        source: std::io::Error,
    },
    /// The reader of the server's kernel denials could not be started.
    #[error("the server's kernel event reader: {0}")]
    Kernel(#[from] kernel::KernelError),
}

/// Where `execvp` would find `program` (symlinks resolved).
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    find_program(program).and_then(|p| std::fs::canonicalize(p).ok())
}

/// `program` as `execvp` finds it: as given when it holds a `/`, else the first executable
/// file of that name in a `PATH` directory; its links not followed.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::X_OK).is_ok() && p.is_file()
        })
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, ServerError> {
    let read = |source| ServerError::Read {
        path: path.to_owned(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(read)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(read)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(gatewayd_core::canonical::hex(&h.finalize()))
}

/// The server program's path and hash, refused when it differs from the pin.
pub fn check_pin(
    name: &str,
    program: &str,
    pin: Option<&str>,
) -> Result<(PathBuf, String), ServerError> {
    let path = resolve_program(program).ok_or_else(|| ServerError::NotFound(program.into()))?;
    let got = sha256_file(&path)?;
    if let Some(want) = pin
        && !want.eq_ignore_ascii_case(&got)
    {
        return Err(ServerError::PinMismatch {
            name: name.into(),
            path,
            got,
            want: want.to_ascii_lowercase(),
        });
    }
    Ok((path, got))
}

/// A running server and what confines it.
pub struct Running {
    /// The server's process.
    pub child: Child,
    confinement: ServerConfinement,
    kernel: Option<(kernel::task::Handle, JoinHandle<kernel::Session>)>,
    /// `--learn`: the thread that records what the server's left-out allowlist would refuse.
    learning: Option<gatewayd_kernel::name_guard::Serving>,
}

/// Where a server's kernel records go.
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// The audit log; without one they are printed.
    pub writer: Option<WriterHandle>,
    /// The gateway session of the client the server serves, in each record's detail
    /// (`client_session`): a `--listen` proxy runs a server per client session, and all of
    /// them record under the session `mcp:NAME`.
    pub client_session: Option<String>,
}

impl Records {
    /// `e` (a kernel event's or a learned refusal's entry) with the client's session named.
    fn entry(&self, mut e: Entry) -> Entry {
        if let (Some(client), Some(detail)) = (&self.client_session, e.detail.as_object_mut()) {
            detail.insert("client_session".into(), serde_json::json!(client));
        }
        e
    }
}

/// Starts `command` for server `name` under its profile. Kernel denials of the server's
/// cgroup, and under `learn` what its profile would refuse, are recorded through `records`
/// (session `mcp:NAME`).
pub fn start(
    name: &str,
    command: &[String],
    server: &McpServer,
    policy: &Policy,
    own: &[PathBuf],
    records: Records,
    learn: bool,
) -> Result<Started, ServerError> {
    let program = command.first().ok_or(ServerError::NoCommand)?;
    let confine_error = |source| ServerError::Confine {
        name: name.into(),
        source: Box::new(source),
    };
    let mut confinement =
        ServerConfinement::prepare(name, server, server.kernel_mode(policy), own, learn)
            .map_err(confine_error)?;
    let pieces = confinement.pieces.clone();
    let session = format!("mcp:{name}");
    let (tx, rx) = mpsc::channel::<Entry>(256);
    tokio::spawn(record_denials(rx, records.writer.clone()));
    let kernel = match confinement.take_layer() {
        Some((layer, spec)) => {
            let (session, records) = (session.clone(), records.clone());
            Some(kernel::task::spawn(layer, spec, tx.clone(), move |d| {
                records.entry(d.into_entry(&session))
            })?)
        }
        None => None,
    };
    let learning = match confinement.take_learn() {
        Some(group) => Some(
            group
                .serve(move |l| {
                    // The recorder is gone only at the very end: nothing is left to record.
                    let _ = tx.blocking_send(records.entry(l.into_entry(&session)));
                })
                .map_err(|e| confine_error(e.into()))?,
        ),
        None => None,
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // SAFETY: `ServerConfinement::pre_exec` makes only async-signal-safe syscalls (open, write,
    // close, landlock) in the forked child.
    unsafe { gatewayd_kernel::child::supervise(&mut cmd, confinement.pre_exec()) };
    let mut child = cmd.spawn().map_err(|source| ServerError::Spawn {
        program: program.clone(),
        source,
    })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(ServerError::Spawn {
            program: program.clone(),
            source: std::io::ErrorKind::BrokenPipe.into(),
        });
    };
    Ok(Started {
        running: Running {
            child,
            confinement,
            kernel,
            learning,
        },
        stdin,
        stdout,
        pieces,
    })
}

/// Records the server's kernel denials, aggregated as `gatewayd run`'s are (the first of
/// each kind per window in full, the rest counted), or prints them without a recorder.
async fn record_denials(mut rx: mpsc::Receiver<Entry>, recorder: Option<WriterHandle>) {
    let mut windows = aggregate::Timed::new();
    loop {
        let entry = tokio::select! {
            e = rx.recv() => e,
            due = windows.window_end() => {
                write_denials(due, recorder.as_ref()).await;
                continue;
            }
        };
        let Some(entry) = entry else { break };
        write_denials(windows.offer(entry), recorder.as_ref()).await;
    }
    write_denials(windows.flush(), recorder.as_ref()).await;
}

async fn write_denials(entries: Vec<Entry>, recorder: Option<&WriterHandle>) {
    for e in entries {
        match recorder {
            Some(r) => {
                if let Ok(t) = r.submit(e) {
                    let _ = r.wait_async(t).await;
                }
            }
            None => eprintln!("gatewayd mcp: kernel denial: {} {}", e.reason, e.detail),
        }
    }
}

/// What [`start`] hands back: the process, its pipes, and the profile's pieces in force.
pub struct Started {
    /// The running server and its confinement.
    pub running: Running,
    /// The server's stdin: the proxy's requests to it.
    pub stdin: ChildStdin,
    /// The server's stdout: its messages to the proxy.
    pub stdout: ChildStdout,
    /// The profile's pieces in force, with any `warnings` (the `mcp_server_start` record).
    pub pieces: serde_json::Map<String, serde_json::Value>,
}

impl Running {
    /// Stops the server (if still running), reads its last kernel events, kills what is
    /// left in its cgroup, removes its kernel session and removes the cgroup.
    pub async fn stop(mut self) -> Option<std::process::ExitStatus> {
        let waited =
            tokio::time::timeout(std::time::Duration::from_secs(2), self.child.wait()).await;
        let status = if let Ok(Ok(s)) = waited {
            Some(s)
        } else {
            let _ = self.child.kill().await;
            self.child.wait().await.ok()
        };
        let _ = self.confinement.kill_all();
        if let Some(thread) = self.learning.take() {
            // Its thread holds a sender of records; nothing opens any more.
            let _ = tokio::task::spawn_blocking(move || thread.finish()).await;
        }
        if let Some((handle, task)) = self.kernel.take() {
            handle.drain().await;
            drop(handle);
            // Nothing runs in the cgroup any more: the session's entries go, the programs stay.
            if let Ok(session) = task.await
                && let Err(e) = session.remove()
            {
                eprintln!(
                    "gatewayd mcp: removing the server's kernel session: {}",
                    kernel::chain(&e)
                );
            }
        }
        if let Err(e) = self.confinement.finish() {
            eprintln!("gatewayd mcp: removing the server's cgroup: {e}");
        }
        status
    }
}
