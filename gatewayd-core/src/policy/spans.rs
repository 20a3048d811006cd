//! Byte spans of the values in a JSON text, for what `serde_json` forgets after parsing: where a
//! value named by a [`JsonPath`] sits (the line and column of a validation error), and where
//! to splice a new member value so that `gatewayd policy pin` leaves the file's formatting
//! and key order alone.
//!
//! The text has always been parsed by `serde_json` first, so this walker only needs to find
//! boundaries; it still refuses malformed input with an error instead of panicking.
use super::error::{JsonPath, Seg};

/// The text is not the JSON this walker expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed JSON at byte {at}")]
pub struct SpanError {
    /// Byte offset where the walker stopped.
    pub at: usize,
}

/// One value and its byte span `start..end` in the text.
#[derive(Debug)]
pub struct Node {
    /// Byte offset of the value's first character.
    pub start: usize,
    /// Byte offset just past its last character.
    pub end: usize,
    /// What the value is, with its children.
    pub kind: Kind,
}

/// What a [`Node`] holds.
#[derive(Debug)]
pub enum Kind {
    /// An object, its members in text order.
    Object(Vec<Member>),
    /// An array, its elements in order.
    Array(Vec<Node>),
    /// A string, number, boolean or null.
    Scalar,
}

/// An object member: its key, where the key's opening quote is, and its value.
#[derive(Debug)]
pub struct Member {
    /// The decoded key.
    pub key: String,
    /// Byte offset of the key's opening quote.
    pub key_start: usize,
    /// The member's value.
    pub value: Node,
}

/// A replacement of `start..end` by `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Byte offset of the first byte replaced.
    pub start: usize,
    /// Byte offset just past the last byte replaced (`start` for an insertion).
    pub end: usize,
    /// The replacement text.
    pub text: String,
}

/// The spans of every value in `text`.
pub fn parse(text: &str) -> Result<Node, SpanError> {
    let mut p = Parser { t: text, i: 0 };
    p.value()
}

/// 1-based line and column (in characters) of the value `path` names in `text`, or of the
/// deepest value on the way to it when the path goes further than the text does.
pub fn locate(text: &str, path: &JsonPath) -> Option<(usize, usize)> {
    let root = parse(text).ok()?;
    Some(line_column(text, root.find(path.segments()).start))
}

/// 1-based line and column (in characters) of byte `offset`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl Node {
    /// The value of member `key`, if this is an object that has one.
    pub fn member(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Object(m) => m.iter().find(|m| m.key == key).map(|m| &m.value),
            _ => None,
        }
    }

    /// The value `path` names below this one, or the deepest value found on the way.
    pub fn find(&self, path: &[Seg]) -> &Node {
        let Some((first, rest)) = path.split_first() else {
            return self;
        };
        let next = match (&self.kind, first) {
            (Kind::Object(_), Seg::Key(k)) => self.member(k),
            (Kind::Array(items), Seg::Index(i) | Seg::Named(i, _)) => items.get(*i),
            // A JSON Pointer segment does not say whether it indexes an array.
            (Kind::Array(items), Seg::Key(k)) => k.parse().ok().and_then(|i: usize| items.get(i)),
            _ => None,
        };
        next.map_or(self, |n| n.find(rest))
    }

    /// The edit that sets member `key` of this object to the JSON text `value`: the old value
    /// replaced, or a new member inserted before the first one, on its own line when the
    /// first member has a line of its own. None if this is not an object.
    pub fn set_member(&self, text: &str, key: &str, value: String) -> Option<Edit> {
        let Kind::Object(members) = &self.kind else {
            return None;
        };
        if let Some(n) = self.member(key) {
            return Some(Edit {
                start: n.start,
                end: n.end,
                text: value,
            });
        }
        let key = serde_json::Value::from(key).to_string();
        Some(match members.first() {
            Some(first) => {
                let at = first.key_start;
                let line = text.get(..at)?.rfind('\n').map_or(0, |i| i + 1);
                let indent = text.get(line..at)?;
                let sep = if indent.trim().is_empty() {
                    format!("\n{indent}")
                } else {
                    " ".into()
                };
                Edit {
                    start: at,
                    end: at,
                    text: format!("{key}: {value},{sep}"),
                }
            }
            None => Edit {
                start: self.start + 1,
                end: self.end.saturating_sub(1),
                text: format!("{key}: {value}"),
            },
        })
    }
}

/// Applies non-overlapping edits to `text`.
pub fn apply(text: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| std::cmp::Reverse(e.start));
    let mut out = text.to_owned();
    for e in edits {
        if out.is_char_boundary(e.start) && out.is_char_boundary(e.end) && e.start <= e.end {
            out.replace_range(e.start..e.end, &e.text);
        }
    }
    out
}

struct Parser<'a> {
    t: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn byte(&self) -> Option<u8> {
        self.t.as_bytes().get(self.i).copied()
    }

    fn err<T>(&self) -> Result<T, SpanError> {
        Err(SpanError { at: self.i })
    }

    fn ws(&mut self) {
        while self.byte().is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), SpanError> {
        self.ws();
        if self.byte() != Some(c) {
            return self.err();
        }
        self.i += 1;
        Ok(())
    }

    /// A string starting at the opening quote; returns its decoded value.
    fn string(&mut self) -> Result<String, SpanError> {
        let start = self.i;
        self.i += 1;
        loop {
            match self.byte() {
                Some(b'\\') => self.i += 2,
                Some(b'"') => break,
                Some(_) => self.i += 1,
                None => return self.err(),
            }
        }
        self.i += 1;
        let raw = self.t.get(start..self.i).ok_or(SpanError { at: start })?;
        serde_json::from_str(raw).map_err(|_| SpanError { at: start })
    }

    fn value(&mut self) -> Result<Node, SpanError> {
        self.ws();
        let start = self.i;
        let kind = match self.byte() {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    self.ws();
                    match self.byte() {
                        Some(b'}') => break,
                        Some(b',') => self.i += 1,
                        Some(b'"') => {
                            let key_start = self.i;
                            let key = self.string()?;
                            self.expect(b':')?;
                            let value = self.value()?;
                            members.push(Member {
                                key,
                                key_start,
                                value,
                            });
                        }
                        _ => return self.err(),
                    }
                }
                self.i += 1;
                Kind::Object(members)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    match self.byte() {
                        Some(b']') => break,
                        Some(b',') => self.i += 1,
                        Some(_) => items.push(self.value()?),
                        None => return self.err(),
                    }
                }
                self.i += 1;
                Kind::Array(items)
            }
            Some(b'"') => {
                self.string()?;
                Kind::Scalar
            }
            Some(c) if c == b'-' || c.is_ascii_alphanumeric() => {
                while self.byte().is_some_and(|c| !b",]} \t\r\n".contains(&c)) {
                    self.i += 1;
                }
                Kind::Scalar
            }
            _ => return self.err(),
        };
        Ok(Node {
            start,
            end: self.i,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "{\n  \"version\": 1,\n  \"network\": {\n    \"egress\": [\n      {\"host\": \"a\"},\n      {\"cidr\": \"10.1.2.3/8\"}\n    ]\n  },\n  \"tools\": [{\"name\": \"x\", \"args\": {\"p\": {\"regex\": \"(\"}}}]\n}\n";

    fn path(segs: &[Seg]) -> JsonPath {
        segs.iter().fold(JsonPath::root(), |p, s| p.with(s.clone()))
    }

    fn key(k: &str) -> Seg {
        Seg::Key(k.into())
    }

    #[test]
    fn points_at_the_named_value() {
        let cidr = path(&[key("network"), key("egress"), Seg::Index(1), key("cidr")]);
        assert_eq!(locate(TEXT, &cidr), Some((6, 16)));
        let arg = path(&[
            key("tools"),
            Seg::Named(0, "x".into()),
            key("args"),
            key("p"),
        ]);
        assert_eq!(locate(TEXT, &arg), Some((9, 41)));
        // a JSON Pointer's numeric segment indexes an array
        let ptr = JsonPath::root().pointer("/network/egress/1/cidr");
        assert_eq!(locate(TEXT, &ptr), Some((6, 16)));
    }

    #[test]
    fn falls_back_to_the_deepest_part_found() {
        let far = path(&[key("network"), key("egress"), Seg::Index(7), key("cidr")]);
        assert_eq!(locate(TEXT, &far), Some((4, 15)));
        let missing = path(&[key("unsupported policy version 2")]);
        assert_eq!(locate(TEXT, &missing).map(|p| p.0), Some(1));
    }

    #[test]
    fn set_member_replaces_or_inserts() {
        let text = "{\n  \"a\": 1,\n  \"b\": {}\n}";
        let root = parse(text).unwrap();
        let edits = vec![
            root.set_member(text, "a", "2".into()).unwrap(),
            root.set_member(text, "c", "\"x\"".into()).unwrap(),
            root.member("b")
                .unwrap()
                .set_member(text, "d", "[]".into())
                .unwrap(),
        ];
        let out = apply(text, edits);
        assert_eq!(
            out,
            "{\n  \"c\": \"x\",\n  \"a\": 2,\n  \"b\": {\"d\": []}\n}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["b"]["d"], serde_json::json!([]));
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        for bad in ["", "{", "[1,", "{\"a\" 1}", "\"abc", "{\"a\": }", "\"\\"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let root = parse(r#"{"k\"ey": ["é", -1.5e3, true, null]}"#).unwrap();
        assert!(
            matches!(root.member("k\"ey").map(|n| &n.kind), Some(Kind::Array(a)) if a.len() == 4)
        );
    }
}
