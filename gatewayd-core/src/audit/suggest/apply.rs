//! `gatewayd policy suggest --out`: the policy's text with the proposals added, each new
//! entry appended to its array (the array or its section made when absent), the rest of the
//! text byte for byte as it was. The caller validates the result before writing it.
use std::collections::BTreeMap;

use serde_json::Value;

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

/// `text` with `proposals` applied.
pub fn apply(text: &str, proposals: &[Proposal]) -> Result<String, ApplyError> {
    let root = spans::parse(text)?;
    let mut sections: BTreeMap<&str, Members> = BTreeMap::new();
    let mut top = Members::new();
    for p in proposals {
        match p.field.split_once('.') {
            Some((section, _)) => sections.entry(section).or_default(),
            None => &mut top,
        }
        .entry(p.field.rsplit('.').next().unwrap_or(p.field).to_owned())
        .or_default()
        .push(p.value.clone());
    }
    let mut edits = Vec::new();
    for (section, members) in &sections {
        match root.member(section) {
            Some(node) if matches!(&node.kind, Kind::Object(m) if !m.is_empty()) => {
                edits.extend(members_edits(text, node, members, section)?);
            }
            // Absent or empty: the section is written whole.
            _ => {
                let mut obj = serde_json::Map::new();
                for (k, v) in members {
                    obj.insert(k.clone(), fresh(k, v));
                }
                edits.extend(root.set_member(text, section, one_line(&Value::Object(obj))));
            }
        }
    }
    edits.extend(members_edits(text, &root, &top, "the policy")?);
    Ok(spans::apply(text, edits))
}

/// A member's value when it is made: `private_tmp` is a flag, every other field a list.
fn fresh(key: &str, values: &[Value]) -> Value {
    if key == "private_tmp" {
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
            ) if k != "private_tmp" => {
                edits.push(append(text, list, items, v));
            }
            Some(_) if k != "private_tmp" => return Err(ApplyError::Shape(format!("{at}.{k}"))),
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
