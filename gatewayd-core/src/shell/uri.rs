//! Arguments written as URIs (`scheme://…`): which words are URIs, and the local path a
//! `file://` URI names. Shared by the shell analysis (a command that takes paths is refused a
//! URI; one that takes URIs has its `file://` URIs checked as paths) and by the sandbox (a
//! tool's `path` argument may be a `file://` URI).
use std::path::PathBuf;

/// A word that is a URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Uri {
    /// A `file://` URI naming a local file: its path, percent-decoded (always absolute).
    File(PathBuf),
    /// A URI of another scheme (`https`, `ssh`, …), named here.
    Other(String),
}

/// Why a `file://` URI names no local path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UriError {
    /// `file://host/…` with a host other than `localhost`.
    #[error("`{uri}` names a file on host `{host}`; only local files (`file:///path`) are allowed")]
    RemoteHost {
        /// The URI as written.
        uri: String,
        /// Its host.
        host: String,
    },
    /// A `file://` URI that cannot be read as one path.
    #[error("`{uri}` is not a file URI the gateway can read: {why}")]
    Malformed {
        /// The URI as written.
        uri: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The scheme of `word` when it starts with `scheme://` (RFC 3986: a letter, then letters,
/// digits, `+`, `-` or `.`); `None` for anything else, such as `a/b://c` or `file:/x`.
pub(crate) fn scheme(word: &str) -> Option<&str> {
    let (scheme, _) = word.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first.is_ascii_alphabetic() && rest_ok).then_some(scheme)
}

/// `word` read as a URI: `Ok(None)` when it is not one. A `file://` URI must name a local
/// file (no host, or `localhost`), have no query or fragment, and decode (`%XX`) to a path
/// without NUL bytes that is valid UTF-8.
pub(crate) fn parse(word: &str) -> Result<Option<Uri>, UriError> {
    let Some(scheme) = scheme(word) else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return Ok(Some(Uri::Other(scheme.to_owned())));
    }
    let malformed = |why| UriError::Malformed {
        uri: word.to_owned(),
        why,
    };
    let rest = &word[scheme.len() + 3..];
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err(UriError::RemoteHost {
            uri: word.to_owned(),
            host: host.to_owned(),
        });
    }
    if path.is_empty() {
        return Err(malformed("it has no path"));
    }
    if path.contains(['?', '#']) {
        return Err(malformed(
            "a query or fragment (`?`, `#`) has no meaning for a file",
        ));
    }
    let decoded = percent_decode(path).ok_or_else(|| malformed("a `%` escape is not `%XX`"))?;
    if decoded.contains(&0) {
        return Err(malformed("it decodes to a NUL byte"));
    }
    let text = String::from_utf8(decoded).map_err(|_| malformed("it decodes to invalid UTF-8"))?;
    Ok(Some(Uri::File(PathBuf::from(text))))
}

/// Decodes `%XX` escapes (only those: `+` is itself in a path); `None` on a bad escape.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(text, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(word: &str) -> PathBuf {
        match parse(word) {
            Ok(Some(Uri::File(p))) => p,
            other => panic!("{word}: {other:?}"),
        }
    }

    #[test]
    fn file_uris_name_local_paths() {
        assert_eq!(file("file:///etc/passwd"), PathBuf::from("/etc/passwd"));
        assert_eq!(file("FILE://localhost/a%20b"), PathBuf::from("/a b"));
        assert_eq!(
            file("file://LocalHost/%2e%2e/x+y"),
            PathBuf::from("/../x+y")
        );
        assert_eq!(file("file:////srv//x"), PathBuf::from("//srv//x"));
    }

    #[test]
    fn other_words() {
        assert_eq!(parse("notes.txt"), Ok(None));
        assert_eq!(
            parse("file:/etc/passwd"),
            Ok(None),
            "no `//`: a relative path"
        );
        assert_eq!(parse("a/b://c"), Ok(None), "not a scheme");
        assert_eq!(parse("1x://c"), Ok(None), "a scheme starts with a letter");
        assert_eq!(parse("://x"), Ok(None));
        assert_eq!(
            parse("https://example.com/x"),
            Ok(Some(Uri::Other("https".into())))
        );
        assert_eq!(
            parse("git+ssh://h/r"),
            Ok(Some(Uri::Other("git+ssh".into())))
        );
    }

    #[test]
    fn bad_file_uris() {
        assert!(matches!(
            parse("file://evil.example/etc/passwd"),
            Err(UriError::RemoteHost { host, .. }) if host == "evil.example"
        ));
        assert!(matches!(
            parse("file://user@localhost/x"),
            Err(UriError::RemoteHost { .. })
        ));
        for bad in [
            "file://",
            "file://localhost",
            "file:///a%2",
            "file:///a%zz",
            "file:///a%00b",
            "file:///a%ff",
            "file:///a?b",
            "file:///a#b",
        ] {
            assert!(
                matches!(parse(bad), Err(UriError::Malformed { .. })),
                "{bad}: {:?}",
                parse(bad)
            );
        }
    }
}
