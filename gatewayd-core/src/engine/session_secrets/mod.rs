//! The secrets a session starts with (docs/POLICY.md, "Secrets a session starts with"): the
//! values in the policy's small protected files, and the values of the agent's environment
//! variables whose names look like credentials. A key the agent never managed to read still
//! cannot leave if it reaches the model some other way.
//!
//! What is read is bounded ([`Limits`]); what is taken from a file is stated by its parsers:
//! the whole (short) file, the body lines of PEM private keys, `NAME=VALUE` / `name = value`
//! / `name: value` assignments (`.env`, AWS credentials, YAML) whose name looks like a
//! credential or whose value looks like a token, and the same in JSON files (service-account
//! `private_key`). Values shorter than [`MIN_SECRET_LEN`] are never taken.
//!
//! Layout: this file (limits, the environment, the name and value heuristics), `files` (the
//! walk of the protected paths and the parsers).
use crate::policy::{Policy, tools::MIN_SECRET_LEN};

mod files;

pub use files::{FileSecrets, from_files, values_of_file};

/// How much is read at one session start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Larger files are not read (reported).
    pub file_bytes: u64,
    /// A file's whole content is a secret only up to this many bytes (a key file); so is
    /// any one value.
    pub whole_file_bytes: usize,
    /// Most files read.
    pub files: usize,
    /// Most bytes read over all files.
    pub total_bytes: u64,
    /// How deep protected directories are walked (1: their own entries only).
    pub depth: usize,
    /// Most directory entries looked at.
    pub entries: usize,
    /// Most secrets taken.
    pub secrets: usize,
}

/// The limits gatewayd uses (docs/POLICY.md states them).
pub const LIMITS: Limits = Limits {
    file_bytes: 64 * 1024,
    whole_file_bytes: 4096,
    files: 256,
    total_bytes: 1024 * 1024,
    depth: 4,
    entries: 10_000,
    secrets: 1024,
};

/// What a session starts with: (name, value) pairs, and notes on what could not be used.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StartSecrets {
    /// (name, value), in the order found; names never hold values.
    pub secrets: Vec<(String, String)>,
    /// Files too large, unreadable or not text; limits reached; an unreadable environment.
    pub notes: Vec<String>,
}

impl StartSecrets {
    fn push(&mut self, name: String, value: &str, limits: &Limits) {
        let value = value.trim();
        if value.chars().count() < MIN_SECRET_LEN || value.len() > limits.whole_file_bytes {
            return;
        }
        let max = limits.secrets;
        if self.secrets.iter().any(|(_, v)| v == value) {
            return;
        }
        if self.secrets.len() >= max {
            if !self.notes.iter().any(|n| n.starts_with("more than")) {
                self.notes.push(format!(
                    "more than {max} secrets found; the rest are not registered"
                ));
            }
            return;
        }
        self.secrets.push((name, value.to_owned()));
    }
}

/// Everything a session of `policy` starts with, as the policy's `secrets_from_protected` and
/// `secrets_from_env` say. `env`: the agent's environment (None: it could not be read, noted).
pub fn secrets_from_protected(policy: &Policy, env: Option<&[(String, String)]>) -> StartSecrets {
    let files = policy
        .secrets_from_protected()
        .then(|| FileSecrets::read(&policy.sandbox.protected, &LIMITS).found);
    start_secrets(policy, files, env)
}

/// The same, with the protected files' part already read (`None`: not taken, as the policy's
/// `secrets_from_protected` says).
pub fn start_secrets(
    policy: &Policy,
    files: Option<StartSecrets>,
    env: Option<&[(String, String)]>,
) -> StartSecrets {
    let mut out = files.unwrap_or_default();
    if policy.secrets_from_env() {
        match env {
            Some(env) => from_env(env, &LIMITS, &mut out),
            None => out.notes.push(
                "the agent's environment could not be read; none of its values are registered"
                    .into(),
            ),
        }
    }
    out
}

/// Whether an environment variable or a key in a credentials file is named like a credential
/// (case-insensitive): it contains `token`, `secret`, `password`, `passwd`, `passphrase`,
/// `credential`, `api_key`, `apikey`, `private_key`, `access_key` or `auth_key`, or ends with
/// `_key`, or is `key`.
pub fn looks_like_credential_name(name: &str) -> bool {
    const PARTS: [&str; 11] = [
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "api_key",
        "apikey",
        "private_key",
        "access_key",
        "auth_key",
    ];
    let n = name.to_ascii_lowercase();
    PARTS.iter().any(|p| n.contains(p)) || n.ends_with("_key") || n == "key"
}

/// Whether a value looks like a generated token: at least 16 characters, no whitespace, both
/// ASCII letters and digits, and neither a path nor a URL.
pub fn looks_like_token(v: &str) -> bool {
    v.chars().count() >= 16
        && !v.contains(char::is_whitespace)
        && v.chars().any(|c| c.is_ascii_alphabetic())
        && v.chars().any(|c| c.is_ascii_digit())
        && !v.starts_with('/')
        && !v.contains("://")
}

/// The agent's environment variables named like credentials; a value that is an absolute
/// path names a file, not a secret, and is skipped.
pub fn from_env(env: &[(String, String)], limits: &Limits, out: &mut StartSecrets) {
    for (name, value) in env {
        if looks_like_credential_name(name) && !value.starts_with('/') {
            out.push(format!("env:{name}"), value, limits);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{fs, path::Path};

    use super::*;
    #[test]
    fn credential_names() {
        for n in [
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "aws_access_key_id",
            "DB_PASSWORD",
            "OPENAI_API_KEY",
            "deploy_key",
            "client_secret",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(looks_like_credential_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "GIT_AUTHOR_NAME",
            "SSH_AUTH_SOCK",
            "KEYBOARD",
            "MONKEY",
        ] {
            assert!(!looks_like_credential_name(n), "{n}");
        }
    }

    #[test]
    fn env_names_like_credentials_and_not_paths() {
        let env: Vec<(String, String)> = [
            ("GITHUB_TOKEN", "ghp_abcdefghijklmnop1234"),
            ("HOME", "/home/agent"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/home/agent/sa.json"),
            ("API_KEY", "short"),
        ]
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
        let mut out = StartSecrets::default();
        from_env(&env, &LIMITS, &mut out);
        assert_eq!(
            out.secrets,
            vec![(
                "env:GITHUB_TOKEN".to_owned(),
                "ghp_abcdefghijklmnop1234".to_owned()
            )]
        );
    }

    #[test]
    fn policy_switches() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(".env");
        fs::write(&f, "API_TOKEN=tok_0123456789abcdef\n").unwrap();
        let env = vec![("MY_SECRET".to_owned(), "s3cr3t-value-123".to_owned())];
        let text = |extra: &str| {
            format!(
                r#"{{"version": 1, "sandbox": {{"protected": ["{}"]}}{extra}}}"#,
                f.display()
            )
        };
        let p = Policy::parse(&text(""), Path::new("p.json")).unwrap();
        let got = secrets_from_protected(&p, Some(&env));
        let values: Vec<&str> = got.secrets.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(
            values,
            [
                "API_TOKEN=tok_0123456789abcdef",
                "tok_0123456789abcdef",
                "s3cr3t-value-123"
            ]
        );
        let p = Policy::parse(
            &text(r#", "secrets_from_protected": false, "secrets_from_env": false"#),
            Path::new("p.json"),
        )
        .unwrap();
        assert!(secrets_from_protected(&p, Some(&env)).secrets.is_empty());
        let p = Policy::parse(&text(""), Path::new("p.json")).unwrap();
        assert!(!secrets_from_protected(&p, None).notes.is_empty());
    }
}
