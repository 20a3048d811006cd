//! Each host's tools mapped to the gateway's tools (docs/HOOKS.md has the table). A host
//! tool becomes one or more calls of a policy tool: `shell {command}`, `read_file {path}`,
//! `write_file {path, content?}`, `search {path, pattern?}`, `web_fetch {url, prompt?}`,
//! `web_search {query}`, `agent {prompt}`; MCP tools keep their own name. A tool the table
//! does not know is decided under its host name, which the registry refuses unless the
//! policy lists that name (`not_allowlisted`, recorded).
use std::path::Path;

use serde_json::{Value, json};

use super::Host;
use gatewayd_core::engine::ToolCall;

/// Why a tool's input could not be mapped (the call is denied and recorded).
pub(crate) type MapError = String;

fn field<'a>(input: &'a Value, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| input.get(*n).and_then(Value::as_str))
}

fn need<'a>(input: &'a Value, names: &[&str], tool: &str) -> Result<&'a str, MapError> {
    field(input, names)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("`{tool}` needs `{}` in its input", names[0]))
}

/// A path as the host's tool opens it: `~`, `~/…`, `~USER/…`, `$HOME/…` and `${HOME}/…`
/// expanded (the hosts' file tools expand them; judged as written, `~/.ssh/id_rsa` would be
/// a file named `~` in the workspace), then made absolute against the host's working
/// directory.
fn abs(cwd: &str, p: &str) -> String {
    let p = expand_home(
        p,
        |var| std::env::var(var).ok(),
        |user| gatewayd_core::shell::line::user_home(user).map(|h| h.display().to_string()),
    );
    in_cwd(cwd, &p)
}

/// `p` as written, relative to `cwd` unless it is absolute (or `cwd` is unknown).
fn in_cwd(cwd: &str, p: &str) -> String {
    if Path::new(p).is_absolute() || cwd.is_empty() {
        p.to_owned()
    } else {
        Path::new(cwd).join(p).display().to_string()
    }
}

/// `p` with a leading `~`, `~USER`, `$HOME` or `${HOME}` replaced by that home directory;
/// unchanged when the home is unknown (the gateway then judges the literal path).
fn expand_home(
    p: &str,
    env: impl Fn(&str) -> Option<String>,
    home_of: impl Fn(&str) -> Option<String>,
) -> String {
    let (head, rest) = p.split_at(p.find('/').unwrap_or(p.len()));
    let home = match head {
        "~" | "$HOME" | "${HOME}" => env("HOME"),
        user if user.len() > 1 && user.starts_with('~') => home_of(&user[1..]),
        _ => None,
    };
    match home.filter(|h| !h.is_empty()) {
        Some(h) if h.trim_end_matches('/').is_empty() && rest.is_empty() => "/".into(),
        Some(h) => format!("{}{rest}", h.trim_end_matches('/')),
        None => p.to_owned(),
    }
}

fn call(tool: &str, args: Value) -> ToolCall {
    ToolCall::new(tool, args)
}

fn with_opt(mut args: Value, key: &str, v: Option<&str>) -> Value {
    if let Some(v) = v {
        args[key] = json!(v);
    }
    args
}

/// The gateway calls for one host tool call.
pub(crate) fn map(
    host: Host,
    tool: &str,
    input: &Value,
    cwd: &str,
    mcp_server: Option<&str>,
) -> Result<Vec<ToolCall>, MapError> {
    if !input.is_object() {
        return Err("`tool_input` is not an object".into());
    }
    if let Some(name) = mcp_tool_name(host, tool, mcp_server)? {
        return Ok(vec![call(name, input.clone())]);
    }
    if let Some(calls) = map_file_tool(host, tool, input, cwd)? {
        return Ok(calls);
    }
    // Unknown to the tables: decided under its own name (refused unless listed).
    Ok(map_web_tool(host, tool, input)?.unwrap_or_else(|| vec![call(tool, input.clone())]))
}

/// The host's shell, file and search tools, if `tool` is one.
fn map_file_tool(
    host: Host,
    tool: &str,
    input: &Value,
    cwd: &str,
) -> Result<Option<Vec<ToolCall>>, MapError> {
    let path_of =
        |names: &[&str]| -> Result<String, MapError> { Ok(abs(cwd, need(input, names, tool)?)) };
    let search_path = |names: &[&str]| abs(cwd, field(input, names).unwrap_or("."));
    let calls = match (host, tool) {
        (Host::Claude | Host::Codex, "Bash")
        | (Host::Codex, "shell" | "local_shell" | "exec_command")
        | (Host::Gemini, "run_shell_command") => vec![shell_call(host, tool, input, cwd)?],
        (Host::Claude, "Read") | (Host::Codex, "view_image") | (Host::Gemini, "read_file") => {
            vec![call(
                "read_file",
                json!({"path": path_of(&["file_path", "absolute_path", "path"])?}),
            )]
        }
        (Host::Gemini, "read_many_files") => read_many(input, cwd)?,
        (Host::Claude, "Write" | "Edit" | "MultiEdit")
        | (Host::Gemini, "write_file" | "replace") => {
            let args = json!({"path": path_of(&["file_path", "path"])?});
            let content = field(input, &["content", "new_string"]);
            vec![call("write_file", with_opt(args, "content", content))]
        }
        (Host::Claude, "NotebookEdit") => vec![call(
            "write_file",
            with_opt(
                json!({"path": path_of(&["notebook_path"])?}),
                "content",
                field(input, &["new_source"]),
            ),
        )],
        // A path that starts from a home (`~/…`) is both the home's and the same path as
        // written below `cwd` (Codex 0.171 writes it there; its later source expands `~/`
        // from `$HOME`).
        (Host::Codex, "apply_patch") => {
            let text = need(input, &["command", "patch", "input"], tool)?;
            let mut calls = Vec::new();
            for f in gatewayd_core::shell::patch_files(text)? {
                let (expanded, literal) = (abs(cwd, &f), in_cwd(cwd, &f));
                calls.push(call("write_file", json!({ "path": expanded })));
                if literal != expanded {
                    calls.push(call("write_file", json!({ "path": literal })));
                }
            }
            calls
        }
        (Host::Claude, "Glob") | (Host::Gemini, "glob" | "list_directory") => {
            let args = json!({"path": search_path(&["path", "dir_path"])});
            vec![call(
                "list_files",
                with_opt(args, "pattern", field(input, &["pattern"])),
            )]
        }
        // Claude Code's Grep is ripgrep with `--hidden`: what the ignore files name is not
        // read, and its `glob` names what is, ignored or not (`grep`, the globs one a line).
        (Host::Claude, "Grep") => {
            let args = json!({"path": search_path(&["path"])});
            let args = with_opt(args, "pattern", field(input, &["pattern"]));
            let globs = field(input, &["glob"]).map(claude_grep_globs);
            vec![call("grep", with_opt(args, "glob", globs.as_deref()))]
        }
        // Gemini CLI's may fall back to `grep -r`, which reads every file.
        (Host::Gemini, "grep_search" | "search_file_content") => {
            let args = json!({"path": search_path(&["path", "dir_path"])});
            vec![call(
                "search",
                with_opt(args, "pattern", field(input, &["pattern"])),
            )]
        }
        (Host::Claude, "LS") => vec![call("list_files", json!({"path": search_path(&["path"])}))],
        _ => return Ok(None),
    };
    Ok(Some(calls))
}

/// Claude Code's Grep `glob`, as it makes ripgrep's `--glob`s of it, one a line: split at
/// blanks, and each piece at commas unless it holds a `{…}` (`*.{ts,tsx}`).
fn claude_grep_globs(glob: &str) -> String {
    let mut globs = Vec::new();
    for piece in glob.split_whitespace() {
        if piece.contains('{') && piece.contains('}') {
            globs.push(piece);
        } else {
            globs.extend(piece.split(',').filter(|g| !g.is_empty()));
        }
    }
    globs.join("\n")
}

/// The host's web and sub-agent tools, if `tool` is one.
fn map_web_tool(host: Host, tool: &str, input: &Value) -> Result<Option<Vec<ToolCall>>, MapError> {
    let calls = match (host, tool) {
        (Host::Claude, "WebFetch") => vec![call(
            "web_fetch",
            with_opt(
                json!({"url": need(input, &["url"], tool)?}),
                "prompt",
                field(input, &["prompt"]),
            ),
        )],
        (Host::Gemini, "web_fetch") => gemini_web_fetch(need(input, &["prompt"], tool)?)?,
        (Host::Claude, "WebSearch") | (Host::Gemini, "google_web_search") => vec![call(
            "web_search",
            json!({"query": need(input, &["query"], tool)?}),
        )],
        (Host::Claude, "Task" | "Agent") => vec![call(
            "agent",
            json!({"prompt": need(input, &["prompt", "description"], tool)?}),
        )],
        _ => return Ok(None),
    };
    Ok(Some(calls))
}

/// The MCP tool a host tool name stands for, if it is one: `mcp__server__tool` (Claude Code,
/// Codex); Gemini CLI names them bare or `server__tool` and says which server in
/// `mcp_context`.
fn mcp_tool_name<'a>(
    host: Host,
    tool: &'a str,
    mcp_server: Option<&str>,
) -> Result<Option<&'a str>, MapError> {
    if let Some(rest) = tool.strip_prefix("mcp__") {
        let (_, name) = rest
            .split_once("__")
            .ok_or_else(|| format!("`{tool}` is not `mcp__SERVER__TOOL`"))?;
        return Ok(Some(name));
    }
    Ok(match (host, mcp_server) {
        (Host::Gemini, Some(server)) => {
            Some(tool.strip_prefix(&format!("{server}__")).unwrap_or(tool))
        }
        _ => None,
    })
}

/// A host's shell tool call as the gateway's `shell` call: the line (an argv array joined),
/// after a `cd` to where the host runs it (its working directory, which a host keeps across
/// shell calls, or Gemini CLI's `dir_path`), since the gateway resolves relative paths from
/// the directory a line `cd`s into. The line goes in a group, `cd DIR && { LINE\n}`, so that
/// all of it runs after the `cd` (`cd DIR && a || b` would run `b` where the `cd` failed, in
/// a directory not known); the newline ends a here-document or a comment on its last line.
fn shell_call(host: Host, tool: &str, input: &Value, cwd: &str) -> Result<ToolCall, MapError> {
    let command = match input.get("command") {
        Some(Value::Array(argv)) => shell_join(argv)?,
        _ => need(input, &["command", "cmd"], tool)?.to_owned(),
    };
    let dir = match (host, field(input, &["dir_path", "directory"])) {
        (Host::Gemini, Some(d)) if !d.is_empty() => abs(cwd, d),
        _ => cwd.to_owned(),
    };
    let command = if dir.is_empty() {
        command
    } else {
        format!("cd {} && {{ {command}\n}}", quote_word(&dir))
    };
    Ok(call("shell", json!({"command": command})))
}

/// Gemini CLI's `read_many_files`: its entries (`include`, or `paths` in older versions) are
/// globs or paths, and it reads every file they match, a directory's whole tree: a `search`
/// (a tree read) per entry, of the directory before its first glob character
/// (`src/**/*.ts` is a read of `src`'s tree). Its `exclude` and ignore files only narrow it.
fn read_many(input: &Value, cwd: &str) -> Result<Vec<ToolCall>, MapError> {
    let entries = ["include", "paths"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_array))
        .filter(|a| !a.is_empty())
        .ok_or("`read_many_files` needs `include` (or `paths`)")?;
    entries
        .iter()
        .map(|p| {
            let p = p.as_str().ok_or("`include` must be strings")?;
            Ok(call("search", json!({"path": abs(cwd, &glob_base(p))})))
        })
        .collect()
}

/// The directory a glob's matches lie below: its components before the first that holds a
/// glob character (`*?[{`), or `.`.
fn glob_base(glob: &str) -> String {
    let fixed: Vec<&str> = glob
        .split('/')
        .take_while(|c| !c.contains(['*', '?', '[', '{']))
        .collect();
    match fixed.join("/") {
        base if base.is_empty() && glob.starts_with('/') => "/".to_owned(),
        base if base.is_empty() => ".".to_owned(),
        base => base,
    }
}

/// Gemini CLI's `web_fetch`: a `web_fetch` call per http(s) URL its prompt names.
fn gemini_web_fetch(prompt: &str) -> Result<Vec<ToolCall>, MapError> {
    let urls = urls_in(prompt);
    if urls.is_empty() {
        return Err("`web_fetch` names no http(s) URL in its prompt".into());
    }
    Ok(urls
        .into_iter()
        .map(|u| call("web_fetch", json!({"url": u})))
        .collect())
}

/// An argv array (Codex's `shell` tool) as one line; each word quoted when needed, so the
/// gateway's shell analysis sees the same words.
fn shell_join(argv: &[Value]) -> Result<String, MapError> {
    let words: Vec<&str> = argv
        .iter()
        .map(|w| w.as_str().ok_or("`command` must be strings"))
        .collect::<Result<_, _>>()?;
    if words.is_empty() {
        return Err("`command` is empty".into());
    }
    Ok(words
        .iter()
        .map(|w| quote_word(w))
        .collect::<Vec<_>>()
        .join(" "))
}

/// `w` as one shell word: as it is when nothing in it is special, else single-quoted.
fn quote_word(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// The http(s) URLs in a free text (Gemini CLI's `web_fetch` prompt).
fn urls_in(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "<>\"'()[]{}".contains(c))
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| {
            w.trim_end_matches(['.', ',', ';', ':', '!', '?'])
                .to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(host: Host, tool: &str, input: Value) -> (String, Value) {
        one_in("/work", host, tool, input)
    }

    fn one_in(cwd: &str, host: Host, tool: &str, input: Value) -> (String, Value) {
        let v = map(host, tool, &input, cwd, None).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        (v[0].tool.clone(), v[0].arguments.clone())
    }

    #[test]
    fn home_is_expanded_as_the_hosts_tools_do() {
        let env = |v: &str| (v == "HOME").then(|| "/home/alice".to_string());
        let users = |u: &str| (u == "bob").then(|| "/home/bob".to_string());
        for (written, meant) in [
            ("~/.ssh/id_rsa", "/home/alice/.ssh/id_rsa"),
            ("~", "/home/alice"),
            ("$HOME/.aws/credentials", "/home/alice/.aws/credentials"),
            ("${HOME}/.env", "/home/alice/.env"),
            ("~bob/.ssh/id_rsa", "/home/bob/.ssh/id_rsa"),
            ("~nobody-known/x", "~nobody-known/x"),
            ("a/~/b", "a/~/b"),
            ("$HOMEX/y", "$HOMEX/y"),
        ] {
            assert_eq!(expand_home(written, env, users), meant, "{written}");
        }
        assert_eq!(
            expand_home("~/x", |_| None, users),
            "~/x",
            "no HOME: as written"
        );
    }

    #[test]
    fn claude_tools() {
        assert_eq!(
            one(Host::Claude, "Bash", json!({"command": "ls -la"})),
            (
                "shell".into(),
                json!({"command": "cd /work && { ls -la\n}"})
            )
        );
        // A host that ran `cd ~/.ssh` before: the line is judged where it runs.
        let (_, args) = one_in(
            "/home/a/.ssh",
            Host::Claude,
            "Bash",
            json!({"command": "cat id_rsa"}),
        );
        assert_eq!(
            args,
            json!({"command": "cd /home/a/.ssh && { cat id_rsa\n}"})
        );
        let (_, args) = one_in(
            "/w",
            Host::Gemini,
            "run_shell_command",
            json!({"command": "ls", "dir_path": "sub dir"}),
        );
        assert_eq!(args, json!({"command": "cd '/w/sub dir' && { ls\n}"}));
        let (_, args) = one_in("", Host::Claude, "Bash", json!({"command": "ls"}));
        assert_eq!(args, json!({"command": "ls"}), "no cwd: as sent");
        assert_eq!(
            one(Host::Claude, "Read", json!({"file_path": "src/a.rs"})),
            ("read_file".into(), json!({"path": "/work/src/a.rs"}))
        );
        assert_eq!(
            one(
                Host::Claude,
                "Edit",
                json!({"file_path": "/x", "old_string": "a", "new_string": "b"})
            ),
            ("write_file".into(), json!({"path": "/x", "content": "b"}))
        );
        assert_eq!(
            one(Host::Claude, "Grep", json!({"pattern": "fn"})),
            ("grep".into(), json!({"path": "/work/.", "pattern": "fn"}))
        );
        // The globs, as Claude Code hands them to ripgrep, one a line.
        assert_eq!(
            one(
                Host::Claude,
                "Grep",
                json!({"pattern": "fn", "glob": "*.rs  a,b *.{ts,tsx}"})
            ),
            (
                "grep".into(),
                json!({"path": "/work/.", "pattern": "fn", "glob": "*.rs\na\nb\n*.{ts,tsx}"})
            )
        );
        assert_eq!(
            one(Host::Gemini, "grep_search", json!({"pattern": "fn"})),
            ("search".into(), json!({"path": "/work/.", "pattern": "fn"}))
        );
        assert_eq!(
            one(Host::Claude, "Glob", json!({"pattern": "**/*.rs"})),
            (
                "list_files".into(),
                json!({"path": "/work/.", "pattern": "**/*.rs"})
            )
        );
        assert_eq!(
            one(Host::Claude, "Agent", json!({"prompt": "p"})).0,
            "agent"
        );
        assert_eq!(one(Host::Claude, "Task", json!({"prompt": "p"})).0, "agent");
        assert_eq!(
            one(
                Host::Claude,
                "mcp__fs__read_text_file",
                json!({"path": "/a"})
            ),
            ("read_text_file".into(), json!({"path": "/a"}))
        );
        assert_eq!(one(Host::Claude, "Monitor", json!({})).0, "Monitor");
        assert!(map(Host::Claude, "Read", &json!({}), "/", None).is_err());
        assert!(map(Host::Claude, "Read", &json!("x"), "/", None).is_err());
    }

    #[test]
    fn gemini_read_many_files_is_a_tree_read_of_each_globs_directory() {
        let calls = |input: Value| -> Vec<(String, Value)> {
            map(Host::Gemini, "read_many_files", &input, "/work", None)
                .unwrap()
                .into_iter()
                .map(|c| (c.tool, c.arguments))
                .collect()
        };
        let search = |p: &str| ("search".to_owned(), json!({"path": p}));
        assert_eq!(
            calls(json!({"include": ["**/.env", "src/**/*.ts", "docs/", "/etc/*.conf"]})),
            [
                search("/work/."),
                search("/work/src"),
                search("/work/docs/"),
                search("/etc")
            ]
        );
        assert_eq!(
            calls(json!({"paths": ["README.md"]})),
            [search("/work/README.md")]
        );
        assert!(map(Host::Gemini, "read_many_files", &json!({}), "/work", None).is_err());
    }

    #[test]
    fn codex_and_gemini_tools() {
        assert_eq!(
            one(
                Host::Codex,
                "shell",
                json!({"command": ["bash", "-lc", "cat a; rm b"]})
            )
            .1,
            json!({"command": "cd /work && { bash -lc 'cat a; rm b'\n}"})
        );
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: /b.txt\n@@\n-y\n+z\n*** End Patch";
        let v = map(
            Host::Codex,
            "apply_patch",
            &json!({"command": patch}),
            "/w",
            None,
        )
        .unwrap();
        let paths: Vec<&Value> = v.iter().map(|c| &c.arguments["path"]).collect();
        assert_eq!(paths, [&json!("/w/a.txt"), &json!("/b.txt")]);
        // `~/…`: the home's, and the literal path below the working directory.
        let patch = "*** Begin Patch\n*** Add File: ~/x\n+x\n*** End Patch";
        let v = map(
            Host::Codex,
            "apply_patch",
            &json!({ "command": patch }),
            "/w",
            None,
        )
        .unwrap();
        let home = std::env::var("HOME").unwrap_or_default();
        let paths: Vec<&Value> = v.iter().map(|c| &c.arguments["path"]).collect();
        assert_eq!(paths, [&json!(format!("{home}/x")), &json!("/w/~/x")]);
        assert_eq!(
            one(Host::Gemini, "run_shell_command", json!({"command": "ls"})).0,
            "shell"
        );
        let v = map(
            Host::Gemini,
            "web_fetch",
            &json!({"prompt": "Summarise https://a.example/x, and http://b.example."}),
            "/",
            None,
        )
        .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].arguments["url"], "http://b.example");
        let v = map(Host::Gemini, "fs__read", &json!({}), "/", Some("fs")).unwrap();
        assert_eq!(v[0].tool, "read");
        assert!(
            map(
                Host::Gemini,
                "web_fetch",
                &json!({"prompt": "nothing"}),
                "/",
                None
            )
            .is_err()
        );
    }
}
