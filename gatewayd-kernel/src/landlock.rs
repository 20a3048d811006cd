//! Landlock: the file fallback when BPF LSM is missing (tier 2), and a tool server's own
//! allowlist (`gatewayd mcp`).
//!
//! For the agent ([`Ruleset::build`]), the protected paths are hidden by mounts in its own
//! mount namespace ([`crate::agent_privileges::hide`]), so Landlock does not have to
//! approximate "everything except the protected paths": one rule grants every right beneath
//! `/`, so every directory lists and files can be made anywhere the user's permissions
//! allow. A right granted there is left unhandled by the ruleset (it restricts nothing,
//! and an open that asks only for unhandled rights costs no walk up the tree), except
//! `REFER`, which Landlock refuses when unhandled. With an exec allowlist, `EXECUTE` is left out of that rule and granted on the
//! listed binaries (and their ELF interpreters) alone. With file roots
//! ([`crate::fs_roots::FsRoots`]: `sandbox.readable` or `sandbox.writable` listed), the read
//! rights, the write rights or both leave that rule too and are granted beneath the roots
//! alone, with rules for devices (`/dev`), `/proc` and `/sys` in the place of tier 1's
//! exemptions ([`Ruleset::build`]). From ABI 6 the domain is also scoped
//! for signals (the agent cannot signal gatewayd) and for abstract Unix sockets (it cannot
//! reach one made outside its domain; path-named sockets have no Landlock right up to ABI 7,
//! see docs/KERNEL.md); Landlock itself forbids a sandboxed process
//! to ptrace anything outside its domain (which also closes `/proc/PID/root` of processes
//! outside the agent's mount namespace) and, while its ruleset handles a file right, to
//! change the mount tree, so the hiding mounts stay. From ABI 6, an agent's ruleset with
//! nothing to restrict in the file system (no roots, no exec allowlist) handles no file
//! right, only its scopes: its file hooks then cost the agent's opens nothing, and the
//! agent's seccomp filter, which refuses every mount call, keeps the mounts in place.
//!
//! A tool server's allowlist ([`Ruleset::build_allowlist`]) expands its allowed trees around
//! the protected paths: every entry that does not lead to a protected path gets a rule for
//! its whole hierarchy, an entry that does is descended into, a protected path gets none.
//!
//! The ruleset is built in gatewayd (files opened `O_PATH`), and the agent's child process
//! applies it with `landlock_restrict_self` right before exec ([`Ruleset::restrict_fn`]).
use std::{
    ffi::CString,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::{ffi::OsStrExt, fs::MetadataExt},
    },
    path::{Path, PathBuf},
};

// Access rights (include/uapi/linux/landlock.h).
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// `READ_FILE | READ_DIR`: what a readable root grants.
const READ: u64 = READ_FILE | READ_DIR;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;
const CREATE_RULESET_VERSION: libc::c_uint = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;
/// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (ABI 7): keep logging denials after `execve`.
const RESTRICT_SELF_LOG_NEW_EXEC_ON: libc::c_uint = 1 << 1;

/// The Landlock ABI version this kernel offers, or the reason there is none. Asked of the
/// kernel (the `landlock_create_ruleset` version query), not read from a file.
pub fn abi_version() -> Result<u32, String> {
    // SAFETY: the version query takes no attribute pointer and returns an int.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => "not built into this kernel (ENOSYS)".into(),
            Some(libc::EOPNOTSUPP) => "built in but not enabled at boot (EOPNOTSUPP)".into(),
            _ => e.to_string(),
        });
    }
    Ok(v as u32)
}

/// Every filesystem right this ABI knows.
fn all_fs_rights(abi: u32) -> u64 {
    let mut r = (1 << 13) - 1; // ABI 1: EXECUTE ..= MAKE_SYM
    if abi >= 2 {
        r |= REFER;
    }
    if abi >= 3 {
        r |= TRUNCATE;
    }
    if abi >= 5 {
        r |= IOCTL_DEV;
    }
    r
}

/// Rights that make sense on a non-directory.
fn file_rights(abi: u32) -> u64 {
    all_fs_rights(abi) & (EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV)
}

/// Why a Landlock ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// This kernel offers no usable Landlock; says why.
    #[error("Landlock is unavailable: {0}")]
    Unavailable(String),
    /// Adding a path to the ruleset failed.
    #[error("Landlock {op} {path}: {source}")]
    Io {
        /// What was being done, e.g. `read_dir`.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What the agent's ruleset should allow, from the policy.
#[derive(Debug, Clone, Default)]
pub struct FsPolicy {
    /// When not empty, the only files that may be executed.
    pub exec: Vec<PathBuf>,
    /// The readable and writable roots (either side `None`: unrestricted).
    pub roots: crate::fs_roots::FsRoots,
    /// The agent's own program: with reading restricted and no exec allowlist, it is
    /// readable (Landlock needs `READ_FILE` to execute a file; at tier 1 an exec open is
    /// not a read).
    pub program: Option<PathBuf>,
    /// The process's seccomp filter refuses every mount call (the agent's does; a tool
    /// server has none): then, from ABI 6, a ruleset with no file right to restrict handles
    /// none ([`Ruleset::build`]).
    pub mounts_refused_by_seccomp: bool,
}

/// The write rights of `abi`: everything a writable root grants beyond reading (making,
/// removing, writing, truncating and moving files in).
fn write_rights(abi: u32) -> u64 {
    all_fs_rights(abi) & !(EXECUTE | READ | IOCTL_DEV)
}

/// The device files every process may expect, as every container runtime provides them:
/// an allowlist grants reading and writing them (a Node server's event loop opens
/// `/dev/null` to keep a descriptor in reserve, and tries `/` when it cannot).
pub const STANDARD_DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What an allowlist ruleset allows ([`Ruleset::build_allowlist`]).
#[derive(Debug, Clone, Default)]
pub struct AllowPolicy {
    /// Trees that may be read (and listed).
    pub read: Vec<PathBuf>,
    /// Trees that may be read and written.
    pub write: Vec<PathBuf>,
    /// Refused even inside `read` and `write`.
    pub protected: Vec<PathBuf>,
    /// When not empty, the only files that may be executed.
    pub exec: Vec<PathBuf>,
}

/// A built ruleset, ready for the agent's child to apply.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
    /// The Landlock ABI version the ruleset was built for.
    pub abi: u32,
    /// How many rules it holds (for the audit record).
    pub rules: usize,
    /// The filesystem rights it restricts; a rule's rights are cut to these.
    handled: u64,
    /// Whether signals out of the domain, and connecting or sending to abstract Unix sockets
    /// made outside it, are blocked (both scopes come with ABI 6).
    pub scoped_signals: bool,
    protected_inodes: Vec<(u64, u64)>,
    /// The rights of the rule on `/proc`, granted again in the agent's process on the
    /// procfs of its PID namespace (another inode than the one the rule was made for); 0:
    /// no rule on `/proc`.
    proc_rights: u64,
    /// The same for `/dev`: the agent's `/dev` is a tmpfs of its own (`agent_privileges::dev`).
    dev_rights: u64,
}

/// (device, inode) of each path that exists.
fn inodes(paths: &[PathBuf]) -> Vec<(u64, u64)> {
    paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

fn canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// The file rights an agent's ruleset of `abi` handles when it grants `slash` beneath `/`.
/// A right granted beneath `/` restricts nothing, so the ruleset leaves it unhandled: an
/// open that asks only for unhandled rights costs Landlock no walk up to `/`. REFER stays
/// handled and granted: unhandled, it would forbid every move of a file to another
/// directory. (ABI 1 has no REFER: there, a ruleset handling nothing is refused and would not
/// keep the mounts in place, so it handles everything.) With nothing to restrict and the
/// mounts kept by seccomp, from ABI 6 it handles no file right, only its scopes: its domain
/// still scopes signals and abstract Unix sockets and forbids ptrace outside it, while
/// Landlock's file and mount hooks pass the process by (an open costs about 170 ns less:
/// docs/internals/KERNEL.md).
fn handled_rights(abi: u32, slash: u64, mounts_refused_by_seccomp: bool) -> u64 {
    let all = all_fs_rights(abi);
    let restricted = all & !slash;
    if restricted == 0 && abi >= 6 && mounts_refused_by_seccomp {
        return 0;
    }
    match restricted | (all & REFER) {
        0 => all,
        some => some,
    }
}

impl Ruleset {
    /// Whether it restricts any filesystem right (none: its domain only scopes).
    pub fn handles_files(&self) -> bool {
        self.handled != 0
    }

    /// Builds the agent's ruleset for `policy`: every right beneath `/`, but `EXECUTE`
    /// only on the listed binaries and their ELF interpreters when `policy.exec` lists any,
    /// and, with roots, reading only beneath the read roots and writing only beneath the
    /// write roots ([`Ruleset::add_roots`]). Listed paths that do not exist are skipped (the
    /// kernel layer's start record lists them as warnings already).
    pub fn build(policy: &FsPolicy) -> Result<Ruleset, LandlockError> {
        let abi = abi_version().map_err(LandlockError::Unavailable)?;
        let all = all_fs_rights(abi);
        let strip = if policy.exec.is_empty() { 0 } else { EXECUTE };
        let mut slash = all & !strip;
        if policy.roots.read.is_some() {
            slash &= !READ;
        }
        if policy.roots.write.is_some() {
            slash &= !write_rights(abi);
        }
        let handled = handled_rights(abi, slash, policy.mounts_refused_by_seccomp);
        let mut rs = Ruleset::create(abi, handled)?;
        rs.add(Path::new("/"), slash)?;
        // The kernel opens a dynamic binary's ELF interpreter (PT_INTERP) for execution
        // too, so it needs EXECUTE as well (see docs/KERNEL.md for what that allows).
        for bin in with_interpreters(&policy.exec) {
            rs.add(&bin, EXECUTE | READ_FILE)?;
        }
        if policy.roots.enforced() {
            rs.add_roots(policy)?;
        }
        Ok(rs)
    }

    /// The rules of the file roots: read rights beneath each read root, read and write
    /// rights beneath each write root; devices under `/dev` may be read, written and
    /// `ioctl`ed, `/proc` read and written (again in the agent's own procfs:
    /// [`Ruleset::restrict_fn`]), `/sys` read, as tier 1 exempts them. With reading
    /// restricted and no exec allowlist, the agent's own program is readable (so it can be
    /// executed).
    fn add_roots(&mut self, policy: &FsPolicy) -> Result<(), LandlockError> {
        let abi = self.abi;
        let write = write_rights(abi);
        let roots = &policy.roots;
        for (trees, rights) in [(&roots.read, READ), (&roots.write, READ | write)] {
            for tree in canonical(trees.as_deref().unwrap_or_default()) {
                self.add_tree(&tree, rights)?;
            }
        }
        let device = all_fs_rights(abi) & (READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV);
        self.add(Path::new("/dev"), device)?;
        self.add(Path::new("/proc"), READ | ((WRITE_FILE | TRUNCATE) & write))?;
        self.add(Path::new("/sys"), READ)?;
        if roots.read.is_some()
            && policy.exec.is_empty()
            && let Some(program) = &policy.program
            && let Ok(program) = std::fs::canonicalize(program)
        {
            self.add(&program, READ_FILE)?;
        }
        Ok(())
    }

    /// A rule for `tree` with `rights`, cut to the rights of a file when it is not a
    /// directory.
    fn add_tree(&mut self, tree: &Path, rights: u64) -> Result<(), LandlockError> {
        let rights = if tree.is_dir() {
            rights
        } else {
            rights & file_rights(self.abi)
        };
        self.add(tree, rights)
    }

    /// An allowlist ruleset (a tool server's own profile, `gatewayd mcp`): nothing can be
    /// opened outside `policy.read` (read rights) and `policy.write` (every right), and
    /// nothing under `policy.protected` even inside them (the trees are expanded around
    /// protected paths as in [`Ruleset::build`]). With `policy.exec` listed, only those
    /// binaries (and their ELF interpreters) may be executed; otherwise whatever is
    /// readable. Trees that do not exist are skipped. The standard device files
    /// ([`STANDARD_DEVICES`]) may always be read and written.
    pub fn build_allowlist(policy: &AllowPolicy) -> Result<Ruleset, LandlockError> {
        let abi = abi_version().map_err(LandlockError::Unavailable)?;
        let mut rs = Ruleset::create(abi, all_fs_rights(abi))?;
        let protected = canonical(&policy.protected);
        rs.protected_inodes = inodes(&protected);
        let all = all_fs_rights(abi);
        let exec = if policy.exec.is_empty() { EXECUTE } else { 0 };
        let read = READ_FILE | READ_DIR | exec;
        let write = all & !(EXECUTE & !exec);
        for (trees, rights) in [(&policy.read, read), (&policy.write, write)] {
            for tree in canonical(trees) {
                if protected.iter().any(|p| tree.starts_with(p)) {
                    continue;
                }
                let rights = if tree.is_dir() {
                    rights
                } else {
                    rights & file_rights(abi)
                };
                rs.expand(&tree, &protected, rights)?;
            }
        }
        for bin in with_interpreters(&policy.exec) {
            if !protected.iter().any(|p| bin.starts_with(p)) {
                rs.add(&bin, EXECUTE | READ_FILE)?;
            }
        }
        for dev in STANDARD_DEVICES.map(Path::new) {
            if !protected.iter().any(|p| dev.starts_with(p)) {
                rs.add(dev, READ_FILE | WRITE_FILE | TRUNCATE)?;
            }
        }
        Ok(rs)
    }

    /// A ruleset that handles the filesystem rights `handled` of `abi` (and, from ABI 6,
    /// scopes signals and abstract Unix sockets to the domain), with no rule yet. The rights
    /// it does not handle, it never refuses.
    fn create(abi: u32, handled: u64) -> Result<Ruleset, LandlockError> {
        let scoped = if abi >= 6 {
            SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
        } else {
            0
        };
        let attr = [handled, 0, scoped];
        let size = match abi {
            1..=3 => 8,
            4 | 5 => 16,
            _ => 24,
        };
        // SAFETY: attr outlives the call; size covers only the fields this ABI knows.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                attr.as_ptr(),
                size as usize,
                0,
            )
        };
        if fd < 0 {
            return Err(LandlockError::Unavailable(
                std::io::Error::last_os_error().to_string(),
            ));
        }
        // SAFETY: a fresh fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Ruleset {
            fd,
            abi,
            rules: 0,
            handled,
            scoped_signals: scoped != 0,
            protected_inodes: Vec::new(),
            proc_rights: 0,
            dev_rights: 0,
        })
    }

    /// Grants `rights` on everything under `dir` except the protected paths, which get
    /// nothing; the directories that lead to them are descended into. Such a directory keeps
    /// its listing (`READ_DIR` of `rights`: names, never contents) when every protected path
    /// below it is a file: Landlock's rights are inherited, so listing it would list a
    /// protected directory below it too.
    fn expand(
        &mut self,
        dir: &Path,
        protected: &[PathBuf],
        rights: u64,
    ) -> Result<(), LandlockError> {
        if protected.iter().any(|p| p == dir) {
            return Ok(());
        }
        if !protected.iter().any(|p| p.starts_with(dir)) {
            return self.add(dir, rights);
        }
        if !protected.iter().any(|p| p.starts_with(dir) && p.is_dir()) {
            self.add(dir, rights & READ_DIR)?;
        }
        let entries = std::fs::read_dir(dir).map_err(|source| LandlockError::Io {
            op: "read_dir",
            path: dir.to_owned(),
            source,
        })?;
        for e in entries.flatten() {
            let path = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                continue; // its target is reached through its own hierarchy
            }
            if ft.is_dir() {
                self.expand(&path, protected, rights)?;
            } else if !protected.contains(&path)
                && !std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| self.protected_inodes.contains(&(m.dev(), m.ino())))
            {
                self.add(&path, rights & file_rights(self.abi))?;
            }
        }
        Ok(())
    }

    /// A rule granting `rights` (cut to the handled ones; none left: no rule) beneath `path`.
    fn add(&mut self, path: &Path, rights: u64) -> Result<(), LandlockError> {
        let rights = rights & self.handled;
        if rights == 0 {
            return Ok(());
        }
        let io = |op, source| LandlockError::Io {
            op,
            path: path.to_owned(),
            source,
        };
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io("path", std::io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            // Vanished since read_dir (a temp file): nothing to allow.
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(());
            }
            return Err(io("open", e));
        }
        // SAFETY: fresh fd.
        let parent = unsafe { OwnedFd::from_raw_fd(fd) };
        // struct landlock_path_beneath_attr { u64 allowed_access; s32 parent_fd; } __packed
        let mut attr = [0u8; 12];
        attr[..8].copy_from_slice(&rights.to_ne_bytes());
        attr[8..].copy_from_slice(&parent.as_raw_fd().to_ne_bytes());
        // SAFETY: attr is the packed 12-byte struct the kernel expects.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                attr.as_ptr(),
                0,
            )
        };
        if r != 0 {
            return Err(io("add_rule", std::io::Error::last_os_error()));
        }
        self.rules += 1;
        if path == Path::new("/proc") {
            self.proc_rights = rights;
        }
        if path == Path::new("/dev") {
            self.dev_rights = rights;
        }
        Ok(())
    }

    /// A closure for `Command::pre_exec`: the rules on `/proc` and `/dev` again for what is
    /// mounted there now (the agent's PID namespace's procfs, its own `/dev`), no new privileges, then restrict the child
    /// to the ruleset. Only async-signal-safe syscalls.
    pub fn restrict_fn(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let fd = self.fd.as_raw_fd();
        let proc_rights = self.proc_rights;
        let dev_rights = self.dev_rights;
        // From ABI 7 denials are logged to audit, by default only until the next exec: the
        // agent's program is that exec, so the logging goes on past it.
        let flags: libc::c_uint = if self.abi >= crate::landlock_audit::AUDIT_ABI {
            RESTRICT_SELF_LOG_NEW_EXEC_ON
        } else {
            0
        };
        move || {
            // SAFETY: plain syscalls on an fd inherited across fork (valid until exec), a
            // static path and the packed 12-byte rule on the stack.
            unsafe {
                for (path, rights) in [(c"/proc", proc_rights), (c"/dev", dev_rights)] {
                    if rights == 0 {
                        continue;
                    }
                    let dir = libc::open(
                        path.as_ptr(),
                        libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
                    );
                    if dir < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let mut attr = [0u8; 12];
                    attr[..8].copy_from_slice(&rights.to_ne_bytes());
                    attr[8..].copy_from_slice(&dir.to_ne_bytes());
                    let r = libc::syscall(
                        libc::SYS_landlock_add_rule,
                        fd,
                        RULE_PATH_BENEATH,
                        attr.as_ptr(),
                        0,
                    );
                    let e = std::io::Error::last_os_error();
                    libc::close(dir);
                    if r != 0 {
                        return Err(e);
                    }
                }
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, flags) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        }
    }
}

/// `bins` and their ELF interpreters, canonical, sorted, without duplicates.
pub(crate) fn with_interpreters(bins: &[PathBuf]) -> Vec<PathBuf> {
    let mut all = canonical(bins);
    let interps: Vec<PathBuf> = all.iter().filter_map(|b| elf_interpreter(b)).collect();
    all.extend(canonical(&interps));
    all.sort();
    all.dedup();
    all
}

/// The `PT_INTERP` path of a 64-bit little-endian ELF file, if it has one.
pub fn elf_interpreter(path: &Path) -> Option<PathBuf> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u64_at = |b: &[u8], o: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(x)
    };
    let (phoff, phentsize, phnum) = (u64_at(&eh, 32), u16_at(&eh, 54) as usize, u16_at(&eh, 56));
    if phentsize < 56 {
        return None;
    }
    for i in 0..u64::from(phnum.min(64)) {
        let mut ph = vec![0u8; phentsize];
        f.seek(SeekFrom::Start(phoff + i * phentsize as u64)).ok()?;
        f.read_exact(&mut ph).ok()?;
        if u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) != 3 {
            continue; // not PT_INTERP
        }
        let (off, size) = (u64_at(&ph, 8), u64_at(&ph, 32).min(4096) as usize);
        let mut name = vec![0u8; size];
        f.seek(SeekFrom::Start(off)).ok()?;
        f.read_exact(&mut name).ok()?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        return Some(PathBuf::from(std::ffi::OsStr::from_bytes(&name[..end])));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_grow_with_the_abi() {
        assert_eq!(all_fs_rights(1), 0x1fff);
        assert_eq!(all_fs_rights(2), 0x3fff);
        assert_eq!(all_fs_rights(5), 0xffff);
        assert_eq!(file_rights(1), EXECUTE | WRITE_FILE | READ_FILE);
    }

    #[test]
    fn write_rights_are_everything_but_reading_executing_and_ioctl() {
        // WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR ..= MAKE_SYM, REFER, TRUNCATE.
        assert_eq!(write_rights(5), 0x7ff2);
        assert_eq!(write_rights(1), 0x1ff2);
        assert_eq!(write_rights(5) & (READ | EXECUTE | IOCTL_DEV), 0);
    }

    #[test]
    fn a_ruleset_handles_only_what_it_restricts() {
        let all = all_fs_rights(6);
        // Nothing restricted: REFER alone, or nothing from ABI 6 where seccomp keeps the
        // mounts (the agent); ABI 1 has no REFER and handles everything.
        assert_eq!(handled_rights(6, all, false), REFER);
        assert_eq!(handled_rights(6, all, true), 0);
        assert_eq!(handled_rights(5, all_fs_rights(5), true), REFER);
        assert_eq!(handled_rights(1, all_fs_rights(1), true), all_fs_rights(1));
        // An exec allowlist or roots: what they restrict, and REFER.
        assert_eq!(handled_rights(6, all & !EXECUTE, true), EXECUTE | REFER);
        assert_eq!(handled_rights(6, all & !READ, true), READ | REFER);
    }

    #[test]
    fn finds_the_elf_interpreter() {
        let exe = std::env::current_exe().unwrap();
        let interp = elf_interpreter(&exe).expect("a dynamic test binary has PT_INTERP");
        assert!(
            interp.to_string_lossy().contains("ld-linux"),
            "{}",
            interp.display()
        );
        assert!(elf_interpreter(Path::new("/etc/hostname")).is_none());
    }
}
