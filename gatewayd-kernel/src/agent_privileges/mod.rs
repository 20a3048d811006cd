//! The agent's privileges under `gatewayd run`: which user it runs as and what of root's
//! powers and of the kernel's surface it keeps (`docs/KERNEL.md`, "The agent's privileges").
//!
//! Resolved in gatewayd before the spawn ([`AgentPrivileges::resolve`]); applied in the
//! forked child right before exec ([`AgentPrivileges::pre_exec_fn`]), in this order:
//!
//! 1. a private mount namespace and IPC namespace (`unshare(CLONE_NEWNS | CLONE_NEWIPC)`,
//!    then `/` made `MS_REC|MS_PRIVATE`), so no mount the agent could make propagates to the
//!    host, and no System V or POSIX IPC object is shared with the host or outlives the
//!    session; before the cgroup, whose `lsm/sb_mount` program would refuse that very mount;
//! 2. a PID namespace with a small init at its PID 1 ([`pid_namespace`]), which mounts the
//!    namespace's `/proc`, sets `vm.memfd_noexec`, makes what the agent sees of `/proc`,
//!    `/sys` and `/dev` ([`surfaces`], [`dev`]), enters the cgroup (the caller's step), makes
//!    `/sys` read-only,
//! 3. and at tier 2 makes the mounts that hide the protected paths and the host's Unix
//!    sockets ([`hide`], [`host_sockets`]; after the cgroup, whose filesystem they make
//!    read-only), in learn mode marks every mount for [`crate::fs_learn`]
//!    ([`learn_marks`]), then restricts itself to the tier-2 Landlock ruleset (which forbids mounts
//!    itself). The init is the domain's creator, whose pid Landlock's audit records name
//!    (`supervisor::landlock_records`). It then forks the agent's process, where the steps
//!    below run;
//! 4. the descriptors ([`descriptors`]): every one above 2 is closed at exec except those
//!    `--preserve-fd` names, so nothing gatewayd's caller left open reaches the agent;
//! 5. the credentials ([`credentials`]): bounding set cut to the kept capabilities, ambient
//!    and inheritable sets emptied, securebits set and locked, groups, gid and uid set,
//!    `no_new_privs`;
//! 6. the seccomp filter ([`seccomp`]), last, so that nothing above is refused by it.
use std::ffi::CString;

use serde_json::json;

use gatewayd_core::policy::{Account, Agent};

pub(crate) mod credentials;
pub(crate) mod descriptors;
pub(crate) mod dev;
pub mod hide;
pub(crate) mod host_sockets;
pub mod learn_marks;
pub mod name_marks;
pub(crate) mod pid_namespace;
pub mod private_tmp;
pub(crate) mod read_only;
pub(crate) mod seccomp;
pub(crate) mod surfaces;

/// Why the agent's user or its privileges could not be settled; nothing was started.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegesError {
    /// No user was named and gatewayd was not started through `sudo`.
    #[error(
        "no user to run the agent as: gatewayd drops root for the agent. Name one with `gatewayd run --user NAME|UID` (or `agent.user` in the policy), run gatewayd through sudo (the invoking user is the default), or pass `--user root` to keep uid 0 without any capability"
    )]
    NoUser,
    /// A user or group name that the system does not know.
    #[error("unknown {what} `{name}`")]
    Unknown {
        /// `user` or `group`.
        what: &'static str,
        /// The name as given.
        name: String,
    },
    /// `SUDO_UID`/`SUDO_GID` hold something other than a number.
    #[error("{var} is `{value}`, not a number")]
    BadSudoId {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The user database could not be read.
    #[error("looking up {what}: {source}")]
    Lookup {
        /// What was looked up.
        what: String,
        /// The error.
        #[source]
        source: nix::Error,
    },
    /// Capabilities were asked for an agent that is not root.
    #[error(
        "agent.capabilities is set, but the agent runs as uid {uid}: capabilities survive exec only for uid 0 (gatewayd never grants ambient capabilities). Use `--user root` or drop agent.capabilities"
    )]
    CapabilitiesNeedRoot {
        /// The agent's uid.
        uid: u32,
    },
    /// A `--preserve-fd` that is not an open descriptor above 2.
    #[error(
        "--preserve-fd {fd}: {why}; only an open descriptor above 2 can be passed to the agent (0, 1 and 2 always are)"
    )]
    PreserveFd {
        /// The descriptor as given.
        fd: i32,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The seccomp filter did not compile.
    #[error("seccomp filter: {0}")]
    Seccomp(#[from] seccomp::SeccompError),
}

/// Where the agent's user came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSource {
    /// `gatewayd run --user`.
    Flag,
    /// The policy's `agent.user`.
    Policy,
    /// `SUDO_UID`/`SUDO_GID`: the user who ran sudo.
    Sudo,
}

impl UserSource {
    fn as_str(self) -> &'static str {
        match self {
            UserSource::Flag => "--user",
            UserSource::Policy => "policy agent.user",
            UserSource::Sudo => "SUDO_UID",
        }
    }
}

/// Who the agent runs as, and what it keeps.
#[derive(Debug)]
pub struct AgentPrivileges {
    /// The user's name, when the user database has one.
    pub name: Option<String>,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
    /// Capabilities kept in the bounding set (uid 0 only).
    pub capabilities: Vec<u32>,
    /// Where the user came from.
    pub source: UserSource,
    /// Its home directory (for `HOME`), when the user database has one.
    pub home: Option<String>,
    filter: seccomp::Filter,
    pid_namespace: pid_namespace::PidNamespace,
    /// The filter for tier 1, until [`AgentPrivileges::leave_to_bpf_lsm`] takes it.
    filter_bpf_lsm: Option<seccomp::Filter>,
    /// Tier 2: the mounts that hide the protected paths ([`AgentPrivileges::hide`]).
    hiding: hide::Hiding,
    /// Tier 2: the roots marked for protected names ([`AgentPrivileges::protect_names`]).
    name_marks: name_marks::NameMarks,
    /// Tier 2 learn mode: the mounts marked for [`crate::fs_learn`]'s group.
    learn_marks: learn_marks::LearnMarks,
    /// Both tiers: what the agent sees of `/proc`, `/sys` and `/dev`.
    surfaces: surfaces::Surfaces,
    /// The descriptors above 2 the agent keeps (`--preserve-fd`).
    descriptors: descriptors::Descriptors,
}

impl AgentPrivileges {
    /// Settles the agent's user: `flag` (`--user`), else the policy's `agent.user`, else
    /// the user who ran `sudo` (`SUDO_UID`/`SUDO_GID`, read through `env`); none of them is
    /// an error. Also compiles the seccomp filter for this policy.
    pub fn resolve(
        flag: Option<&str>,
        policy: &Agent,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AgentPrivileges, PrivilegesError> {
        let (account, source) = match (flag, &policy.user) {
            (Some(f), _) => (
                f.parse::<u32>()
                    .map_or_else(|_| Account::Name(f.to_string()), Account::Id),
                UserSource::Flag,
            ),
            (None, Some(a)) => (a.clone(), UserSource::Policy),
            (None, None) => {
                let uid = env("SUDO_UID").ok_or(PrivilegesError::NoUser)?;
                let uid = sudo_id("SUDO_UID", &uid)?;
                (Account::Id(uid), UserSource::Sudo)
            }
        };
        let user = lookup_user(&account)?;
        let (uid, mut gid, name, home) = match (&account, user) {
            (_, Some(u)) => (u.uid.as_raw(), u.gid.as_raw(), Some(u.name), Some(u.dir)),
            (Account::Id(n), None) => (*n, *n, None, None),
            // A system without a user database (a minimal guest) still knows root.
            (Account::Name(n), None) if n == "root" => (0, 0, None, None),
            (Account::Name(n), None) => {
                return Err(PrivilegesError::Unknown {
                    what: "user",
                    name: n.clone(),
                });
            }
        };
        if source == UserSource::Sudo
            && let Some(g) = env("SUDO_GID")
        {
            gid = sudo_id("SUDO_GID", &g)?;
        }
        let groups = match &policy.groups {
            Some(list) => list.iter().map(lookup_group).collect::<Result<_, _>>()?,
            None => user_groups(name.as_deref(), gid)?,
        };
        let capabilities = policy.capability_numbers();
        if uid != 0 && !capabilities.is_empty() {
            return Err(PrivilegesError::CapabilitiesNeedRoot { uid });
        }
        let filter = seccomp::Filter::for_policy(policy, false)?;
        let filter_bpf_lsm = seccomp::Filter::for_policy(policy, true)?;
        Ok(AgentPrivileges {
            name,
            uid,
            gid,
            groups,
            capabilities,
            source,
            home: home.map(|h| h.display().to_string()),
            filter,
            pid_namespace: pid_namespace::PidNamespace::new(),
            filter_bpf_lsm: Some(filter_bpf_lsm),
            hiding: hide::Hiding::default(),
            name_marks: name_marks::NameMarks::default(),
            learn_marks: learn_marks::LearnMarks::default(),
            surfaces: surfaces::Surfaces::plan(&[]),
            descriptors: descriptors::Descriptors::default(),
        })
    }

    /// At tier 1: leaves to the BPF LSM programs what they deny with an audit record
    /// ([`seccomp::LEFT_TO_BPF_LSM`]).
    pub fn leave_to_bpf_lsm(&mut self) {
        if let Some(f) = self.filter_bpf_lsm.take() {
            self.filter = f;
        }
    }

    /// The host's character devices bound into the agent's `/dev` besides the standard
    /// ones: the policy's `sandbox.devices` (checked when the policy loaded).
    pub fn devices(&mut self, devices: &[std::path::PathBuf]) {
        self.surfaces = surfaces::Surfaces::plan(devices);
    }

    /// `sandbox.read_only`: bound read-only in the agent's mount namespace, pinned below the
    /// `writable` roots ([`read_only`]). After [`AgentPrivileges::devices`].
    pub fn read_only(&mut self, read_only: &[std::path::PathBuf], writable: &[std::path::PathBuf]) {
        self.surfaces
            .read_only(read_only::ReadOnly::plan(read_only, writable));
    }

    /// `sandbox.private_tmp`: the session's directory becomes the agent's `/tmp`, with the
    /// host's paths it binds. After [`AgentPrivileges::devices`], which plans the surfaces
    /// anew.
    pub fn private_tmp(&mut self, tmp: &private_tmp::SessionTmp) {
        self.surfaces.private_tmp(tmp);
    }

    /// The descriptors above 2 the agent keeps (`--preserve-fd`); every other one is closed
    /// at exec.
    pub fn preserve_fds(&mut self, fds: &[i32]) -> Result<(), PrivilegesError> {
        self.descriptors = descriptors::Descriptors::keeping(fds)?;
        Ok(())
    }

    /// At tier 2: the mounts that hide the protected paths in the agent's namespace.
    pub fn hide(&mut self, hiding: hide::Hiding) {
        self.hiding = hiding;
    }

    /// At tier 2, with `sandbox.protected_names`: the roots bound and marked for the
    /// fanotify group of [`crate::name_guard`], and hard links refused to the agent (a link
    /// is no open, and would give a protected file a free name).
    pub fn protect_names(&mut self, marks: name_marks::NameMarks) -> Result<(), PrivilegesError> {
        self.name_marks = marks;
        self.filter.refuse_hard_links()?;
        Ok(())
    }

    /// At tier 2 in learn mode: every mount of the agent's namespace marked for the
    /// fanotify group of [`crate::fs_learn`].
    pub fn learn(&mut self, marks: learn_marks::LearnMarks) {
        self.learn_marks = marks;
    }

    /// Environment variables the agent gets in place of gatewayd's (`HOME`, `USER`,
    /// `LOGNAME`), as `su` sets them; none when the uid does not change or the user has no
    /// entry in the user database.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        if self.uid == nix::unistd::getuid().as_raw() {
            return Vec::new();
        }
        let mut env = Vec::new();
        if let Some(h) = &self.home {
            env.push(("HOME", h.clone()));
        }
        if let Some(n) = &self.name {
            env.push(("USER", n.clone()));
            env.push(("LOGNAME", n.clone()));
        }
        env
    }

    /// What the `session_start` record says about the agent's privileges.
    pub fn describe(&self) -> serde_json::Value {
        let caps: Vec<&str> = self
            .capabilities
            .iter()
            .filter_map(|c| {
                gatewayd_core::policy::names::CAPABILITIES
                    .get(*c as usize)
                    .copied()
            })
            .collect();
        json!({
            "user": self.name, "uid": self.uid, "gid": self.gid, "groups": self.groups,
            "from": self.source.as_str(),
            "capabilities": caps,
            "no_new_privs": true,
            "mount_namespace": "private",
            "ipc_namespace": "own (System V IPC and a mqueue of its own)",
            "descriptors": {"passed": [0, 1, 2], "preserved": self.descriptors.kept(), "others": "closed at exec"},
            "hidden": (!self.hiding.is_empty()).then(|| self.hiding.describe()),
            "pid_namespace": "own (an init at PID 1, a procfs of its own)",
            "kernel_interfaces": self.surfaces.describe(),
            "memfd_noexec": if self.pid_namespace.memfd_noexec() {
                json!(2)
            } else {
                json!("not in this kernel")
            },
            "seccomp": self.filter.describe(),
        })
    }

    /// For `Command::pre_exec`: the private mount namespace, the PID namespace whose init
    /// makes the agent's `/proc`, `/sys` and `/dev` around `enter` (the cgroup), then the
    /// hiding mounts (tier 2) and `between` (the Landlock ruleset, which forbids mounting),
    /// and in the agent's process the credentials and the seccomp filter. The init's pid is
    /// written to `tell_init` when given. Only async-signal-safe syscalls.
    pub fn pre_exec_fn(
        &self,
        enter: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
        between: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
        tell_init: Option<std::os::fd::OwnedFd>,
    ) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let creds = credentials::Plan::new(self.uid, self.gid, &self.groups, &self.capabilities);
        let filter = self.filter.clone();
        let pid_namespace = self.pid_namespace;
        let hiding = self.hiding.clone();
        let name_marks = self.name_marks.clone();
        let learn_marks = self.learn_marks;
        let surfaces = self.surfaces.clone();
        let descriptors = self.descriptors.clone();
        move || {
            oom_score_adj_back_to_default();
            private_namespaces()?;
            pid_namespace.enter(
                &|| {
                    surfaces.mount()?;
                    enter()?;
                    surfaces.seal()?;
                    hiding.apply()?;
                    name_marks.apply()?;
                    learn_marks.apply()?;
                    between()
                },
                tell_init.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
            )?;
            descriptors.close_the_rest_at_exec()?;
            creds.apply()?;
            filter.install()
        }
    }
}

fn sudo_id(var: &'static str, value: &str) -> Result<u32, PrivilegesError> {
    value
        .trim()
        .parse()
        .map_err(|_| PrivilegesError::BadSudoId {
            var,
            value: value.to_string(),
        })
}

/// The user's entry in the user database. A number or `root` needs none: when the database
/// cannot be read (C libraries report a missing `/etc/passwd` as an error), they have no
/// entry.
fn lookup_user(a: &Account) -> Result<Option<nix::unistd::User>, PrivilegesError> {
    match a {
        Account::Id(n) => {
            Ok(nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(*n)).unwrap_or(None))
        }
        Account::Name(n) if n == "root" => Ok(nix::unistd::User::from_name(n).unwrap_or(None)),
        Account::Name(n) => {
            nix::unistd::User::from_name(n).map_err(|source| PrivilegesError::Lookup {
                what: format!("user {a}"),
                source,
            })
        }
    }
}

fn lookup_group(a: &Account) -> Result<u32, PrivilegesError> {
    match a {
        Account::Id(n) => Ok(*n),
        Account::Name(n) => nix::unistd::Group::from_name(n)
            .map_err(|source| PrivilegesError::Lookup {
                what: format!("group {n}"),
                source,
            })?
            .map(|g| g.gid.as_raw())
            .ok_or_else(|| PrivilegesError::Unknown {
                what: "group",
                name: n.clone(),
            }),
    }
}

/// The user's groups from the group database (`getgrouplist`), or just `gid` for a uid
/// with no name.
fn user_groups(name: Option<&str>, gid: u32) -> Result<Vec<u32>, PrivilegesError> {
    let Some(name) = name else {
        return Ok(vec![gid]);
    };
    let c = CString::new(name).map_err(|_| PrivilegesError::Unknown {
        what: "user",
        name: name.to_string(),
    })?;
    let groups =
        nix::unistd::getgrouplist(&c, nix::unistd::Gid::from_raw(gid)).map_err(|source| {
            PrivilegesError::Lookup {
                what: format!("the groups of {name}"),
                source,
            }
        })?;
    Ok(groups.iter().map(|g| g.as_raw()).collect())
}

/// gatewayd makes itself the OOM killer's last choice (`session_limits`); the agent must not
/// inherit that. Raising the value back to 0 needs no privilege; a caller's higher value
/// (a refused write) stays.
fn oom_score_adj_back_to_default() {
    // SAFETY: open, write and close on a static C string, in the forked child.
    unsafe {
        let fd = libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

/// A mount namespace of the agent's own whose mounts propagate nowhere: from here on, a
/// mount the agent could make stays inside it (and the host's later mounts stay out). And an
/// IPC namespace of its own: the host's System V shared memory, message queues and
/// semaphores are out of its reach, and what it makes there is freed with the namespace
/// when the session's last process ends (its POSIX message queues: `dev`'s `mqueue`).
fn private_namespaces() -> std::io::Result<()> {
    // SAFETY: plain syscalls on static C strings, in the single-threaded forked child.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    #[test]
    fn without_a_user_or_sudo_the_start_is_refused() {
        let e = AgentPrivileges::resolve(None, &Agent::default(), env(&[])).unwrap_err();
        assert!(matches!(e, PrivilegesError::NoUser), "{e}");
        assert!(e.to_string().contains("--user root"), "{e}");
    }

    #[test]
    fn the_sudo_user_is_the_default_and_the_flag_wins() {
        let p = AgentPrivileges::resolve(
            None,
            &Agent::default(),
            env(&[("SUDO_UID", "65534"), ("SUDO_GID", "4242")]),
        )
        .unwrap();
        assert_eq!((p.uid, p.gid, p.source), (65534, 4242, UserSource::Sudo));
        let p = AgentPrivileges::resolve(
            Some("root"),
            &Agent::default(),
            env(&[("SUDO_UID", "65534")]),
        )
        .unwrap();
        assert_eq!((p.uid, p.gid, p.source), (0, 0, UserSource::Flag));
        // A uid without an entry in the user database: its gid is the same number.
        let p = AgentPrivileges::resolve(Some("424242"), &Agent::default(), env(&[])).unwrap();
        assert_eq!(
            (p.uid, p.gid, p.groups.as_slice()),
            (424_242, 424_242, &[424_242][..])
        );
        assert!(p.env().iter().all(|(k, _)| *k != "USER"));
    }

    #[test]
    fn unknown_names_and_capabilities_without_root_are_refused() {
        let e = AgentPrivileges::resolve(Some("no-such-user-gw"), &Agent::default(), env(&[]))
            .unwrap_err();
        assert!(
            e.to_string().contains("unknown user `no-such-user-gw`"),
            "{e}"
        );
        let keep = Agent {
            capabilities: vec!["CAP_NET_BIND_SERVICE".into()],
            ..Agent::default()
        };
        let e = AgentPrivileges::resolve(Some("65534"), &keep, env(&[])).unwrap_err();
        assert!(
            matches!(e, PrivilegesError::CapabilitiesNeedRoot { uid: 65534 }),
            "{e}"
        );
        let p = AgentPrivileges::resolve(Some("0"), &keep, env(&[])).unwrap();
        assert_eq!(p.capabilities, [10]);
        assert_eq!(
            p.describe()["capabilities"],
            json!(["CAP_NET_BIND_SERVICE"])
        );
    }
}
