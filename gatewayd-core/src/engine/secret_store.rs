//! The secrets and credentials of one engine, loaded from the policy's sources: what the
//! secret-egress check looks for, what records and messages are scrubbed of, and the values
//! injected into handlers.
use std::collections::BTreeMap;

use super::{error::SecretError, secrets::SecretSet};
use crate::policy::{Policy, tools::MIN_SECRET_LEN};

pub(super) struct SecretStore {
    /// Secrets and credentials: never leave through `sends_out`; scrubbed from records.
    pub all: SecretSet,
    /// The (name, value) pairs `all` was built from.
    items: Vec<(String, String)>,
    /// Credentials alone: never in any tool's arguments; redacted from outputs.
    pub creds: SecretSet,
    /// Every credential the policy names, with its value or why it cannot be read.
    cred_values: BTreeMap<String, Result<String, String>>,
    /// Secrets whose source could not be read: egress cannot be checked for them.
    pub missing: Vec<String>,
}

/// A value shorter than [`MIN_SECRET_LEN`] would match everywhere: not looked for.
fn too_short(v: &str) -> bool {
    v.chars().count() < MIN_SECRET_LEN
}

/// A secret added at run time must be long enough to be looked for.
pub(super) fn check_len(name: &str, value: &str) -> Result<(), SecretError> {
    if too_short(value) {
        return Err(SecretError::TooShort {
            name: name.to_owned(),
            min: MIN_SECRET_LEN,
        });
    }
    Ok(())
}

impl SecretStore {
    /// Resolves every source; what cannot be used is reported in `warnings`.
    pub(super) fn load(policy: &Policy, warnings: &mut Vec<String>) -> SecretStore {
        let min = MIN_SECRET_LEN;
        let mut all = Vec::new();
        let mut cred_list = Vec::new();
        let mut cred_values = BTreeMap::new();
        let mut missing = Vec::new();
        for (name, src) in &policy.secrets {
            match src.resolve() {
                Ok(v) if too_short(&v) => warnings.push(format!(
                    "secret {name} not checked: shorter than {min} characters"
                )),
                Ok(v) => all.push((name.clone(), v)),
                Err(e) => {
                    warnings.push(format!(
                        "secret {name} cannot be loaded ({e}): every sends_out call is denied"
                    ));
                    missing.push(name.clone());
                }
            }
        }
        for (name, src) in &policy.credentials {
            let v = src.resolve();
            match &v {
                Ok(v) if too_short(v) => warnings.push(format!(
                    "credential {name} is shorter than {min} characters: injected, but not looked for in arguments or outputs"
                )),
                Ok(v) => {
                    all.push((name.clone(), v.clone()));
                    cred_list.push((name.clone(), v.clone()));
                }
                Err(e) => warnings.push(format!("credential {name} unavailable: {e}")),
            }
            cred_values.insert(name.clone(), v);
        }
        SecretStore {
            all: SecretSet::new(&all),
            items: all,
            creds: SecretSet::new(&cred_list),
            cred_values,
            missing,
        }
    }

    /// Adds a secret: looked for from the next call on.
    pub(super) fn add(&mut self, name: &str, value: &str) -> Result<(), SecretError> {
        check_len(name, value)?;
        self.items.push((name.to_owned(), value.to_owned()));
        self.all = SecretSet::new(&self.items);
        Ok(())
    }

    /// The value of credential `name`, when it could be read.
    pub(super) fn credential(&self, name: &str) -> Option<&str> {
        match self.cred_values.get(name) {
            Some(Ok(v)) => Some(v),
            _ => None,
        }
    }
}
