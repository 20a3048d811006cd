//! Roots a client offers cannot widen what the policy gives a server. The filesystem server
//! replaces its command-line directories with the client's roots, so the proxy clamps the
//! client's answer to the server's `roots/list` request: a root that is not inside one of
//! the server's trees (`mcp_servers.NAME.sandbox`: readable, writable, root) is dropped.
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The path of a `file://` URI (percent-decoded), or None for anything else.
pub(crate) fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file:///p` (empty authority) or `file://localhost/p`.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let s = String::from_utf8(out).ok()?;
    (!s.contains('\0')).then(|| PathBuf::from(s))
}

/// Whether `path` (resolved, when it exists) lies inside one of `trees` (resolved).
fn inside(path: &Path, trees: &[PathBuf]) -> bool {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    if real
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return false;
    }
    trees.iter().any(|t| {
        let t = std::fs::canonicalize(t).unwrap_or_else(|_| t.clone());
        real.starts_with(&t)
    })
}

/// Removes from a `roots/list` result every root outside `trees`; returns the URIs dropped.
/// A result that is not `{"roots": [...]}` is emptied (nothing unknown gets through).
pub(crate) fn clamp(result: &mut Value, trees: &[PathBuf]) -> Vec<String> {
    let Some(roots) = result.get_mut("roots").and_then(Value::as_array_mut) else {
        *result = serde_json::json!({"roots": []});
        return vec!["(a result without a roots list)".into()];
    };
    let mut dropped = Vec::new();
    roots.retain(|r| {
        let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
        let keep = file_uri_path(uri).is_some_and(|p| inside(&p, trees));
        if !keep {
            dropped.push(uri.chars().take(300).collect());
        }
        keep
    });
    dropped
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn uris_are_decoded() {
        assert_eq!(file_uri_path("file:///a%20b/c"), Some("/a b/c".into()));
        assert_eq!(file_uri_path("file://localhost/x"), Some("/x".into()));
        assert_eq!(file_uri_path("https://x/"), None);
        assert_eq!(file_uri_path("file:///a%00"), None);
        assert_eq!(file_uri_path("file://host/x"), None);
    }

    #[test]
    fn roots_outside_the_trees_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("in");
        std::fs::create_dir(&inner).unwrap();
        let trees = vec![dir.path().to_owned()];
        let mut r = json!({"roots": [
            {"uri": format!("file://{}", inner.display()), "name": "in"},
            {"uri": "file:///etc"},
            {"uri": format!("file://{}/../..", inner.display())},
        ]});
        let dropped = clamp(&mut r, &trees);
        assert_eq!(r["roots"].as_array().unwrap().len(), 1, "{r}");
        assert_eq!(dropped.len(), 2);
        let mut bad = json!({"nope": 1});
        assert_eq!(clamp(&mut bad, &trees).len(), 1);
        assert_eq!(bad, json!({"roots": []}));
    }
}
