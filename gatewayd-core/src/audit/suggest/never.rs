//! What `gatewayd policy suggest` never proposes, whatever the log says: to open a protected
//! path or name, a secret (the credential stores `policy init` protects, key and `.env`
//! names, the cloud's metadata service), gatewayd's own files, the kernel's file systems, the
//! built-in read-only paths, or writes to the system's files. Each check returns the rule and
//! why, for the "not proposed" list.
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
};

use super::{Rule, cover};
use crate::policy::{Policy, Sandbox, protected_names::ProtectedNames, starter};

/// File names that are secrets wherever they lie, protected or not.
const SECRET_NAMES: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_*",
    "credentials*",
    ".netrc",
    ".git-credentials",
    ".pgpass",
];

/// gatewayd's own files: its configuration, sockets, state and logs.
const SELF: &[&str] = &[
    "/etc/gatewayd",
    "/run/gatewayd",
    "/var/lib/gatewayd",
    "/var/log/gatewayd",
];

/// The kernel's file systems: not roots to hand out (devices go in `sandbox.devices`).
const KERNEL_FS: &[&str] = &["/proc", "/sys", "/dev"];

/// The system's trees an agent never gets to write.
const SYSTEM: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/opt", "/var", "/nix",
    "/snap", "/root",
];

/// The cloud instance metadata services: they hand out the machine's credentials.
pub(super) const METADATA: &[&str] = &[
    "169.254.169.254",
    "fd00:ec2::254",
    "100.100.100.200",
    "metadata.google.internal",
];

/// The checks, for one policy.
pub(super) struct Guard<'a> {
    policy: &'a Policy,
    names: ProtectedNames,
    secret_names: ProtectedNames,
}

type Refusal = (Rule, String);

impl<'a> Guard<'a> {
    pub(super) fn new(policy: &'a Policy) -> Guard<'a> {
        let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Guard {
            policy,
            // The policy was validated: its patterns parse.
            names: ProtectedNames::parse(&policy.sandbox.protected_names).unwrap_or_default(),
            secret_names: ProtectedNames::parse(&owned(SECRET_NAMES)).unwrap_or_default(),
        }
    }

    /// Why the refused `path` (or its proposed cover `dir`) is never proposed, if it is not.
    pub(super) fn path(&self, path: &Path, dir: &Path, write: bool) -> Option<Refusal> {
        let sb = &self.policy.sandbox;
        let under = |p: &Path, roots: &[PathBuf]| roots.iter().find(|r| p.starts_with(r)).cloned();
        if let Some(r) = under(path, &sb.protected).or_else(|| under(dir, &sb.protected)) {
            return Some((
                Rule::ProtectedPath,
                format!("under sandbox.protected `{}`", r.display()),
            ));
        }
        if [Path::new("/"), Path::new("/home")].contains(&dir)
            || cover::home_of(dir).is_some_and(|h| h == dir)
        {
            return Some((
                Rule::WholeTree,
                format!(
                    "`{}` as a whole: listing it, or making a name directly in it, would take everything below it (the kernel grants both per directory); the host runs without it",
                    dir.display()
                ),
            ));
        }
        let name = path.file_name().unwrap_or(OsStr::new(""));
        if let Some(p) = self.names.matching(name) {
            return Some((
                Rule::ProtectedName,
                format!("its name matches sandbox.protected_names `{p}`"),
            ));
        }
        if let Some(s) = SELF.iter().find(|s| path.starts_with(s)) {
            return Some((
                Rule::SelfProtection,
                format!("gatewayd's own files (`{s}`)"),
            ));
        }
        if let Some(why) = self.secret(path, name) {
            return Some((Rule::Secret, why));
        }
        if let Some(k) = KERNEL_FS.iter().find(|k| path.starts_with(k)) {
            return Some((
                Rule::KernelFs,
                format!(
                    "`{k}` is the kernel's: the agent's own /proc is given, a device goes in sandbox.devices by hand"
                ),
            ));
        }
        if write {
            return self.write(path);
        }
        None
    }

    /// A credential store (`policy init`'s list), a key or `.env` name.
    fn secret(&self, path: &Path, name: &OsStr) -> Option<String> {
        if let Some(p) = self.secret_names.matching(name) {
            return Some(format!("a secret by its name (`{p}`)"));
        }
        if let Some(s) = starter::SYSTEM_PROTECTED
            .iter()
            .find(|s| path.starts_with(s))
        {
            return Some(format!("a secret of the system (`{s}`)"));
        }
        let home = cover::home_of(path)?;
        starter::HOME_SECRETS
            .iter()
            .find(|s| path.starts_with(home.join(s)))
            .map(|s| format!("a credential store (`~/{s}`)"))
    }

    /// A write to the system's files or to a built-in read-only path.
    fn write(&self, path: &Path) -> Option<Refusal> {
        let read_only = self
            .policy
            .sandbox
            .read_only_with_defaults(cover::home_of(path).as_deref());
        let built_in = Sandbox::READ_ONLY_BELOW_ROOTS
            .iter()
            .any(|r| path.ancestors().any(|a| a.ends_with(r)));
        if built_in || read_only.iter().any(|r| path.starts_with(r)) {
            return Some((Rule::ReadOnly, "a read-only path (the user's own tools run or load it later): change sandbox.read_only by hand if you must".to_owned()));
        }
        if cover::home_of(path).is_some_and(|h| {
            Sandbox::READ_ONLY_IN_HOME
                .iter()
                .any(|r| path.starts_with(h.join(r)))
        }) {
            return Some((
                Rule::ReadOnly,
                "a read-only path of the home (shell startup files, git's and ssh's configuration)"
                    .to_owned(),
            ));
        }
        SYSTEM
            .iter()
            .find(|s| path.starts_with(s) && cover::home_of(path).is_none())
            .map(|s| {
                (
                    Rule::SystemWrite,
                    format!("writing the system's files (`{s}`) is not proposed"),
                )
            })
    }

    /// `dir`, narrowed toward `path` until it holds no credential store (a proposed cover
    /// never opens more secrets than the file itself).
    pub(super) fn narrow(path: &Path, dir: PathBuf) -> PathBuf {
        let Some(home) = cover::home_of(path) else {
            return dir;
        };
        let mut dir = dir;
        while dir != path
            && starter::HOME_SECRETS
                .iter()
                .any(|s| home.join(s).starts_with(&dir))
        {
            let below = path
                .strip_prefix(&dir)
                .ok()
                .and_then(|r| r.components().next());
            match below {
                Some(c) => dir.push(c),
                None => break,
            }
        }
        dir
    }

    /// A destination never proposed: the metadata services.
    pub(super) fn egress(host: &str) -> Option<Refusal> {
        METADATA.contains(&host).then(|| {
            (
                Rule::Secret,
                "the cloud's instance metadata service hands out the machine's credentials"
                    .to_owned(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(sandbox: serde_json::Value) -> Policy {
        let text = serde_json::json!({"version": 1, "sandbox": sandbox}).to_string();
        Policy::parse(&text, Path::new("p.json")).unwrap()
    }

    fn rule(g: &Guard, p: &str, write: bool) -> Option<Rule> {
        let path = Path::new(p);
        let (dir, _) = cover::cover(path);
        g.path(path, &Guard::narrow(path, dir), write)
            .map(|(r, _)| r)
    }

    #[test]
    fn protected_paths_and_names_of_the_policy_are_never_proposed() {
        let p = policy(
            serde_json::json!({"root": "/w", "protected": ["/home/u/.config/app/token"],
                                          "protected_names": ["*.secret"]}),
        );
        let g = Guard::new(&p);
        assert_eq!(
            rule(&g, "/home/u/.config/app/token", false),
            Some(Rule::ProtectedPath)
        );
        // Its cover is not under the protected file: the file's own check refuses it.
        assert_eq!(rule(&g, "/w/db.secret", false), Some(Rule::ProtectedName));
        assert_eq!(rule(&g, "/home/u/.config/app/ui.json", false), None);
        let p = policy(serde_json::json!({"protected": ["/home/u/.config"]}));
        assert_eq!(
            rule(&Guard::new(&p), "/home/u/.config/app/ui.json", false),
            Some(Rule::ProtectedPath),
            "a cover under a protected directory"
        );
    }

    #[test]
    fn secrets_are_never_proposed_protected_or_not() {
        let p = policy(serde_json::json!({}));
        let g = Guard::new(&p);
        for s in [
            "/home/u/.ssh/known_hosts",
            "/home/u/.aws/config",
            "/srv/app/.env",
            "/srv/tls/server.pem",
            "/home/u/.config/gh/hosts.yml",
            "/etc/ssl/private/k",
            "/root/.docker/config.json",
        ] {
            assert_eq!(rule(&g, s, false), Some(Rule::Secret), "{s}");
        }
        assert_eq!(
            Guard::egress("169.254.169.254").map(|r| r.0),
            Some(Rule::Secret)
        );
        assert!(Guard::egress("api.github.com").is_none());
    }

    #[test]
    fn a_cover_that_would_hold_a_credential_store_is_narrowed() {
        let file = Path::new("/home/u/.docker/buildx/x");
        assert_eq!(
            Guard::narrow(file, "/home/u/.docker".into()),
            Path::new("/home/u/.docker/buildx")
        );
        let file = Path::new("/home/u/.cargo/registry/src/a.rs");
        assert_eq!(
            Guard::narrow(file, "/home/u/.cargo".into()),
            Path::new("/home/u/.cargo/registry")
        );
        let file = Path::new("/home/u/.config/app/a");
        assert_eq!(
            Guard::narrow(file, "/home/u/.config/app".into()),
            Path::new("/home/u/.config/app")
        );
    }

    #[test]
    fn self_protection_kernel_fs_read_only_and_system_writes() {
        let p = policy(serde_json::json!({"root": "/w", "writable": ["/w"]}));
        let g = Guard::new(&p);
        assert_eq!(
            rule(&g, "/etc/gatewayd/policy.json", false),
            Some(Rule::SelfProtection)
        );
        assert_eq!(rule(&g, "/proc/1/environ", false), Some(Rule::KernelFs));
        assert_eq!(rule(&g, "/home/u/.bashrc", true), Some(Rule::ReadOnly));
        assert_eq!(
            rule(&g, "/w/.git/hooks/pre-commit", true),
            Some(Rule::ReadOnly)
        );
        assert_eq!(
            rule(&g, "/etc/ssl/openssl.cnf", true),
            Some(Rule::SystemWrite)
        );
        assert_eq!(
            rule(&g, "/etc/ssl/openssl.cnf", false),
            None,
            "reading it is proposed"
        );
        assert_eq!(rule(&g, "/home/u/.bashrc", false), None);
    }
}
