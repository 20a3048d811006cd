//! `sandbox.protected_names`: file names nobody in the agent's cgroup may open under the
//! session's roots (`sandbox.root` and the `writable` roots), whether the file existed when
//! the session started or was made later, by the agent or anyone else.
//!
//! A pattern is a file name with at most one `*`, which stands for any run of bytes
//! (possibly empty): `.env` (exactly that name), `.env.*` (a prefix), `*.pem` (a suffix),
//! `id_*`, `credentials*`, `*secret*.json` is refused (two `*`). The part before the `*` and
//! the part after it are each at most [`NamePattern::PART_MAX`] bytes, so the kernel can
//! compare a name with fixed-size loads. It matches a path's last component only.
use std::{ffi::OsStr, os::unix::ffi::OsStrExt as _};

/// One parsed `sandbox.protected_names` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern {
    /// The bytes a matching name starts with.
    pub prefix: Vec<u8>,
    /// The bytes it ends with.
    pub suffix: Vec<u8>,
    /// `false`: the name is exactly `prefix` (the pattern has no `*`).
    pub wildcard: bool,
}

impl NamePattern {
    /// The longest prefix or suffix, in bytes.
    pub const PART_MAX: usize = 32;
    /// Patterns one policy may list (the kernel compares each in turn).
    pub const MAX: usize = 16;

    /// Parses one entry; Err: why it is not a pattern this can enforce.
    pub fn parse(s: &str) -> Result<NamePattern, String> {
        if s.is_empty() || s == "*" {
            return Err(format!(
                "`{s}` would match every name; list the names to protect, such as `.env` or `*.pem`"
            ));
        }
        if s.contains('/') || s.contains('\0') {
            return Err(format!(
                "`{s}` is not a file name (a name has no `/`; protect a path with sandbox.protected)"
            ));
        }
        if s == "." || s == ".." {
            return Err(format!("`{s}` is not a file name"));
        }
        if let Some(c) = s.chars().find(|c| matches!(c, '?' | '[' | ']' | '{' | '}')) {
            return Err(format!(
                "`{s}`: `{c}` is not supported; a pattern is a name with at most one `*`"
            ));
        }
        let (prefix, suffix, wildcard) = match s.split_once('*') {
            None => (s, "", false),
            Some((_, after)) if after.contains('*') => {
                return Err(format!(
                    "`{s}` has more than one `*`; a pattern is a name with at most one `*`"
                ));
            }
            Some((before, after)) => (before, after, true),
        };
        for part in [prefix, suffix] {
            if part.len() > Self::PART_MAX {
                return Err(format!(
                    "`{s}`: `{part}` is longer than {} bytes (the part before and the part after the `*` are each at most {} bytes)",
                    Self::PART_MAX,
                    Self::PART_MAX
                ));
            }
        }
        Ok(NamePattern {
            prefix: prefix.as_bytes().to_vec(),
            suffix: suffix.as_bytes().to_vec(),
            wildcard,
        })
    }

    /// Whether a file name (one path component) matches.
    pub fn matches(&self, name: &[u8]) -> bool {
        if !self.wildcard {
            return name == self.prefix.as_slice();
        }
        name.len() >= self.prefix.len() + self.suffix.len()
            && name.starts_with(&self.prefix)
            && name.ends_with(&self.suffix)
    }
}

/// The policy's patterns, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedNames {
    /// Each pattern with its text as written.
    pub patterns: Vec<(String, NamePattern)>,
}

impl ProtectedNames {
    /// Parses every entry; Err: the index of the first bad one and why.
    pub fn parse(entries: &[String]) -> Result<ProtectedNames, (usize, String)> {
        if entries.len() > NamePattern::MAX {
            return Err((
                NamePattern::MAX,
                format!(
                    "{} patterns; at most {} (the kernel compares each name with every pattern)",
                    entries.len(),
                    NamePattern::MAX
                ),
            ));
        }
        let mut patterns = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            patterns.push((e.clone(), NamePattern::parse(e).map_err(|m| (i, m))?));
        }
        Ok(ProtectedNames { patterns })
    }

    /// The first pattern a file name matches, as written.
    pub fn matching(&self, name: &OsStr) -> Option<&str> {
        self.patterns
            .iter()
            .find(|(_, p)| p.matches(name.as_bytes()))
            .map(|(s, _)| s.as_str())
    }

    /// Whether no pattern is listed.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, name: &str) -> bool {
        NamePattern::parse(pattern)
            .unwrap()
            .matches(name.as_bytes())
    }

    #[test]
    fn exact_prefix_suffix_and_both() {
        assert!(m(".env", ".env"));
        assert!(!m(".env", ".env.local"));
        assert!(!m(".env", "x.env"));
        assert!(m(".env.*", ".env.local"));
        assert!(m(".env.*", ".env."));
        assert!(!m(".env.*", ".env"));
        assert!(m("*.pem", "server.pem"));
        assert!(m("*.pem", ".pem"));
        assert!(!m("*.pem", "server.pem.txt"));
        assert!(m("id_*", "id_ed25519"));
        assert!(!m("id_*", "valid_id"));
        assert!(m("credentials*", "credentials"));
        assert!(m("a*a", "aa"));
        assert!(!m("a*a", "a"), "the prefix and suffix may not overlap");
    }

    #[test]
    fn bad_patterns_are_refused_with_the_reason() {
        for (bad, says) in [
            ("", "every name"),
            ("*", "every name"),
            ("a/b", "no `/`"),
            ("..", "not a file name"),
            ("*secret*", "more than one"),
            ("id_?", "not supported"),
            ("[ab].pem", "not supported"),
        ] {
            let e = NamePattern::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!("{}*", "x".repeat(33));
        assert!(NamePattern::parse(&long).unwrap_err().contains("32 bytes"));
        let many: Vec<String> = (0..17).map(|i| format!("n{i}")).collect();
        assert_eq!(ProtectedNames::parse(&many).unwrap_err().0, 16);
    }

    #[test]
    fn matching_names_the_pattern_as_written() {
        let p = ProtectedNames::parse(&[".env".into(), "*.pem".into()]).unwrap();
        assert_eq!(p.matching(OsStr::new("key.pem")), Some("*.pem"));
        assert_eq!(p.matching(OsStr::new("notes.txt")), None);
    }
}
