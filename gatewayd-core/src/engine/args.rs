//! Arguments: the tool's input schema, per-argument rules, and rule conditions.
use regex::Regex;
use serde_json::Value;

use crate::policy::{ArgRule, Cond, ToolDef, glob_match_str};

/// Longest schema-failure text put into a message for the model.
const MAX_SCHEMA_MESSAGE: usize = 200;

/// Checks the call's arguments `v` (named `at` in messages) against `tool`'s input schema,
/// compiled when the policy loaded (`crate::policy::schema`: every keyword of the schema's
/// draft holds). The message names the failing keyword and where in the arguments it failed,
/// and does not repeat the argument's value.
pub(crate) fn schema_check(tool: &ToolDef, v: &Value, at: &str) -> Result<(), String> {
    let schema = tool.arg_schema().map_err(|e| {
        format!(
            "the input schema of tool `{}` does not compile ({e}); every call is refused",
            tool.name
        )
    })?;
    let Err(e) = schema.validator().validate(v) else {
        return Ok(());
    };
    let mut what = e.masked_with("the value").to_string();
    if what.chars().count() > MAX_SCHEMA_MESSAGE {
        what = what.chars().take(MAX_SCHEMA_MESSAGE).collect::<String>() + "…";
    }
    Err(format!(
        "`{}`: {what} (input schema keyword `{}` at {})",
        readable_path(at, v, e.instance_path().as_str()),
        e.kind().keyword(),
        e.schema_path().as_str()
    ))
}

/// A JSON Pointer into `v` written as `at.key[3].key`.
fn readable_path(at: &str, v: &Value, pointer: &str) -> String {
    let mut out = at.to_owned();
    let mut here = Some(v);
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if let Some(Value::Array(a)) = here {
            let i = seg.parse::<usize>().ok();
            here = i.and_then(|i| a.get(i));
            out.push_str(&format!("[{seg}]"));
        } else {
            here = here.and_then(|h| h.get(&seg));
            out.push('.');
            out.push_str(&seg);
        }
    }
    out
}

/// An argument rule with its regexes compiled.
#[derive(Debug)]
pub(crate) struct CArg {
    /// The rule as written in the policy.
    pub rule: ArgRule,
    regex: Option<Regex>,
    forbid: Vec<Regex>,
}

impl CArg {
    /// Compiles `rule`'s `regex` and `forbid` patterns; errs with the regex error's text.
    pub(crate) fn new(rule: &ArgRule) -> Result<CArg, String> {
        let c = |r: &String| Regex::new(r).map_err(|e| e.to_string());
        Ok(CArg {
            regex: rule.regex.as_ref().map(c).transpose()?,
            forbid: rule.forbid.iter().map(c).collect::<Result<_, _>>()?,
            rule: rule.clone(),
        })
    }

    /// The value-level constraints (prefix, glob, regex, forbid, enum, min, max, `max_len`).
    /// `v` is one scalar: a string (for paths, the canonical path) or a number.
    pub(crate) fn check_scalar(&self, name: &str, v: &Value) -> Result<(), String> {
        let r = &self.rule;
        if let Some(e) = r.one_of.as_ref().filter(|e| !e.contains(v)) {
            return Err(format!(
                "`{name}` must be one of {}",
                Value::Array(e.clone())
            ));
        }
        if r.min.is_some() || r.max.is_some() {
            let n = v
                .as_f64()
                .ok_or_else(|| format!("`{name}` must be a number"))?;
            if r.min.is_some_and(|m| n < m) || r.max.is_some_and(|m| n > m) {
                return Err(format!(
                    "`{name}` = {n} is outside the allowed range {}..={}",
                    r.min.map(|m| m.to_string()).unwrap_or_default(),
                    r.max.map(|m| m.to_string()).unwrap_or_default()
                ));
            }
        }
        let needs_str = r.prefix.is_some()
            || r.glob.is_some()
            || self.regex.is_some()
            || !self.forbid.is_empty()
            || r.max_len.is_some();
        if !needs_str {
            return Ok(());
        }
        let s = v
            .as_str()
            .ok_or_else(|| format!("`{name}` must be a string"))?;
        if r.max_len.is_some_and(|m| s.chars().count() > m) {
            return Err(format!(
                "`{name}` is longer than {} characters",
                r.max_len.unwrap_or(0)
            ));
        }
        if let Some(p) = &r.prefix {
            let ok = if r.path.is_some() {
                std::path::Path::new(s).starts_with(p)
            } else {
                s.starts_with(p.as_str())
            };
            if !ok {
                return Err(format!("`{name}` must start with `{p}`"));
            }
        }
        if let Some(g) = r.glob.as_ref().filter(|g| !glob_match_str(g, s)) {
            return Err(format!("`{name}` must match `{g}`"));
        }
        if let Some(re) = self.regex.as_ref().filter(|re| !re.is_match(s)) {
            return Err(format!("`{name}` must match /{}/", re.as_str()));
        }
        if let Some(re) = self.forbid.iter().find(|re| re.is_match(s)) {
            return Err(format!(
                "`{name}` matches the forbidden pattern /{}/",
                re.as_str()
            ));
        }
        Ok(())
    }
}

/// A rule condition with its regex compiled.
#[derive(Debug)]
pub(crate) struct CCond {
    cond: Cond,
    regex: Option<Regex>,
}

impl CCond {
    /// Compiles `c`'s `regex`; errs with the regex error's text.
    pub(crate) fn new(c: &Cond) -> Result<CCond, String> {
        Ok(CCond {
            regex: c
                .regex
                .as_ref()
                .map(|r| Regex::new(r).map_err(|e| e.to_string()))
                .transpose()?,
            cond: c.clone(),
        })
    }

    /// Whether the argument value `v` (None = absent) meets the condition. An array meets it
    /// when every element does (`all`, for allow rules) or any element does (hold and deny
    /// rules): either way the more restrictive reading.
    pub(crate) fn matches(&self, v: Option<&Value>, all: bool) -> bool {
        let c = &self.cond;
        let Some(v) = v else {
            return c.present == Some(false);
        };
        if c.present == Some(false) {
            return false;
        }
        if c.equals.as_ref().is_some_and(|e| e == v)
            || c.one_of.as_ref().is_some_and(|e| e.contains(v))
        {
            return self.scalar(v);
        }
        match v {
            Value::Array(a) if !a.is_empty() => {
                if all {
                    a.iter().all(|x| self.scalar(x))
                } else {
                    a.iter().any(|x| self.scalar(x))
                }
            }
            _ => self.scalar(v),
        }
    }

    fn scalar(&self, v: &Value) -> bool {
        let c = &self.cond;
        if c.equals.as_ref().is_some_and(|e| e != v) {
            return false;
        }
        if c.one_of.as_ref().is_some_and(|e| !e.contains(v)) {
            return false;
        }
        let numeric = c.gt.is_some() || c.gte.is_some() || c.lt.is_some() || c.lte.is_some();
        if numeric {
            // A number given as a string still counts as that number.
            let n = v
                .as_f64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok()));
            let Some(n) = n.filter(|n| n.is_finite()) else {
                return false;
            };
            if c.gt.is_some_and(|m| n <= m)
                || c.gte.is_some_and(|m| n < m)
                || c.lt.is_some_and(|m| n >= m)
                || c.lte.is_some_and(|m| n > m)
            {
                return false;
            }
        }
        let textual = c.prefix.is_some() || c.glob.is_some() || self.regex.is_some();
        if textual {
            let Some(s) = v.as_str() else {
                return false;
            };
            if c.prefix
                .as_ref()
                .is_some_and(|p| !s.starts_with(p.as_str()))
                || c.glob.as_ref().is_some_and(|g| !glob_match_str(g, s))
                || self.regex.as_ref().is_some_and(|r| !r.is_match(s))
            {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> ToolDef {
        serde_json::from_value(json!({"name": "t", "input_schema": schema})).unwrap()
    }

    #[test]
    fn schema_subset() {
        let s = tool(
            json!({"type": "object", "required": ["to"], "additionalProperties": false,
            "properties": {"to": {"type": "string"}, "n": {"type": "integer", "maximum": 5},
                           "tags": {"type": "array", "items": {"type": "string"}}}}),
        );
        assert!(schema_check(&s, &json!({"to": "a", "n": 3, "tags": ["x"]}), "args").is_ok());
        for bad in [
            json!({"n": 1}),
            json!({"to": 1}),
            json!({"to": "a", "n": 1.5}),
            json!({"to": "a", "n": 6}),
            json!({"to": "a", "extra": 1}),
            json!({"to": "a", "tags": [1]}),
            json!("x"),
        ] {
            assert!(schema_check(&s, &bad, "args").is_err(), "{bad}");
        }
    }

    #[test]
    fn schema_messages_name_keyword_and_place_not_the_value() {
        let s = tool(json!({"properties": {"list": {"type": "array",
            "items": {"type": "object", "properties": {"a/b": {"pattern": "^ok$"}}}}}}));
        let secret = "hunter2-do-not-echo";
        let m = schema_check(&s, &json!({"list": [{}, {"a/b": secret}]}), "arguments").unwrap_err();
        assert!(m.starts_with("`arguments.list[1].a/b`: "), "{m}");
        assert!(m.contains("keyword `pattern`"), "{m}");
        assert!(
            m.contains("/properties/list/items/properties/a~1b/pattern"),
            "{m}"
        );
        assert!(!m.contains(secret), "{m}");
        // a long schema-side text is cut
        let long: Vec<String> = (0..200).map(|i| format!("value-{i}")).collect();
        let s = tool(json!({"properties": {"x": {"enum": long}}}));
        let m = schema_check(&s, &json!({"x": "nope"}), "arguments").unwrap_err();
        assert!(m.chars().count() < MAX_SCHEMA_MESSAGE + 120, "{m}");
    }

    #[test]
    fn a_schema_that_does_not_compile_refuses_every_call() {
        // Policy::parse refuses such a tool; a ToolDef that skipped it still fails closed.
        let s = tool(json!({"properties": {"x": {"$ref": "https://schemas.example.test/x"}}}));
        let m = schema_check(&s, &json!({}), "arguments").unwrap_err();
        assert!(m.contains("does not compile"), "{m}");
    }

    #[test]
    fn arg_bounds_are_exact() {
        let a = CArg::new(&ArgRule {
            max: Some(100.0),
            ..Default::default()
        })
        .unwrap();
        assert!(a.check_scalar("amount", &json!(100)).is_ok());
        assert!(a.check_scalar("amount", &json!(100.0)).is_ok());
        assert!(a.check_scalar("amount", &json!(100.01)).is_err());
        assert!(a.check_scalar("amount", &json!("50")).is_err());
    }

    #[test]
    fn conds() {
        let c = CCond::new(&Cond {
            glob: Some("*@corp.test".into()),
            ..Default::default()
        })
        .unwrap();
        let v = json!(["a@corp.test", "b@evil.test"]);
        assert!(!c.matches(Some(&v), true));
        assert!(c.matches(Some(&v), false));
        assert!(!c.matches(None, false));
        let n = CCond::new(&Cond {
            gt: Some(100.0),
            ..Default::default()
        })
        .unwrap();
        assert!(n.matches(Some(&json!(100.01)), false));
        assert!(n.matches(Some(&json!("150")), false));
        assert!(!n.matches(Some(&json!(100)), false));
    }
}
