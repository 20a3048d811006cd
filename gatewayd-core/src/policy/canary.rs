//! Canary credentials (docs/POLICY.md, "canaries"): decoys `gatewayd run` makes fresh for
//! each session and places where the agent can see them (its environment, a decoy file);
//! any egress that carries one locks the session down. This module is the policy's part:
//! the field and its checks. The decoys, their placing and their detection are
//! `gatewayd`'s (`supervisor::canary`).
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{JsonPath, Policy, ValidationError};

/// Where the session's decoys go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Canaries {
    /// Put decoys in the agent's environment (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`), each only when the agent does not have it.
    #[serde(default)]
    pub env: bool,
    /// Write a decoy AWS credentials file here (absolute; must not exist when the session
    /// starts; removed when it ends).
    #[serde(default)]
    pub file: Option<PathBuf>,
}

/// `canaries`: an absolute `file` that is not a directory's name, and something placed.
pub(super) fn validate(p: &Policy) -> Result<(), ValidationError> {
    let Some(c) = &p.canaries else {
        return Ok(());
    };
    let at = JsonPath::root().key("canaries");
    if let Some(f) = &c.file {
        if !f.is_absolute() {
            return Err(ValidationError::value(
                at.key("file"),
                format!("`{}` is not an absolute path", f.display()),
            ));
        }
        if f.file_name().is_none() || f.to_string_lossy().ends_with('/') {
            return Err(ValidationError::value(
                at.key("file"),
                format!("`{}` names no file", f.display()),
            ));
        }
        if p.sandbox.protected.iter().any(|d| f.starts_with(d)) {
            return Err(ValidationError::value(
                at.key("file"),
                format!(
                    "`{}` is under sandbox.protected: the agent could not read the decoy, so it would catch nothing",
                    f.display()
                ),
            ));
        }
    }
    if !c.env && c.file.is_none() {
        return Err(ValidationError::value(
            at,
            "places no decoy: set `env: true`, `file: PATH`, or both (or leave `canaries` out)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(extra: &str) -> Result<Policy, String> {
        Policy::parse(&format!(r#"{{"version": 1{extra}}}"#), Path::new("p.json"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn canaries_are_checked() {
        let p =
            parse(r#", "canaries": {"env": true, "file": "/home/a/.aws/credentials"}"#).unwrap();
        let c = p.canaries.unwrap();
        assert!(c.env);
        assert_eq!(
            c.file.as_deref(),
            Some(Path::new("/home/a/.aws/credentials"))
        );
        assert!(parse("").unwrap().canaries.is_none());
        let e = parse(r#", "canaries": {"file": "creds"}"#).unwrap_err();
        assert!(e.contains("not an absolute path"), "{e}");
        let e = parse(r#", "canaries": {}"#).unwrap_err();
        assert!(e.contains("places no decoy"), "{e}");
        let e = parse(r#", "canaries": {"env": true, "token": 1}"#).unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
        let e = parse(
            r#", "sandbox": {"protected": ["/home/a/.aws"]}, "canaries": {"file": "/home/a/.aws/credentials"}"#,
        )
        .unwrap_err();
        assert!(e.contains("sandbox.protected"), "{e}");
    }
}
