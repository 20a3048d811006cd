//! The commands of the user docs (README.md, docs/*.md but the internals, and `gatewayd
//! --help`'s examples) against the command line itself: every `gatewayd ...` they show, in
//! a code span or a `sh` block, names subcommands and options that exist. Placeholders
//! (`P`, `FILE`, `ID`) stay as written: what is checked is that the command line still
//! takes the words. POLICY.md's field examples, put together, make a valid policy (here).
//! The examples that can run run as written: OPERATIONS.md's audit block (here), its
//! operators' block (daemon tests, `cli.rs`) and its systemd block (packaging tests,
//! `quickstart.rs`), the cookbook's check lines (`cookbook.rs`), HOOKS.md's install block
//! (hosts tests, `readme.rs`); PROTOCOL.md's exchanges, MCP.md's client configuration and the
//! README's quickstarts have tests of their own.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use crate::teaching::{gatewayd, text};

/// One command of the tree: its subcommands and its options (`--long`, `-s`).
#[derive(Default)]
struct Node {
    subcommands: BTreeSet<String>,
    options: BTreeSet<String>,
}

/// The name opening a help line such as `  validate  Parse ...` or `  -s, --socket <S>  ...`.
fn section<'a>(help: &'a str, title: &str) -> impl Iterator<Item = &'a str> {
    help.lines()
        .skip_while(move |l| *l != title)
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("  "))
        .filter(|l| !l.starts_with("   ") || l.trim_start().starts_with('-'))
}

/// The whole command tree, read from `--help` at each level.
fn tree() -> BTreeMap<Vec<String>, Node> {
    let mut all = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = gatewayd(&args);
        assert!(out.status.success(), "{path:?}: {}", text(&out));
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut node = Node::default();
        for l in section(&help, "Commands:") {
            let name = l.split_whitespace().next().unwrap_or_default();
            if name != "help" && !name.is_empty() {
                node.subcommands.insert(name.to_owned());
                todo.push([path.clone(), vec![name.to_owned()]].concat());
            }
        }
        for l in section(&help, "Options:") {
            for w in l.split_whitespace().take_while(|w| w.starts_with('-')) {
                node.options.insert(w.trim_end_matches(',').to_owned());
            }
        }
        all.insert(path, node);
    }
    all
}

/// `line` split as `sh` would into words (quotes, backslashes), without expanding anything.
fn words(line: &str) -> Vec<String> {
    let mut v = vec![];
    let mut cur = None::<String>;
    let (mut quote, mut escaped) = (None, false);
    for c in line.chars() {
        if escaped {
            cur.get_or_insert_default().push(c);
            escaped = false;
        } else if c == '\\' && quote != Some('\'') {
            escaped = true;
        } else if quote == Some(c) {
            quote = None;
        } else if quote.is_none() && (c == '\'' || c == '"') {
            quote = Some(c);
            cur.get_or_insert_default();
        } else if quote.is_none() && c.is_whitespace() {
            v.extend(cur.take());
        } else {
            cur.get_or_insert_default().push(c);
        }
    }
    v.extend(cur);
    v
}

/// What is wrong with `command` (its words after `gatewayd`), if anything.
fn check(tree: &BTreeMap<Vec<String>, Node>, command: &[String]) -> Option<String> {
    let mut path = vec![];
    let mut rest = command;
    while let Some((next, tail)) = rest.split_first() {
        // `list|approve`: each must be a subcommand; the first is followed.
        let mut alternatives = next.split('|');
        let first = alternatives.next().unwrap_or(next);
        if !tree[&path].subcommands.contains(first) {
            break;
        }
        if let Some(other) = alternatives.find(|a| !tree[&path].subcommands.contains(*a)) {
            return Some(format!("no subcommand {other:?} under {path:?}"));
        }
        path.push(first.to_owned());
        rest = tail;
    }
    let node = &tree[&path];
    if let Some(first) = rest.first()
        && !node.subcommands.is_empty()
        && !first.starts_with('-')
    {
        return Some(format!("no subcommand {first:?} under {path:?}"));
    }
    for w in rest.iter().take_while(|w| *w != "--" && *w != "|") {
        let w = w.trim_start_matches('[').trim_end_matches([']', '.']);
        if !w.starts_with('-') || w == "-" {
            continue;
        }
        for option in w.split('|') {
            let name = option.split('=').next().unwrap_or(option);
            if !node.options.contains(name) {
                return Some(format!("{path:?} has no option {name}"));
            }
        }
    }
    None
}

/// The `gatewayd` commands of one document: its code spans and its `sh` blocks' lines
/// (a line indented under a command continues it), each with its line number.
fn commands(doc: &str) -> Vec<(usize, String)> {
    let mut found = vec![];
    let mut in_sh = None::<bool>;
    for (n, line) in doc.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            in_sh = match in_sh {
                Some(_) => None,
                None => Some(info.starts_with("sh")),
            };
            continue;
        }
        match in_sh {
            Some(true) => {
                let command = gatewayd_testkit::readme::command_of(line);
                if command.starts_with(' ') {
                    if let Some((_, last)) = found.last_mut() {
                        *last = format!("{last} {}", command.trim());
                    }
                } else if command.starts_with("gatewayd ") || command.starts_with("sudo gatewayd ")
                {
                    found.push((n + 1, command.to_owned()));
                }
            }
            Some(false) => {}
            None => {
                for (i, span) in line.split('`').enumerate() {
                    if i % 2 == 1
                        && (span.starts_with("gatewayd ") || span.starts_with("sudo gatewayd "))
                    {
                        found.push((n + 1, span.to_owned()));
                    }
                }
            }
        }
    }
    found
}

/// The user docs, by name, and `gatewayd --help`'s text.
fn user_docs() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut docs = vec![(
        "README.md".to_owned(),
        gatewayd_testkit::readme::doc_text("README.md"),
    )];
    let mut names: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| Path::new(n).extension().is_some_and(|x| x == "md"))
        .collect();
    names.sort();
    for name in names {
        let doc = format!("docs/{name}");
        docs.push((doc.clone(), gatewayd_testkit::readme::doc_text(&doc)));
    }
    let help = text(&gatewayd(&["--help"]));
    let examples = help.split("Examples:").nth(1).expect("--help has examples");
    docs.push((
        "gatewayd --help".to_owned(),
        format!("```sh\n{}\n```", examples.replace("\n  ", "\n")),
    ));
    docs
}

#[test]
fn every_command_in_the_user_docs_names_what_the_command_line_takes() {
    let tree = tree();
    assert!(tree.len() > 15, "the command tree: {} commands", tree.len());
    let (mut checked, mut wrong) = (0, vec![]);
    for (name, doc) in user_docs() {
        for (line, command) in commands(&doc) {
            let w = words(&command);
            let w = w.strip_prefix(&["sudo".to_owned()]).unwrap_or(&w);
            checked += 1;
            if let Some(why) = check(&tree, &w[1..]) {
                wrong.push(format!("{name}:{line}: `{command}`: {why}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        checked > 100,
        "only {checked} commands found in the user docs"
    );
}

#[test]
fn the_checker_catches_a_wrong_command() {
    let tree = tree();
    let check_line = |l: &str| check(&tree, &words(l)[1..]);
    assert_eq!(check_line("gatewayd audit verify F --anchor H"), None);
    assert_eq!(
        check_line("gatewayd hook --host claude|codex [--audit F]"),
        None
    );
    assert!(check_line("gatewayd audit verify F --anchr H").is_some());
    assert!(check_line("gatewayd policy valdate P").is_some());
    assert_eq!(check_line("gatewayd run --policy P -- claude --nope"), None);
    assert_eq!(
        words(r#"a '{"b": 1}' "c d" e\|f"#),
        ["a", r#"{"b": 1}"#, "c d", "e|f"]
    );
}

/// docs/OPERATIONS.md's `audit verify` block, run as written on a daemon's log in the place
/// of `/var/log/gatewayd/audit.jsonl` and its real head in the place of `9f2c…`: an intact log,
/// the same log broken, a missing file, then the anchor; each as its comments say.
#[test]
fn the_operations_doc_audit_block_runs_as_written() {
    let lines = gatewayd_testkit::readme::doc_block("docs/OPERATIONS.md", "sh operations-audit");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[1].starts_with("# ok: ") && lines[1].ends_with("exit 0"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("# BROKEN at seq ")
            && lines[2].contains("exit 1")
            && lines[2].contains("2 for a missing file")
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let cookbook = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/cookbook");
    let made = gatewayd::<&std::ffi::OsStr>(&[
        "test".as_ref(),
        cookbook.join("research-agent.json").as_os_str(),
        cookbook.join("research-agent.scenarios.json").as_os_str(),
        "--audit".as_ref(),
        log.as_os_str(),
    ]);
    assert!(
        made.status.success() && log.is_file(),
        "test --audit wrote no log: {}",
        text(&made)
    );
    let sh = |line: &str, log: &Path| {
        let out = Command::new("sh")
            .env("PATH", with_gatewayd())
            .arg("-c")
            .arg(line.replace("/var/log/gatewayd/audit.jsonl", &log.display().to_string()))
            .output()
            .unwrap();
        (out.status.code(), text(&out))
    };
    let (code, out) = sh(&lines[0], &log);
    assert_eq!(code, Some(0), "{out}");
    let head = out
        .trim()
        .strip_prefix("ok: ")
        .and_then(|o| o.split_once(" records, head "))
        .map_or_else(
            || panic!("not as the doc shows: {out}"),
            |(_, h)| h.to_owned(),
        );
    assert!(head.len() == 64 && lines[3].contains("9f2c…"), "{head}");
    let broken = dir.path().join("broken.jsonl");
    let body = std::fs::read_to_string(&log).unwrap();
    let mut records: Vec<String> = body.lines().map(str::to_owned).collect();
    assert!(records.len() > 3, "{body}");
    records[2] = records[2].replacen("\"session\":\"", "\"session\":\"x", 1);
    std::fs::write(&broken, records.join("\n") + "\n").unwrap();
    let (code, out) = sh(&lines[0], &broken);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("BROKEN at seq 3"), "{out}");
    let (code, out) = sh(&lines[0], &dir.path().join("missing.jsonl"));
    assert_eq!(code, Some(2), "{out}");
    let (code, out) = sh(&lines[3].replace("9f2c…", &head), &log);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("; anchor is seq "), "{out}");
}

/// `PATH` with the `gatewayd` built for the tests first.
pub(crate) fn with_gatewayd() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_gatewayd"));
    let dir = bin.parent().expect("the binary's directory");
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The policy POLICY.md's field examples make together: the top-level example, then each
/// `"field": ...` example merged in (objects field by field) and the tool example as a tool.
fn policy_of_the_field_examples() -> (serde_json::Value, usize) {
    let doc = gatewayd_testkit::readme::doc_text("docs/POLICY.md");
    let fields = &doc[..doc
        .find("## Testing a policy")
        .expect("the testing section")];
    let blocks: Vec<&str> = fields
        .split("```json\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    let (first, rest) = blocks.split_first().expect("a top-level example");
    let mut policy: serde_json::Value = serde_json::from_str(first).expect("the top level");
    for b in rest {
        let b = b.trim();
        if b.starts_with('{') {
            let tool: serde_json::Value = serde_json::from_str(b).expect("a tool");
            policy["tools"] = serde_json::json!([tool]);
            continue;
        }
        let fragment: serde_json::Value =
            serde_json::from_str(&format!("{{{b}}}")).unwrap_or_else(|e| panic!("{b}: {e}"));
        for (k, v) in fragment.as_object().expect("an object") {
            match (
                policy.get_mut(k).and_then(|p| p.as_object_mut()),
                v.as_object(),
            ) {
                (Some(into), Some(from)) => into.extend(from.clone()),
                _ => policy[k] = v.clone(),
            }
        }
    }
    (policy, blocks.len())
}

/// `gatewayd policy validate` on `policy` written to `dir`: exit code and output.
fn validate(dir: &Path, policy: &serde_json::Value) -> (Option<i32>, String) {
    let path = dir.join("policy.json");
    std::fs::write(&path, serde_json::to_string_pretty(policy).unwrap()).unwrap();
    let out =
        gatewayd::<&std::ffi::OsStr>(&["policy".as_ref(), "validate".as_ref(), path.as_os_str()]);
    (out.status.code(), text(&out))
}

/// Every field example of POLICY.md (top level, sandbox, network, agent, a tool, rules,
/// limits, secrets and credentials, `mcp_servers`) and MCP.md's server entry, put together,
/// is a valid policy, and the tool's fingerprint is its definition's (`policy pin` changes
/// nothing).
#[test]
fn the_policy_md_field_examples_make_a_valid_policy() {
    let (mut policy, blocks) = policy_of_the_field_examples();
    assert!(blocks >= 10, "only {blocks} examples found");
    for field in [
        "sandbox",
        "network",
        "agent",
        "tools",
        "rules",
        "limits",
        "secrets",
        "credentials",
        "mcp_servers",
    ] {
        assert!(policy.get(field).is_some(), "no {field} example: {policy}");
    }
    assert!(policy["network"]["unix"].is_array() && policy["network"]["egress"].is_array());
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = validate(dir.path(), &policy);
    assert_eq!(code, Some(0), "{out}");
    let pin = gatewayd::<&std::ffi::OsStr>(&[
        "policy".as_ref(),
        "pin".as_ref(),
        dir.path().join("policy.json").as_os_str(),
    ]);
    assert!(text(&pin).contains("nothing to change"), "{}", text(&pin));
    // MCP.md's server entry in the place of POLICY.md's.
    let mcp = gatewayd_testkit::readme::doc_text("docs/MCP.md");
    let entry = mcp
        .split("```json\n")
        .map(|b| b.split("```").next().unwrap_or_default())
        .find(|b| b.starts_with("\"mcp_servers\""))
        .expect("MCP.md's server entry");
    let entry: serde_json::Value = serde_json::from_str(&format!("{{{entry}}}")).unwrap();
    policy["mcp_servers"] = entry["mcp_servers"].clone();
    let (code, out) = validate(dir.path(), &policy);
    assert_eq!(code, Some(0), "{out}");
}

/// POLICY.md's example of an input-schema refusal ("input schemas") is the message
/// `gatewayd check` gives for a `to` that misses the pattern it shows.
#[test]
fn the_policy_md_input_schema_message_is_the_engines() {
    let doc = gatewayd_testkit::readme::doc_text("docs/POLICY.md");
    let section = &doc[doc.find("### input schemas").expect("the section")..];
    let shown = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the example")
        .trim();
    let pattern = shown.split('"').nth(1).expect("the pattern in the example");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    let body = serde_json::json!({"version": 1, "tools": [{"name": "send_email", "input_schema":
        {"type": "object", "properties": {"to": {"type": "string", "pattern": pattern}}}}]});
    std::fs::write(&policy, body.to_string()).unwrap();
    let out = gatewayd::<&std::ffi::OsStr>(&[
        "check".as_ref(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--call".as_ref(),
        r#"{"tool": "send_email", "arguments": {"to": "x@evil.test"}}"#.as_ref(),
        "--json".as_ref(),
    ]);
    let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(verdict["message"], shown, "{}", text(&out));
}
