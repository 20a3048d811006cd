//! `gatewayd policy validate P`, `gatewayd policy pin P [--from TOOLS.json]`,
//! `gatewayd policy init [--out P] [--workspace DIR] [--home DIR]`,
//! `gatewayd policy add-mcp P --server NAME -- SERVER_CMD...` (`policy_mcp.rs`),
//! `gatewayd policy suggest AUDIT [--policy P] [--out FILE]` (`policy_suggest.rs`),
//! `gatewayd policy diff OLD NEW [--json]` (`policy_diff.rs`)
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, bail};
use gatewayd_core::{
    engine::{ToolDefinition, fingerprint, scan},
    policy::{
        Policy, schema,
        spans::{self, Edit},
        starter::{self, AgentHost, HostInstall},
    },
};
use serde_json::Value;

use super::out::{errln, outln};

#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    /// Parse and check a policy file; errors carry line and column.
    Validate {
        /// The policy file (JSON).
        policy: PathBuf,
        /// Every warning is an error (exit code 2): a protected path that does not exist, a
        /// relative sandbox root, a tool definition that differs from its pin, ...
        #[arg(long)]
        strict: bool,
    },
    /// Rewrite the tools' pinned fingerprints from their current definitions, printing what
    /// changed. With --from, the definitions (description, input schema) are first taken
    /// from a tool server's list (MCP `tools/list` result: `{"tools": [...]}` or `[...]`).
    Pin {
        /// The policy file (JSON), rewritten in place.
        policy: PathBuf,
        /// A tool server's `tools/list` result (JSON) to take the definitions from.
        #[arg(long)]
        from: Option<PathBuf>,
    },
    /// Write a starter policy for a workspace: the workspace as the sandbox, a developer
    /// machine's usual secrets protected, an egress allowlist, the agent hosts' built-in
    /// tools (docs/HOOKS.md). Review it before use.
    Init {
        /// Where to write it (refused if it exists: name another file).
        #[arg(long, default_value = "gatewayd-policy.json")]
        out: PathBuf,
        /// The workspace [default: the current directory].
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// The home directory whose secrets are protected [default: $HOME].
        #[arg(long)]
        home: Option<PathBuf>,
        /// Add what an agent host needs to run as installed under `gatewayd run`: its
        /// state under the home, its install folder (found on PATH), its model API
        /// (repeatable: claude, codex, gemini; docs/POLICY.md, "Host profiles").
        #[arg(long = "host", value_parser = parse_host)]
        hosts: Vec<AgentHost>,
    },
    /// Put an MCP tool server behind the proxy: add its entry to `mcp_servers` (its
    /// program's SHA-256; a kernel profile: the system's files and its install folder
    /// readable, the directories its command line names readable and writable, no egress),
    /// start it once under that profile to list its tools, and add them pinned and labelled
    /// `untrusted_output`. Review what it prints, then start the server with `gatewayd mcp`.
    #[command(name = "add-mcp")]
    AddMcp {
        /// The policy file (JSON), rewritten in place.
        policy: PathBuf,
        /// The server's name in `mcp_servers` (what `gatewayd mcp --server` names).
        #[arg(long)]
        server: String,
        /// How long the server may take to answer each request, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout_s: u64,
        /// The server's command line, after `--`.
        #[arg(last = true, required = true, value_name = "SERVER_CMD")]
        command: Vec<String>,
    },
    /// Turn an audit log's refusals into a reviewed diff against the policy: each proposed
    /// entry with its reasons and count, grouped (the host's config dirs, the runtime's
    /// files, egress, exec, roots, tools), and what is never proposed (protected paths and
    /// names, secrets, self-protection, the Rule of Two) with why. --out writes the result.
    Suggest(super::policy_suggest::Args),
    /// What replacing OLD by NEW would change, for a reviewer before a reload: tools by
    /// name, rules by id, every other field by its path (inline secret values never
    /// shown). Exit 0: no change; 1: changes; 2: a file is not a valid policy.
    Diff(super::policy_diff::Args),
}

pub(super) fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Validate { policy, strict } => {
            let p = Policy::load(&policy)?;
            let found: Vec<String> = sandbox_warnings(&p)
                .into_iter()
                .chain(warnings(&p))
                .collect();
            for w in &found {
                outln!("warning: {w}")?;
            }
            anyhow::ensure!(
                !strict || found.is_empty(),
                "{}: {} warning(s), and --strict makes them errors",
                policy.display(),
                found.len()
            );
            outln!("{}: valid", policy.display())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Pin { policy, from } => pin(&policy, from.as_deref()),
        Command::Init {
            out,
            workspace,
            home,
            hosts,
        } => init(&out, workspace, home, &hosts),
        Command::AddMcp {
            policy,
            server,
            timeout_s,
            command,
        } => super::policy_mcp::add_mcp(&policy, &server, &command, timeout_s),
        Command::Suggest(a) => super::policy_suggest::exec(a),
        Command::Diff(a) => super::policy_diff::exec(a),
    }
}

fn parse_host(name: &str) -> Result<AgentHost, String> {
    AgentHost::parse(name).ok_or_else(|| {
        let known: Vec<&str> = AgentHost::ALL.iter().map(|h| h.name()).collect();
        format!("unknown host `{name}`; known: {}", known.join(", "))
    })
}

/// Where `host` is installed on this machine (its program looked up on PATH), and the
/// Node.js it runs on when that lies outside `/usr`.
fn locate(host: AgentHost) -> HostInstall {
    let (install, runtime) = match gatewayd::mcp::server::resolve_program(host.name()) {
        Some(program) => install_of(&program),
        None => (None, None),
    };
    HostInstall {
        host,
        install,
        runtime,
    }
}

/// The install folder of a program found on this machine ([`starter::hosts::install_dir`]),
/// and the Node.js it runs on when it is a Node script and that lies outside `/usr`.
pub(super) fn install_of(program: &Path) -> (Option<PathBuf>, Option<PathBuf>) {
    let install = starter::hosts::install_dir(program);
    let script = std::fs::read(program).ok().is_some_and(|b| {
        b.starts_with(b"#!")
            && b.split(|c| *c == b'\n')
                .next()
                .is_some_and(|l| l.windows(4).any(|w| w == b"node"))
    });
    let runtime = script
        .then(|| gatewayd::mcp::server::resolve_program("node"))
        .flatten()
        .and_then(|n| std::fs::canonicalize(n).ok())
        .filter(|n| !n.starts_with("/usr"))
        .and_then(|n| n.parent().and_then(Path::parent).map(Path::to_path_buf));
    (install, runtime)
}

/// The starter's programs as this machine's `PATH` finds them, rustup's home, and the local
/// paths the environment points them at.
fn toolchains(home: &Path) -> starter::Toolchains {
    starter::Toolchains {
        programs: starter::DEV_PROGRAMS
            .iter()
            .filter_map(|p| gatewayd::mcp::server::find_program(p))
            .collect(),
        rustup_home: Some(
            std::env::var_os("RUSTUP_HOME").map_or_else(|| home.join(".rustup"), PathBuf::from),
        )
        .filter(|p| p.is_dir()),
        environment: starter::toolchains::paths_in_environment(std::env::vars()),
    }
}

fn init(
    out: &Path,
    workspace: Option<PathBuf>,
    home: Option<PathBuf>,
    hosts: &[AgentHost],
) -> anyhow::Result<ExitCode> {
    let ws = match workspace {
        Some(w) => w,
        None => std::env::current_dir()?,
    };
    let ws = std::fs::canonicalize(&ws).with_context(|| format!("workspace {}", ws.display()))?;
    let home = home
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .context("no --home and no $HOME")?;
    let installs: Vec<HostInstall> = hosts.iter().map(|h| locate(*h)).collect();
    let (policy, entries) = starter::starter_for(&ws, &home, &installs, &toolchains(&home));
    let text = serde_json::to_string_pretty(&policy)?;
    Policy::parse(&text, out).context("the starter policy does not validate")?;
    write_new(out, &format!("{text}\n"), "write the starter elsewhere")?;
    outln!(
        "{}: starter policy for {}; review it, then `gatewayd policy validate`",
        out.display(),
        ws.display()
    )?;
    outln!("beyond the workspace it lets the agent:")?;
    for e in &entries {
        outln!("  {:<9} {}  ({})", e.kind, e.value, e.reason)?;
    }
    for i in installs.iter().filter(|i| i.install.is_none()) {
        errln!(
            "warning: `{}` is not on PATH: its install folder is not readable; add it to sandbox.readable",
            i.host.name()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What `validate` reports without refusing the file: stale pins and scan findings.
/// What the sandbox section names that cannot be enforced as written: protected paths that
/// do not exist (the kernel protects by identity: a file made there later is not protected),
/// a relative `root`, read and write roots that do not exist. `gatewayd run` prints them too.
pub(super) fn sandbox_warnings(p: &Policy) -> Vec<String> {
    let sb = &p.sandbox;
    let mut out = Vec::new();
    let missing: Vec<String> = sb
        .protected
        .iter()
        .filter(|path| std::fs::symlink_metadata(path).is_err())
        .map(|path| path.display().to_string())
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "{} protected path(s) do not exist, so the kernel does not protect them (one made there later is not protected; the gateway still refuses them by name): {}",
            missing.len(),
            missing.join(", ")
        ));
    }
    if let Some(root) = sb.root.as_ref().filter(|r| r.is_relative()) {
        out.push(format!(
            "sandbox.root `{}` is relative: it is taken from the directory gatewayd is started in; write it absolute",
            root.display()
        ));
    }
    for (what, roots) in [("readable", &sb.readable), ("writable", &sb.writable)] {
        for r in roots.iter().filter(|r| std::fs::metadata(r).is_err()) {
            let unbound = sb.private_tmp
                && !gatewayd_core::policy::tmp_binds::under_tmp([r.as_path()]).is_empty();
            out.push(format!(
                "sandbox.{what} `{}` does not exist: nothing under it can be opened{}",
                r.display(),
                if unbound {
                    ", and it is not bound into the session's /tmp (what the agent makes there stays in its own /tmp, removed at the end)"
                } else {
                    ""
                }
            ));
        }
    }
    out.extend(wildcard_egress_warnings(p));
    // Without BPF in the LSM list `gatewayd run` is at tier 2 here (None: unknown).
    let bpf_lsm = gatewayd_kernel::kernel::tier1_advice::LsmFacts::gather(None, None).bpf_listed();
    out.extend(tier_warnings(p, bpf_lsm));
    out
}

/// `*.domain` egress entries with egress by name turned off (`network.proxy: false`): the
/// gateway decides them; the kernel has no address for them.
fn wildcard_egress_warnings(p: &Policy) -> Vec<String> {
    if p.network.by_name() {
        return Vec::new();
    }
    let names: Vec<&str> = (p.network.egress.iter())
        .filter_map(|e| e.host.as_deref())
        .filter(|h| h.starts_with("*."))
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "network.egress {}: with network.proxy false a wildcard is decided by the gateway only; under `gatewayd run` the kernel has no address for it, so the agent's own connections to those hosts are refused: remove `\"proxy\": false` to decide egress by name, or list the hosts it needs by name (or their addresses as `cidr`)",
        names.join(", ")
    )]
}

/// Entries the kernel cannot enforce at this host's tier: `bpf_lsm` says whether BPF LSM is
/// active (tier 1 possible), None when unknown (nothing said).
fn tier_warnings(p: &Policy, bpf_lsm: Option<bool>) -> Vec<String> {
    let absent: Vec<&std::path::Path> = (p.sandbox.read_only.iter())
        .filter(|path| std::fs::symlink_metadata(path).is_err())
        .map(PathBuf::as_path)
        .collect();
    // Tier 1 refuses making a name of at most READ_ONLY_NAME_MAX bytes in a directory that
    // exists when the session starts.
    let unrefusable = |path: &&std::path::Path| {
        let long = path
            .file_name()
            .is_some_and(|n| n.len() > gateway_common::READ_ONLY_NAME_MAX as usize);
        long || path.parent().is_none_or(|d| !d.is_dir())
    };
    let list = |v: &[&std::path::Path]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let at_tier_2 = "so the agent can create it: it is reported when the session ends (`gatewayd run --left-behind fail` fails the run), not refused";
    match bpf_lsm {
        _ if absent.is_empty() => Vec::new(),
        Some(false) => vec![format!(
            "sandbox.read_only {}: does not exist, and this kernel has no BPF LSM (tier 2), {at_tier_2}",
            list(&absent)
        )],
        None => vec![format!(
            "sandbox.read_only {}: does not exist; if this kernel has no BPF LSM (tier 2; `gatewayd doctor` tells, neither /sys/kernel/security/lsm nor an lsm= on the command line says), {at_tier_2}",
            list(&absent)
        )],
        Some(true) => {
            let left: Vec<&std::path::Path> = absent.into_iter().filter(unrefusable).collect();
            if left.is_empty() {
                return Vec::new();
            }
            vec![format!(
                "sandbox.read_only {}: does not exist, and its name is longer than {} bytes or its directory does not exist either, so the kernel cannot refuse making it (it is reported when the session ends)",
                list(&left),
                gateway_common::READ_ONLY_NAME_MAX
            )]
        }
    }
}

fn warnings(p: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    for t in &p.tools {
        let schema = t
            .input_schema
            .clone()
            .unwrap_or_else(fingerprint::default_schema);
        let now = fingerprint::fingerprint(&t.name, &t.description, &schema);
        if t.fingerprint.as_ref().is_some_and(|f| *f != now) {
            out.push(format!(
                "tool {}: definition differs from its pinned fingerprint; calls are refused (rug_pull) until `gatewayd policy pin`",
                t.name
            ));
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for arg in t.args.keys().filter(|a| !a.starts_with('/')) {
                if !props.contains_key(arg) {
                    out.push(format!(
                        "tool {}: rule for argument `{arg}`, which its input_schema does not list (a typo leaves the real argument unchecked)",
                        t.name
                    ));
                }
            }
        }
        for k in schema::unknown_keywords(&schema) {
            out.push(format!(
                "tool {}: input_schema keyword `{k}` is not a keyword of its JSON Schema draft, so it constrains nothing",
                t.name
            ));
        }
        for f in scan::scan(&t.description, &schema) {
            out.push(format!(
                "tool {}: description scan: {} in {}: \"{}\"",
                t.name, f.kind, f.place, f.excerpt
            ));
        }
    }
    out
}

/// The tool definitions a server served (`--from`: a `tools/list` result or its `tools`
/// array), by name.
fn served_definitions(f: &Path) -> anyhow::Result<BTreeMap<String, ToolDefinition>> {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
    )
    .with_context(|| format!("{}: not JSON", f.display()))?;
    let list = v.get("tools").cloned().unwrap_or(v);
    let list: Vec<ToolDefinition> = serde_json::from_value(list)
        .with_context(|| format!("{}: expected a list of tool definitions", f.display()))?;
    Ok(list.into_iter().map(|d| (d.name.clone(), d)).collect())
}

/// The description scan's findings for one tool, as warnings on stderr.
fn warn_scan_findings(name: &str, desc: &str, schema: &Value) {
    for f in scan::scan(desc, schema) {
        errln!(
            "warning: {name}: description scan: {} in {}: \"{}\"",
            f.kind,
            f.place,
            f.excerpt
        );
    }
}

/// Replaces the file at `path` (through a symlink, the real file) with `text` atomically,
/// keeping its permissions.
pub(super) fn replace_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let real =
        std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    let perms = std::fs::metadata(&real)?.permissions();
    let tmp = real.with_extension("json.pin-tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, perms)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &real).with_context(|| format!("replacing {}", real.display()))?;
    Ok(())
}

fn pin(path: &Path, from: Option<&Path>) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let policy = Policy::parse(&text, path)?;
    let defs = match from {
        None => BTreeMap::new(),
        Some(f) => served_definitions(f)?,
    };
    let root = spans::parse(&text)?;
    let Some(spans::Node {
        kind: spans::Kind::Array(tools),
        ..
    }) = root.member("tools")
    else {
        outln!("{}: no tools to pin", path.display())?;
        return Ok(ExitCode::SUCCESS);
    };
    let mut edits: Vec<Edit> = Vec::new();
    let mut changed = 0;
    for (t, node) in policy.tools.iter().zip(tools) {
        let source = from.unwrap_or(path);
        changed += usize::from(pin_tool(
            t,
            node,
            &text,
            defs.get(&t.name),
            source,
            &mut edits,
        )?);
    }
    for name in defs.keys() {
        if !policy.tools.iter().any(|t| t.name == *name) {
            outln!("{name}: offered by the server but not in the policy (stays refused)")?;
        }
    }
    if edits.is_empty() {
        outln!("{}: nothing to change", path.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = spans::apply(&text, edits);
    if let Err(e) = Policy::parse(&out, path) {
        bail!(
            "the rewritten policy would not load ({e}); {} left as it was",
            path.display()
        );
    }
    replace_file(path, &out)?;
    outln!("{}: {changed} fingerprint(s) pinned", path.display())?;
    Ok(ExitCode::SUCCESS)
}

/// Pins tool `t` (its `node` in the policy's `text`): its description and schema taken
/// from the server's definition `served` (read from `source`) when given, its fingerprint
/// computed; the changes go to `edits`. True when the fingerprint changed.
fn pin_tool(
    t: &gatewayd_core::policy::ToolDef,
    node: &spans::Node,
    text: &str,
    served: Option<&ToolDefinition>,
    source: &Path,
    edits: &mut Vec<Edit>,
) -> anyhow::Result<bool> {
    let (desc, schema) = match served {
        Some(d) => (d.description.clone(), d.input_schema.clone()),
        None => (
            t.description.clone(),
            t.input_schema
                .clone()
                .unwrap_or_else(fingerprint::default_schema),
        ),
    };
    let fp = fingerprint::fingerprint(&t.name, &desc, &schema);
    if let Some(d) = served {
        if d.description != t.description {
            edits.extend(node.set_member(text, "description", serde_json::to_string(&desc)?));
            outln!("{}: description updated from {}", t.name, source.display())?;
        }
        if Some(&d.input_schema) != t.input_schema.as_ref() {
            edits.extend(node.set_member(text, "input_schema", serde_json::to_string(&schema)?));
            outln!("{}: input_schema updated", t.name)?;
        }
    }
    warn_scan_findings(&t.name, &desc, &schema);
    match &t.fingerprint {
        Some(old) if *old == fp => {
            outln!("{}: unchanged {fp}", t.name)?;
            Ok(false)
        }
        old => {
            outln!(
                "{}: {} -> {fp}",
                t.name,
                old.as_deref().unwrap_or("(not pinned)")
            )?;
            edits.extend(node.set_member(text, "fingerprint", serde_json::to_string(&fp)?));
            Ok(true)
        }
    }
}

/// Writes a new policy file: never over an existing one (`hint` says what to do instead,
/// with `--out FILE`).
pub(super) fn write_new(out: &Path, text: &str, hint: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .with_context(|| {
            format!(
                "{} is not overwritten: {hint} with `--out FILE`",
                out.display()
            )
        })?;
    std::io::Write::write_all(&mut f, text.as_bytes())?;
    Ok(())
}
