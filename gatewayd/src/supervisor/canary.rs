//! Canary credentials (docs/KERNEL.md, "Canary credentials"): decoys made fresh for each
//! session from the kernel's random bytes, in the formats of real credentials (an AWS key
//! pair, a GitHub token), placed where the agent can see them ([`Decoys`]: its environment,
//! a decoy AWS credentials file), and watched for on every route of egress gatewayd sees
//! ([`CanaryAlarm`]: the gateway's tool calls, the egress proxy's plain HTTP bytes, inspected
//! requests, DNS names). A hit locks the session down (the kernel lockdown of the Rule of Two)
//! and writes a high-severity `canary` record naming the decoy, never its value.
use std::{
    io::{Read as _, Write as _},
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use serde_json::{Value, json};

use gatewayd_core::{
    audit::{Entry, writer::WriterHandle},
    engine::secrets::{EgressWindow, Match, SecretSet},
    policy::Canaries,
};
use gatewayd_kernel::kernel;

/// The variables an `env` canary may take, each only when the agent does not have it.
pub(super) const ENV_NAMES: [&str; 3] =
    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"];

/// `n` characters of `alphabet`, each uniform (bytes past the last whole multiple of the
/// alphabet's length are drawn again).
fn random_chars(alphabet: &[u8], n: usize) -> Result<String, String> {
    let mut f = std::fs::File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?;
    let len = alphabet.len();
    let limit = 256 - 256 % len;
    let mut out = String::with_capacity(n);
    let mut buf = [0u8; 64];
    while out.len() < n {
        f.read_exact(&mut buf)
            .map_err(|e| format!("/dev/urandom: {e}"))?;
        for b in buf {
            if usize::from(b) < limit && out.len() < n {
                out.push(char::from(alphabet[usize::from(b) % len]));
            }
        }
    }
    Ok(out)
}

const UPPER_BASE32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// An AWS access key id (`AKIA` and 16 of `A-Z2-7`) and its 40-character secret.
fn aws_pair() -> Result<(String, String), String> {
    Ok((
        format!("AKIA{}", random_chars(UPPER_BASE32, 16)?),
        random_chars(BASE64, 40)?,
    ))
}

/// A classic GitHub token: `ghp_`, 30 random base62 characters and their CRC-32 in 6
/// base62 characters (the format GitHub's secret scanning checks).
fn github_token() -> Result<String, String> {
    let body = random_chars(BASE62, 30)?;
    let mut sum = u64::from(crc32(body.as_bytes()));
    let mut check = [b'0'; 6];
    for c in check.iter_mut().rev() {
        *c = BASE62[(sum % 62) as usize];
        sum /= 62;
    }
    Ok(format!("ghp_{body}{}", String::from_utf8_lossy(&check)))
}

/// CRC-32 (IEEE), bitwise.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A session's decoys: what the agent's environment gets, the decoy file (removed, with
/// the directories made for it, when this is dropped), and every decoy by name.
#[derive(Debug, Default)]
pub(crate) struct Decoys {
    env: Vec<(String, String)>,
    file: Option<PathBuf>,
    /// Directories made for the file, deepest first.
    made_dirs: Vec<PathBuf>,
    /// (name, value): `env:VARIABLE`, `file:PATH:KEY`.
    all: Vec<(String, String)>,
}

impl Drop for Decoys {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            let _ = std::fs::remove_file(f);
        }
        for d in &self.made_dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

impl Decoys {
    /// Makes the decoys `canaries` asks for. `taken`: whether the agent already has a
    /// variable (then it keeps its own). The file is made new (an existing one is an error:
    /// it would be overwritten, or be the user's own), readable by all (it holds decoys).
    pub(crate) fn make(
        canaries: &Canaries,
        taken: impl Fn(&str) -> bool,
    ) -> Result<Decoys, String> {
        let mut d = Decoys::default();
        if canaries.env {
            let (id, secret) = aws_pair()?;
            let values = [id, secret, github_token()?];
            for (name, value) in ENV_NAMES.iter().zip(values) {
                if !taken(name) {
                    d.all.push((format!("env:{name}"), value.clone()));
                    d.env.push(((*name).to_owned(), value));
                }
            }
        }
        if let Some(path) = &canaries.file {
            let (id, secret) = aws_pair()?;
            d.made_dirs = make_parents(path)?;
            let text =
                format!("[default]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\n");
            write_new(path, &text).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    format!(
                        "canaries.file {} already exists: gatewayd writes the decoy file new and removes it at the session's end, so it will not take an existing file (remove it, or name another path)",
                        path.display()
                    )
                } else {
                    format!("canaries.file {}: {e}", path.display())
                }
            })?;
            d.file = Some(path.clone());
            let at = path.display();
            d.all.push((format!("file:{at}:aws_access_key_id"), id));
            d.all
                .push((format!("file:{at}:aws_secret_access_key"), secret));
        }
        Ok(d)
    }

    /// The agent's added variables.
    pub(crate) fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The decoy file, when there is one.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// What the `session_start` record says: the variables placed and the file, by name.
    pub(crate) fn describe(&self) -> Value {
        json!({
            "env": self.env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "file": self.file,
            "decoys": self.all.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        })
    }
}

/// Makes the missing parents of `path` (0755); returns them deepest first.
fn make_parents(path: &Path) -> Result<Vec<PathBuf>, String> {
    let mut missing = Vec::new();
    let mut at = path.parent();
    while let Some(p) = at {
        if p.exists() {
            break;
        }
        missing.push(p.to_owned());
        at = p.parent();
    }
    for p in missing.iter().rev() {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(p)
            .map_err(|e| format!("canaries.file: making {}: {e}", p.display()))?;
    }
    Ok(missing)
}

fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Watches for the session's decoys and trips on the first one seen: locks the agent's
/// egress (the kernel task's lockdown) and records `canary` (and, the first time,
/// `egress_lockdown`).
pub(crate) struct CanaryAlarm {
    set: SecretSet,
    /// Taken out when the session ends, so the kernel task can end.
    kernel: Mutex<Option<kernel::task::Handle>>,
    audit: WriterHandle,
    session: String,
    locked: AtomicBool,
}

/// Where a decoy was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// A tool call's arguments, at the agent's gateway.
    ToolCall,
    /// A plain HTTP request the egress proxy read.
    Http,
    /// A request to an inspected host, read by the proxy after its TLS.
    Inspected,
    /// A name asked of the session's resolver.
    Dns,
    /// A TLS server name.
    ServerName,
}

impl Route {
    fn as_str(self) -> &'static str {
        match self {
            Route::ToolCall => "tool_call",
            Route::Http => "egress_proxy_http",
            Route::Inspected => "egress_proxy_inspected",
            Route::Dns => "egress_resolver",
            Route::ServerName => "egress_proxy_server_name",
        }
    }
}

impl CanaryAlarm {
    /// The alarm for `decoys`, `None` when there are none.
    pub(crate) fn new(
        decoys: &Decoys,
        kernel: kernel::task::Handle,
        audit: WriterHandle,
        session: String,
    ) -> Option<CanaryAlarm> {
        if decoys.all.is_empty() {
            return None;
        }
        Some(CanaryAlarm {
            set: SecretSet::new(&decoys.all),
            kernel: Mutex::new(Some(kernel)),
            audit,
            session,
            locked: AtomicBool::new(false),
        })
    }

    /// The decoy in `texts`, as it is or in any form the secret matcher sees through
    /// (encoded, disguised, in fragments).
    pub(crate) fn find(&self, texts: &[&str]) -> Option<Match> {
        self.set
            .find_in_call(texts, &EgressWindow::new())
            .filter(|m| m.secret.is_some())
    }

    /// `text` with every decoy in it replaced by its name, for records.
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.set.scrub(text).into_owned()
    }

    /// Lets go of the kernel task (the session is ending).
    pub(crate) fn release(&self) {
        self.kernel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// The message for the model: what happened and what to do.
    pub(crate) fn message(name: &str) -> String {
        format!(
            "refused: this carries `{name}`, a canary credential (a decoy gatewayd placed to catch credentials leaving the session); all egress of this session is now closed. Next: stop; do not send credentials found in the environment or in files anywhere; end the session and tell the user what was sent and why"
        )
    }

    /// Trips on `m` seen on `route` (with `detail`'s specifics: host, tool, ...): the
    /// lockdown, then the `canary` record (and `egress_lockdown` the first time), durable
    /// before this returns. Returns the message for the model.
    pub(crate) async fn trip(
        &self,
        m: &Match,
        route: Route,
        tool: Option<&str>,
        mut detail: Value,
    ) -> String {
        let name = m.secret.clone().unwrap_or_default();
        let first = !self.locked.swap(true, Ordering::SeqCst);
        let kernel = self
            .kernel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let locked = match kernel {
            Some(k) => k.lockdown(true).await.map_err(|e| kernel::chain(&e)),
            None => Err("the kernel layer has stopped".to_owned()),
        };
        let message = Self::message(&name);
        if let Some(d) = detail.as_object_mut() {
            d.insert("canary".into(), json!(name));
            d.insert("found_as".into(), json!(m.encoding));
            d.insert("route".into(), json!(route.as_str()));
            d.insert(
                "lockdown".into(),
                json!(locked.as_ref().err().map_or("on", |e| e.as_str())),
            );
        }
        let mut entries = vec![Entry::canary(&self.session, tool, detail, &message)];
        if first {
            let d = json!({"trigger": "canary", "canary": name, "route": route.as_str(),
                "error": locked.as_ref().err()});
            entries.push(Entry::egress_lockdown(&self.session, tool, d));
        }
        let mut last = None;
        for e in entries {
            match self.audit.submit(e) {
                Ok(t) => last = Some(t),
                Err(e) => eprintln!("gatewayd: the canary record is not written: {e}"),
            }
        }
        if let Some(t) = last
            && let Err(e) = self.audit.wait_async(t).await
        {
            eprintln!("gatewayd: the canary record is not durable: {e}");
        }
        message
    }
}

/// The gateway's route: a tool call whose arguments carry a decoy is refused, after the
/// lockdown and its record.
impl crate::daemon::CanaryCheck for CanaryAlarm {
    fn check<'a>(&'a self, tool: &'a str, arguments: &'a Value) -> crate::daemon::CanaryFuture<'a> {
        Box::pin(async move {
            let owned = gatewayd_core::engine::secrets::egress_texts(arguments);
            let texts: Vec<&str> = owned.iter().map(AsRef::as_ref).collect();
            let m = self.find(&texts)?;
            Some(self.trip(&m, Route::ToolCall, Some(tool), json!({})).await)
        })
    }
}

#[cfg(test)]
#[path = "canary_tests.rs"]
mod tests;
