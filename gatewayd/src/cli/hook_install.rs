//! `gatewayd hook install --host claude|codex|gemini [--scope user|project] [--socket S |
//! --policy P [--audit A]] [--dry-run | --check]`: gatewayd's hook merged into the host's
//! own settings; for Codex, trusted through Codex itself (docs/HOOKS.md, "Installing").
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;
use gatewayd::hook::{
    Host, codex_trust,
    install::{self, HookCommand, Scope},
};

use super::out::outln;

#[derive(Debug, clap::Args)]
pub(super) struct InstallArgs {
    /// The agent host (repeatable): claude, codex, gemini.
    #[arg(long = "host", required = true)]
    hosts: Vec<Host>,
    /// The user's settings (under the home) or the project's (under the workspace).
    #[arg(long, value_parser = ["user", "project"], default_value = "user")]
    scope: String,
    /// The workspace (project scope; Codex's trust is listed from here) [default: the
    /// current directory].
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The home whose settings are changed [default: $HOME].
    #[arg(long)]
    home: Option<PathBuf>,
    /// The hook asks a `gatewayd serve` daemon on this socket.
    #[arg(long, conflicts_with = "policy")]
    socket: Option<PathBuf>,
    /// The hook decides from this policy without a daemon. Under `gatewayd run` the
    /// session's gateway (`$GATEWAYD_SOCKET`) is asked instead, either way.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The hook's audit log with --policy [default: $XDG_STATE_HOME/gatewayd/hook-audit.jsonl,
    /// written out in full: never inside the workspace].
    #[arg(long, requires = "policy")]
    audit: Option<PathBuf>,
    /// The deadline the hook answers within; the host's timeout is set above it.
    #[arg(long, default_value_t = 4000)]
    deadline_ms: u64,
    /// The codex program that trusts the hook [default: `codex` on PATH].
    #[arg(long)]
    codex: Option<PathBuf>,
    /// Print each file as it would be written; change nothing.
    #[arg(long, conflicts_with = "check")]
    dry_run: bool,
    /// Report, per host, whether the hook is there, enabled, trusted (Codex) and given more
    /// time by the host than its deadline; exit 1 when one is not.
    #[arg(long)]
    check: bool,
}

/// The places one install touches.
struct Places {
    scope: Scope,
    home: PathBuf,
    workspace: PathBuf,
    codex_home: Option<PathBuf>,
}

impl Places {
    fn settings(&self, host: Host) -> PathBuf {
        host.settings_file(
            self.scope,
            &self.home,
            &self.workspace,
            self.codex_home.as_deref(),
        )
    }
}

pub(super) fn exec(args: InstallArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.deadline_ms < install::TIMEOUT_S * 1000,
        "--deadline-ms must stay below the host's timeout ({} s)",
        install::TIMEOUT_S
    );
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()?,
    };
    let places = Places {
        scope: if args.scope == "project" {
            Scope::Project
        } else {
            Scope::User
        },
        home: args
            .home
            .clone()
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
            .context("no --home and no $HOME")?,
        workspace: std::fs::canonicalize(&workspace)
            .with_context(|| format!("workspace {}", workspace.display()))?,
        // Codex's home: $CODEX_HOME, unless --home names another user's home.
        codex_home: match &args.home {
            Some(h) => Some(h.join(".codex")),
            None => std::env::var_os("CODEX_HOME").map(PathBuf::from),
        },
    };
    if args.check {
        return check(&args, &places);
    }
    let command = hook_command(&args)?;
    let mut ok = true;
    for host in &args.hosts {
        ok &= install_one(*host, &args, &places, &command.line(*host))?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn hook_command(args: &InstallArgs) -> anyhow::Result<HookCommand> {
    let absolute = |p: &Path| -> anyhow::Result<PathBuf> {
        std::path::absolute(p).with_context(|| p.display().to_string())
    };
    let audit = match (&args.policy, &args.audit) {
        (Some(_), Some(a)) => Some(absolute(a)?),
        (Some(_), None) => Some(match &args.home {
            // Another user's home: their state directory, made theirs.
            Some(home) => state_dir_of(home)?.join("hook-audit.jsonl"),
            None => super::hook::default_audit().map_err(anyhow::Error::msg)?,
        }),
        (None, _) => None,
    };
    Ok(HookCommand {
        gatewayd: std::env::current_exe().context("this program's path")?,
        socket: args.socket.as_deref().map(absolute).transpose()?,
        policy: args.policy.as_deref().map(absolute).transpose()?,
        audit,
        deadline_ms: args.deadline_ms,
    })
}

/// `HOME/.local/state/gatewayd`, made (mode 0700) and given to the owner of `home` (when
/// this runs as root for another user), so the hook that user's host runs can write there.
fn state_dir_of(home: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let home = std::path::absolute(home)?;
    let owner = std::fs::metadata(&home).with_context(|| home.display().to_string())?;
    let dir = home.join(".local/state/gatewayd");
    let chain = [home.join(".local"), home.join(".local/state"), dir.clone()];
    // Only what this makes changes owner.
    let made: Vec<bool> = chain.iter().map(|d| !d.exists()).collect();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot make {}", dir.display()))?;
    for (d, _) in chain.iter().zip(made).filter(|(_, m)| *m) {
        let m = std::fs::metadata(d)?;
        if m.uid() != owner.uid() {
            std::os::unix::fs::chown(d, Some(owner.uid()), Some(owner.gid()))
                .with_context(|| format!("chown {}", d.display()))?;
        }
    }
    Ok(dir)
}

/// Merges and writes one host's settings (or prints them); for Codex, then trusts the hook.
/// `false` when the hook is written but Codex will not run it.
fn install_one(
    host: Host,
    args: &InstallArgs,
    places: &Places,
    line: &str,
) -> anyhow::Result<bool> {
    let path = places.settings(host);
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| path.display().to_string()),
    };
    let merged = install::merged(&path, existing.as_deref(), host, line)?;
    let text = format!("{}\n", serde_json::to_string_pretty(&merged)?);
    if args.dry_run {
        outln!("{}: would write\n{text}", path.display())?;
        if host == Host::Codex {
            outln!("codex: would then trust the hook through `codex app-server`")?;
        }
        return Ok(true);
    }
    if existing.as_deref() == Some(text.as_str()) {
        outln!(
            "{} {}: the hook is installed already",
            host.name(),
            path.display()
        )?;
    } else {
        install::write_atomically(&path, &text)?;
        outln!(
            "{} {}: hook installed ({line})",
            host.name(),
            path.display()
        )?;
    }
    if host != Host::Codex {
        return Ok(true);
    }
    let Some(codex) = codex_program(args) else {
        outln!(
            "codex: NOT TRUSTED: no `codex` on PATH (--codex PATH), and Codex skips an untrusted hook silently; trust it in Codex's /hooks, or install again with --codex"
        )?;
        return Ok(false);
    };
    match codex_trust::trust(&codex, places.codex_home.as_deref(), &places.workspace) {
        Ok(hooks) => {
            for h in hooks {
                outln!("codex: trusted {} ({})", h.key, h.hash)?;
            }
            Ok(true)
        }
        Err(e) => {
            outln!("codex: NOT TRUSTED: {e}; Codex skips an untrusted hook silently")?;
            Ok(false)
        }
    }
}

fn codex_program(args: &InstallArgs) -> Option<PathBuf> {
    args.codex
        .clone()
        .or_else(|| gatewayd::mcp::server::resolve_program("codex"))
}

/// `--check`: one line per host; exit 1 unless each is installed, enabled, trusted and
/// given time.
fn check(args: &InstallArgs, places: &Places) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    let codex = codex_program(args);
    for host in &args.hosts {
        match report(*host, places, codex.as_deref()) {
            Ok(line) => outln!("{}: ok ({line})", host.name())?,
            Err(line) => {
                ok = false;
                outln!("{}: {line}", host.name())?;
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The state of `host`'s hook in its settings: `Ok` (where, which events) when it is there,
/// enabled, trusted (Codex, asked through `codex`) and given time; `Err` says what is not.
fn report(host: Host, places: &Places, codex: Option<&Path>) -> Result<String, String> {
    let path = places.settings(host);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Err(format!("NO HOOK ({} does not exist)", path.display()));
    };
    let st = install::state(&text, host);
    let mut problems: Vec<String> = st
        .missing
        .iter()
        .map(|e| format!("no gatewayd hook for {e}"))
        .collect();
    problems.extend(st.short_timeouts.iter().cloned());
    if st.disabled {
        problems.push("disableAllHooks is set".into());
    }
    if host == Host::Codex && st.missing.len() < 2 {
        problems.extend(codex_problems(codex, places));
    }
    if problems.is_empty() {
        Ok(format!("{}: {}", path.display(), st.events.join(", ")))
    } else {
        Err(format!("{} ({})", problems.join("; "), path.display()))
    }
}

fn codex_problems(codex: Option<&Path>, places: &Places) -> Vec<String> {
    let Some(codex) = codex else {
        return vec!["trust unknown: no `codex` on PATH (--codex PATH)".into()];
    };
    match codex_trust::gatewayd_hooks(codex, places.codex_home.as_deref(), &places.workspace) {
        Ok(hooks) if hooks.is_empty() => vec!["Codex lists no gatewayd hook".into()],
        Ok(hooks) => hooks
            .iter()
            .filter_map(|h| {
                (!h.trusted)
                    .then(|| format!("{} is NOT TRUSTED: Codex skips it silently", h.key))
                    .or_else(|| (!h.enabled).then(|| format!("{} is disabled", h.key)))
            })
            .collect(),
        Err(e) => vec![format!("trust unknown: {e}")],
    }
}

/// `gatewayd doctor`'s rows: each host that is on PATH or has a settings file, its user-scope
/// hook as `--check` finds it.
pub(super) fn doctor_rows() -> Vec<(String, Result<String, String>)> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return Vec::new();
    };
    let places = Places {
        scope: Scope::User,
        workspace: std::env::current_dir().unwrap_or_else(|_| home.clone()),
        codex_home: std::env::var_os("CODEX_HOME").map(PathBuf::from),
        home,
    };
    let codex = gatewayd::mcp::server::resolve_program("codex");
    [Host::Claude, Host::Codex, Host::Gemini]
        .into_iter()
        .filter(|h| {
            gatewayd::mcp::server::resolve_program(h.name()).is_some()
                || places.settings(*h).exists()
        })
        .map(|h| {
            (
                format!("hook {}", h.name()),
                report(h, &places, codex.as_deref()),
            )
        })
        .collect()
}
