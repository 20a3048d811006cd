//! What changes between two policies, for a reviewer (`gatewayd policy diff OLD NEW`) and
//! for the `policy_reload` record: both are compared as the JSON they parse to (defaults
//! filled in, so a field written out with its default value is no change), objects key by
//! key, `tools` by name and `rules` by id, other lists as sets of values. A secret's or a
//! credential's inline `value` is never shown: only that it changed.
use serde::Serialize;
use serde_json::Value;

use super::Policy;

/// One difference: where, and the value before and after (None: absent on that side).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Where, as `tools[send_email].labels` or `network.egress`.
    pub path: String,
    /// The value in the old policy.
    pub old: Option<Value>,
    /// The value in the new policy.
    pub new: Option<Value>,
}

/// Every difference, in the order of the policy's fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PolicyDiff {
    /// The changes; empty: the policies decide alike.
    pub changes: Vec<Change>,
}

impl PolicyDiff {
    /// One line per change: `+ path: new`, `- path: old`, `~ path: old -> new`.
    pub fn lines(&self) -> Vec<String> {
        self.changes
            .iter()
            .map(|c| match (&c.old, &c.new) {
                (None, Some(n)) => format!("+ {}: {n}", c.path),
                (Some(o), None) => format!("- {}: {o}", c.path),
                (Some(o), Some(n)) => format!("~ {}: {o} -> {n}", c.path),
                (None, None) => format!("  {}", c.path),
            })
            .collect()
    }
}

/// The differences from `old` to `new`.
pub fn diff(old: &Policy, new: &Policy) -> PolicyDiff {
    let (Ok(mut a), Ok(mut b)) = (serde_json::to_value(old), serde_json::to_value(new)) else {
        return PolicyDiff::default();
    };
    hide_values(&mut a, &mut b);
    let mut changes = Vec::new();
    walk("", &a, &b, &mut changes);
    PolicyDiff { changes }
}

/// Replaces the inline values of `secrets` and `credentials` on both sides with a marker
/// that says only whether it changed.
fn hide_values(a: &mut Value, b: &mut Value) {
    for section in ["secrets", "credentials"] {
        let Some(names) = b
            .get(section)
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
        else {
            continue;
        };
        for name in names {
            let old = a.pointer(&format!("/{section}/{name}/value")).cloned();
            if let Some(v) = b
                .get_mut(section)
                .and_then(|s| s.get_mut(&name))
                .and_then(|e| e.get_mut("value"))
                .filter(|v| !v.is_null())
            {
                let same = old.as_ref() == Some(&*v);
                *v = Value::String(
                    if same {
                        "(hidden)"
                    } else {
                        "(hidden, changed)"
                    }
                    .into(),
                );
            }
        }
        if let Some(m) = a.get_mut(section).and_then(Value::as_object_mut) {
            for e in m.values_mut() {
                if let Some(v) = e.get_mut("value").filter(|v| !v.is_null()) {
                    *v = Value::String("(hidden)".into());
                }
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The key that names an element of a list, when every element has one: tools by `name`,
/// rules by `id`.
fn element_key(v: &Value) -> Option<&str> {
    v.get("name")
        .or_else(|| v.get("id"))
        .and_then(Value::as_str)
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<Change>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                match y.get(k) {
                    Some(vb) => walk(&join(path, k), va, vb, out),
                    None => out.push(change(&join(path, k), Some(va), None)),
                }
            }
            for (k, vb) in y.iter().filter(|(k, _)| !x.contains_key(*k)) {
                out.push(change(&join(path, k), None, Some(vb)));
            }
        }
        (Value::Array(x), Value::Array(y)) => walk_list(path, x, y, out),
        _ => out.push(change(path, Some(a), Some(b))),
    }
}

fn walk_list(path: &str, x: &[Value], y: &[Value], out: &mut Vec<Change>) {
    let keyed = |l: &[Value]| l.iter().all(|v| element_key(v).is_some());
    if keyed(x) && keyed(y) {
        let find = |l: &'_ [Value], k: &str| l.iter().find(|v| element_key(v) == Some(k)).cloned();
        for va in x {
            let k = element_key(va).unwrap_or_default();
            let at = format!("{path}[{k}]");
            match find(y, k) {
                Some(vb) => walk(&at, va, &vb, out),
                None => out.push(change(&at, Some(va), None)),
            }
        }
        for vb in y {
            let k = element_key(vb).unwrap_or_default();
            if find(x, k).is_none() {
                out.push(change(&format!("{path}[{k}]"), None, Some(vb)));
            }
        }
        return;
    }
    for va in x.iter().filter(|v| !y.contains(v)) {
        out.push(change(path, Some(va), None));
    }
    for vb in y.iter().filter(|v| !x.contains(v)) {
        out.push(change(path, None, Some(vb)));
    }
}

fn change(path: &str, old: Option<&Value>, new: Option<&Value>) -> Change {
    Change {
        path: path.to_owned(),
        old: old.cloned(),
        new: new.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn policy(text: &str) -> Policy {
        Policy::parse(text, Path::new("p.json")).unwrap()
    }

    #[test]
    fn lists_what_a_reviewer_must_see() {
        let old = policy(
            r#"{"version": 1, "tools": [{"name": "a"}, {"name": "b", "cost": 1}],
                "network": {"egress": [{"host": "example.com"}, {"host": "api.example.com"}]}}"#,
        );
        let new = policy(
            r#"{"version": 1, "tools": [{"name": "b", "cost": 2}, {"name": "c"}],
                "network": {"egress": [{"host": "example.com"}]}}"#,
        );
        let lines = diff(&old, &new).lines();
        assert!(
            lines.iter().any(|l| l.starts_with("- tools[a]: ")),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("+ tools[c]: ")),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"~ tools[b].cost: 1 -> 2".to_owned()),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("- network.egress: ") && l.contains("api.example.com")),
            "{lines:?}"
        );
        assert!(diff(&old, &old).changes.is_empty());
    }

    #[test]
    fn never_shows_an_inline_secret() {
        let old = policy(
            r#"{"version": 1, "tools": [{"name": "a"}], "credentials": {"k": {"value": "old-secret-value-1"}}}"#,
        );
        let new = policy(
            r#"{"version": 1, "tools": [{"name": "a"}], "credentials": {"k": {"value": "new-secret-value-2"}}}"#,
        );
        let lines = diff(&old, &new).lines();
        assert_eq!(
            lines,
            ["~ credentials.k.value: \"(hidden)\" -> \"(hidden, changed)\""],
            "{lines:?}"
        );
    }
}
