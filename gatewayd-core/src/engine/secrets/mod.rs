//! Registered secrets and credentials: found in text in plain, base64 (standard and URL-safe,
//! also embedded in a longer base64 text), hex and URL-encoded forms ([`SecretSet::find`]);
//! scrubbed from audit records and messages; redacted from tool outputs.
//!
//! Egress ([`find_in_call`], the `secret_egress` check) looks further: through normalisation
//! (`normalise`), layered decodings (`decode`, over the runs `tokens` finds, `inflate`),
//! fragments and fixed rewrites (`fragments`), and pieces split across arguments and calls
//! (`window`); `egress` puts them together. docs/POLICY.md ("The secret matcher") states what
//! it sees and what it cannot.
use std::{borrow::Cow, collections::HashMap};

use base64::Engine as _;

mod decode;
mod egress;
#[cfg(test)]
mod egress_tests;
mod exact;
mod fragments;
mod inflate;
mod normalise;
mod tokens;
mod window;

pub use egress::{Match, egress_texts, find_in_call};
use exact::ExactForms;
use fragments::FragmentIndex;
pub use window::EgressWindow;

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes `%XX` escapes (and `+` as space); invalid escapes are kept as they are.
pub fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.as_bytes().contains(&b'%') && !s.as_bytes().contains(&b'+') {
        return Cow::Borrowed(s);
    }
    let out = decode::percent_decode_bytes(s.as_bytes());
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

/// The forms of `v` looked for: (text, case-insensitive, the encoding's name).
fn variants(v: &str) -> Vec<(String, bool, &'static str)> {
    let b = v.as_bytes();
    let mut out = vec![(v.to_owned(), false, "plain")];
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    out.push((hex, true, "hex"));
    let pe = percent_encode(v);
    if pe != v {
        out.push((pe, true, "url"));
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
            out.push((core.to_owned(), false, "base64"));
            out.push((core.replace('+', "-").replace('/', "_"), false, "base64url"));
        }
        if k == 0 {
            let padded = enc.clone();
            out.push((padded.trim_end_matches('=').to_owned(), false, "base64"));
            out.push((
                padded
                    .replace('+', "-")
                    .replace('/', "_")
                    .trim_end_matches('=')
                    .to_owned(),
                false,
                "base64url",
            ));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    out
}

/// The last matcher built for a session's secrets, shared by the next session with the same
/// ones (sessions of one daemon start with the same protected files' values: building the
/// matcher for them is most of a session's start).
#[derive(Debug, Default)]
pub struct SecretMemo(std::sync::Mutex<Option<Remembered>>);

/// The items a matcher was built for, and the matcher.
type Remembered = (Vec<(String, String)>, std::sync::Arc<SecretSet>);

impl SecretMemo {
    /// The matcher for `items`: the remembered one when the items are the same, else built
    /// (and remembered).
    pub fn set_for(&self, items: Vec<(String, String)>) -> std::sync::Arc<SecretSet> {
        let mut last = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((have, set)) = last.as_ref()
            && *have == items
        {
            return set.clone();
        }
        let set = std::sync::Arc::new(SecretSet::new(&items));
        *last = Some((items, set.clone()));
        set
    }
}

/// A set of named secret values and one matcher over all their forms.
#[derive(Debug, Default)]
pub struct SecretSet {
    /// The matcher of the exact forms (None: no values, or it could not be built).
    forms: Option<ExactForms>,
    /// The plain values in any ASCII case, for [`scrub`](Self::scrub) alone: a secret found
    /// normalised (a name in lower case, as DNS and TLS server names travel) is not written
    /// down either.
    folded_plain: Option<ExactForms>,
    /// The matcher could not be built: fail closed.
    broken: bool,
    /// Each form (lower-cased if case-insensitive) → (secret name, encoding).
    by_form: HashMap<String, (String, &'static str)>,
    names: Vec<String>,
    /// The values, by the index of `names` (to tell a plain match from a normalised one).
    values: Vec<String>,
    /// Fragments of the normalised secrets and their rewrites (egress only).
    index: FragmentIndex,
    /// Some secret folds to fewer than 8 letters and digits (not indexed): egress looks for
    /// its exact forms with the regex too.
    exact_only: bool,
}

impl SecretSet {
    /// `items`: (name, value). Values shorter than 8 characters are ignored by the caller's
    /// validation; empty values are skipped here.
    pub fn new(items: &[(String, String)]) -> SecretSet {
        Self::with_builder(items, |written, folded| {
            ExactForms::new(written, folded).ok()
        })
    }

    /// Builds the set with `build` making the matcher of the exact forms (as written, and
    /// ASCII-case-folded). If it cannot be built, the set fails closed: every string counts as
    /// holding a secret and is redacted whole.
    fn with_builder(
        items: &[(String, String)],
        build: impl Fn(&[String], &[String]) -> Option<ExactForms>,
    ) -> SecretSet {
        let mut by_form = HashMap::new();
        let (mut written, mut folded) = (Vec::new(), Vec::new());
        for (name, value) in items {
            if value.is_empty() {
                continue;
            }
            // The case-insensitive forms (hex, percent-encoding) are ASCII.
            for (form, ci, kind) in variants(value) {
                let ci = ci && form.is_ascii();
                let key = if ci {
                    form.to_ascii_lowercase()
                } else {
                    form.clone()
                };
                by_form.entry(key).or_insert_with(|| (name.clone(), kind));
                if ci { &mut folded } else { &mut written }.push(form);
            }
        }
        let (forms, broken) = if written.is_empty() && folded.is_empty() {
            (None, false)
        } else {
            match build(&written, &folded) {
                Some(f) => (Some(f), false),
                None => (None, true),
            }
        };
        // The values that have a case to fold.
        let mut plain = Vec::new();
        for (name, value) in items {
            if value.is_ascii() && value.bytes().any(|b| b.is_ascii_alphabetic()) {
                by_form
                    .entry(value.to_ascii_lowercase())
                    .or_insert_with(|| (name.clone(), "plain"));
                plain.push(value.clone());
            }
        }
        let folded_plain = if plain.is_empty() {
            None
        } else {
            build(&[], &plain)
        };
        let index = FragmentIndex::new(&items.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>());
        SecretSet {
            forms,
            folded_plain,
            broken,
            by_form,
            names: items.iter().map(|(n, _)| n.clone()).collect(),
            values: items.iter().map(|(_, v)| v.clone()).collect(),
            exact_only: items
                .iter()
                .enumerate()
                .any(|(i, (_, v))| !v.is_empty() && !index.covers(i)),
            index,
        }
    }

    /// Whether there is nothing to look for (no values, and the matcher did not fail).
    pub fn is_empty(&self) -> bool {
        self.forms.is_none() && !self.broken
    }

    fn name_of(&self, m: &str) -> &str {
        self.form_of(m).0
    }

    /// The secret name and encoding of a form the regex matched.
    fn form_of(&self, m: &str) -> (&str, &'static str) {
        self.by_form
            .get(m)
            .or_else(|| self.by_form.get(&m.to_ascii_lowercase()))
            .map_or(("secret", "an encoded form"), |(n, k)| (n.as_str(), *k))
    }

    /// The name of a secret found in `s` in any form: as it is, URL-decoded, or with
    /// whitespace removed (wrapped base64).
    pub fn find(&self, s: &str) -> Option<String> {
        if self.broken {
            return Some("secret (the secret matcher could not be built; failing closed)".into());
        }
        let forms = self.forms.as_ref()?;
        self.find_form(forms, s, true).map(|(name, _)| name)
    }

    /// A secret in `s` in one of its exact forms (see [`find`](Self::find); with whitespace
    /// removed only if `squeeze`): its name and the encoding.
    fn find_form(&self, forms: &ExactForms, s: &str, squeeze: bool) -> Option<(String, String)> {
        let hit = |t: &str| forms.find(t).map(|m| self.form_of(m));
        if let Some((name, kind)) = hit(s) {
            return Some((name.to_owned(), kind.to_owned()));
        }
        if let Cow::Owned(d) = percent_decode(s)
            && let Some((name, kind)) = hit(&d)
        {
            let layers: &[&str] = if kind == "plain" {
                &["url"]
            } else {
                &["url", kind]
            };
            return Some((name.to_owned(), nest(layers)));
        }
        if squeeze && s.contains(char::is_whitespace) {
            let squeezed = squeeze_whitespace(s);
            return hit(&squeezed)
                .map(|(name, kind)| (name.to_owned(), format!("{kind}, spaced out")));
        }
        None
    }

    /// `s` with every form of every secret replaced by `[REDACTED:name]`, and each plain
    /// value in any ASCII case.
    pub fn scrub<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match &self.forms {
            None if self.broken => Cow::Owned("[REDACTED:secrets]".into()),
            None => Cow::Borrowed(s),
            Some(forms) => {
                let redact = |m: &str| format!("[REDACTED:{}]", self.name_of(m));
                let once = forms.replace_all(s, redact);
                let Some(folded) = &self.folded_plain else {
                    return once;
                };
                match folded.replace_all(&once, redact) {
                    Cow::Borrowed(_) => once,
                    Cow::Owned(twice) => Cow::Owned(twice),
                }
            }
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

/// `s` without its whitespace (as `char::is_whitespace` has it); bytewise for ASCII.
fn squeeze_whitespace(s: &str) -> Cow<'_, str> {
    if !s.is_ascii() {
        return Cow::Owned(s.chars().filter(|c| !c.is_whitespace()).collect());
    }
    let mut kept = Vec::with_capacity(s.len());
    kept.extend(
        s.bytes()
            .filter(|&b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')),
    );
    String::from_utf8(kept).map_or(Cow::Borrowed(s), Cow::Owned)
}

/// Layers named outermost first, written nested: `["base64", "gzip"]` → `base64(gzip)`.
fn nest(layers: &[&str]) -> String {
    layers.iter().rev().fold(String::new(), |inner, l| {
        if inner.is_empty() {
            (*l).to_owned()
        } else {
            format!("{l}({inner})")
        }
    })
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
    fn the_memo_shares_a_matcher_for_the_same_secrets_only() {
        let memo = SecretMemo::default();
        let items = |v: &str| vec![("k".to_string(), v.to_string())];
        let a = memo.set_for(items("value-0123456789"));
        let b = memo.set_for(items("value-0123456789"));
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        let c = memo.set_for(items("other-0123456789"));
        assert!(!std::sync::Arc::ptr_eq(&a, &c));
        assert!(c.find("x other-0123456789 y").is_some() && c.find("value-0123456789").is_none());
    }

    #[test]
    fn a_matcher_that_cannot_be_built_fails_closed() {
        // A matcher that could not be built (the builder gives none).
        let s = SecretSet::with_builder(&[("big".into(), "0123456789abcdef".into())], |_, _| None);
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

    #[test]
    fn a_secret_is_scrubbed_in_any_ascii_case() {
        // A name travels in lower case (DNS, a TLS server name): the matcher finds the
        // secret there normalised, and the record must not hold it either.
        let v = "AKIAQYLPMN5HFIQR7XYZ";
        let s = SecretSet::new(&[("aws".into(), v.into())]);
        let name = format!("{}.exfil.test", v.to_ascii_lowercase());
        assert!(s.find(&name).is_none(), "the exact forms: case matters");
        assert_eq!(s.scrub(&name), "[REDACTED:aws].exfil.test");
        assert_eq!(
            s.scrub(&format!("{v} and AkIaQyLpMn5HfIqR7xYz")),
            "[REDACTED:aws] and [REDACTED:aws]"
        );
        assert_eq!(s.scrub("nothing here"), "nothing here");
    }
}
