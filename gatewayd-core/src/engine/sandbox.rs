//! Path and URL arguments against the policy's `sandbox` and `network` sections.
use std::{
    collections::HashSet,
    os::unix::fs::MetadataExt,
    path::{Component, Path, PathBuf},
};

pub use super::egress::{Dest, EgressView, host_matches, parse_url, split_authority};
use crate::{
    policy::{PathAccess, Sandbox, protected_names::ProtectedNames, tmp_binds::lexical},
    shell::{
        RipgrepRules, WalkFilter,
        uri::{self, Uri},
    },
    sys::FileId,
};

/// A path argument's canonical form ([`canonicalize`]) and, when the walk that proved it
/// reached an existing file, that file's identity (the protected-inode check uses it instead
/// of walking the path again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical path.
    pub path: PathBuf,
    id: Option<FileId>,
}

impl Resolved {
    /// A canonical path whose identity is not known (read from the file system when needed).
    pub fn unproved(path: PathBuf) -> Resolved {
        Resolved { path, id: None }
    }
}

impl std::ops::Deref for Resolved {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// Canonical form of `p` (absolute): the real path when it exists; otherwise the real path of
/// its longest existing ancestor with the rest appended as written (a `..` there undoes the
/// name before it).
/// A dangling symlink or a component that is not a directory cannot be resolved: error.
/// A path with no symlink on the way is resolved in one `openat2` (`crate::sys`).
pub fn canonicalize(p: &Path) -> Result<PathBuf, String> {
    resolve_absolute(p).map(|r| r.path)
}

/// [`canonicalize`], with the identity of the file when the no-symlink walk reached it.
fn resolve_absolute(p: &Path) -> Result<Resolved, String> {
    if !p.is_absolute() {
        return Err(format!("`{}` is not absolute", p.display()));
    }
    match crate::sys::reach_without_symlinks(p) {
        Ok(id) => {
            return Ok(Resolved {
                path: lexical(p),
                id: Some(id),
            });
        }
        // A missing component met before any symlink: realpath would fail there too.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A new name in a directory reached without a symlink (a file about to be written).
            if let (Some(parent), Some(Component::Normal(name))) =
                (p.parent(), p.components().next_back())
                && crate::sys::reach_without_symlinks(parent).is_ok()
            {
                return Ok(Resolved::unproved(lexical(parent).join(name)));
            }
        }
        Err(_) => {
            if let Ok(c) = std::fs::canonicalize(p) {
                return Ok(Resolved::unproved(c));
            }
        }
    }
    walk_components(p).map(Resolved::unproved)
}

/// [`canonicalize`]'s slow way: component by component, for a path through a symlink to a
/// missing name, or where `openat2` is not available. Below the first missing name the rest
/// is taken as written, and a `..` there leaves the last name not yet made (`build/..` after
/// `mkdir build`): were that name made a symlink before the path is used, the path would lead
/// elsewhere, as any path below a name not yet made would (POLICY.md, Limits of the engine).
fn walk_components(p: &Path) -> Result<PathBuf, String> {
    let mut cur = PathBuf::from("/");
    // Names at the end of `cur` that do not exist.
    let mut missing = 0usize;
    for comp in p.components() {
        match comp {
            Component::RootDir | Component::CurDir => {}
            Component::Prefix(_) => return Err("path prefix".into()),
            Component::ParentDir => {
                missing = missing.saturating_sub(1);
                cur.pop();
            }
            Component::Normal(name) => {
                let next = cur.join(name);
                if missing > 0 {
                    missing += 1;
                    cur = next;
                    continue;
                }
                match std::fs::symlink_metadata(&next) {
                    Ok(_) => {
                        cur = std::fs::canonicalize(&next)
                            .map_err(|e| format!("`{}` cannot be resolved: {e}", next.display()))?;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        if !cur.is_dir() {
                            return Err(format!("`{}` is not a directory", cur.display()));
                        }
                        missing = 1;
                        cur = next;
                    }
                    Err(e) => return Err(format!("`{}`: {e}", next.display())),
                }
            }
        }
    }
    Ok(cur)
}

/// Whether the normalised absolute path `p` is `root` or lies below it: [`Path::starts_with`]
/// for paths in normal form, compared as bytes instead of component by component.
fn is_under(p: &Path, root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let (p, root) = (p.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let root = root.strip_suffix(b"/").unwrap_or(root);
    p.starts_with(root) && (p.len() == root.len() || p[root.len()] == b'/')
}

/// Both forms of a policy path: as written (normalised) and resolved.
fn both(p: &Path) -> Vec<PathBuf> {
    let mut v = vec![lexical(p)];
    match canonicalize(p) {
        Ok(c) if c != v[0] => v.push(c),
        _ => {}
    }
    v
}

/// Longest path the kernel opens (Linux `PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// Most entries looked at below one protected directory when indexing hard links.
pub const PROTECTED_INDEX_CAP: usize = 100_000;

/// Records the identity of a protected entry, and of every file below a protected directory
/// that has more than one name (only those can be reached through a hard link elsewhere).
/// Symlinks are not followed; at most [`PROTECTED_INDEX_CAP`] entries per directory.
fn index_protected(p: &Path, ids: &mut HashSet<(u64, u64)>) {
    let Ok(m) = std::fs::metadata(p) else {
        return;
    };
    ids.insert((m.dev(), m.ino()));
    if !m.is_dir() {
        return;
    }
    let mut stack = vec![p.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            seen += 1;
            if seen > PROTECTED_INDEX_CAP {
                return;
            }
            let Ok(m) = e.metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() && m.nlink() > 1 {
                ids.insert((m.dev(), m.ino()));
            }
        }
    }
}

/// The sandbox section, resolved once.
#[derive(Debug, Default)]
pub struct SandboxView {
    /// `sandbox.root`, canonicalised (as written when it does not resolve); relative path arguments
    /// start here.
    pub root: Option<PathBuf>,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    /// `sandbox.read_only`: never a write target, nor inside one.
    read_only: Vec<PathBuf>,
    /// With `private_tmp`: each directory of the host's `/tmp` (`/tmp/NAME`) that holds a
    /// path the policy names. It is the host's, not the session's scratch: reached only
    /// below a root of the policy, never by the session's `/tmp` alone.
    tmp_host: Vec<PathBuf>,
    /// (device, inode) of protected entries that exist: catches hard links.
    protected_ids: HashSet<(u64, u64)>,
    /// Allowed binaries: canonical paths, and the file names written in the policy.
    pub exec: Vec<PathBuf>,
    /// `sandbox.protected_names` (checked when the policy loaded).
    names: ProtectedNames,
    /// Where the names apply: `root` and the writable roots (as written and canonical).
    name_roots: Vec<PathBuf>,
    /// Paths protected at run time ([`SandboxView::protect`]): gatewayd's own files.
    own: Vec<PathBuf>,
}

impl SandboxView {
    /// Resolves the policy's paths (as written and canonicalised) and indexes protected inodes.
    pub fn new(s: &Sandbox) -> SandboxView {
        let root = s
            .root
            .as_ref()
            .map(|r| canonicalize(r).unwrap_or_else(|_| lexical(r)));
        let mut read: Vec<PathBuf> = s.readable.iter().flat_map(|p| both(p)).collect();
        let mut write: Vec<PathBuf> = s.writable.iter().flat_map(|p| both(p)).collect();
        let mut tmp_host = Vec::new();
        if s.private_tmp {
            // The session's own `/tmp` under `gatewayd run` (docs/POLICY.md, sandbox), but
            // for the directories of the host's `/tmp` that hold what the policy names: under
            // `gatewayd run` the agent sees only the policy's paths bound there, and a tool
            // outside it (a hook) writes the host's.
            write.push(PathBuf::from("/tmp"));
            let listed = s.protected.iter().chain(&s.read_only).map(PathBuf::as_path);
            for inside in crate::policy::tmp_binds::under_tmp(s.named_paths().chain(listed)) {
                let top: PathBuf = inside.components().take(3).collect();
                if !tmp_host.contains(&top) {
                    tmp_host.push(top);
                }
            }
        }
        read.extend(write.iter().cloned());
        read.extend(root.iter().cloned());
        let protected: Vec<PathBuf> = s.protected.iter().flat_map(|p| both(p)).collect();
        let mut protected_ids = HashSet::new();
        for p in &protected {
            index_protected(p, &mut protected_ids);
        }
        let exec = s.exec.iter().flat_map(|p| both(p)).collect();
        let names = ProtectedNames::parse(&s.protected_names).unwrap_or_default();
        let name_roots = root.iter().chain(&write).cloned().collect();
        SandboxView {
            names,
            name_roots,
            own: Vec::new(),
            root,
            read,
            write,
            protected,
            read_only: s
                .read_only_with_defaults(None)
                .iter()
                .flat_map(|p| both(p))
                .collect(),
            tmp_host,
            protected_ids,
            exec,
        }
    }

    /// Adds a protected path at run time (the policy file, the audit log).
    pub fn protect(&mut self, p: &Path) {
        for q in both(p) {
            index_protected(&q, &mut self.protected_ids);
            self.own.push(q.clone());
            self.protected.push(q);
        }
    }

    /// The read-only path that `p` (normalised, absolute) equals or lies under, if any.
    pub fn read_only_by_path(&self, p: &Path) -> Option<&PathBuf> {
        self.read_only.iter().find(|x| is_under(p, x))
    }

    /// Whether `word`, a file name, is one that a program's text names a secret by, wherever
    /// it lies: a `sandbox.protected_names` entry without a wildcard (`.env`, `id_rsa`), or
    /// the name of a protected path when it starts with `.` (`.ssh`, `.aws`).
    pub fn names_a_secret(&self, word: &str) -> bool {
        self.names
            .patterns
            .iter()
            .any(|(_, p)| !p.wildcard && p.matches(word.as_bytes()))
            || self.protected.iter().any(|x| {
                x.file_name()
                    .is_some_and(|n| n.to_str() == Some(word) && word.starts_with('.'))
            })
    }

    /// Whether `p` is or lies in one of gatewayd's own files.
    pub fn own_hit(&self, p: &Path) -> bool {
        self.own.iter().any(|x| is_under(p, x))
    }

    /// Whether a refusal's message names one of gatewayd's own files as the protected path
    /// it reached (as the path and shell checks write it).
    pub fn names_own_path(&self, message: &str) -> bool {
        self.own
            .iter()
            .any(|p| message.contains(&format!("protected path `{}`", p.display())))
    }

    /// Canonical form of a tool's path argument: [`SandboxView::resolve_path`] of the path
    /// itself, or of the path a local `file://` URI names (percent-decoded). A URI of
    /// another scheme, or a `file://` URI naming another host, is no path: error.
    pub fn resolve(&self, raw: &str) -> Result<Resolved, String> {
        match uri::parse(raw) {
            Ok(None) => self.resolve_path(raw),
            Ok(Some(Uri::File(path))) => self.resolve_path(&path.to_string_lossy()),
            Ok(Some(Uri::Other(scheme))) => Err(format!(
                "`{raw}` is a `{scheme}:` URL, not a path (only local `file://` URIs name files)"
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Canonical form of a path as written (a URI is a relative path here: shell commands
    /// open their arguments literally); relative paths are taken from `sandbox.root`.
    pub fn resolve_path(&self, raw: &str) -> Result<Resolved, String> {
        if raw.is_empty() || raw.contains('\0') {
            return Err("empty path or NUL byte".into());
        }
        if raw.len() >= PATH_MAX {
            return Err(format!("path longer than {PATH_MAX} bytes"));
        }
        let p = Path::new(raw);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            match &self.root {
                Some(r) => r.join(p),
                None => return Err(format!("relative path `{raw}` and no `sandbox.root`")),
            }
        };
        resolve_absolute(&abs)
    }

    /// The protected path that `p` (normalised, absolute) equals or lies under by its name
    /// alone, if any: [`SandboxView::protected_hit`] without the look at its inode.
    pub fn protected_by_path(&self, p: &Path) -> Option<&PathBuf> {
        self.protected.iter().find(|x| is_under(p, x))
    }

    /// The protected path that `p` equals or lies under, if any (also by inode: the identity
    /// the resolving walk read, else the file's as `stat` gives it now).
    pub fn protected_hit(&self, p: &Resolved) -> Option<PathBuf> {
        if let Some(x) = self.protected_by_path(p) {
            return Some(x.clone());
        }
        let (id, is_file, nlink) = if let Some(f) = p.id {
            ((f.dev, f.ino), f.is_file, f.nlink)
        } else {
            let m = std::fs::metadata(&p.path).ok()?;
            ((m.dev(), m.ino()), m.is_file(), m.nlink())
        };
        if self.protected_ids.contains(&id) {
            return Some(p.path.clone());
        }
        // A file with several names not seen at start: linked since. Look again.
        if is_file && nlink > 1 {
            let mut ids = HashSet::new();
            for x in &self.protected {
                index_protected(x, &mut ids);
                if ids.contains(&id) {
                    return Some(x.clone());
                }
            }
        }
        None
    }

    /// A protected path strictly below `p` that a walk of `p` reaches: with `names_only`,
    /// only a directory (its entries are its contents); with `skip_hidden`, only one with no
    /// hidden component below `p`.
    pub fn protected_reached_below(
        &self,
        p: &Path,
        names_only: bool,
        skip_hidden: bool,
        filter: &WalkFilter,
    ) -> Option<PathBuf> {
        let matcher = filter.matcher();
        self.protected
            .iter()
            .filter(|x| is_under(x, p) && *x != p)
            .filter(|x| !names_only || x.is_dir())
            .find(|x| {
                if let Some(rules) = &filter.ripgrep {
                    return super::ripgrep_walk::reaches(p, x, skip_hidden, rules);
                }
                let Ok(rel) = x.strip_prefix(p) else {
                    return true;
                };
                let hidden = rel
                    .components()
                    .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
                let filtered = matcher.as_ref().is_some_and(|m| m.skips(rel, x.is_dir()));
                let skipped = (skip_hidden && hidden) || filtered;
                !skipped
            })
            .cloned()
    }

    /// The `sandbox.protected_names` pattern a path's own name matches, when it lies under
    /// `root` or a writable root.
    pub fn protected_name(&self, p: &Path) -> Option<&str> {
        let name = p.file_name()?;
        let pattern = self.names.matching(name)?;
        self.name_roots
            .iter()
            .any(|r| is_under(p, r))
            .then_some(pattern)
    }

    /// Checks a canonical path for an access; Err = the message of a `sandbox` denial.
    pub fn check(&self, raw: &str, p: &Resolved, access: PathAccess) -> Result<(), String> {
        self.check_protection(raw, p, access)?;
        self.check_placement(raw, p, access)
    }

    /// Checks a path whose name and metadata are looked at, no file opened for its contents
    /// (`ls FILE`, `stat`, `test -f`): as a read, except that a protected file itself may be
    /// looked at, as a listing of its directory shows it. A protected directory is listed
    /// (its entries are its contents), and a path below one names what it holds: both stay
    /// refused.
    pub fn check_metadata(&self, raw: &str, p: &Resolved) -> Result<(), String> {
        // The protection checks first, as for a read: the file system is asked about the
        // path only when one of them refuses it.
        if let Err(refused) = self.check_protection(raw, p, PathAccess::Read) {
            let is_dir = std::fs::metadata(&p.path).is_ok_and(|m| m.is_dir());
            if is_dir || self.protected_hit(p).is_some_and(|x| x != p.path) {
                return Err(refused);
            }
        }
        self.check_placement(raw, p, PathAccess::Read)
    }

    /// A path inside a protected path, or one whose name is protected, is refused.
    fn check_protection(&self, raw: &str, p: &Resolved, access: PathAccess) -> Result<(), String> {
        if let Some(x) = self.protected_hit(p) {
            return Err(format!(
                "path `{raw}` resolves to `{}`, which is inside protected path `{}`; protected paths are never readable or writable through tools. Next: do not try to reach it another way; ask the user for what you need from it.",
                p.display(),
                x.display()
            ));
        }
        // A name protects a file: reading a path that names nothing opens nothing (a shell
        // word taken as a path, jq's `.key`), while a write could make it.
        let named = || {
            access == PathAccess::Write
                || p.id.is_some()
                || std::fs::symlink_metadata(&p.path).is_ok()
        };
        if let Some(pattern) = self.protected_name(p).filter(|_| named()) {
            return Err(format!(
                "path `{raw}` resolves to `{}`, whose name matches protected name `{pattern}` (sandbox.protected_names): files of that name are never readable or writable by the agent. Next: do not try to reach it another way; ask the user for what you need from it.",
                p.display(),
            ));
        }
        Ok(())
    }

    /// Checks a path a program may write as its output, an argument of a program the shell
    /// analysis has no table for (`go build -o FILE`; `shell::CommandAnalysis::outputs`): a
    /// write of the path itself, inside a writable root and outside every read-only and
    /// protected path, but not of what it holds (`black .` holds `.git/config`).
    pub fn check_output(&self, raw: &str, p: &Resolved) -> Result<(), String> {
        self.check_protection(raw, p, PathAccess::Write)?;
        self.check_placement_of(raw, p, PathAccess::Write, false)
    }

    /// The path lies in a root for its access, a write outside every read-only path, and no
    /// protected path below is reached.
    fn check_placement(&self, raw: &str, p: &Resolved, access: PathAccess) -> Result<(), String> {
        self.check_placement_of(raw, p, access, true)
    }

    /// [`SandboxView::check_placement`]; without `what_it_holds`, a write is of the path
    /// itself: a read-only or protected path below it does not refuse it.
    fn check_placement_of(
        &self,
        raw: &str,
        p: &Resolved,
        access: PathAccess,
        what_it_holds: bool,
    ) -> Result<(), String> {
        let (roots, what) = match access {
            PathAccess::Write => (&self.write, "writable"),
            PathAccess::Read | PathAccess::Tree | PathAccess::Search | PathAccess::Names => {
                (&self.read, "readable")
            }
        };
        // The session's own `/tmp` covers none of the host's directories there that hold what
        // the policy names ([`SandboxView::tmp_host`]).
        let host_tmp = || self.tmp_host.iter().any(|x| is_under(p, x));
        let covers = |r: &PathBuf| is_under(p, r) && !(r == Path::new("/tmp") && host_tmp());
        if !roots.iter().any(covers) {
            // The root first (for reads), each once, three at most.
            let mut seen: Vec<&PathBuf> = Vec::new();
            let root = self.root.iter().filter(|_| access != PathAccess::Write);
            for r in root.chain(roots.iter()) {
                if !seen.contains(&r) {
                    seen.push(r);
                }
            }
            let mut list: Vec<String> = seen
                .iter()
                .take(3)
                .map(|r| format!("`{}`", r.display()))
                .collect();
            if seen.len() > 3 {
                list.push("…".into());
            }
            let next = if list.is_empty() {
                "ask the user; this session has no such root".to_owned()
            } else {
                format!(
                    "use a path under {}, or ask the user to allow this one",
                    list.join(", ")
                )
            };
            return Err(format!(
                "path `{raw}` resolves to `{}`, outside every {what} root of the sandbox. Next: {next}.",
                p.display()
            ));
        }
        if access == PathAccess::Write
            && let Some(x) = self
                .read_only
                .iter()
                // Inside one whether or not it exists; above one only when it does (deleting a
                // directory that holds a read-only path that is not there takes nothing).
                .find(|x| is_under(p, x) || (what_it_holds && is_under(x, p) && x.exists()))
        {
            return Err(format!(
                "path `{raw}` resolves to `{}`, which is or holds read-only path `{}`: the agent may read it but not change it (code or settings the user's own programs run later). Next: ask the user to make that change.",
                p.display(),
                x.display()
            ));
        }
        let below = match access {
            _ if !what_it_holds => None,
            PathAccess::Read => None,
            PathAccess::Names => {
                self.protected_reached_below(p, true, false, &WalkFilter::default())
            }
            PathAccess::Write | PathAccess::Tree => {
                self.protected_reached_below(p, false, false, &WalkFilter::default())
            }
            PathAccess::Search => self.reached_by_ripgrep(p, RipgrepRules::default()),
        };
        below.map_or(Ok(()), |x| Err(contains_protected(raw, p, &x)))
    }

    /// [`PathAccess::Search`] with these rules (a call's globs): readable, and no protected
    /// path below that ripgrep's walk by `rules`, hidden entries included, reaches.
    pub fn check_search(&self, raw: &str, p: &Resolved, rules: RipgrepRules) -> Result<(), String> {
        self.check(raw, p, PathAccess::Read)?;
        self.reached_by_ripgrep(p, rules)
            .map_or(Ok(()), |x| Err(contains_protected(raw, p, &x)))
    }

    /// The protected path below `p` that ripgrep's walk by `rules`, hidden entries included,
    /// reaches, if any.
    fn reached_by_ripgrep(&self, p: &Path, rules: RipgrepRules) -> Option<PathBuf> {
        let ripgrep = WalkFilter {
            ripgrep: Some(rules),
            ..WalkFilter::default()
        };
        self.protected_reached_below(p, false, false, &ripgrep)
    }
}

/// The denial of a walk of `p` that reaches protected path `x`.
fn contains_protected(raw: &str, p: &Path, x: &Path) -> String {
    format!(
        "path `{raw}` resolves to `{}`, which contains protected path `{}`. Next: name a narrower path that leaves it out, or ask the user.",
        p.display(),
        x.display()
    )
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;
