//! Canonical JSON and SHA-256 hex: one definition for everything that hashes JSON (the
//! audit chain, tool fingerprints, argument digests).
use serde_json::Value;
use sha2::{Digest, Sha256};

/// JSON with object keys sorted at every level and no insignificant whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    into_string(out)
}

/// Appends the canonical JSON of `v` to `out`: keys sorted by their bytes, strings and
/// scalars as `serde_json` writes them compactly.
pub fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write_canonical(x, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(x, out);
            }
            out.push(b']');
        }
        // Writing into a Vec cannot fail.
        other => drop(serde_json::to_writer(&mut *out, other)),
    }
}

/// Appends `s` as a JSON string (quoted and escaped as `serde_json` does) to `out`.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail.
    drop(serde_json::to_writer(&mut *out, s));
}

/// What [`write_canonical`] wrote, as a String (`serde_json` writes UTF-8 only).
pub fn into_string(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex SHA-256 of `parts` one after the other (as of their concatenation).
pub fn sha256_hex_of_parts(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    hex(&h.finalize())
}

/// `bytes` as lower-case hex (a table lookup per half byte: `format!` per byte cost a call's
/// decision more than its checks did).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn keys_sort_by_bytes_at_every_level_with_no_spaces() {
        let v = json!({"b": [1, {"z": null, "a": 2.5}], "a": "x\"\u{1}é", "B": true, "aa": -3});
        assert_eq!(
            super::canonical_json(&v),
            r#"{"B":true,"a":"x\"\u0001é","aa":-3,"b":[1,{"a":2.5,"z":null}]}"#
        );
        assert_eq!(
            super::sha256_hex_of_parts(&[b"a", b"", b"bc"]),
            super::sha256_hex(b"abc")
        );
    }

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
