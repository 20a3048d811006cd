//! Registered secrets and credentials: found in text in plain, base64 (standard and URL-safe,
//! also embedded in a longer base64 text), hex and URL-encoded forms; scrubbed from audit
//! records and messages; redacted from tool outputs.
use std::{borrow::Cow, collections::HashMap};

use regex::Regex;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = u32::from(c[0]) << 16
            | u32::from(*c.get(1).unwrap_or(&0)) << 8
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes `%XX` escapes (and `+` as space); invalid escapes are kept as they are.
pub fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.contains(['%', '+']) {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |x: u8| (x as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            x => out.push(x),
        }
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The forms of `v` looked for: (text, case-insensitive).
fn variants(v: &str) -> Vec<(String, bool)> {
    let b = v.as_bytes();
    let mut out = vec![(v.to_owned(), false)];
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    out.push((hex, true));
    let pe = percent_encode(v);
    if pe != v {
        out.push((pe, true));
    }
    // Base64 of the value at each of the three alignments it can have inside a longer
    // encoded text: keep only the characters that depend on the value's bytes alone.
    for k in 0..3usize {
        let mut buf = vec![0u8; k];
        buf.extend_from_slice(b);
        let enc = base64(&buf);
        let skip = if k == 0 { 0 } else { 4 };
        let full_groups = buf.len() / 3;
        let core = &enc[skip.min(full_groups * 4)..full_groups * 4];
        if core.len() >= 6 {
            out.push((core.to_owned(), false));
            out.push((core.replace('+', "-").replace('/', "_"), false));
        }
        if k == 0 {
            let padded = enc.clone();
            out.push((padded.trim_end_matches('=').to_owned(), false));
            out.push((
                padded
                    .replace('+', "-")
                    .replace('/', "_")
                    .trim_end_matches('=')
                    .to_owned(),
                false,
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A set of named secret values and one matcher over all their forms.
#[derive(Debug, Default)]
pub struct SecretSet {
    re: Option<Regex>,
    /// The matcher could not be built: fail closed.
    broken: bool,
    by_form: HashMap<String, String>,
}

impl SecretSet {
    /// `items`: (name, value). Values shorter than 8 characters are ignored by the caller's
    /// validation; empty values are skipped here.
    pub fn new(items: &[(String, String)]) -> SecretSet {
        Self::with_builder(items, |pattern| {
            regex::RegexBuilder::new(pattern)
                .size_limit(1 << 28)
                .build()
        })
    }

    /// Builds the set with `build` compiling the matcher. If it cannot be built (e.g. huge
    /// secret values), the set fails closed: every string counts as holding a secret and is
    /// redacted whole.
    fn with_builder(
        items: &[(String, String)],
        build: impl Fn(&str) -> Result<Regex, regex::Error>,
    ) -> SecretSet {
        let mut by_form = HashMap::new();
        let mut alts = Vec::new();
        for (name, value) in items {
            if value.is_empty() {
                continue;
            }
            for (form, ci) in variants(value) {
                let key = if ci {
                    form.to_ascii_lowercase()
                } else {
                    form.clone()
                };
                by_form.entry(key).or_insert_with(|| name.clone());
                let esc = regex::escape(&form);
                alts.push(if ci { format!("(?i:{esc})") } else { esc });
            }
        }
        // Longest first so the leftmost match is the most complete form.
        alts.sort_by_key(|a| std::cmp::Reverse(a.len()));
        let (re, broken) = if alts.is_empty() {
            (None, false)
        } else {
            match build(&alts.join("|")) {
                Ok(re) => (Some(re), false),
                Err(_) => (None, true),
            }
        };
        SecretSet {
            re,
            broken,
            by_form,
        }
    }

    /// Whether there is nothing to look for (no values, and the matcher did not fail).
    pub fn is_empty(&self) -> bool {
        self.re.is_none() && !self.broken
    }

    fn name_of(&self, m: &str) -> &str {
        self.by_form
            .get(m)
            .or_else(|| self.by_form.get(&m.to_ascii_lowercase()))
            .map_or("secret", String::as_str)
    }

    /// The name of a secret found in `s` in any form: as it is, URL-decoded, or with
    /// whitespace removed (wrapped base64).
    pub fn find(&self, s: &str) -> Option<String> {
        if self.broken {
            return Some("secret (the secret matcher could not be built; failing closed)".into());
        }
        let re = self.re.as_ref()?;
        let hit = |t: &str| re.find(t).map(|m| self.name_of(m.as_str()).to_owned());
        if let Some(n) = hit(s) {
            return Some(n);
        }
        if let Cow::Owned(d) = percent_decode(s)
            && let Some(n) = hit(&d)
        {
            return Some(n);
        }
        if s.contains(char::is_whitespace) {
            let squeezed: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            return hit(&squeezed);
        }
        None
    }

    /// `s` with every form of every secret replaced by `[REDACTED:name]`.
    pub fn scrub<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match &self.re {
            None if self.broken => Cow::Owned("[REDACTED:secrets]".into()),
            None => Cow::Borrowed(s),
            Some(re) => re.replace_all(s, |c: &regex::Captures| {
                format!("[REDACTED:{}]", self.name_of(&c[0]))
            }),
        }
    }

    /// Scrubs every string (and object key) in a JSON value.
    pub fn scrub_value(&self, v: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                if let Cow::Owned(o) = self.scrub(s) {
                    *s = o;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.scrub_value(x)),
            Value::Object(m) => {
                let old = std::mem::take(m);
                for (k, mut x) in old {
                    self.scrub_value(&mut x);
                    m.insert(self.scrub(&k).into_owned(), x);
                }
            }
            _ => {}
        }
    }
}

/// Like [`strings`], borrowing where it can.
pub fn strings_ref<'a>(v: &'a serde_json::Value, out: &mut Vec<Cow<'a, str>>) {
    use serde_json::Value;
    match v {
        Value::String(s) => out.push(Cow::Borrowed(s)),
        Value::Number(n) => out.push(Cow::Owned(n.to_string())),
        Value::Array(a) => a.iter().for_each(|x| strings_ref(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(Cow::Borrowed(k));
                strings_ref(x, out);
            }
        }
        _ => {}
    }
}

/// Every string in a JSON value, object keys included, numbers as text.
pub fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                strings(x, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matcher_that_cannot_be_built_fails_closed() {
        let s = SecretSet::with_builder(&[("big".into(), "0123456789abcdef".into())], |_| {
            Regex::new(&String::from("(")) // an unclosed group: the build fails
        });
        assert!(!s.is_empty());
        assert!(s.find("nothing secret here").is_some());
        assert_eq!(s.scrub("nothing secret here"), "[REDACTED:secrets]");
        let ok = SecretSet::new(&[("big".into(), "0123456789abcdef".into())]);
        assert!(ok.find("nothing secret here").is_none());
    }

    #[test]
    fn base64_matches_known_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c%zz%4"), "a b c%zz%4");
        assert_eq!(percent_decode("plain"), "plain");
    }

    #[test]
    fn finds_every_form() {
        let v = "sk-live-9f8e7d6c5b4a";
        let s = SecretSet::new(&[("stripe".into(), v.into())]);
        assert_eq!(s.find(&format!("key={v}")).as_deref(), Some("stripe"));
        assert_eq!(s.find(&base64(v.as_bytes())).as_deref(), Some("stripe"));
        for pre in ["", "a", "ab", "abc"] {
            let t = base64(format!("{pre}token: {v} end").as_bytes());
            assert_eq!(s.find(&t).as_deref(), Some("stripe"), "prefix {pre:?}");
        }
        let hex: String = v.bytes().map(|b| format!("{b:02X}")).collect();
        assert_eq!(s.find(&hex).as_deref(), Some("stripe"));
        assert_eq!(
            s.find("sk%2Dlive%2D9f8e7d6c5b4a").as_deref(),
            Some("stripe")
        );
        assert!(s.find("nothing to see here").is_none());
        assert_eq!(s.scrub(&format!("x {v} y")), "x [REDACTED:stripe] y");
    }
}
