//! Why a policy could not be used: [`PolicyError`] for the file as a whole, and the
//! structured [`ValidationError`] of the semantic checks, whose [`JsonPath`] the line and
//! column locator ([`super::spans::locate`]) follows without re-reading any message.
use std::{fmt, path::PathBuf};

use super::schema::SchemaError;

/// One step of a [`JsonPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// An object member.
    Key(String),
    /// An array element.
    Index(usize),
    /// An array element shown with its name, as in `tools[3] (read_file)`.
    Named(usize, String),
}

/// Where in the policy document a value is: `network.egress[0].cidr`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonPath(Vec<Seg>);

impl JsonPath {
    /// The document itself.
    pub fn root() -> JsonPath {
        JsonPath::default()
    }

    /// This path extended by `seg`.
    #[must_use]
    pub fn with(&self, seg: Seg) -> JsonPath {
        let mut p = self.clone();
        p.0.push(seg);
        p
    }

    /// This path extended by an object member.
    #[must_use]
    pub fn key(&self, key: impl Into<String>) -> JsonPath {
        self.with(Seg::Key(key.into()))
    }

    /// This path extended by an array element.
    #[must_use]
    pub fn index(&self, i: usize) -> JsonPath {
        self.with(Seg::Index(i))
    }

    /// This path extended by an array element shown with its name.
    #[must_use]
    pub fn named(&self, i: usize, name: impl Into<String>) -> JsonPath {
        self.with(Seg::Named(i, name.into()))
    }

    /// This path extended by the segments of a JSON Pointer (`/properties/a~1b/0`), taken as
    /// keys: the locator also reads a numeric key as an array index.
    #[must_use]
    pub fn pointer(&self, pointer: &str) -> JsonPath {
        let mut p = self.clone();
        for s in pointer.split('/').skip(1) {
            p.0.push(Seg::Key(s.replace("~1", "/").replace("~0", "~")));
        }
        p
    }

    /// The steps from the document root, outermost first.
    pub fn segments(&self) -> &[Seg] {
        &self.0
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, s) in self.0.iter().enumerate() {
            match s {
                Seg::Key(k) if i == 0 => f.write_str(k)?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
                Seg::Named(n, name) => write!(f, "[{n}] ({name})")?,
            }
        }
        Ok(())
    }
}

/// A semantic check of [`super::Policy`] failed: what serde cannot express.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// A value the policy does not allow.
    #[error("{at}: {message}")]
    Value {
        /// Where the value is.
        at: JsonPath,
        /// What is wrong with it.
        message: String,
    },
    /// A regex (argument rule, rule condition) does not compile.
    #[error("{at}: bad regex: {source}")]
    Regex {
        /// Where the regex is.
        at: JsonPath,
        /// The compile error.
        #[source]
        source: regex::Error,
    },
    /// A tool's input schema does not compile; `at` names the failing part of the schema.
    #[error("{at}: {source}")]
    InputSchema {
        /// Where in the policy the failing part of the schema is.
        at: JsonPath,
        /// The compile error.
        #[source]
        source: SchemaError,
    },
}

impl ValidationError {
    pub(crate) fn value(at: JsonPath, message: impl Into<String>) -> ValidationError {
        ValidationError::Value {
            at,
            message: message.into(),
        }
    }

    /// Where the offending value is.
    pub fn path(&self) -> &JsonPath {
        match self {
            ValidationError::Value { at, .. }
            | ValidationError::Regex { at, .. }
            | ValidationError::InputSchema { at, .. } => at,
        }
    }
}

/// Why a policy could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("cannot read policy {path}: {source}")]
    Read {
        /// The policy file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON or does not have the policy's shape.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The policy file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// Parsed, but a semantic check failed; `line:column` is where [`ValidationError::path`]
    /// points in the file.
    #[error("{path}:{line}:{column}: {source}")]
    Invalid {
        /// The policy file.
        path: PathBuf,
        /// 1-based line of the offending value.
        line: usize,
        /// 1-based column of the offending value.
        column: usize,
        /// The failed check.
        source: ValidationError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_like_the_document() {
        let p = JsonPath::root()
            .key("tools")
            .named(3, "read_file")
            .key("args")
            .key("path");
        assert_eq!(p.to_string(), "tools[3] (read_file).args.path");
        assert_eq!(
            JsonPath::root()
                .key("network")
                .key("egress")
                .index(0)
                .to_string(),
            "network.egress[0]"
        );
        assert_eq!(JsonPath::root().to_string(), "(top level)");
        assert_eq!(
            JsonPath::root().pointer("/a~1b/~0c/0").segments(),
            &[
                Seg::Key("a/b".into()),
                Seg::Key("~c".into()),
                Seg::Key("0".into())
            ]
        );
    }
}
