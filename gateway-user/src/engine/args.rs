//! Arguments: a JSON Schema subset, per-argument rules, and rule conditions.
use regex::Regex;
use serde_json::Value;

use crate::policy::{ArgRule, Cond, glob_match_str};

/// Checks `v` against the supported subset of JSON Schema: `type`, `properties`, `required`,
/// `additionalProperties` (boolean), `items`, `enum`, `const`, `minimum`, `maximum`,
/// `minLength`, `maxLength`, `maxItems`. Other keywords are annotations and ignored.
pub fn schema_check(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(x) => vec![x.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !types.iter().any(|t| type_ok(t, v)) {
            return Err(format!("`{at}` must be of type {}", types.join(" or ")));
        }
    }
    if let Some(Value::Array(e)) = s
        .get("enum")
        .filter(|e| !e.as_array().is_some_and(|e| e.contains(v)))
    {
        return Err(format!("`{at}` must be one of {}", Value::Array(e.clone())));
    }
    if let Some(c) = s.get("const").filter(|c| *c != v) {
        return Err(format!("`{at}` must be {c}"));
    }
    if let Some(n) = v.as_f64() {
        if s.get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            return Err(format!("`{at}` is below the schema minimum"));
        }
        if s.get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            return Err(format!("`{at}` is above the schema maximum"));
        }
    }
    if let Some(st) = v.as_str() {
        let n = st.chars().count() as u64;
        if s.get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
        {
            return Err(format!("`{at}` is longer than the schema allows"));
        }
        if s.get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
        {
            return Err(format!("`{at}` is shorter than the schema allows"));
        }
    }
    if let Some(a) = v.as_array() {
        if s.get("maxItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| a.len() as u64 > m)
        {
            return Err(format!("`{at}` has more items than the schema allows"));
        }
        if let Some(items) = s.get("items") {
            for (i, x) in a.iter().enumerate() {
                schema_check(items, x, &format!("{at}[{i}]"))?;
            }
        }
    }
    if let Some(o) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(req)) = s.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !o.contains_key(r) {
                    return Err(format!("`{at}.{r}` is required"));
                }
            }
        }
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => schema_check(ps, x, &format!("{at}.{k}"))?,
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("`{at}.{k}` is not an argument of this tool"));
                }
                None => {}
            }
        }
    }
    Ok(())
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// An argument rule with its regexes compiled.
#[derive(Debug)]
pub struct CArg {
    pub rule: ArgRule,
    regex: Option<Regex>,
    forbid: Vec<Regex>,
}

impl CArg {
    pub fn new(rule: &ArgRule) -> Result<CArg, String> {
        let c = |r: &String| Regex::new(r).map_err(|e| e.to_string());
        Ok(CArg {
            regex: rule.regex.as_ref().map(c).transpose()?,
            forbid: rule.forbid.iter().map(c).collect::<Result<_, _>>()?,
            rule: rule.clone(),
        })
    }

    /// The value-level constraints (prefix, glob, regex, forbid, enum, min, max, max_len).
    /// `v` is one scalar: a string (for paths, the canonical path) or a number.
    pub fn check_scalar(&self, name: &str, v: &Value) -> Result<(), String> {
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
pub struct CCond {
    cond: Cond,
    regex: Option<Regex>,
}

impl CCond {
    pub fn new(c: &Cond) -> Result<CCond, String> {
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
    pub fn matches(&self, v: Option<&Value>, all: bool) -> bool {
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

    #[test]
    fn schema_subset() {
        let s = json!({"type": "object", "required": ["to"], "additionalProperties": false,
            "properties": {"to": {"type": "string"}, "n": {"type": "integer", "maximum": 5},
                           "tags": {"type": "array", "items": {"type": "string"}}}});
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
