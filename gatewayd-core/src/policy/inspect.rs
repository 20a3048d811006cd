//! Layer-7 egress rules, opt-in per host: an egress entry with `inspect`, `http` or `inject`
//! has its TLS terminated by `gatewayd run`'s egress proxy (a CA of the session), each HTTP
//! request decided by [`HttpRule`]s and the secret matcher, and credentials swapped in for
//! placeholders ([`Inject`]). docs/POLICY.md ("Inspected hosts").
use serde::{Deserialize, Serialize};

use super::{EgressEntry, JsonPath, Policy, ValidationError, glob_match_str};

/// One shape of request an inspected host accepts: a method among `methods` (empty: any)
/// and a request target (path and query) the `path` glob matches (absent: any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRule {
    /// Methods, upper case (`GET`, `HEAD`, `POST`, ...); empty: any.
    #[serde(default)]
    pub methods: Vec<String>,
    /// A glob (`*`, `?`) on the request target, path and query (`/org/repo.git/git-upload-pack`,
    /// `/*/info/refs?service=git-upload-pack`); absent: any.
    #[serde(default)]
    pub path: Option<String>,
}

impl HttpRule {
    /// Whether a request of `method` to `target` (path and query) has this shape.
    pub fn matches(&self, method: &str, target: &str) -> bool {
        (self.methods.is_empty() || self.methods.iter().any(|m| m == method))
            && self
                .path
                .as_deref()
                .is_none_or(|g| glob_match_str(g, target))
    }
}

/// A credential of the policy (`credentials`) bound to an inspected host and one header: the
/// agent's environment variable `env` holds a placeholder, which the proxy replaces with the
/// credential's value in `header` on requests to this host only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inject {
    /// The name of the credential in the policy's `credentials`.
    pub credential: String,
    /// The request header the value goes in (`Authorization`, `X-Api-Key`).
    pub header: String,
    /// The agent's environment variable that holds the placeholder.
    pub env: String,
}

impl EgressEntry {
    /// Whether the proxy terminates this host's TLS and reads its requests.
    pub fn inspected(&self) -> bool {
        self.inspect == Some(true) || self.http.is_some() || !self.inject.is_empty()
    }

    /// Whether a request of `method` to `target` passes the entry's `http` rules (no rules:
    /// every request does).
    pub fn request_allowed(&self, method: &str, target: &str) -> bool {
        self.http
            .as_ref()
            .is_none_or(|rules| rules.iter().any(|r| r.matches(method, target)))
    }
}

/// Variables `gatewayd run` sets itself in the agent's environment for an inspecting
/// session: a placeholder may not take their names.
pub const CA_VARIABLES: [&str; 5] = [
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
];

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The checks of `network.egress[i]`'s layer-7 fields and of `network.upstream_ca`.
pub(super) fn validate(p: &Policy) -> Result<(), ValidationError> {
    let root = JsonPath::root().key("network");
    if let Some(ca) = &p.network.upstream_ca
        && !ca.is_absolute()
    {
        return Err(ValidationError::value(
            root.key("upstream_ca"),
            format!("`{}` is not an absolute path", ca.display()),
        ));
    }
    let mut envs = std::collections::BTreeSet::new();
    for (i, e) in p.network.egress.iter().enumerate() {
        let at = root.key("egress").index(i);
        if !e.inspected() {
            if e.inspect == Some(false) && (e.http.is_some() || !e.inject.is_empty()) {
                return Err(ValidationError::value(
                    at.key("inspect"),
                    "`http` and `inject` need the host inspected: drop `inspect: false`",
                ));
            }
            continue;
        }
        if e.inspect == Some(false) {
            return Err(ValidationError::value(
                at.key("inspect"),
                "`http` and `inject` need the host inspected: drop `inspect: false`",
            ));
        }
        if p.network.proxy == Some(false) {
            return Err(ValidationError::value(
                root.key("proxy"),
                "inspected hosts are read by the egress proxy: drop `proxy: false` (or the entry's inspect, http and inject)",
            ));
        }
        if e.host.is_none() || e.cidr.is_some() {
            return Err(ValidationError::value(
                at,
                "an inspected entry names a `host` (and no `cidr`): the proxy decides it by name",
            ));
        }
        for (j, r) in e.http.iter().flatten().enumerate() {
            rule(at.key("http").index(j), r)?;
        }
        for (j, inj) in e.inject.iter().enumerate() {
            inject(at.key("inject").index(j), inj, p, &mut envs)?;
        }
    }
    Ok(())
}

fn rule(at: JsonPath, r: &HttpRule) -> Result<(), ValidationError> {
    for (k, m) in r.methods.iter().enumerate() {
        if !is_token(m) || m.bytes().any(|b| b.is_ascii_lowercase()) {
            return Err(ValidationError::value(
                at.key("methods").index(k),
                format!("`{m}` is not an HTTP method in upper case (GET, HEAD, POST, ...)"),
            ));
        }
    }
    if let Some(g) = &r.path
        && !(g.starts_with('/') || g.starts_with('*'))
    {
        return Err(ValidationError::value(
            at.key("path"),
            format!(
                "`{g}` is matched against the request target, which starts with `/`: start the glob with `/` or `*`"
            ),
        ));
    }
    Ok(())
}

fn inject(
    at: JsonPath,
    inj: &Inject,
    p: &Policy,
    envs: &mut std::collections::BTreeSet<String>,
) -> Result<(), ValidationError> {
    if !p.credentials.contains_key(&inj.credential) {
        return Err(ValidationError::value(
            at.key("credential"),
            format!(
                "`{}` is not in the policy's `credentials`: add it there (env, file or value)",
                inj.credential
            ),
        ));
    }
    if !is_token(&inj.header) || inj.header.eq_ignore_ascii_case("host") {
        return Err(ValidationError::value(
            at.key("header"),
            format!(
                "`{}` is not a header name a credential can go in",
                inj.header
            ),
        ));
    }
    let reserved = CA_VARIABLES.contains(&inj.env.as_str()) || inj.env.starts_with("GATEWAYD_");
    if !is_env_name(&inj.env) || reserved {
        return Err(ValidationError::value(
            at.key("env"),
            format!(
                "`{}` is not an environment variable name the placeholder can take (letters, digits, `_`; not GATEWAYD_* nor a CA variable)",
                inj.env
            ),
        ));
    }
    if !envs.insert(inj.env.clone()) {
        return Err(ValidationError::value(
            at.key("env"),
            format!("`{}` holds another placeholder already", inj.env),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(network: serde_json::Value) -> Result<Policy, String> {
        let text = json!({"version": 1, "network": network,
            "credentials": {"gh": {"value": "ghp_real_value_123"}}})
        .to_string();
        Policy::parse(&text, std::path::Path::new("p.json")).map_err(|e| e.to_string())
    }

    #[test]
    fn rules_match_method_and_target() {
        let git_read: Vec<HttpRule> = serde_json::from_value(json!([
            {"methods": ["GET", "HEAD"], "path": "*/info/refs?service=git-upload-pack"},
            {"methods": ["POST"], "path": "*/git-upload-pack"},
            {"methods": ["GET"], "path": "/static/*"}
        ]))
        .unwrap();
        let e = EgressEntry {
            cidr: None,
            host: Some("git.test".into()),
            port: None,
            inspect: None,
            http: Some(git_read),
            inject: Vec::new(),
        };
        assert!(e.inspected());
        for (m, t, ok) in [
            ("GET", "/r.git/info/refs?service=git-upload-pack", true),
            ("POST", "/r.git/git-upload-pack", true),
            ("GET", "/r.git/info/refs?service=git-receive-pack", false),
            ("POST", "/r.git/git-receive-pack", false),
            ("GET", "/static/a/b.css", true),
            ("POST", "/static/a", false),
            ("get", "/static/a", false),
        ] {
            assert_eq!(e.request_allowed(m, t), ok, "{m} {t}");
        }
        let any = EgressEntry {
            http: None,
            inspect: Some(true),
            ..e
        };
        assert!(any.request_allowed("DELETE", "/x"));
    }

    #[test]
    fn layer7_fields_are_checked() {
        assert!(
            parse(json!({"egress": [{"host": "a.test", "inspect": true,
                "http": [{"methods": ["GET"]}],
                "inject": [{"credential": "gh", "header": "Authorization", "env": "GH_TOKEN"}]}]}))
            .is_ok()
        );
        for (net, says) in [
            (
                json!({"egress": [{"cidr": "10.0.0.1", "inspect": true}]}),
                "names a `host`",
            ),
            (
                json!({"egress": [{"host": "a.test", "http": [{"methods": ["get"]}]}]}),
                "upper case",
            ),
            (
                json!({"egress": [{"host": "a.test", "http": [{"path": "x/*"}]}]}),
                "start the glob",
            ),
            (
                json!({"egress": [{"host": "a.test", "inspect": false, "http": []}]}),
                "drop `inspect: false`",
            ),
            (
                json!({"egress": [{"host": "a.test", "inject": [{"credential": "nope", "header": "A", "env": "X"}]}]}),
                "not in the policy's `credentials`",
            ),
            (
                json!({"egress": [{"host": "a.test", "inject": [{"credential": "gh", "header": "Host", "env": "X"}]}]}),
                "header name",
            ),
            (
                json!({"egress": [{"host": "a.test", "inject": [{"credential": "gh", "header": "A", "env": "SSL_CERT_FILE"}]}]}),
                "not GATEWAYD_",
            ),
            (
                json!({"egress": [
                {"host": "a.test", "inject": [{"credential": "gh", "header": "A", "env": "X"}]},
                {"host": "b.test", "inject": [{"credential": "gh", "header": "A", "env": "X"}]}]}),
                "another placeholder",
            ),
            (json!({"upstream_ca": "ca.pem"}), "absolute"),
            (
                json!({"proxy": false, "egress": [{"host": "a.test", "inspect": true}]}),
                "drop `proxy: false`",
            ),
        ] {
            let e = parse(net.clone()).unwrap_err();
            assert!(e.contains(says), "{net}: {e}");
        }
    }
}
