//! `gatewayd policy suggest --out`: the policy's text with the proposals added, each new
//! entry appended to its array (the array or its section made when absent), the rest of the
//! text byte for byte as it was. The caller validates the result before writing it.
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Proposal;
use crate::policy::spans::{self, Edit, Kind, Node};

/// The policy text could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The text is not the JSON the walker expects.
    #[error(transparent)]
    Span(#[from] spans::SpanError),
    /// A section or field the proposals go into is not an object or an array.
    #[error("`{0}` in the policy is not an object or an array as the policy format has it")]
    Shape(String),
}

/// The new values of one object's members: a list to append, or a value to set.
type Members = BTreeMap<String, Vec<Value>>;

/// Keys an entry shows first, in this order; the others follow in byte order.
const FIRST: &[&str] = &["name", "description", "host", "cidr", "port", "default"];

/// An entry as one line of JSON, `{"host": "a.example", "port": 443}`: its name or
/// destination first, a space after each `:` and `,`.
pub fn one_line(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by_key(|k| (FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()), *k));
            let members: Vec<String> = keys
                .iter()
                .map(|k| format!("{}: {}", Value::from(k.as_str()), one_line(&m[*k])))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(one_line).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// `text` with `proposals` applied. A proposal goes into the object its field names, inside
/// `mcp_servers.NAME` for a server's ([`Proposal::server`]).
pub fn apply(text: &str, proposals: &[Proposal]) -> Result<String, ApplyError> {
    let root = spans::parse(text)?;
    let mut objects: BTreeMap<Vec<String>, Members> = BTreeMap::new();
    for p in proposals {
        let mut at: Vec<String> = match &p.server {
            Some(name) => vec!["mcp_servers".to_owned(), name.clone()],
            None => Vec::new(),
        };
        let mut parts: Vec<&str> = p.field.split('.').collect();
        let member = parts.pop().unwrap_or(p.field);
        at.extend(parts.iter().map(|s| (*s).to_owned()));
        objects
            .entry(at)
            .or_default()
            .entry(member.to_owned())
            .or_default()
            .push(p.value.clone());
    }
    // Objects the text lacks (or has empty) are written whole, one edit where the text
    // stops: the members of every object made at the same place merged into it.
    let mut made: BTreeMap<(Vec<String>, String), Value> = BTreeMap::new();
    let mut edits = Vec::new();
    for (at, members) in &objects {
        let (node, depth) = deepest(&root, at);
        if depth == at.len() {
            let shown = if at.is_empty() {
                "the policy".to_owned()
            } else {
                at.join(".")
            };
            edits.extend(members_edits(text, node, members, &shown)?);
            continue;
        }
        let mut value = Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), fresh(k, v)))
                .collect(),
        );
        for k in at[depth + 1..].iter().rev() {
            value = Value::Object(std::iter::once((k.clone(), value)).collect());
        }
        let place = (at[..depth].to_vec(), at[depth].clone());
        merge(made.entry(place).or_insert_with(|| json!({})), value);
    }
    for ((parent, key), value) in made {
        let (node, _) = deepest(&root, &parent);
        let shown = if parent.is_empty() {
            "the policy".to_owned()
        } else {
            parent.join(".")
        };
        let edit = node.set_member(text, &key, one_line(&value));
        edits.push(edit.ok_or(ApplyError::Shape(shown))?);
    }
    Ok(spans::apply(text, edits))
}

/// The deepest non-empty object along `at` the text has, and how many keys of `at` it took.
fn deepest<'n>(root: &'n Node, at: &[String]) -> (&'n Node, usize) {
    let mut node = root;
    for (depth, key) in at.iter().enumerate() {
        match node.member(key) {
            Some(next) if matches!(&next.kind, Kind::Object(m) if !m.is_empty()) => node = next,
            _ => return (node, depth),
        }
    }
    (node, at.len())
}

/// `add`'s members into `into`, objects merged key by key.
fn merge(into: &mut Value, add: Value) {
    match (into, add) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert_with(|| json!({})), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// The members that are flags (`sandbox.private_tmp`, `network.proxy`): set to `true`,
/// where every other field is a list.
fn is_flag(key: &str) -> bool {
    key == "private_tmp" || key == "proxy"
}

/// A member's value when it is made: a flag is `true`, every other field a list.
fn fresh(key: &str, values: &[Value]) -> Value {
    if is_flag(key) {
        Value::Bool(true)
    } else {
        Value::Array(values.to_vec())
    }
}

/// The edits that add `members` to the object `node`.
fn members_edits(
    text: &str,
    node: &Node,
    members: &Members,
    at: &str,
) -> Result<Vec<Edit>, ApplyError> {
    let mut edits = Vec::new();
    for (k, v) in members {
        match node.member(k) {
            Some(
                list @ Node {
                    kind: Kind::Array(items),
                    ..
                },
            ) if !is_flag(k) => {
                edits.push(append(text, list, items, v));
            }
            Some(_) if !is_flag(k) => return Err(ApplyError::Shape(format!("{at}.{k}"))),
            _ => edits.extend(node.set_member(text, k, one_line(&fresh(k, v)))),
        }
    }
    if !members.is_empty() && !matches!(node.kind, Kind::Object(_)) {
        return Err(ApplyError::Shape(at.to_owned()));
    }
    Ok(edits)
}

/// The edit that appends `values` to the array `list` (whose elements are `items`), each on
/// a line of its own when the last element is.
fn append(text: &str, list: &Node, items: &[Node], values: &[Value]) -> Edit {
    let shown: Vec<String> = values.iter().map(one_line).collect();
    let Some(last) = items.last() else {
        return Edit {
            start: list.start,
            end: list.end,
            text: format!("[{}]", shown.join(", ")),
        };
    };
    let line = text
        .get(..last.start)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let indent = text.get(line..last.start).unwrap_or("");
    let sep = if indent.trim().is_empty() {
        format!(",\n{indent}")
    } else {
        ", ".to_owned()
    };
    let mut add = String::new();
    for s in &shown {
        add.push_str(&sep);
        add.push_str(s);
    }
    Edit {
        start: last.end,
        end: last.end,
        text: add,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::suggest::Group;
    use serde_json::json;

    fn p(field: &'static str, value: Value) -> Proposal {
        Proposal {
            server: None,
            group: Group::Roots,
            field,
            value,
            reasons: std::collections::BTreeSet::default(),
            count: 1,
            examples: vec![],
        }
    }

    #[test]
    fn entries_are_appended_and_the_rest_of_the_text_kept() {
        let text = "{\n  \"version\": 1,\n  \"sandbox\": {\n    \"readable\": [\n      \"/w\"\n    ],\n    \"root\": \"/w\"\n  },\n  \"tools\": []\n}\n";
        let out = apply(
            text,
            &[
                p("sandbox.readable", json!("/etc/ssl")),
                p("sandbox.exec", json!("/usr/bin/git")),
                p("sandbox.private_tmp", json!(true)),
                p("network.egress", json!({"host": "a.example", "port": 443})),
                p("tools", json!({"name": "t", "default": "hold"})),
            ],
        )
        .unwrap();
        assert!(out.contains("      \"/w\",\n      \"/etc/ssl\"\n"), "{out}");
        assert!(out.contains("\"root\": \"/w\""), "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["sandbox"]["exec"], json!(["/usr/bin/git"]));
        assert_eq!(v["sandbox"]["private_tmp"], json!(true));
        assert_eq!(v["network"]["egress"][0]["host"], "a.example");
        assert_eq!(v["tools"][0]["name"], "t");
        assert_eq!(v["version"], 1);
        assert!(
            out.contains("{\"name\": \"t\", \"default\": \"hold\"}"),
            "{out}"
        );
    }

    #[test]
    fn a_servers_entries_go_into_its_profile() {
        let text = "{\"version\": 1, \"mcp_servers\": {\"fs\": {\"sandbox\": {\"readable\": [\"/w\"]}},\n  \"other\": {}}}";
        let server = |name: &str, field, value| Proposal {
            server: Some(name.to_owned()),
            ..p(field, value)
        };
        let out = apply(
            text,
            &[
                server("fs", "sandbox.readable", json!("/usr")),
                server("fs", "network.egress", json!({"host": "a.example"})),
                server("other", "sandbox.readable", json!("/etc/ssl")),
                server("other", "sandbox.exec", json!("/usr/bin/node")),
                p("sandbox.readable", json!("/srv")),
            ],
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        let fs = &v["mcp_servers"]["fs"];
        assert_eq!(fs["sandbox"]["readable"], json!(["/w", "/usr"]), "{out}");
        assert_eq!(fs["network"]["egress"][0]["host"], "a.example", "{out}");
        assert_eq!(
            v["mcp_servers"]["other"],
            json!({"sandbox": {"readable": ["/etc/ssl"], "exec": ["/usr/bin/node"]}}),
            "{out}"
        );
        assert_eq!(v["sandbox"]["readable"], json!(["/srv"]), "{out}");
    }

    #[test]
    fn an_empty_section_is_made_whole() {
        let out = apply(
            "{\"version\": 1, \"sandbox\": {}}",
            &[
                p("sandbox.readable", json!("/a")),
                p("sandbox.writable", json!("/b")),
            ],
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["sandbox"],
            json!({"readable": ["/a"], "writable": ["/b"]})
        );
    }
}
