//! Tool fingerprints: SHA-256 over name, description and canonical input schema.
use serde_json::Value;
use sha2::{Digest, Sha256};

/// JSON with object keys sorted at every level and no insignificant whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&m[*k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The schema a tool without one gets.
pub fn default_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// `sha256:HEX` over the canonical JSON of `{name, description, input_schema}`.
pub fn fingerprint(name: &str, description: &str, input_schema: &Value) -> String {
    let doc = serde_json::json!({
        "name": name,
        "description": description,
        "input_schema": input_schema,
    });
    format!("sha256:{}", sha256_hex(canonical_json(&doc).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys() {
        let a = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": "x"}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":"x","d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }

    #[test]
    fn fingerprint_changes_with_each_part() {
        let s = json!({"type": "object"});
        let f = fingerprint("t", "d", &s);
        assert!(f.starts_with("sha256:") && f.len() == 71);
        assert_ne!(f, fingerprint("t2", "d", &s));
        assert_ne!(f, fingerprint("t", "d2", &s));
        assert_ne!(
            f,
            fingerprint("t", "d", &json!({"type": "object", "required": ["x"]}))
        );
        assert_eq!(f, fingerprint("t", "d", &json!({"type": "object"})));
    }
}
