//! The semantic checks of a parsed policy: what serde cannot express. Each failure is a
//! [`ValidationError`] naming the offending value by its [`JsonPath`].
use super::{JsonPath, Policy, SecretSource, ValidationError, tools::MIN_SECRET_LEN};

impl Policy {
    /// Semantic checks serde cannot express; compiles every tool's input schema.
    pub(super) fn validate(&self) -> Result<(), ValidationError> {
        let root = JsonPath::root();
        if self.version != 1 {
            return Err(ValidationError::value(
                root.key("version"),
                format!(
                    "unsupported policy version {} (only 1 exists)",
                    self.version
                ),
            ));
        }
        for (i, e) in self.network.egress.iter().enumerate() {
            let at = root.key("network").key("egress").index(i);
            match (&e.cidr, &e.host) {
                (None, None) => {
                    return Err(ValidationError::value(at, "needs `cidr` or `host`"));
                }
                (Some(c), _) => {
                    crate::net::Cidr::parse(c)
                        .map_err(|m| ValidationError::value(at.key("cidr"), m))?;
                }
                _ => {}
            }
        }
        for (i, e) in self.network.unix.iter().enumerate() {
            super::UnixEntry::parse(e)
                .map_err(|m| ValidationError::value(root.key("network").key("unix").index(i), m))?;
        }
        for (field, paths) in [
            ("readable", &self.sandbox.readable),
            ("writable", &self.sandbox.writable),
            ("protected", &self.sandbox.protected),
            ("read_only", &self.sandbox.read_only),
            ("exec", &self.sandbox.exec),
            (
                "exec_libs",
                self.sandbox.exec_libs.as_ref().unwrap_or(&Vec::new()),
            ),
        ] {
            for (i, p) in paths.iter().enumerate() {
                if !p.is_absolute() {
                    return Err(ValidationError::value(
                        root.key("sandbox").key(field).index(i),
                        format!("`{}` is not an absolute path", p.display()),
                    ));
                }
            }
        }
        super::protected_names::ProtectedNames::parse(&self.sandbox.protected_names).map_err(
            |(i, m)| ValidationError::value(root.key("sandbox").key("protected_names").index(i), m),
        )?;
        if !self.sandbox.protected_names.is_empty()
            && self.sandbox.root.is_none()
            && self.sandbox.writable.is_empty()
        {
            return Err(ValidationError::value(
                root.key("sandbox").key("protected_names"),
                "protected names apply under sandbox.root and the sandbox.writable roots, and neither is set: nothing would be protected",
            ));
        }
        for (i, d) in self.sandbox.devices.iter().enumerate() {
            device(d).map_err(|m| {
                ValidationError::value(root.key("sandbox").key("devices").index(i), m)
            })?;
        }
        super::inspect::validate(self)?;
        super::canary::validate(self)?;
        super::agent::validate(&self.agent)?;
        super::mcp::validate(self)?;
        gateway(self)
    }
}

/// A `sandbox.devices` entry: an absolute path to an existing character device that lies
/// under `/dev` (after symbolic links: it is bound at that place in the agent's `/dev`).
fn device(d: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt as _;
    let shown = d.display();
    if !d.is_absolute() {
        return Err(format!("`{shown}` is not an absolute path"));
    }
    let meta = std::fs::metadata(d).map_err(|e| format!("device `{shown}`: {e}"))?;
    if !meta.file_type().is_char_device() {
        return Err(format!(
            "`{shown}` is not a character device (only character devices can be given to the agent)"
        ));
    }
    let real = std::fs::canonicalize(d).map_err(|e| format!("device `{shown}`: {e}"))?;
    if !real.starts_with("/dev") || real == std::path::Path::new("/dev") {
        return Err(format!(
            "`{shown}` lies outside /dev (at {}): the agent's /dev holds devices from the host's /dev only",
            real.display()
        ));
    }
    Ok(())
}

fn check_regex(at: &JsonPath, re: &str) -> Result<(), ValidationError> {
    regex::Regex::new(re)
        .map(|_| ())
        .map_err(|source| ValidationError::Regex {
            at: at.clone(),
            source,
        })
}

fn check_source(at: JsonPath, s: &SecretSource) -> Result<(), ValidationError> {
    let n = [s.env.is_some(), s.file.is_some(), s.value.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if n != 1 {
        return Err(ValidationError::value(
            at,
            "needs exactly one of `env`, `file`, `value`",
        ));
    }
    if s.value
        .as_ref()
        .is_some_and(|v| v.chars().count() < MIN_SECRET_LEN)
    {
        return Err(ValidationError::value(
            at.key("value"),
            format!("value shorter than {MIN_SECRET_LEN} characters"),
        ));
    }
    Ok(())
}

/// The gateway-layer checks of [`Policy::validate`]; compiles every input schema.
fn gateway(p: &Policy) -> Result<(), ValidationError> {
    let root = JsonPath::root();
    let mut names = std::collections::BTreeSet::new();
    for (i, t) in p.tools.iter().enumerate() {
        let at = root.key("tools").named(i, &t.name);
        if t.name.is_empty() || !names.insert(t.name.as_str()) {
            return Err(ValidationError::value(
                at.key("name"),
                "empty or duplicate tool name",
            ));
        }
        tool(p, &at, t)?;
    }
    let mut ids = std::collections::BTreeSet::new();
    for (i, r) in p.rules.iter().enumerate() {
        let at = root.key("rules").named(i, &r.id);
        if r.id.is_empty() || !ids.insert(r.id.as_str()) {
            return Err(ValidationError::value(
                at.key("id"),
                "empty or duplicate rule id",
            ));
        }
        for (arg, c) in &r.when {
            if let Some(re) = &c.regex {
                check_regex(&at.key("when").key(arg).key("regex"), re)?;
            }
        }
    }
    for (i, r) in p.limits.rate.iter().enumerate() {
        if r.max == 0 || r.window_s == 0 {
            return Err(ValidationError::value(
                root.key("limits").key("rate").index(i),
                "`max` and `window_s` must be > 0",
            ));
        }
    }
    if p.untrusted_echo_words == Some(0) || p.untrusted_echo_words.is_some_and(|n| n > 64) {
        return Err(ValidationError::value(
            root.key("untrusted_echo_words"),
            "must be 1..=64",
        ));
    }
    if p.approval_ttl_s == Some(0) {
        return Err(ValidationError::value(
            root.key("approval_ttl_s"),
            "must be > 0",
        ));
    }
    for (kind, map) in [("secrets", &p.secrets), ("credentials", &p.credentials)] {
        for (name, s) in map {
            check_source(root.key(kind).key(name), s)?;
        }
    }
    Ok(())
}

/// One tool's entry: its schema compiles, its fingerprint is well formed, its credentials
/// exist, its argument rules make sense.
fn tool(p: &Policy, at: &JsonPath, t: &super::ToolDef) -> Result<(), ValidationError> {
    if t.input_schema.as_ref().is_some_and(|s| !s.is_object()) {
        return Err(ValidationError::value(
            at.key("input_schema"),
            "must be an object",
        ));
    }
    t.arg_schema().map_err(|e| ValidationError::InputSchema {
        at: at.key("input_schema").pointer(&e.pointer),
        source: e.clone(),
    })?;
    if let Some(f) = &t.fingerprint {
        let hex = f.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ValidationError::value(
                at.key("fingerprint"),
                "expected `sha256:` and 64 hex digits",
            ));
        }
    }
    for (j, c) in t.credentials.iter().enumerate() {
        if !p.credentials.contains_key(c) {
            return Err(ValidationError::value(
                at.key("credentials").index(j),
                format!("`{c}` is not in `credentials`"),
            ));
        }
    }
    for (arg, r) in &t.args {
        let at = at.key("args").key(arg);
        if let Some(re) = &r.regex {
            check_regex(&at.key("regex"), re)?;
        }
        for (j, re) in r.forbid.iter().enumerate() {
            check_regex(&at.key("forbid").index(j), re)?;
        }
        if matches!((r.min, r.max), (Some(lo), Some(hi)) if lo > hi) {
            return Err(ValidationError::value(at, "min > max"));
        }
        let kinds = [r.path.is_some(), r.url, r.shell.is_some()];
        if kinds.iter().filter(|b| **b).count() > 1 {
            return Err(ValidationError::value(
                at,
                "at most one of `path`, `url`, `shell`",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_must_be_character_devices_under_dev() {
        let bad = |dev: &str, needle: &str| {
            let text = format!(r#"{{"version": 1, "sandbox": {{"devices": ["{dev}"]}}}}"#);
            let e = Policy::parse(&text, std::path::Path::new("p.json"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("sandbox.devices[0]"), "{dev}: {e}");
            assert!(e.contains(needle), "{dev}: {e}");
        };
        bad("dev/null", "not an absolute path");
        bad("/dev/no-such-device-gw", "No such file or directory");
        bad("/dev", "not a character device");
        bad("/proc/version", "not a character device");
        let ok = r#"{"version": 1, "sandbox": {"devices": ["/dev/null", "/dev/zero"]}}"#;
        let p = Policy::parse(ok, std::path::Path::new("p.json")).unwrap();
        assert_eq!(p.sandbox.devices.len(), 2);
    }

    #[test]
    fn gateway_fields_are_validated() {
        let bad = |extra: &str, needle: &str| {
            let text = format!(r#"{{"version": 1, {extra}}}"#);
            let e = Policy::parse(&text, std::path::Path::new("p.json"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{extra}: {e}");
        };
        bad(
            r#""tools": [{"name": "a"}, {"name": "a"}]"#,
            "duplicate tool name",
        );
        bad(
            r#""tools": [{"name": "a", "args": {"x": {"regex": "("}}}]"#,
            "bad regex",
        );
        bad(
            r#""tools": [{"name": "a", "credentials": ["nope"]}]"#,
            "is not in `credentials`",
        );
        bad(
            r#""tools": [{"name": "a", "args": {"x": {"min": 5, "max": 1}}}]"#,
            "min > max",
        );
        bad(
            r#""tools": [{"name": "a", "args": {"x": {"path": "read", "url": true}}}]"#,
            "at most one",
        );
        bad(
            r#""tools": [{"name": "a", "fingerprint": "md5:00"}]"#,
            "fingerprint",
        );
        bad(r#""tools": [{"name": "a", "lables": []}]"#, "unknown field");
        bad(
            r#""rules": [{"id": "r", "tool": "*", "decision": "maybe"}]"#,
            "unknown variant",
        );
        bad(
            r#""rules": [{"id": "r", "tool": "*", "decision": "deny"}, {"id": "r", "tool": "x", "decision": "deny"}]"#,
            "duplicate rule id",
        );
        bad(
            r#""limits": {"rate": [{"tool": "*", "max": 0, "window_s": 1}]}"#,
            "limits.rate[0]",
        );
        bad(r#""untrusted_echo_words": 0"#, "untrusted_echo_words");
        bad(r#""secrets": {"k": {"value": "short"}}"#, "shorter than 8");
        bad(
            r#""secrets": {"k": {"env": "A", "value": "longenough"}}"#,
            "exactly one",
        );
    }

    fn invalid(text: &str) -> (usize, usize, ValidationError) {
        match Policy::parse(text, std::path::Path::new("p.json")).unwrap_err() {
            super::super::PolicyError::Invalid {
                line,
                column,
                source,
                ..
            } => (line, column, source),
            other => panic!("not a validation error: {other}"),
        }
    }

    #[test]
    fn errors_carry_the_path_the_locator_follows() {
        let (line, column, e) = invalid("{\n  \"version\": 2\n}");
        assert_eq!((line, column), (2, 14), "{e}");
        assert_eq!(e.path(), &JsonPath::root().key("version"));
        // A key with a dot is one segment: the path is structured, not a string to re-split.
        let (line, column, e) =
            invalid("{\"version\": 1,\n \"secrets\": {\"a.b\": {\"value\": \"short\"}}}");
        assert_eq!((line, column), (2, 31), "{e}");
        assert_eq!(
            e.path(),
            &JsonPath::root().key("secrets").key("a.b").key("value")
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_points_at_its_keyword() {
        let text = "{\"version\": 1, \"tools\": [\n  {\"name\": \"t\", \"input_schema\": {\"properties\": {\n    \"n\": {\"type\": \"string\", \"pattern\": \"(?<=a)b\"}}}}]}";
        let (line, column, e) = invalid(text);
        assert_eq!((line, column), (3, 40), "{e}");
        let s = e.to_string();
        assert!(
            s.starts_with("tools[0] (t).input_schema.properties.n.pattern: "),
            "{s}"
        );
        assert!(matches!(e, ValidationError::InputSchema { .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
    }
}
