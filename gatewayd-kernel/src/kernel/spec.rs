//! What the kernel layer enforces, derived from the policy: the same sandbox and egress
//! allowlist the gateway checks, turned into map entries.
use std::{os::unix::fs::MetadataExt, path::PathBuf};

use gateway_common::{
    AF_INET, AF_INET6, EgressRule, InodeKey, MAX_READ_ONLY_NAMES, READ_ONLY_NAME_MAX,
};

use gatewayd_core::{
    net::Cidr,
    policy::{KernelMode, Policy, UnixEntry},
};

use crate::fs_roots::FsRoots;
use gatewayd_core::policy::protected_names::ProtectedNames;

/// A protected path as the kernel sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedInode {
    /// The path as the policy writes it.
    pub path: PathBuf,
    /// Its kernel identity (kernel `dev_t`, inode), symlinks followed.
    pub key: InodeKey,
}

/// A read-only path that does not exist, as the kernel refuses to let the agent make it: a
/// name in a directory that does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyName {
    /// The read-only path.
    pub path: PathBuf,
    /// Its directory's kernel identity (symlinks followed).
    pub dir: InodeKey,
    /// Its last component.
    pub name: Vec<u8>,
}

/// A readable or writable root (or a mount point under one) as the kernel sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootInode {
    /// The path, canonical.
    pub path: PathBuf,
    /// Its kernel identity (for a mount point: the root of the filesystem mounted there).
    pub key: InodeKey,
    /// `ROOT_READ` | `ROOT_WRITE` | `ROOT_NAMES`: what may be done beneath it, and whether
    /// the protected names apply there.
    pub rights: u32,
}

/// Everything a session needs from the kernel layer ([`super::SharedPrograms::add_session`]).
#[derive(Debug, Clone)]
pub struct KernelSpec {
    /// The agent's cgroup directory; the cgroup programs attach to it.
    pub cgroup_dir: PathBuf,
    /// Protected paths that exist, resolved to inodes.
    pub protected: Vec<ProtectedInode>,
    /// Binaries the agent may execute; enforced only when `exec_enforced`.
    pub exec: Vec<ProtectedInode>,
    /// The policy lists binaries (`sandbox.exec` non-empty): exec is an allowlist.
    pub exec_enforced: bool,
    /// With `exec_enforced`: library trees (`sandbox.exec_libs`) and the ELF interpreters of
    /// the listed binaries, whose files may be mapped executable but not executed.
    pub exec_map: Vec<ProtectedInode>,
    /// Egress allowlist entries with an address (`cidr`); host-only entries have no kernel form.
    pub egress: Vec<EgressRule>,
    /// Path-named Unix sockets outside the session the agent may reach (`network.unix`),
    /// resolved to the inodes of their socket files.
    pub unix_paths: Vec<ProtectedInode>,
    /// Abstract Unix socket names the agent may reach (`network.unix`'s `@name`s, without
    /// the `@`).
    pub unix_names: Vec<Vec<u8>>,
    /// Read-only paths (`sandbox.read_only` with the built-in ones) that did not exist when
    /// the spec was derived and whose directory did: names the agent may not make.
    pub read_only_names: Vec<ReadOnlyName>,
    /// The sides of the file roots enforced (`ROOT_READ` | `ROOT_WRITE`; 0: none), from
    /// [`FsRoots::flags`].
    pub roots_enforced: u32,
    /// With `roots_enforced` or `protected_names`: the roots and the mount points under
    /// them, resolved now.
    pub roots: Vec<RootInode>,
    /// `sandbox.protected_names`, parsed (`NAMES`; checked when the policy loaded).
    pub protected_names: ProtectedNames,
    /// `kernel: "require"`: any program that does not load and attach is an error.
    pub require: bool,

    /// `gatewayd run --learn`: a destination outside the egress allowlist is allowed and
    /// recorded `would_deny`, and at tier 1 the file programs let the learnable accesses
    /// through ([`gateway_common::SessionInfo::learn`]).
    pub learn: bool,
    /// The session's Landlock ruleset enforces its roots and exec allowlist and nothing else
    /// records its refusals (Landlock's own audit records are off): `raw_tp/sys_exit`'s
    /// `EACCES` outside them are recorded (`call_paths::landlock_reason`). Set by whoever
    /// starts the session's reader of events, not derived from the policy.
    pub landlock_refusals: bool,
    /// A learning session that learns files: what its names made, removed or renamed
    /// (`raw_tp/sys_exit`'s successful calls) are judged by
    /// ([`crate::fs_learn::Scope::judge_name`]). Set with the session's fanotify learner.
    pub learn_names: Option<crate::fs_learn::Scope>,
}

/// Problems found while deriving the spec that do not stop it (recorded in the audit log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecWarning {
    /// The path the problem is about.
    pub path: PathBuf,
    /// What the problem is.
    pub message: String,
}

/// Kernel `dev_t` (`MAJOR << 20 | MINOR`) from a userspace `st_dev`.
pub fn kernel_dev(st_dev: u64) -> u64 {
    let (major, minor) = (libc::major(st_dev), libc::minor(st_dev));
    (u64::from(major) << 20) | u64::from(minor)
}

/// The kernel's identity of the file at `path` (symlinks followed).
pub fn inode_key(path: &std::path::Path) -> std::io::Result<InodeKey> {
    let md = std::fs::metadata(path)?;
    Ok(InodeKey {
        dev: kernel_dev(md.dev()),
        ino: md.ino(),
    })
}

/// The kernel rules of the policy's egress entries that have a `cidr` (host-only entries are
/// resolved by `gatewayd run`), in policy order.
pub fn egress_rules(policy: &Policy) -> Vec<EgressRule> {
    policy
        .network
        .egress
        .iter()
        .filter_map(|e| {
            let cidr = Cidr::parse(e.cidr.as_deref()?).ok()?;
            Some(egress_rule(&cidr, e.port))
        })
        .collect()
}

/// One egress rule from an allowlist entry; host-only entries have no kernel form.
pub fn egress_rule(cidr: &Cidr, port: Option<u16>) -> EgressRule {
    EgressRule {
        family: if cidr.addr.is_ipv4() {
            AF_INET
        } else {
            AF_INET6
        },
        port: port.map_or(0, u32::from),
        addr: cidr.addr_bytes(),
        mask: cidr.mask_bytes(),
    }
}

/// `network.unix`, split into socket files (resolved now: one that does not exist, or is not
/// a socket, is reported and left out) and abstract names.
fn unix_entries(
    policy: &Policy,
    warnings: &mut Vec<SpecWarning>,
) -> (Vec<ProtectedInode>, Vec<Vec<u8>>) {
    use std::os::unix::fs::FileTypeExt as _;
    let (mut paths, mut names) = (Vec::new(), Vec::new());
    for entry in &policy.network.unix {
        match UnixEntry::parse(entry) {
            Ok(UnixEntry::Abstract(name)) => names.push(name),
            Ok(UnixEntry::Path(path)) => match std::fs::metadata(&path) {
                Ok(md) if md.file_type().is_socket() => paths.push(ProtectedInode {
                    key: InodeKey {
                        dev: kernel_dev(md.dev()),
                        ino: md.ino(),
                    },
                    path,
                }),
                Ok(_) => warnings.push(SpecWarning {
                    path,
                    message: "network.unix entry not allowed by the kernel: not a socket".into(),
                }),
                Err(e) => warnings.push(SpecWarning {
                    path,
                    message: format!("network.unix entry not allowed by the kernel: {e}"),
                }),
            },
            // Validated with the policy: cannot happen for a loaded policy.
            Err(message) => warnings.push(SpecWarning {
                path: entry.into(),
                message,
            }),
        }
    }
    (paths, names)
}

/// The read-only paths of `read_only` that do not exist, in a directory that does, as names
/// in that directory; the first [`MAX_READ_ONLY_NAMES`] whose name the map can hold (the
/// others are reported). A path whose directory does not exist either is not among them.
fn read_only_names(read_only: &[PathBuf], warnings: &mut Vec<SpecWarning>) -> Vec<ReadOnlyName> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut names = Vec::new();
    for path in read_only {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        let absent = matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        let Ok(dir_md) = std::fs::metadata(dir) else {
            continue;
        };
        if !absent || !dir_md.is_dir() {
            continue;
        }
        let name = name.as_bytes().to_vec();
        if names.len() == MAX_READ_ONLY_NAMES as usize || name.len() > READ_ONLY_NAME_MAX as usize {
            warnings.push(SpecWarning {
                path: path.clone(),
                message: "read-only path that does not exist: the kernel does not refuse making it (too many such paths, or a name over 30 bytes)".into(),
            });
            continue;
        }
        names.push(ReadOnlyName {
            path: path.clone(),
            dir: InodeKey {
                dev: kernel_dev(dir_md.dev()),
                ino: dir_md.ino(),
            },
            name,
        });
    }
    names
}

/// The inodes of the roots (and of the mount points under them, as mounted now). A listed
/// `readable` or `writable` entry that does not exist is reported: nothing under it can be
/// opened.
fn root_inodes(
    sandbox: &gatewayd_core::policy::Sandbox,
    roots: &FsRoots,
    warnings: &mut Vec<SpecWarning>,
) -> Vec<RootInode> {
    if !roots.enforced() && roots.names.is_none() {
        return Vec::new();
    }
    for p in sandbox.readable.iter().chain(&sandbox.writable) {
        if let Err(e) = std::fs::metadata(p) {
            warnings.push(SpecWarning {
                path: p.clone(),
                message: format!("sandbox root not reachable by the agent: {e}"),
            });
        }
    }
    roots
        .entries(&crate::fs_roots::mount_points())
        .into_iter()
        .filter_map(|(path, rights)| {
            let key = inode_key(&path).ok()?;
            Some(RootInode { path, key, rights })
        })
        .collect()
}

impl KernelSpec {
    /// Derives the spec for one agent cgroup. Protected paths are resolved to inodes now:
    /// a path that does not exist yet cannot be protected by identity and is reported.
    /// `read_only` (the session's read-only paths, built-in ones included) gives the names
    /// the agent may not make.
    pub fn from_policy(
        policy: &Policy,
        read_only: &[PathBuf],
        cgroup_dir: PathBuf,
    ) -> (KernelSpec, Vec<SpecWarning>) {
        let mut warnings = Vec::new();
        let mut resolve = |paths: &[PathBuf], what: &str| -> Vec<ProtectedInode> {
            let mut out = Vec::new();
            for path in paths {
                match inode_key(path) {
                    Ok(key) => out.push(ProtectedInode {
                        path: path.clone(),
                        key,
                    }),
                    Err(e) => warnings.push(SpecWarning {
                        path: path.clone(),
                        message: format!("{what}: {e}"),
                    }),
                }
            }
            out
        };
        let protected = resolve(
            &policy.sandbox.protected,
            "protected path not protected by the kernel",
        );
        let exec = resolve(
            &policy.sandbox.exec,
            "exec allowlist entry not allowed by the kernel",
        );
        let exec_enforced = !policy.sandbox.exec.is_empty();
        let exec_map = if exec_enforced {
            let mut trees = policy.sandbox.exec_libs();
            for bin in &policy.sandbox.exec {
                if let Some(interp) = crate::landlock::elf_interpreter(bin)
                    && !trees.contains(&interp)
                {
                    trees.push(interp);
                }
            }
            resolve(&trees, "library tree or interpreter not mappable")
        } else {
            Vec::new()
        };
        let egress = egress_rules(policy);
        let (unix_paths, unix_names) = unix_entries(policy, &mut warnings);
        let fs_roots = FsRoots::of(&policy.sandbox);
        let roots = root_inodes(&policy.sandbox, &fs_roots, &mut warnings);
        let read_only_names = read_only_names(read_only, &mut warnings);
        let spec = KernelSpec {
            cgroup_dir,
            protected,
            exec_enforced,
            exec,
            exec_map,
            egress,
            unix_paths,
            unix_names,
            read_only_names,
            roots_enforced: fs_roots.flags(),
            roots,
            protected_names: ProtectedNames::parse(&policy.sandbox.protected_names)
                .unwrap_or_default(),
            require: policy.kernel == KernelMode::Require,
            learn: false,
            landlock_refusals: false,
            learn_names: None,
        };
        (spec, warnings)
    }

    /// The `PROTECTED` map's keys.
    pub fn protected_keys(&self) -> Vec<InodeKey> {
        self.protected.iter().map(|p| p.key).collect()
    }

    /// The `EXEC` map's keys of binaries the agent may run ([`gateway_common::EXEC_RUN`]).
    pub fn exec_keys(&self) -> Vec<InodeKey> {
        self.exec.iter().map(|p| p.key).collect()
    }

    /// The `EXEC` map's keys of trees and interpreters that may only be mapped executable
    /// ([`gateway_common::EXEC_MAP_ONLY`]); a key that is also a listed binary is left out.
    pub fn exec_map_keys(&self) -> Vec<InodeKey> {
        let run = self.exec_keys();
        self.exec_map
            .iter()
            .map(|p| p.key)
            .filter(|k| !run.contains(k))
            .collect()
    }

    /// The `ROOTS` map's entries: each root's key and rights, one per key (the rights of two
    /// paths with the same inode are joined).
    pub fn root_keys(&self) -> Vec<(InodeKey, u32)> {
        let mut out: Vec<(InodeKey, u32)> = Vec::new();
        for r in &self.roots {
            match out.iter_mut().find(|(k, _)| *k == r.key) {
                Some((_, rights)) => *rights |= r.rights,
                None => out.push((r.key, r.rights)),
            }
        }
        out
    }

    /// The `network.unix` socket path with this inode, for audit details.
    pub fn unix_path(&self, dev: u64, ino: u64) -> Option<&PathBuf> {
        self.unix_paths
            .iter()
            .find(|p| p.key.ino == ino && p.key.dev == dev)
            .map(|p| &p.path)
    }

    /// The protected path with this inode, for audit details.
    pub fn protected_path(&self, dev: u64, ino: u64) -> Option<&PathBuf> {
        self.protected
            .iter()
            .find(|p| p.key.ino == ino && p.key.dev == dev)
            .map(|p| &p.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn kernel_dev_encoding() {
        // userspace makedev(8, 1) -> kernel MKDEV(8, 1) = 8 << 20 | 1
        assert_eq!(kernel_dev(libc::makedev(8, 1)), (8 << 20) | 1);
        assert_eq!(kernel_dev(libc::makedev(259, 300)), (259 << 20) | 0x12c);
    }

    #[test]
    fn spec_from_policy() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "x").unwrap();
        let text = format!(
            r#"{{"version":1,"kernel":"best_effort","sandbox":{{"protected":["{}","/nonexistent/x"]}},
               "network":{{"egress":[{{"cidr":"127.0.0.1","port":80}},{{"host":"example.com"}},{{"cidr":"::1/128"}}]}}}}"#,
            secret.display()
        );
        let p = Policy::parse(&text, Path::new("t")).unwrap();
        let (spec, warnings) = KernelSpec::from_policy(&p, &[], "/x".into());
        assert!(!spec.require);
        assert_eq!(spec.protected.len(), 1);
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            spec.egress.len(),
            2,
            "the host-only entry has no kernel form"
        );
        assert_eq!(spec.egress[0].port, 80);
        assert_eq!(spec.egress[0].addr[..4], [127, 0, 0, 1]);
        assert_eq!(spec.egress[1].family, AF_INET6);
        assert_eq!(spec.egress[1].port, 0);
        let md = std::fs::metadata(&secret).unwrap();
        assert_eq!(
            spec.protected_path(kernel_dev(md.dev()), md.ino()),
            Some(&secret)
        );
    }

    #[test]
    fn roots_resolve_to_inodes_with_their_rights() {
        use gateway_common::{ROOT_READ, ROOT_WRITE};
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let text = serde_json::json!({"version": 1, "sandbox": {
            "readable": [a, dir.path().join("missing")], "writable": [b]}})
        .to_string();
        let p = Policy::parse(&text, Path::new("t")).unwrap();
        let (spec, warnings) = KernelSpec::from_policy(&p, &[], "/x".into());
        assert_eq!(spec.roots_enforced, ROOT_READ | ROOT_WRITE);
        let keys = spec.root_keys();
        let rights = |path: &Path| {
            let key = inode_key(path).unwrap();
            keys.iter().find(|(k, _)| *k == key).map(|(_, r)| *r)
        };
        assert_eq!(rights(&a), Some(ROOT_READ));
        assert_eq!(rights(&b), Some(ROOT_READ | ROOT_WRITE));
        assert_eq!(rights(dir.path()), None, "the parent is no root");
        assert!(
            warnings
                .iter()
                .any(|w| w.path.ends_with("missing") && w.message.contains("sandbox root")),
            "{warnings:?}"
        );

        let text = r#"{"version": 1, "sandbox": {"root": "/tmp"}}"#;
        let p = Policy::parse(text, Path::new("t")).unwrap();
        let (spec, _) = KernelSpec::from_policy(&p, &[], "/x".into());
        assert_eq!(spec.roots_enforced, 0, "no list: no kernel roots");
        assert!(spec.roots.is_empty());
    }

    #[test]
    fn unix_entries_resolve_socket_files_and_keep_abstract_names() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "x").unwrap();
        let text = serde_json::json!({"version": 1, "network": {"unix": [
            sock, plain, dir.path().join("missing"), "@abstract"]}})
        .to_string();
        let p = Policy::parse(&text, Path::new("t")).unwrap();
        let (spec, warnings) = KernelSpec::from_policy(&p, &[], "/x".into());
        assert_eq!(spec.unix_paths.len(), 1);
        let md = std::fs::metadata(&sock).unwrap();
        assert_eq!(spec.unix_path(kernel_dev(md.dev()), md.ino()), Some(&sock));
        assert_eq!(spec.unix_names, [b"abstract".to_vec()]);
        let w: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].ends_with("not a socket"), "{w:?}");
    }
}
