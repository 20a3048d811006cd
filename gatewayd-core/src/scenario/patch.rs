//! A scenario's `policy_patch`: JSON Patch (RFC 6902) `add`, `replace` and `remove`, applied
//! to the policy before the scenario's engine is built.
use serde::Deserialize;
use serde_json::Value;

/// One operation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum PatchOp {
    /// Sets a member, or inserts into an array (`-` appends).
    Add {
        /// A JSON Pointer.
        path: String,
        /// The new value.
        value: Value,
    },
    /// Sets a value that exists.
    Replace {
        /// A JSON Pointer.
        path: String,
        /// The new value.
        value: Value,
    },
    /// Removes a value that exists.
    Remove {
        /// A JSON Pointer.
        path: String,
    },
}

/// The parent of `path` and the last token (unescaped).
fn split(path: &str) -> Result<(&str, String), String> {
    let i = path
        .rfind('/')
        .ok_or_else(|| format!("`{path}` is not a JSON Pointer"))?;
    Ok((
        &path[..i],
        path[i + 1..].replace("~1", "/").replace("~0", "~"),
    ))
}

fn parent<'a>(doc: &'a mut Value, path: &str, at: &str) -> Result<&'a mut Value, String> {
    doc.pointer_mut(path)
        .ok_or_else(|| format!("`{at}`: `{path}` does not exist"))
}

fn index(a: &[Value], token: &str, at: &str, append: bool) -> Result<usize, String> {
    if append && token == "-" {
        return Ok(a.len());
    }
    let max = if append {
        a.len()
    } else {
        a.len().saturating_sub(1)
    };
    token
        .parse::<usize>()
        .ok()
        .filter(|i| *i <= max && (append || !a.is_empty()))
        .ok_or_else(|| format!("`{at}`: no array element `{token}`"))
}

/// Applies the operations in order; Err names the one that failed.
pub(super) fn apply(doc: &mut Value, ops: &[PatchOp]) -> Result<(), String> {
    for op in ops {
        match op {
            PatchOp::Add { path, value } | PatchOp::Replace { path, value } if path.is_empty() => {
                *doc = value.clone();
            }
            PatchOp::Add { path, value } => {
                let (p, token) = split(path)?;
                match parent(doc, p, path)? {
                    Value::Object(m) => {
                        m.insert(token, value.clone());
                    }
                    Value::Array(a) => {
                        let i = index(a, &token, path, true)?;
                        a.insert(i, value.clone());
                    }
                    _ => return Err(format!("`{path}`: the parent is not a container")),
                }
            }
            PatchOp::Replace { path, value } => {
                let slot = doc
                    .pointer_mut(path)
                    .ok_or_else(|| format!("`{path}` does not exist"))?;
                *slot = value.clone();
            }
            PatchOp::Remove { path } => {
                let (p, token) = split(path)?;
                match parent(doc, p, path)? {
                    Value::Object(m) => {
                        m.remove(&token)
                            .ok_or_else(|| format!("`{path}` does not exist"))?;
                    }
                    Value::Array(a) => {
                        let i = index(a, &token, path, false)?;
                        a.remove(i);
                    }
                    _ => return Err(format!("`{path}`: the parent is not a container")),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ops(v: Value) -> Vec<PatchOp> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn add_replace_remove() {
        let mut doc = json!({"a": {"b": 1}, "l": [1, 2], "x~/y": 0});
        apply(
            &mut doc,
            &ops(json!([
                {"op": "add", "path": "/a/c", "value": 2},
                {"op": "replace", "path": "/a/b", "value": 3},
                {"op": "add", "path": "/l/-", "value": 9},
                {"op": "add", "path": "/l/0", "value": 0},
                {"op": "remove", "path": "/l/1"},
                {"op": "remove", "path": "/x~0~1y"}
            ])),
        )
        .unwrap();
        assert_eq!(doc, json!({"a": {"b": 3, "c": 2}, "l": [0, 2, 9]}));
    }

    #[test]
    fn missing_targets_are_errors() {
        let mut doc = json!({"a": [1]});
        for bad in [
            json!([{"op": "replace", "path": "/b", "value": 1}]),
            json!([{"op": "remove", "path": "/a/1"}]),
            json!([{"op": "add", "path": "/a/5", "value": 1}]),
            json!([{"op": "add", "path": "/x/y", "value": 1}]),
            json!([{"op": "remove", "path": "/b"}]),
        ] {
            assert!(apply(&mut doc, &ops(bad.clone())).is_err(), "{bad}");
        }
        assert!(
            serde_json::from_value::<Vec<PatchOp>>(json!([{"op": "move", "path": "/a"}])).is_err()
        );
    }
}
