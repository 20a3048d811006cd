//! `gatewayd policy add-mcp P --server NAME -- SERVER_CMD...`: puts a tool server behind the
//! proxy in one step. The server's entry is proposed (its program's SHA-256, a kernel
//! profile: the system's files and its install folder readable, the directories its command
//! line names readable and writable, the policy's protected paths under them protected, no
//! egress), the server is started once under that profile and listed, and its tools are
//! added, each pinned and labelled `untrusted_output`, its path arguments (by name) checked
//! against the sandbox, for the person to review.
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::{Context, bail};
use gatewayd::mcp::{discover, server};
use gatewayd_core::{
    engine::{ToolDefinition, fingerprint},
    policy::{Policy, spans},
};
use serde_json::{Value, json};

use super::out::outln;

/// The system trees every server reads (those that exist).
const SYSTEM: [&str; 7] = ["/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/dev"];

/// The directories `command`'s arguments name (relative ones against the current
/// directory), resolved.
fn named_directories(command: &[String]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = command
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| std::fs::canonicalize(a).ok())
        .filter(|p| p.is_dir())
        .collect();
    dirs.dedup();
    dirs
}

/// The entry proposed for a server whose program is `program` (its SHA-256 `sha`).
fn proposed_entry(policy: &Policy, program: &Path, sha: &str, command: &[String]) -> Value {
    let trees = named_directories(command);
    let (install, runtime) = super::policy::install_of(program);
    let mut readable: Vec<PathBuf> = SYSTEM
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    readable.extend(install.into_iter().chain(runtime));
    readable.extend(trees.iter().cloned());
    readable.retain(|p| p != Path::new("/"));
    readable.dedup();
    let mut writable = trees.clone();
    writable.push(PathBuf::from("/dev/null"));
    let protected: Vec<&PathBuf> = policy
        .sandbox
        .protected
        .iter()
        .filter(|p| trees.iter().any(|t| p.starts_with(t)))
        .collect();
    json!({
        "command_sha256": sha,
        "kernel": "best_effort",
        "sandbox": {"readable": readable, "writable": writable, "protected": protected},
        "network": {"egress": []},
    })
}

/// Argument names that carry a path, in the schemas of file tools.
const PATH_ARGS: [&str; 9] = [
    "path",
    "paths",
    "file",
    "file_path",
    "filename",
    "directory",
    "dir",
    "source",
    "destination",
];

/// How a tool named `name` uses its path arguments, by its name's verb: a change
/// (`write`), a listing of names (`names`), else a read.
fn path_access(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    let changes = [
        "write", "edit", "create", "move", "delete", "remove", "rename", "mkdir", "append",
        "update",
    ];
    if changes.iter().any(|v| n.starts_with(v)) {
        "write"
    } else if ["list", "tree", "search", "find", "glob"]
        .iter()
        .any(|v| n.contains(v))
    {
        "names"
    } else {
        "read"
    }
}

/// The argument rules of a served tool: each argument its schema names as a path (by its
/// name) checked against the sandbox, so the gateway refuses a protected path before the
/// server sees the call.
fn path_rules(def: &ToolDefinition) -> serde_json::Map<String, Value> {
    let access = path_access(&def.name);
    def.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|props| props.keys())
        .filter(|k| PATH_ARGS.contains(&k.as_str()))
        .map(|k| (k.clone(), json!({ "path": access })))
        .collect()
}

/// The policy entry of a served tool: pinned, labelled `untrusted_output`, its path
/// arguments checked.
fn tool_entry(def: &ToolDefinition) -> Value {
    let mut entry = json!({
        "name": def.name,
        "description": def.description,
        "input_schema": def.input_schema,
        "fingerprint": fingerprint::fingerprint(&def.name, &def.description, &def.input_schema),
        "labels": ["untrusted_output"],
    });
    let rules = path_rules(def);
    if !rules.is_empty() {
        entry["args"] = Value::Object(rules);
    }
    entry
}

/// What [`tool_entry`] decided for a tool, in one line.
fn describe_entry(entry: &Value) -> String {
    let rules: Vec<String> = entry["args"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, r)| format!("`{k}` as a {} path", r["path"].as_str().unwrap_or("")))
        .collect();
    if rules.is_empty() {
        "labelled untrusted_output".into()
    } else {
        format!("labelled untrusted_output; checks {}", rules.join(", "))
    }
}

/// `text` with `mcp_servers.NAME` set to `entry` and `tools` appended to its `tools`.
fn with_server(text: &str, name: &str, entry: &Value, tools: &[Value]) -> anyhow::Result<String> {
    let root = spans::parse(text)?;
    let mut edits = Vec::new();
    let pretty = |v: &Value, indent: &str| {
        serde_json::to_string_pretty(v).map(|t| t.replace('\n', &format!("\n{indent}")))
    };
    match root.member("mcp_servers") {
        Some(servers) => edits.extend(servers.set_member(text, name, pretty(entry, "    ")?)),
        None => edits.extend(root.set_member(
            text,
            "mcp_servers",
            pretty(&json!({ name: entry }), "  ")?,
        )),
    }
    let lines: Vec<String> = tools.iter().map(|t| format!("    {t}")).collect();
    match root.member("tools") {
        Some(spans::Node {
            kind: spans::Kind::Array(items),
            ..
        }) if !items.is_empty() => {
            let end = items.last().map_or(0, |n| n.end);
            if !tools.is_empty() {
                edits.push(spans::Edit {
                    start: end,
                    end,
                    text: format!(",\n{}", lines.join(",\n")),
                });
            }
        }
        _ if tools.is_empty() => {}
        _ => edits.extend(root.set_member(text, "tools", format!("[\n{}\n  ]", lines.join(",\n")))),
    }
    Ok(spans::apply(text, edits))
}

/// Starts the server under `server`'s profile and lists its tools.
fn list_served(
    name: &str,
    command: &[String],
    policy: &Policy,
    own: &[PathBuf],
    timeout: Duration,
) -> anyhow::Result<Vec<ToolDefinition>> {
    let server = policy
        .mcp_servers
        .get(name)
        .context("the proposed entry is not in the policy")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let listed = rt.block_on(async {
        let started = server::start(
            name,
            command,
            server,
            policy,
            own,
            server::Records::default(),
            false,
        )?;
        anyhow::Ok(discover::list_tools(started, timeout).await?)
    })?;
    listed
        .into_iter()
        .map(|t| serde_json::from_value(t).context("the server listed a tool without a name"))
        .collect()
}

pub(super) fn add_mcp(
    path: &Path,
    name: &str,
    command: &[String],
    timeout_s: u64,
) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let policy = Policy::parse(&text, path)?;
    if policy.mcp_servers.contains_key(name) {
        bail!(
            "{} already has mcp_servers.{name}: edit that entry, or pin its tools with `gatewayd policy pin {} --from LISTING`",
            path.display(),
            path.display()
        );
    }
    let program = command.first().context("no server command after `--`")?;
    let resolved = server::resolve_program(program)
        .with_context(|| format!("`{program}` is not a program on PATH"))?;
    let sha = server::sha256_file(&resolved)?;
    let entry = proposed_entry(&policy, &resolved, &sha, command);
    let proposed = Policy::parse(&with_server(&text, name, &entry, &[])?, path)
        .context("the proposed server entry does not validate")?;
    let own = [std::fs::canonicalize(path)?];
    let served = list_served(
        name,
        command,
        &proposed,
        &own,
        Duration::from_secs(timeout_s),
    )
    .with_context(|| {
        format!(
            "listing the tools of `{}` under its proposed profile",
            command.join(" ")
        )
    })?;
    let mut added = Vec::new();
    for def in &served {
        if policy.tools.iter().any(|t| t.name == def.name) {
            outln!(
                "{}: the policy already has a tool of this name (its own definition): the proxy withholds the server's until you pin it (`gatewayd mcp --listing F`, then `gatewayd policy pin P --from F`); names share one namespace (docs/MCP.md)",
                def.name
            )?;
            continue;
        }
        let entry = tool_entry(def);
        outln!("{}: added, {}", def.name, describe_entry(&entry))?;
        added.push(entry);
    }
    let out = with_server(&text, name, &entry, &added)?;
    Policy::parse(&out, path)
        .context("the policy with the server would not load; left as it was")?;
    super::policy::replace_file(path, &out)?;
    outln!(
        "{}: mcp_servers.{name} added (program {} sha256 {sha}), {} tool(s) of {} added",
        path.display(),
        resolved.display(),
        added.len(),
        served.len()
    )?;
    outln!("review each tool's labels and argument rules (docs/POLICY.md, tools)")?;
    outln!(
        "the MCP client starts it as: gatewayd mcp --policy {} --server {name} -- {}",
        own[0].display(),
        command.join(" ")
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_and_its_tools_go_into_the_policy_text_as_it_was_written() {
        let entry = json!({"command_sha256": "ab", "kernel": "best_effort"});
        let tool = json!({"name": "t", "labels": ["untrusted_output"]});
        let bare = "{\n  \"version\": 1\n}\n";
        let out = with_server(bare, "fs", &entry, std::slice::from_ref(&tool)).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["mcp_servers"]["fs"], entry);
        assert_eq!(v["tools"], json!([tool]));
        assert!(out.starts_with("{\n  \"tools\""), "{out}");
        let listed = "{\n  \"version\": 1,\n  \"mcp_servers\": {\"other\": {}},\n  \"tools\": [\n    {\"name\": \"a\"}\n  ]\n}\n";
        let out = with_server(listed, "fs", &entry, &[tool]).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["mcp_servers"]["other"], json!({}));
        assert_eq!(v["tools"][0]["name"], "a");
        assert_eq!(v["tools"][1]["name"], "t");
    }

    #[test]
    fn path_arguments_are_checked_by_what_the_tool_name_says_it_does() {
        let def = |name: &str| ToolDefinition {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
        };
        assert_eq!(
            Value::Object(path_rules(&def("write_file"))),
            json!({"path": {"path": "write"}})
        );
        assert_eq!(path_access("read_text_file"), "read");
        assert_eq!(path_access("list_directory"), "names");
        assert_eq!(path_access("move_file"), "write");
        assert!(
            path_rules(&ToolDefinition {
                input_schema: json!({"type": "object"}),
                ..def("echo")
            })
            .is_empty()
        );
    }
}
