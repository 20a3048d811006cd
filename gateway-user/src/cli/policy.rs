//! `gatewayd policy validate P`, `gatewayd policy pin P [--from TOOLS.json]`
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, bail};
use gatewayd::{
    engine::{ToolDefinition, fingerprint, scan},
    policy::Policy,
};
use serde_json::Value;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Parse and check a policy file; errors carry line and column.
    Validate { policy: PathBuf },
    /// Rewrite the tools' pinned fingerprints from their current definitions, printing what
    /// changed. With --from, the definitions (description, input schema) are first taken
    /// from a tool server's list (MCP `tools/list` result: `{"tools": [...]}` or `[...]`).
    Pin {
        policy: PathBuf,
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

pub fn exec(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Validate { policy } => {
            let p = Policy::load(&policy)?;
            for w in warnings(&p) {
                println!("warning: {w}");
            }
            println!("{}: valid", policy.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Pin { policy, from } => pin(&policy, from.as_deref()),
    }
}

/// What `validate` reports without refusing the file: stale pins and scan findings.
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
        for f in scan::scan(&t.description, &schema) {
            out.push(format!(
                "tool {}: description scan: {} in {}: \"{}\"",
                t.name, f.kind, f.place, f.excerpt
            ));
        }
    }
    out
}

fn pin(path: &Path, from: Option<&Path>) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let policy = Policy::parse(&text, path)?;
    let defs: BTreeMap<String, ToolDefinition> = match from {
        None => BTreeMap::new(),
        Some(f) => {
            let v: Value = serde_json::from_str(
                &std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
            )
            .with_context(|| format!("{}: not JSON", f.display()))?;
            let list = v.get("tools").cloned().unwrap_or(v);
            let list: Vec<ToolDefinition> = serde_json::from_value(list)
                .with_context(|| format!("{}: expected a list of tool definitions", f.display()))?;
            list.into_iter().map(|d| (d.name.clone(), d)).collect()
        }
    };
    let root = spans::parse(&text)?;
    let tools = match root.member("tools") {
        Some(spans::Node {
            kind: spans::Kind::Arr(items),
            ..
        }) => items,
        _ => {
            println!("{}: no tools to pin", path.display());
            return Ok(ExitCode::SUCCESS);
        }
    };
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut changed = 0;
    for (t, node) in policy.tools.iter().zip(tools) {
        let (desc, schema) = match defs.get(&t.name) {
            Some(d) => (d.description.clone(), d.input_schema.clone()),
            None => (
                t.description.clone(),
                t.input_schema
                    .clone()
                    .unwrap_or_else(fingerprint::default_schema),
            ),
        };
        let fp = fingerprint::fingerprint(&t.name, &desc, &schema);
        if let Some(d) = defs.get(&t.name) {
            if d.description != t.description {
                node.set(
                    &text,
                    &mut edits,
                    "description",
                    serde_json::to_string(&desc)?,
                );
                println!(
                    "{}: description updated from {}",
                    t.name,
                    from.unwrap_or(path).display()
                );
            }
            if Some(&d.input_schema) != t.input_schema.as_ref() {
                node.set(
                    &text,
                    &mut edits,
                    "input_schema",
                    serde_json::to_string(&schema)?,
                );
                println!("{}: input_schema updated", t.name);
            }
        }
        for f in scan::scan(&desc, &schema) {
            eprintln!(
                "warning: {}: description scan: {} in {}: \"{}\"",
                t.name, f.kind, f.place, f.excerpt
            );
        }
        match &t.fingerprint {
            Some(old) if *old == fp => println!("{}: unchanged {fp}", t.name),
            old => {
                changed += 1;
                println!(
                    "{}: {} -> {fp}",
                    t.name,
                    old.as_deref().unwrap_or("(not pinned)")
                );
                node.set(
                    &text,
                    &mut edits,
                    "fingerprint",
                    serde_json::to_string(&fp)?,
                );
            }
        }
    }
    for name in defs.keys() {
        if !policy.tools.iter().any(|t| t.name == *name) {
            println!("{name}: offered by the server but not in the policy (stays refused)");
        }
    }
    if edits.is_empty() {
        println!("{}: nothing to change", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.clone();
    for (start, end, with) in edits {
        out.replace_range(start..end, &with);
    }
    if let Err(e) = Policy::parse(&out, path) {
        bail!(
            "the rewritten policy would not load ({e}); {} left as it was",
            path.display()
        );
    }
    // Replaced atomically, through a symlink to the real file, keeping its permissions.
    let real =
        std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    let perms = std::fs::metadata(&real)?.permissions();
    let tmp = real.with_extension("json.pin-tmp");
    std::fs::write(&tmp, &out).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, perms)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &real).with_context(|| format!("replacing {}", real.display()))?;
    println!("{}: {changed} fingerprint(s) pinned", path.display());
    Ok(ExitCode::SUCCESS)
}

/// A JSON parser that keeps byte spans, so `pin` edits the file in place and leaves its
/// formatting and key order alone. The text has already been validated by serde.
mod spans {
    use anyhow::{Result, bail};

    pub enum Kind {
        /// Members: key, key start, value.
        Obj(Vec<(String, usize, Node)>),
        Arr(Vec<Node>),
        Scalar,
    }

    pub struct Node {
        pub start: usize,
        pub end: usize,
        pub kind: Kind,
    }

    impl Node {
        pub fn member(&self, key: &str) -> Option<&Node> {
            match &self.kind {
                Kind::Obj(m) => m.iter().find(|(k, _, _)| k == key).map(|(_, _, n)| n),
                _ => None,
            }
        }

        /// Queues an edit that sets `key` to the JSON text `value` in this object: replaces
        /// the value, or inserts the member before the first one with its indentation.
        pub fn set(
            &self,
            text: &str,
            edits: &mut Vec<(usize, usize, String)>,
            key: &str,
            value: String,
        ) {
            let Kind::Obj(members) = &self.kind else {
                return;
            };
            if let Some(n) = self.member(key) {
                edits.push((n.start, n.end, value));
                return;
            }
            let key = serde_json::to_string(key).unwrap_or_default();
            match members.first() {
                Some((_, kstart, _)) => {
                    let line = text[..*kstart].rfind('\n').map_or(0, |i| i + 1);
                    let indent = &text[line..*kstart];
                    let sep = if indent.trim().is_empty() {
                        format!("\n{indent}")
                    } else {
                        " ".into()
                    };
                    edits.push((*kstart, *kstart, format!("{key}: {value},{sep}")));
                }
                None => edits.push((self.start + 1, self.end - 1, format!("{key}: {value}"))),
            }
        }
    }

    struct P<'a> {
        b: &'a [u8],
        t: &'a str,
        i: usize,
    }

    pub fn parse(text: &str) -> Result<Node> {
        let mut p = P {
            b: text.as_bytes(),
            t: text,
            i: 0,
        };
        p.value()
    }

    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }

        fn string(&mut self) -> Result<String> {
            let start = self.i;
            self.i += 1;
            while self.i < self.b.len() && self.b[self.i] != b'"' {
                self.i += if self.b[self.i] == b'\\' { 2 } else { 1 };
            }
            self.i += 1;
            Ok(serde_json::from_str(
                &self.t[start..self.i.min(self.b.len())],
            )?)
        }

        fn value(&mut self) -> Result<Node> {
            self.ws();
            let start = self.i;
            let kind = match self.b.get(self.i) {
                Some(b'{') => {
                    self.i += 1;
                    let mut m = Vec::new();
                    loop {
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b'}') => break,
                            Some(b',') => self.i += 1,
                            Some(b'"') => {
                                let kstart = self.i;
                                let k = self.string()?;
                                self.ws();
                                self.i += 1; // ':'
                                let v = self.value()?;
                                m.push((k, kstart, v));
                            }
                            _ => bail!("malformed object at byte {}", self.i),
                        }
                    }
                    self.i += 1;
                    Kind::Obj(m)
                }
                Some(b'[') => {
                    self.i += 1;
                    let mut a = Vec::new();
                    loop {
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b']') => break,
                            Some(b',') => self.i += 1,
                            Some(_) => a.push(self.value()?),
                            None => bail!("unterminated array"),
                        }
                    }
                    self.i += 1;
                    Kind::Arr(a)
                }
                Some(b'"') => {
                    self.string()?;
                    Kind::Scalar
                }
                Some(_) => {
                    while self.i < self.b.len() && !b",]} \t\r\n".contains(&self.b[self.i]) {
                        self.i += 1;
                    }
                    Kind::Scalar
                }
                None => bail!("unexpected end of policy"),
            };
            Ok(Node {
                start,
                end: self.i,
                kind,
            })
        }
    }
}
