//! Shared fixture of the daemon suites: an in-process `gatewayd serve` on a temporary socket
//! (its own runtime on its own thread), and a relay client running inside a fresh cgroup v2
//! (an "agent" on another cgroup than the test process, which plays the operator).

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{Arc, mpsc},
    thread::JoinHandle,
};

use gatewayd::{
    daemon::{
        self, DaemonError, ExportOptions, Gateway, ReloadOptions, ServeOptions, ServerOptions,
    },
    protocol::client::Client,
    shutdown::{self, Trigger},
};
use gatewayd_core::{audit::writer::Head, clock::Clock};
use gatewayd_kernel::cgroup::AgentCgroup;
use serde_json::{Value, json};

/// A policy with one tool of each kind, its sandbox inside `root`.
pub(crate) fn policy(root: &Path) -> Value {
    json!({"version": 1,
        "tools": [
            {"name": "read_file", "description": "Read a file.", "labels": ["reads_private"],
             "args": {"path": {"required": true, "path": "read"}}},
            {"name": "fetch_url", "description": "Fetch a web page.", "labels": ["untrusted_output"]},
            {"name": "send_email", "description": "Send an email.", "labels": ["sends_out"],
             "credentials": ["smtp"]},
            {"name": "count", "description": "Counts.", "cost": 1}
        ],
        "credentials": {"smtp": {"value": "smtp-password-123456"}},
        "sandbox": {"root": root, "readable": [root]},
        "limits": {"budget": 100},
        "trifecta": "hold"})
}

/// A daemon running in this process.
pub(crate) struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub audit: Option<PathBuf>,
    pub gw: Arc<Gateway>,
    /// Where `start` puts the audit log (removed with the daemon).
    audit_dir: Option<tempfile::TempDir>,
    trigger: Trigger,
    thread: Option<JoinHandle<Result<Head, DaemonError>>>,
}

impl Daemon {
    /// A session `id` of alice's with three calls of `count`, closed: a few records.
    pub(crate) fn three_counted_calls(&self, id: &str) {
        let mut c = self.client();
        c.call("session/open", json!({"session": id, "user": "alice"}))
            .unwrap();
        for _ in 0..3 {
            c.call(
                "call/decide",
                json!({"session": id, "call": {"tool": "count", "arguments": {}}}),
            )
            .unwrap();
        }
        c.call("session/close", json!({"session": id})).unwrap();
    }

    /// Starts a daemon on `policy` (written into a fresh directory, with `notes.txt` next
    /// to it); `audit`: where the log goes (None: no audit).
    pub(crate) fn start_with(
        policy_of: impl FnOnce(&Path) -> Value,
        audit: Option<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("notes.txt"), "meeting at noon\n").unwrap();
        let pfile = root.join("policy.json");
        std::fs::write(&pfile, policy_of(&root).to_string()).unwrap();
        Self::launch(dir, pfile, audit, clock)
    }

    /// Starts a daemon on the policy file `pfile` (already written), its socket in `dir`.
    pub(crate) fn launch(
        dir: tempfile::TempDir,
        pfile: PathBuf,
        audit: Option<PathBuf>,
        clock: Arc<dyn Clock>,
    ) -> Daemon {
        Self::launch_with(dir, pfile, audit, clock, None)
    }

    /// The standard policy, audit in `audit` (kept after the daemon), exporting to `export`.
    pub(crate) fn start_exporting(audit: PathBuf, export: ExportOptions) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("notes.txt"), "meeting at noon\n").unwrap();
        let pfile = root.join("policy.json");
        std::fs::write(&pfile, policy(&root).to_string()).unwrap();
        let clock = Arc::new(gatewayd_core::clock::SystemClock);
        Self::launch_with(dir, pfile, Some(audit), clock, Some(export))
    }

    fn launch_with(
        dir: tempfile::TempDir,
        pfile: PathBuf,
        audit: Option<PathBuf>,
        clock: Arc<dyn Clock>,
        export: Option<ExportOptions>,
    ) -> Daemon {
        let root = dir.path().canonicalize().unwrap();
        let socket = root.join("gatewayd.sock");
        let (trigger, shutdown) = shutdown::channel();
        let (tx, rx) = mpsc::channel();
        let opts = ServeOptions {
            listener: None,
            policy: pfile,
            socket: socket.clone(),
            audit: audit.clone(),
            gid: 0,
            agent_cgroups: Vec::new(),
            clock,
            server: ServerOptions::default(),
            reload: ReloadOptions {
                sighup: false,
                watch: true,
            },
            export,
        };
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let txe = tx.clone();
            let r = rt.block_on(daemon::serve(opts, shutdown, move |gw| {
                let _ = tx.send(Some(gw.clone()));
            }));
            let _ = txe.send(None);
            r
        });
        let Some(gw) = rx.recv().unwrap() else {
            panic!("daemon failed: {:?}", thread.join().unwrap().err())
        };
        Daemon {
            dir,
            socket,
            audit,
            gw,
            audit_dir: None,
            trigger,
            thread: Some(thread),
        }
    }

    /// The policy file `pfile` in `dir` (written by the caller), audit in a directory removed
    /// with the daemon, the system clock.
    pub(crate) fn start_file(dir: tempfile::TempDir, pfile: PathBuf) -> Daemon {
        let adir = tempfile::tempdir().unwrap();
        let audit = adir.path().join("audit.jsonl");
        let mut d = Self::launch(
            dir,
            pfile,
            Some(audit),
            Arc::new(gatewayd_core::clock::SystemClock),
        );
        d.audit_dir = Some(adir);
        d
    }

    /// The standard policy, audit in the daemon's directory, the system clock.
    pub(crate) fn start() -> Daemon {
        Self::start_policy(policy)
    }

    /// `policy_of`'s policy, audit in a directory removed with the daemon, the system clock.
    pub(crate) fn start_policy(policy_of: impl FnOnce(&Path) -> Value) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        let mut d = Self::start_with(
            policy_of,
            Some(audit),
            Arc::new(gatewayd_core::clock::SystemClock),
        );
        d.audit_dir = Some(dir);
        d
    }

    pub(crate) fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub(crate) fn client(&self) -> Client {
        Client::connect(&self.socket).unwrap()
    }

    /// Fires shutdown and waits for the daemon to return.
    pub(crate) fn stop(mut self) -> Result<Head, DaemonError> {
        self.trigger.fire();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.trigger.fire();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// These tests need root and a writable cgroup v2 hierarchy (as `cargo xtask test` and CI
/// have): without them they fail rather than pass having checked nothing.
pub(crate) fn require_cgroups() {
    assert!(
        nix::unistd::geteuid().is_root() && gatewayd_kernel::cgroup::cgroup2_mount().is_ok(),
        "this test needs root and a writable cgroup v2 hierarchy (run the suite as root)"
    );
}

const RELAY: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for line in sys.stdin.buffer:
    f.write(line); f.flush()
    sys.stdout.buffer.write(f.readline()); sys.stdout.flush()
"#;

/// A client in a cgroup of its own under `/gatewayd` (an agent's): lines go through a
/// Python relay started inside it.
pub(crate) struct AgentRelay {
    pub cgroup: AgentCgroup,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl AgentRelay {
    /// In `/gatewayd/NAME-PID` (PID: this test process's).
    pub(crate) fn spawn(socket: &Path, name: &str) -> AgentRelay {
        Self::spawn_exact(socket, &format!("{name}-{}", std::process::id()))
    }

    /// In `/gatewayd/NAME`.
    pub(crate) fn spawn_exact(socket: &Path, name: &str) -> AgentRelay {
        // One left by a run that was killed (empty by now): rmdir refuses a busy one.
        let mount = gatewayd_kernel::cgroup::cgroup2_mount().unwrap();
        let _ = std::fs::remove_dir(mount.join("gatewayd").join(name));
        let cgroup = AgentCgroup::create(name).unwrap();
        let enter = cgroup.enter_fn();
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", RELAY])
            .arg(socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        // SAFETY: the closure only opens, writes and closes a file (async-signal-safe).
        unsafe { cmd.pre_exec(enter) };
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        AgentRelay {
            cgroup,
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// The cgroup path as the daemon sees it.
    pub(crate) fn cgroup_path(&self) -> String {
        let mount = gatewayd_kernel::cgroup::cgroup2_mount().unwrap();
        let rel = self.cgroup.path().strip_prefix(&mount).unwrap();
        format!("/{}", rel.display())
    }

    pub(crate) fn raw(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut out = String::new();
        self.stdout.read_line(&mut out).unwrap();
        out.trim_end().to_owned()
    }

    /// Calls a method; the whole answer object.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        serde_json::from_str(&self.raw(&req.to_string())).unwrap()
    }
}

impl Drop for AgentRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The records of an audit log.
pub(crate) fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
