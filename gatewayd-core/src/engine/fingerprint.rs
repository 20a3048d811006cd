//! Tool fingerprints: SHA-256 over name, description and canonical input schema.
use serde_json::Value;

pub use crate::canonical::{canonical_json, sha256_hex};

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
