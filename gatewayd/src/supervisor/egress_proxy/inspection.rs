//! What the egress proxy knows of a session with inspected hosts, made before the agent
//! starts: the session's CA and the agent's bundle file, the TLS client toward the servers,
//! the secrets the requests are checked for, and each `inject` credential's placeholder.
//! [`Inspection::check`] decides one request (the rules, placeholders, secrets).
use std::{
    io::Read as _,
    os::unix::fs::{DirBuilderExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    sync::Arc,
};

use base64::{Engine as _, prelude::BASE64_STANDARD};
use gatewayd_core::{
    engine::{
        sandbox::host_matches,
        secrets::{EgressWindow, SecretSet},
    },
    policy::{EgressEntry, Policy, inspect::CA_VARIABLES},
};
use hyper::header::HeaderMap;

use super::ca::{self, SessionCa};

/// A credential's stand-in in the agent's environment.
#[derive(Debug)]
pub(crate) struct Placeholder {
    /// The agent's variable.
    pub(crate) env: String,
    /// What the agent holds.
    pub(crate) value: String,
    /// What the server gets.
    real: String,
    /// The entry's host (`name` or `*.domain`, lower case) and port.
    host: String,
    port: Option<u16>,
    /// The header it goes in.
    header: String,
}

/// A request refused: the record's reason and why, for the model.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) reason: &'static str,
    pub(crate) why: String,
}

/// See the module.
pub(crate) struct Inspection {
    pub(crate) ca: SessionCa,
    pub(crate) client: Arc<rustls::ClientConfig>,
    /// The policy's secrets and credentials' values.
    secrets: SecretSet,
    placeholders: Vec<Placeholder>,
    /// The placeholders as a secret set, to find them encoded too.
    placeholder_set: SecretSet,
    /// The longest secret, credential or placeholder, in bytes.
    longest_value: usize,
    /// The directory of the agent's bundle (removed on drop) and the bundle.
    dir: PathBuf,
    bundle: PathBuf,
}

impl Drop for Inspection {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.bundle);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// 16 random bytes from the kernel, in hex.
fn random_hex() -> Result<String, String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Inspection {
    /// For a policy that inspects a host: the CA, the bundle in `RUNTIME_DIR/SESSION.ca/`
    /// (readable by all: certificates only), the placeholders. `None` otherwise.
    pub(crate) fn prepare(
        policy: &Policy,
        runtime_dir: &Path,
        session: &str,
    ) -> Result<Option<Inspection>, String> {
        if !policy.network.inspects() {
            return Ok(None);
        }
        let ca = SessionCa::new(session)?;
        let client = ca::client_config(policy.network.upstream_ca.as_deref())?;
        let mut items = Vec::new();
        for (name, src) in policy.secrets.iter().chain(&policy.credentials) {
            if let Ok(v) = src.resolve() {
                items.push((name.clone(), v));
            }
        }
        let placeholders = placeholders(policy)?;
        let named: Vec<(String, String)> = placeholders
            .iter()
            .map(|p| (format!("placeholder {}", p.env), p.value.clone()))
            .collect();
        let dir = runtime_dir.join(format!("{session}.ca"));
        let bundle = dir.join("ca-bundle.pem");
        let longest_value = items
            .iter()
            .map(|(_, v)| v.len())
            .chain(named.iter().map(|(_, v)| v.len()))
            .max()
            .unwrap_or(0);
        let made = Inspection {
            longest_value,
            client,
            secrets: SecretSet::new(&items),
            placeholder_set: SecretSet::new(&named),
            placeholders,
            dir,
            bundle,
            ca,
        };
        made.write_bundle(runtime_dir)
            .map_err(|e| format!("the agent's CA bundle {}: {e}", made.bundle.display()))?;
        Ok(Some(made))
    }

    fn write_bundle(&self, runtime_dir: &Path) -> std::io::Result<()> {
        let mk = |recursive| {
            let mut b = std::fs::DirBuilder::new();
            b.recursive(recursive).mode(0o755);
            b
        };
        mk(true).create(runtime_dir)?;
        mk(false).create(&self.dir)?;
        std::fs::write(&self.bundle, ca::bundle(&self.ca))?;
        std::fs::set_permissions(&self.bundle, std::fs::Permissions::from_mode(0o644))
    }

    /// The directory the agent must be able to read.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The agent's added variables: the CA variables, each naming the bundle, and the
    /// placeholders.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let bundle = self.bundle.to_string_lossy().into_owned();
        CA_VARIABLES
            .iter()
            .map(|v| ((*v).to_owned(), bundle.clone()))
            .chain(
                self.placeholders
                    .iter()
                    .map(|p| (p.env.clone(), p.value.clone())),
            )
            .collect()
    }

    /// `s` with the secrets and placeholders it holds replaced by their names, for records.
    pub(crate) fn scrub(&self, s: &str) -> String {
        let once = self.secrets.scrub(s);
        self.placeholder_set.scrub(&once).into_owned()
    }

    /// A placeholder in bytes the proxy passes on without inspecting them (a plain HTTP
    /// request head to a host that is not inspected): its variable.
    pub(crate) fn placeholder_in(&self, bytes: &[u8]) -> Option<String> {
        if self.placeholders.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(bytes);
        self.placeholder_set
            .find_in_call(&[&text], &EgressWindow::new())
            .map(|m| m.secret.unwrap_or_else(|| m.encoding.clone()))
    }

    /// Decides a request of `method` to `target` on `host:port`, under `entry` (inspected):
    /// its `http` rules, then placeholders (swapped in `headers` for the real value when
    /// bound to this host and header, refused anywhere else), then the secrets (in the
    /// target, the headers, the body).
    pub(crate) fn check(
        &self,
        entry: &EgressEntry,
        (host, port): (&str, u16),
        (method, target): (&str, &str),
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<(), Refusal> {
        if !entry.request_allowed(method, target) {
            return Err(Refusal {
                reason: "egress_http_not_allowed",
                why: format!(
                    "{method} {target} on {host} matches none of the host's network.egress http rules"
                ),
            });
        }
        let body = String::from_utf8_lossy(body);
        let mut swap = Vec::new();
        let mut texts: Vec<String> = vec![target.to_owned(), body.into_owned()];
        for (name, value) in headers.iter() {
            let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
            match self.swapped(name.as_str(), &v, (host, port)) {
                // Swapped: the rest of the value is still looked at.
                Some(Swapped { rest, real }) => {
                    texts.push(format!("{name}: {rest}"));
                    swap.push((name.clone(), real));
                }
                None => texts.push(format!("{name}: {v}")),
            }
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.check_texts(&refs)?;
        for (name, v) in swap {
            match hyper::header::HeaderValue::from_str(&v) {
                Ok(v) => {
                    headers.insert(name, v);
                }
                Err(_) => {
                    return Err(Refusal {
                        reason: "egress_placeholder",
                        why: format!("the credential for {name} cannot go in a header"),
                    });
                }
            }
        }
        Ok(())
    }

    /// A later part of a request body too large to check whole (after [`Self::check`] of
    /// the request with its first part): placeholders, then secrets.
    pub(crate) fn check_body_part(&self, part: &str) -> Result<(), Refusal> {
        self.check_texts(&[part])
    }

    /// The most bytes one form of a secret or placeholder can take in a request (a value's
    /// percent-encoding: three bytes a byte), so that a window of a body that overlaps the
    /// one before by this much holds each occurrence whole.
    pub(crate) fn longest_form(&self) -> usize {
        3 * self.longest_value
    }

    /// Placeholders (none may be left), then secrets, in `refs`.
    fn check_texts(&self, refs: &[&str]) -> Result<(), Refusal> {
        if let Some(m) = self
            .placeholder_set
            .find_in_call(refs, &EgressWindow::new())
        {
            let which = m.secret.unwrap_or(m.encoding);
            return Err(Refusal {
                reason: "egress_placeholder",
                why: format!(
                    "the request carries the credential {which} where it is not bound (found as it is or encoded; it is swapped for the real value only in its own header on its own host)"
                ),
            });
        }
        if !self.secrets.is_empty()
            && let Some(m) = self.secrets.find_in_call(refs, &EgressWindow::new())
        {
            let why = match m.secret {
                Some(name) => format!(
                    "the request contains the registered secret `{name}` (found as {})",
                    m.encoding
                ),
                None => format!("the request cannot be checked for secrets ({})", m.encoding),
            };
            return Err(Refusal {
                reason: "egress_secret",
                why,
            });
        }
        Ok(())
    }
}

/// A header value whose placeholder is swapped: the value without the placeholder (checked
/// for secrets) and with the real credential (sent).
#[derive(Debug, PartialEq, Eq)]
struct Swapped {
    rest: String,
    real: String,
}

impl Inspection {
    /// The value of header `name` with the placeholder bound to this header on `host:port`
    /// swapped for its credential: where it stands as it is, or inside `Basic` credentials
    /// (base64 of `user:password`, as `curl -u` and git's credential helpers send them),
    /// decoded, swapped and encoded again. `None`: no placeholder bound here.
    fn swapped(&self, name: &str, value: &str, (host, port): (&str, u16)) -> Option<Swapped> {
        let basic = basic_credentials(value);
        let p = self.placeholders.iter().find(|p| {
            name.eq_ignore_ascii_case(&p.header)
                && host_matches(&p.host, host)
                && p.port.is_none_or(|q| q == port)
                && (value.contains(&p.value)
                    || basic.as_ref().is_some_and(|b| b.contains(&p.value)))
        })?;
        if value.contains(&p.value) {
            return Some(Swapped {
                rest: value.replace(&p.value, ""),
                real: value.replace(&p.value, &p.real),
            });
        }
        let decoded = basic?;
        let encoded = BASE64_STANDARD.encode(decoded.replace(&p.value, &p.real));
        Some(Swapped {
            rest: format!("Basic {}", decoded.replace(&p.value, "")),
            real: format!("Basic {encoded}"),
        })
    }
}

/// `user:password` of a `Basic` value (the scheme in any case), when it decodes to text.
fn basic_credentials(value: &str) -> Option<String> {
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = BASE64_STANDARD.decode(token.trim()).ok()?;
    String::from_utf8(bytes).ok()
}

/// A placeholder per `inject` of the policy (credentials that do not resolve are an error:
/// the agent would hold a placeholder for nothing).
fn placeholders(policy: &Policy) -> Result<Vec<Placeholder>, String> {
    let mut out = Vec::new();
    for e in &policy.network.egress {
        let Some(host) = &e.host else { continue };
        for inj in &e.inject {
            let src = policy
                .credentials
                .get(&inj.credential)
                .ok_or_else(|| format!("credential `{}` is not in the policy", inj.credential))?;
            let real = src
                .resolve()
                .map_err(|m| format!("credential `{}`: {m}", inj.credential))?;
            out.push(Placeholder {
                env: inj.env.clone(),
                value: format!("gatewayd-placeholder-{}", random_hex()?),
                real,
                host: host.trim_end_matches('.').to_ascii_lowercase(),
                port: e.port,
                header: inj.header.clone(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "inspection_tests.rs"]
mod tests;
