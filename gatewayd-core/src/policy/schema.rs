//! Tool input schemas, compiled once by the `jsonschema` crate when the policy loads; the
//! engine checks every call's arguments against the compiled form
//! ([`crate::engine::args::schema_check`]).
//!
//! - **Every keyword** of the schema's draft is enforced. The draft comes from `$schema`
//!   (draft 4, 6, 7, 2019-09 or 2020-12); a schema without one is read as 2020-12. Any other
//!   `$schema` is refused: its meta-schema would have to be fetched.
//! - **`format` asserts**, in every draft (a format is a constraint the author wrote; a check
//!   that silently does not happen would be fail-open), and a format this build does not
//!   know (a custom one, or `idn-email`/`idn-hostname`) makes the schema a policy error.
//! - **`pattern`** and `patternProperties` run on the `regex` crate: linear time, so no
//!   argument can make a check backtrack for long; a pattern outside its syntax
//!   (look-around, back-references) makes the schema a policy error.
//! - **Nothing is ever fetched or read.** The crate is built without its HTTP and file
//!   resolvers, and the retriever refuses every URI, so a `$ref` that leaves the schema
//!   (`http:`, `file:`, or relative to an `$id`) makes the schema a policy error. References
//!   inside the schema (`#/$defs/x`) work.
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// A tool's input schema does not compile.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{source}")]
pub struct SchemaError {
    /// Where in the schema, as a JSON Pointer (`""`: the schema as a whole).
    pub pointer: String,
    /// The compiler's error.
    #[source]
    pub source: Arc<jsonschema::ValidationError<'static>>,
}

/// A compiled input schema. Cloning shares the compiled form.
#[derive(Clone)]
pub struct ArgSchema(Arc<jsonschema::Validator>);

impl std::fmt::Debug for ArgSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ArgSchema({:?})", self.0.draft())
    }
}

/// The retriever of every schema gatewayd compiles: it never fetches or reads anything.
struct RefuseAll;

impl jsonschema::Retrieve for RefuseAll {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "`{uri}` is outside the schema; gatewayd never fetches or reads a schema (put the definition under `$defs`)"
        )
        .into())
    }
}

impl ArgSchema {
    /// Compiles `schema` with the options described in the module documentation.
    pub fn compile(schema: &Value) -> Result<ArgSchema, SchemaError> {
        jsonschema::options()
            .with_retriever(RefuseAll)
            .should_validate_formats(true)
            .should_ignore_unknown_formats(false)
            .with_pattern_options(jsonschema::PatternOptions::regex())
            .build(schema)
            .map(|v| ArgSchema(Arc::new(v)))
            .map_err(|e| SchemaError {
                pointer: e.instance_path().as_str().to_owned(),
                source: Arc::new(e),
            })
    }

    /// The compiled validator.
    pub fn validator(&self) -> &jsonschema::Validator {
        &self.0
    }
}

/// Keywords that annotate and constrain nothing, in every draft.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$vocabulary",
];

/// The keywords of `schema` and its subschemas that its draft does not define: JSON Schema
/// ignores them, so a misspelt one (`maxLenght`) silently constrains nothing. Sorted, once
/// each. For `policy validate` to warn about.
pub fn unknown_keywords(schema: &Value) -> Vec<String> {
    fn walk(draft: jsonschema::Draft, s: &Value, out: &mut std::collections::BTreeSet<String>) {
        let draft = draft.detect(s);
        if let Some(o) = s.as_object() {
            out.extend(
                o.keys()
                    .filter(|k| !draft.is_known_keyword(k) && !ANNOTATIONS.contains(&k.as_str()))
                    .cloned(),
            );
        }
        for sub in draft.subresources_of(s) {
            walk(draft, sub, out);
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(jsonschema::Draft::default(), schema, &mut out);
    out.into_iter().collect()
}

/// The compiled form of a [`super::ToolDef`]'s `input_schema`: derived state, compiled on
/// first use and then shared by every clone. [`super::Policy::parse`] compiles every tool's
/// schema, so a policy that loaded has them all compiled. Equal whatever it holds, since it
/// follows from the schema.
#[derive(Clone, Default)]
pub struct CompiledSchema(OnceLock<Result<ArgSchema, SchemaError>>);

impl CompiledSchema {
    /// The compiled `schema` (absent: `{"type": "object"}`), compiling it on the first call.
    pub fn get(&self, schema: Option<&Value>) -> Result<&ArgSchema, &SchemaError> {
        self.0
            .get_or_init(|| match schema {
                Some(s) => ArgSchema::compile(s),
                None => ArgSchema::compile(&crate::engine::fingerprint::default_schema()),
            })
            .as_ref()
    }
}

impl PartialEq for CompiledSchema {
    fn eq(&self, _: &CompiledSchema) -> bool {
        true
    }
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get() {
            None => f.write_str("not compiled"),
            Some(Ok(s)) => s.fmt(f),
            Some(Err(e)) => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compiles(s: Value) -> Result<ArgSchema, SchemaError> {
        ArgSchema::compile(&s)
    }

    #[test]
    fn draft_comes_from_dollar_schema() {
        // Draft 4: exclusiveMinimum is a boolean modifier of minimum.
        let d4 = compiles(json!({"$schema": "http://json-schema.org/draft-04/schema#",
            "minimum": 5, "exclusiveMinimum": true}))
        .unwrap();
        assert!(!d4.validator().is_valid(&json!(5)));
        assert!(d4.validator().is_valid(&json!(6)));
        // Without $schema: 2020-12, where that boolean is a schema error.
        let e = compiles(json!({"minimum": 5, "exclusiveMinimum": true})).unwrap_err();
        assert_eq!(e.pointer, "/exclusiveMinimum");
        // 2020-12: prefixItems exists.
        let s = compiles(json!({"prefixItems": [{"type": "string"}]})).unwrap();
        assert!(!s.validator().is_valid(&json!([1])));
    }

    #[test]
    fn unknown_meta_schema_is_refused() {
        assert!(compiles(json!({"$schema": "https://example.test/my-dialect"})).is_err());
    }

    #[test]
    fn formats_assert_and_unknown_formats_are_refused() {
        let s = compiles(json!({"type": "string", "format": "email"})).unwrap();
        assert!(s.validator().is_valid(&json!("a@b.test")));
        assert!(!s.validator().is_valid(&json!("not an address")));
        let e = compiles(json!({"properties": {"x": {"format": "made-up"}}})).unwrap_err();
        assert!(e.to_string().contains("made-up"), "{e}");
    }

    #[test]
    fn patterns_are_linear_time_regexes() {
        let e = compiles(json!({"pattern": "^(?=a)a$"})).unwrap_err();
        assert_eq!(e.pointer, "/pattern", "{e}");
        let s = compiles(json!({"pattern": "^(a+)+$"})).unwrap();
        let evil = format!("{}!", "a".repeat(50_000));
        let t = std::time::Instant::now();
        assert!(!s.validator().is_valid(&json!(evil)));
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn bad_schemas_name_the_failing_place() {
        let e = compiles(json!({"properties": {"n": {"minLength": -1}}})).unwrap_err();
        assert_eq!(e.pointer, "/properties/n/minLength", "{e}");
        let e = compiles(json!({"type": "strnig"})).unwrap_err();
        assert_eq!(e.pointer, "/type", "{e}");
    }

    #[test]
    fn refs_stay_inside_the_schema() {
        let s = compiles(json!({"$defs": {"id": {"type": "integer"}},
            "properties": {"n": {"$ref": "#/$defs/id"}}}))
        .unwrap();
        assert!(!s.validator().is_valid(&json!({"n": "x"})));
        for r in [
            "https://schemas.example.test/x.json",
            "file:///etc/passwd",
            "other.json",
        ] {
            let e = compiles(json!({"$id": "https://base.example.test/s.json",
                "properties": {"n": {"$ref": r}}}))
            .unwrap_err();
            assert!(e.to_string().contains("never fetches"), "{r}: {e}");
        }
    }

    #[test]
    fn unknown_keywords_are_found_at_any_depth() {
        let s = json!({"title": "t", "description": "d", "type": "object",
            "properties": {"a": {"type": "string", "maxLenght": 3, "default": "x"},
                           "b": {"items": {"minimun": 1}}},
            "x-vendor": true});
        assert_eq!(unknown_keywords(&s), ["maxLenght", "minimun", "x-vendor"]);
        // draft 4 has no `const`; 2020-12 does
        assert!(unknown_keywords(&json!({"const": 1})).is_empty());
        let d4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "const": 1});
        assert_eq!(unknown_keywords(&d4), ["const"]);
        // property names are not keywords
        assert!(unknown_keywords(&json!({"properties": {"maxLenght": {}}})).is_empty());
    }

    #[test]
    fn compiled_once_and_shared_by_clones() {
        let c = CompiledSchema::default();
        assert_eq!(format!("{c:?}"), "not compiled");
        let a = c.get(None).unwrap().clone();
        let d = c.clone();
        let b = d.get(Some(&json!({"type": "string"}))).unwrap();
        // the clone kept the first compilation: `{"type": "object"}`
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(b.validator().is_valid(&json!({})));
    }
}
