//! Driving a real agent CLI offline: a network namespace with loopback only, a scripted
//! model server (`model_server.py`), a workspace and a home of its own, the host's own
//! settings with every telemetry and update path off, and the four ways it runs (bare, hooks
//! only, `gatewayd run` alone, `gatewayd run` with hooks reaching the session's gateway).
use std::{
    io::Read as _,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{Value, json};

/// The host CLIs the suite drives (installed by `cargo xtask setup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
    Claude,
    Codex,
    Gemini,
}

/// How the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No gatewayd at all: what the attempts do without it.
    Bare,
    /// The host's hooks call `gatewayd hook --policy P`; no `gatewayd run`.
    Hooks,
    /// `gatewayd run` with no hook: the kernel alone.
    Kernel,
    /// `gatewayd run`, the hooks reaching the session's gateway through `$GATEWAYD_SOCKET`.
    KernelAndHooks,
}

impl Host {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::Codex => "codex",
            Host::Gemini => "gemini",
        }
    }

    /// The host's program, from `GATEWAYD_HOST_<NAME>` (set by `cargo xtask test`). `None`
    /// only when setup said npm could not be reached, which is printed loudly.
    pub(crate) fn program(self) -> Option<PathBuf> {
        let var = format!("GATEWAYD_HOST_{}", self.name().to_uppercase());
        match std::env::var(&var) {
            Ok(p) if p.starts_with("unavailable:") => {
                eprintln!(
                    "HOSTS-SKIPPED {}: {p} (npm could not be reached)",
                    self.name()
                );
                None
            }
            Ok(p) => Some(PathBuf::from(p)),
            Err(e) => panic!("{var}: {e}: run these tests through cargo xtask test"),
        }
    }
}

/// A world for one run: workspace, home (with a key), policy, audit logs, under `/var/tmp`
/// (the session's private `/tmp` would hide a workspace under `/tmp`). Removed on drop.
pub(crate) struct World {
    pub(crate) host: Host,
    pub(crate) mode: Mode,
    pub(crate) dir: PathBuf,
    pub(crate) ws: PathBuf,
    pub(crate) home: PathBuf,
    program: PathBuf,
    model: ModelServer,
    /// The model server's port.
    port: u16,
    /// Codex runs with its own sandbox (its default), not `-s danger-full-access`.
    pub(crate) codex_own_sandbox: bool,
    /// `gatewayd run --learn` (the kernel modes).
    pub(crate) learn: bool,
}

/// The model Codex is told to use: one of its catalog's whose tools are sent with each
/// request (the catalog's newest take theirs from the server) and whose `apply_patch` is a
/// freeform tool, the way the catalog's models edit.
pub(crate) const CODEX_MODEL: &str = "gpt-5.5";

pub(crate) const KEY: &str = "PRIVATE-KEY-7f3a9c";
pub(crate) const DOTENV: &str = "DOTENV-SECRET-52be";

impl World {
    /// Where the world of test `what` for `host` in `mode` lies (its workspace is `ws`, its
    /// home `home`): one of its own per test, so tests may run side by side.
    /// A learn test's world is a user's home, `/home/NAME`, with its workspace in it (as
    /// `gatewayd policy suggest` sees a real one: it never proposes a home as a whole, nor
    /// writing under `/var`). The others lie in `/tmp`, as a test harness's `mktemp -d`
    /// puts them: the starter's private `/tmp` binds the workspace and the home's paths
    /// the policy names (docs/KERNEL.md, "The agent's /tmp").
    pub(crate) fn dir_for(what: &str, host: Host, mode: Mode) -> PathBuf {
        let base = if what == "learn" { "/home" } else { "/tmp" };
        PathBuf::from(format!(
            "{base}/gwhosts-{what}-{}-{mode:?}-{}",
            host.name(),
            std::process::id()
        ))
    }

    /// Makes the world and starts the model server on `steps` (in the caller's network
    /// namespace: [`loopback_only`] first).
    pub(crate) fn new(
        what: &str,
        host: Host,
        mode: Mode,
        program: PathBuf,
        steps: &[Value],
    ) -> World {
        let dir = World::dir_for(what, host, mode);
        let _ = std::fs::remove_dir_all(&dir);
        let ws = dir.join("ws");
        let home = if what == "learn" {
            dir.clone()
        } else {
            dir.join("home")
        };
        for d in [ws.join("src"), home.join(".ssh")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join(".ssh/id_rsa"), format!("{KEY}\n")).unwrap();
        std::fs::write(ws.join(".env"), format!("TOKEN={DOTENV}\n")).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Dev\n\temail = dev@example.com\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        for (f, text) in crate::sessions::PROJECT {
            std::fs::write(ws.join(f), text).unwrap();
        }
        let steps: Vec<Value> = steps.iter().map(|s| host.step(s)).collect();
        let model = ModelServer::start(&dir, &steps);
        let port = model.port;
        let w = World {
            host,
            mode,
            dir,
            ws,
            home,
            program,
            model,
            port,
            codex_own_sandbox: false,
            learn: false,
        };
        w.write_policy();
        w.write_host_settings();
        w.install_hook();
        w
    }

    pub(crate) fn policy(&self) -> PathBuf {
        self.dir.join("policy.json")
    }

    /// `gatewayd run`'s audit log.
    pub(crate) fn audit(&self) -> PathBuf {
        self.dir.join("audit.jsonl")
    }

    /// The hooks' audit log (hooks only: outside the workspace, as `--audit` says).
    pub(crate) fn hook_audit(&self) -> PathBuf {
        self.dir.join("hook-audit.jsonl")
    }

    /// `gatewayd policy init --host H` as a user runs it (the host found on PATH), then the
    /// model server's loopback port in egress and this build's gatewayd readable (a real
    /// install has it under /usr).
    fn write_policy(&self) {
        let out = Command::new(crate::gatewayd())
            .args(["policy", "init", "--host", self.host.name(), "--out"])
            .arg(self.policy())
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--home")
            .arg(&self.home)
            .env("PATH", self.path_var())
            .output()
            .unwrap();
        assert!(out.status.success(), "policy init: {out:?}");
        let text = std::fs::read_to_string(self.policy()).unwrap();
        let mut p: Value = serde_json::from_str(&text).unwrap();
        p["network"]["egress"]
            .as_array_mut()
            .unwrap()
            .push(json!({"cidr": "127.0.0.1/32", "port": self.port}));
        let bin_dir = crate::gatewayd().parent().unwrap().to_path_buf();
        p["sandbox"]["readable"]
            .as_array_mut()
            .unwrap()
            .push(json!(bin_dir));
        std::fs::write(self.policy(), serde_json::to_string_pretty(&p).unwrap()).unwrap();
    }

    /// The model server's port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    fn path_var(&self) -> String {
        let bin = self.program.parent().unwrap().display().to_string();
        format!("{bin}:/usr/local/bin:/usr/bin:/bin")
    }

    /// `gatewayd hook install` as a user runs it, in the hook modes: one command for both,
    /// since under `gatewayd run` the hook asks the session's gateway (`$GATEWAYD_SOCKET`)
    /// before its `--policy`. For Codex it also trusts the hook through Codex itself.
    fn install_hook(&self) {
        if matches!(self.mode, Mode::Bare | Mode::Kernel) {
            return;
        }
        let out = Command::new(crate::gatewayd())
            .args(["hook", "install", "--host", self.host.name(), "--home"])
            .arg(&self.home)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--policy")
            .arg(self.policy())
            .arg("--audit")
            .arg(self.hook_audit())
            .env("PATH", self.path_var())
            .env_remove("CODEX_HOME")
            .output()
            .unwrap();
        assert!(out.status.success(), "hook install: {out:?}");
        let check = Command::new(crate::gatewayd())
            .args([
                "hook",
                "install",
                "--check",
                "--host",
                self.host.name(),
                "--home",
            ])
            .arg(&self.home)
            .arg("--workspace")
            .arg(&self.ws)
            .env("PATH", self.path_var())
            .output()
            .unwrap();
        assert!(check.status.success(), "hook install --check: {check:?}");
        if self.host == Host::Claude {
            let kept = std::fs::read_to_string(self.home.join(".claude/settings.json")).unwrap();
            assert!(
                kept.contains("cleanupPeriodDays"),
                "the user's own setting: {kept}"
            );
        }
    }

    /// Each host's own settings: the model server, telemetry and updates off, the hooks.
    fn write_host_settings(&self) {
        match self.host {
            Host::Claude => {
                std::fs::create_dir_all(self.home.join(".claude")).unwrap();
                // A setting of the user's own, which the install must keep.
                let s = json!({"cleanupPeriodDays": 30});
                write_json(&self.home.join(".claude/settings.json"), &s);
            }
            Host::Codex => {
                let codex = self.home.join(".codex");
                std::fs::create_dir_all(&codex).unwrap();
                // The catalog this Codex ships, so that the model it is told to use is one
                // of OpenAI's with its tools (a freeform `apply_patch`): an unknown model gets
                // fallback tools, and no patch tool.
                let catalog = Command::new(&self.program)
                    .args(["debug", "models", "--bundled"])
                    .env_clear()
                    .env("HOME", &self.home)
                    .env("PATH", self.path_var())
                    .output()
                    .unwrap();
                assert!(catalog.status.success(), "codex debug models: {catalog:?}");
                std::fs::write(codex.join("models.json"), &catalog.stdout).unwrap();
                let config = format!(
                    "model_provider = \"fake\"\nmodel = \"{CODEX_MODEL}\"\n\
                     model_catalog_json = \"{}\"\ncheck_for_update_on_startup = false\n\
                     [analytics]\nenabled = false\n[features]\nplugins = false\n\
                     [model_providers.fake]\nname = \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n\
                     wire_api = \"responses\"\nenv_key = \"FAKE_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
                    codex.join("models.json").display(),
                    self.port
                );
                std::fs::write(codex.join("config.toml"), config).unwrap();
            }
            Host::Gemini => {
                let gemini = self.home.join(".gemini");
                std::fs::create_dir_all(&gemini).unwrap();
                let s = json!({"general": {"enableAutoUpdate": false},
                    "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
                    "security": {"auth": {"selectedType": "gemini-api-key"}}});
                write_json(&gemini.join("settings.json"), &s);
            }
        }
    }

    /// The host's command line and environment, non-interactive.
    fn host_command(&self) -> Command {
        let mut c = match self.mode {
            Mode::Bare | Mode::Hooks => Command::new(&self.program),
            Mode::Kernel | Mode::KernelAndHooks => {
                let mut c = Command::new(crate::gatewayd());
                c.args(["run", "--user", "root"]);
                if self.learn {
                    c.arg("--learn");
                }
                c.arg("--policy")
                    .arg(self.policy())
                    .arg("--audit")
                    .arg(self.audit())
                    // A launcher line, as users write one (`env VAR=x claude`): the host's
                    // install folder must be readable for `env` to start it.
                    .args(["--", "env", "GATEWAYD_TEST_LAUNCHER=1"])
                    .arg(&self.program);
                c
            }
        };
        let url = format!("http://127.0.0.1:{}", self.port);
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.path_var())
            .env("LANG", "C.UTF-8")
            .current_dir(&self.ws)
            .stdin(Stdio::null());
        match self.host {
            Host::Claude => {
                c.args(["-p", "do the task", "--output-format", "json"])
                    .args([
                        "--allowedTools",
                        "Bash",
                        "Read",
                        "Glob",
                        "Grep",
                        "Edit",
                        "Write",
                    ])
                    .env("ANTHROPIC_BASE_URL", url)
                    .env("ANTHROPIC_API_KEY", "x")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    .env("DISABLE_TELEMETRY", "1")
                    .env("DISABLE_ERROR_REPORTING", "1");
            }
            Host::Codex => {
                c.args(["exec", "--skip-git-repo-check", "--ephemeral", "--json"]);
                if !self.codex_own_sandbox {
                    c.args(["-s", "danger-full-access"]);
                }
                c.arg("--dangerously-bypass-hook-trust")
                    .arg("do the task")
                    .env("FAKE_KEY", "x");
            }
            Host::Gemini => {
                c.args(["-p", "do the task", "--output-format", "json", "--yolo"])
                    .env("GEMINI_API_KEY", "x")
                    .env("GOOGLE_GEMINI_BASE_URL", url)
                    .env("GEMINI_CLI_NO_RELAUNCH", "1")
                    .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
            }
        }
        c
    }

    /// Runs the host to its end (two minutes at most) and collects what the model was told.
    pub(crate) fn run(&self) -> Run {
        let child = self
            .host_command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.host.name()));
        let out = wait_with_deadline(child, Duration::from_mins(2));
        let results = self.model.results();
        Run { out, results }
    }
}

impl Host {
    /// A host-neutral step in the form this host's model server script takes: Codex has no
    /// file tool of its own, so a read is a `cat` and a glob a `find`.
    fn step(self, step: &Value) -> Value {
        if self != Host::Codex {
            return step.clone();
        }
        if let Some(p) = step["read"].as_str() {
            return json!({"shell": format!("cat {p}")});
        }
        if let Some(g) = step["glob"].as_str() {
            let name = g.rsplit('/').next().unwrap_or(g);
            return json!({"shell": format!("find . -name '{name}'")});
        }
        step.clone()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Prints a `HOSTS-RESULT` line even from a passing test (written to stderr directly:
/// libtest captures `print!` and `eprint!`).
pub(crate) fn report(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("HOSTS-RESULT {line}\n").as_bytes());
}

/// What a run did: the host's exit and output, and each tool result the model was told, in
/// order.
pub(crate) struct Run {
    pub(crate) out: Output,
    pub(crate) results: Vec<String>,
}

impl Run {
    pub(crate) fn describe(&self) -> String {
        format!(
            "exit {}\nstdout: {}\nstderr: {}\nresults: {:#?}",
            self.out.status,
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr),
            self.results
        )
    }
}

fn write_json(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// The scripted model server, running until dropped.
struct ModelServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ModelServer {
    fn start(dir: &Path, steps: &[Value]) -> ModelServer {
        let script = dir.join("model-script.json");
        let log = dir.join("model-log.jsonl");
        write_json(&script, &json!(steps));
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hosts/model_server.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(server)
            .arg(&script)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // It prints its port once it listens; nothing else of its output is read.
        let port = gatewayd_testkit::net::announced_port(&mut child, "PORT ");
        drop(child.stdout.take());
        ModelServer { child, port, log }
    }

    /// Each tool result the model was told, by its place in the conversation.
    fn results(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut out: Vec<String> = Vec::new();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let n = v["results"].as_u64().unwrap_or(0) as usize;
            if n == 0 {
                continue;
            }
            if out.len() < n {
                out.resize(n, String::new());
            }
            out[n - 1] = v["last_result"].as_str().unwrap_or_default().to_string();
        }
        out
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// This thread into a network namespace of its own, loopback up: whatever it starts reaches
/// 127.0.0.1 and nothing else.
pub(crate) fn loopback_only() {
    // SAFETY: a plain syscall; the namespace is the calling thread's.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "unshare(CLONE_NEWNET): {}",
        std::io::Error::last_os_error()
    );
    let st = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(st.success(), "ip link set lo up");
}

fn wait_with_deadline(mut child: Child, limit: Duration) -> Output {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// A TCP receiver on loopback (in the caller's namespace): what an exfiltration delivers.
pub(crate) fn receiver() -> (u16, mpsc::Receiver<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut b = Vec::new();
            let _ = s.read_to_end(&mut b);
            if tx.send(b).is_err() {
                break;
            }
        }
    });
    (port, rx)
}
