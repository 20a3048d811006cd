//! The kernel layer: loads gatewayd's eBPF object, fills its maps from the policy, attaches
//! the programs to the agent's cgroup, and turns kernel denials into audit entries.
//!
//! - [`btf`]    — struct member offsets from the running kernel's BTF
//! - [`spec`]   — what to enforce, derived from the policy (protected inodes, egress rules)
//! - [`events`] — ring-buffer events to audit entries
//! - [`task`]   — the one task that owns the `Ebpf` handle; others send it [`task::Command`]s
//!
//! Programs (names are also the audit `hook` values): `lsm/file_open`, `lsm/bpf`,
//! `lsm/sb_mount`, `lsm/ptrace_access_check`, `lsm/task_kill`, `cgroup/connect4`,
//! `cgroup/connect6`, `cgroup/sendmsg4`, `cgroup/sendmsg6`.
pub mod btf;
pub mod events;
pub mod spec;
pub mod task;

use std::{fs::File, path::Path};

use aya::{
    Btf, Ebpf, EbpfLoader, include_bytes_aligned,
    maps::{Array, CgroupArray, HashMap, MapData, PerCpuArray, RingBuf},
    programs::{CgroupAttachMode, CgroupSockAddr, Lsm},
};
use gateway_common::{Config, EgressRule, InodeKey, STATE_EGRESS_LOCKDOWN};

pub use spec::KernelSpec;

/// The eBPF object built by `build.rs` (empty when built with `GATEWAYD_EBPF_STUB=1`).
static OBJECT: &[u8] = include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gateway"));

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("this gatewayd was built without its kernel programs (GATEWAYD_EBPF_STUB=1)")]
    Stub,
    #[error(transparent)]
    Btf(#[from] btf::BtfError),
    #[error("loading the eBPF object failed: {0}")]
    Object(String),
    #[error("kernel program {program} could not be {stage}: {answer}")]
    Program {
        program: &'static str,
        stage: &'static str,
        answer: String,
    },
    #[error("map {map}: {answer}")]
    Map { map: &'static str, answer: String },
    #[error("cannot open cgroup {path}: {source}")]
    Cgroup {
        path: String,
        source: std::io::Error,
    },
}

/// One piece of enforcement and whether this kernel took it.
#[derive(Debug, Clone)]
pub struct PieceStatus {
    /// Program name as used in audit records, e.g. `lsm/file_open`.
    pub program: &'static str,
    /// What it enforces, in words.
    pub enforces: &'static str,
    /// `Ok` when loaded and attached; otherwise the kernel's answer.
    pub result: Result<(), String>,
}

/// Enforcement tier reached (DESIGN.md): 1 = BPF LSM + cgroup programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// BPF LSM and cgroup programs: everything.
    Full,
    /// cgroup programs, and Landlock for files and exec (set by the supervisor).
    CgroupLandlock,
    /// cgroup programs only (egress); no file or exec enforcement in the kernel.
    CgroupOnly,
    /// Nothing attached.
    None,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Full => "1 (bpf-lsm + cgroup)",
            Tier::CgroupLandlock => {
                "2 (cgroup egress + Landlock files/exec; no BPF LSM, so no bpf() denial)"
            }
            Tier::CgroupOnly => {
                "2 (cgroup egress only; no kernel file enforcement or self-protection)"
            }
            Tier::None => "none",
        }
    }
}

/// Loaded and attached programs. Dropping it detaches everything (nothing is pinned), which
/// is why the agent is killed before gatewayd lets go of it.
pub struct KernelLayer {
    ebpf: Ebpf,
    status: Vec<PieceStatus>,
}

/// One BPF LSM program: (hook, audit name, what it enforces, [(parameter count, program
/// name in the object)]). The program is chosen by the hook's parameter count in this
/// kernel's BTF, because its "earlier verdict" argument comes right after the parameters.
type LsmSpec = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(u32, &'static str)],
);
const LSM_PROGRAMS: [LsmSpec; 10] = [
    (
        "file_open",
        "lsm/file_open",
        "open() of protected files and directories; writes to cgroup files",
        &[(1, "file_open")],
    ),
    (
        "inode_unlink",
        "lsm/inode_unlink",
        "deleting protected files",
        &[(2, "inode_unlink")],
    ),
    (
        "inode_rmdir",
        "lsm/inode_rmdir",
        "removing protected directories",
        &[(2, "inode_rmdir")],
    ),
    (
        "inode_rename",
        "lsm/inode_rename",
        "renaming, replacing or moving into protected paths",
        &[(4, "inode_rename")],
    ),
    (
        "inode_setattr",
        "lsm/inode_setattr",
        "truncate, chmod, chown, utimes of protected paths",
        &[(2, "inode_setattr2"), (3, "inode_setattr3")],
    ),
    (
        "bprm_check_security",
        "lsm/bprm_check_security",
        "exec of binaries outside the policy's exec allowlist",
        &[(1, "bprm_check_security")],
    ),
    (
        "bpf",
        "lsm/bpf",
        "bpf() from the agent",
        &[(3, "bpf3"), (4, "bpf4")],
    ),
    (
        "sb_mount",
        "lsm/sb_mount",
        "mount() from the agent",
        &[(5, "sb_mount")],
    ),
    (
        "ptrace_access_check",
        "lsm/ptrace_access_check",
        "ptrace attach by the agent; any ptrace access to gatewayd",
        &[(2, "ptrace_access_check")],
    ),
    (
        "task_kill",
        "lsm/task_kill",
        "signals from the agent to gatewayd",
        &[(4, "task_kill")],
    ),
];
const SOCK_PROGRAMS: [(&str, &str, &str); 4] = [
    (
        "connect4",
        "cgroup/connect4",
        "IPv4 connect() outside the egress allowlist",
    ),
    (
        "connect6",
        "cgroup/connect6",
        "IPv6 connect() outside the egress allowlist",
    ),
    (
        "sendmsg4",
        "cgroup/sendmsg4",
        "IPv4 sendto()/sendmsg() outside the egress allowlist",
    ),
    (
        "sendmsg6",
        "cgroup/sendmsg6",
        "IPv6 sendto()/sendmsg() outside the egress allowlist",
    ),
];

fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> KernelError {
    move |e| KernelError::Map {
        map,
        answer: e.to_string(),
    }
}

impl KernelLayer {
    /// Loads the object with `spec`'s configuration, fills the maps and tries every program.
    /// With `spec.require`, the first program that cannot load or attach is an error naming it
    /// and the kernel's answer; otherwise failures are recorded in [`KernelLayer::status`].
    pub fn load(spec: &KernelSpec) -> Result<KernelLayer, KernelError> {
        if OBJECT.is_empty() {
            return Err(KernelError::Stub);
        }
        let kbtf = btf::KernelBtf::from_sys_fs()?;
        let cfg = Config {
            cgroup_id: spec.cgroup_id,
            daemon_tgid: std::process::id(),
            exec_enforced: u32::from(spec.exec_enforced),
            off_file_dentry: kbtf.member_offset("file", "f_path")?
                + kbtf.member_offset("path", "dentry")?,
            off_dentry_parent: kbtf.member_offset("dentry", "d_parent")?,
            off_dentry_inode: kbtf.member_offset("dentry", "d_inode")?,
            off_inode_ino: kbtf.member_offset("inode", "i_ino")?,
            off_inode_sb: kbtf.member_offset("inode", "i_sb")?,
            off_sb_dev: kbtf.member_offset("super_block", "s_dev")?,
            off_sb_magic: kbtf.member_offset("super_block", "s_magic")?,
            off_file_mode: kbtf.member_offset("file", "f_mode")?,
            off_task_tgid: kbtf.member_offset("task_struct", "tgid")?,
            off_bprm_file: kbtf.member_offset("linux_binprm", "file")?,
        };
        let mut ebpf = EbpfLoader::new()
            .override_global("CONFIG", &cfg, true)
            .load(OBJECT)
            .map_err(|e| KernelError::Object(format!("{e:#}")))?;
        let cgroup = File::open(&spec.cgroup_dir).map_err(|source| KernelError::Cgroup {
            path: spec.cgroup_dir.display().to_string(),
            source,
        })?;
        fill_maps(
            &mut ebpf,
            &cgroup,
            &spec.protected_keys(),
            &spec.exec_keys(),
            &spec.egress,
        )?;

        let mut layer = KernelLayer {
            ebpf,
            status: Vec::new(),
        };
        for (hook, program, enforces, variants) in LSM_PROGRAMS {
            let res = kbtf
                .func_param_count(&format!("bpf_lsm_{hook}"))
                .map_err(|e| ("loaded", e.to_string()))
                .and_then(|n| {
                    variants.iter().find(|(count, _)| *count == n).map(|(_, name)| *name).ok_or((
                        "loaded",
                        format!("this kernel's {hook} hook has {n} parameters, a signature gatewayd does not know"),
                    ))
                })
                .and_then(|name| layer.attach_lsm(hook, name));
            layer.record(program, enforces, res, spec.require)?;
        }
        for (name, program, enforces) in SOCK_PROGRAMS {
            let res = layer.attach_sock(name, &cgroup);
            layer.record(program, enforces, res, spec.require)?;
        }
        Ok(layer)
    }

    fn record(
        &mut self,
        program: &'static str,
        enforces: &'static str,
        res: Result<(), (&'static str, String)>,
        require: bool,
    ) -> Result<(), KernelError> {
        if let (Err((stage, answer)), true) = (&res, require) {
            return Err(KernelError::Program {
                program,
                stage,
                answer: answer.clone(),
            });
        }
        self.status.push(PieceStatus {
            program,
            enforces,
            result: res.map_err(|(stage, answer)| format!("not {stage}: {answer}")),
        });
        Ok(())
    }

    fn attach_lsm(&mut self, hook: &str, name: &str) -> Result<(), (&'static str, String)> {
        let btf = Btf::from_sys_fs().map_err(|e| ("loaded", format!("kernel BTF: {e}")))?;
        let p: &mut Lsm = self
            .ebpf
            .program_mut(name)
            .ok_or(("found", "program missing from the object".to_string()))?
            .try_into()
            .map_err(|e| ("loaded", format!("{e}")))?;
        p.load(hook, &btf)
            .map_err(|e| ("loaded", program_error(e)))?;
        p.attach().map_err(|e| ("attached", program_error(e)))?;
        Ok(())
    }

    fn attach_sock(&mut self, name: &str, cgroup: &File) -> Result<(), (&'static str, String)> {
        let p: &mut CgroupSockAddr = self
            .ebpf
            .program_mut(name)
            .ok_or(("found", "program missing from the object".to_string()))?
            .try_into()
            .map_err(|e| ("loaded", format!("{e}")))?;
        p.load().map_err(|e| ("loaded", program_error(e)))?;
        // Single: no BPF_F_ALLOW_OVERRIDE, so the agent's sub-cgroups cannot replace it.
        p.attach(cgroup, CgroupAttachMode::Single)
            .map_err(|e| ("attached", program_error(e)))?;
        Ok(())
    }

    /// What each program did on this kernel.
    pub fn status(&self) -> &[PieceStatus] {
        &self.status
    }

    /// Whether `program` (e.g. `lsm/file_open`) is attached.
    pub fn attached(&self, program: &str) -> bool {
        self.status
            .iter()
            .any(|s| s.program == program && s.result.is_ok())
    }

    pub fn tier(&self) -> Tier {
        let sock = SOCK_PROGRAMS.iter().all(|(_, p, _)| self.attached(p));
        let lsm = LSM_PROGRAMS.iter().all(|(_, p, _, _)| self.attached(p));
        match (lsm, sock) {
            (true, true) => Tier::Full,
            (false, true) => Tier::CgroupOnly,
            _ => Tier::None,
        }
    }

    /// Turns all egress of the agent's cgroup off (the Rule of Two tripped) or back on.
    pub fn set_lockdown(&mut self, on: bool) -> Result<(), KernelError> {
        let mut state: Array<_, u32> =
            Array::try_from(self.ebpf.map_mut("STATE").ok_or(KernelError::Map {
                map: "STATE",
                answer: "missing".into(),
            })?)
            .map_err(map_err("STATE"))?;
        state
            .set(STATE_EGRESS_LOCKDOWN, u32::from(on), 0)
            .map_err(map_err("STATE"))
    }

    /// Events that did not fit in the ring buffer, summed over CPUs.
    pub fn dropped(&self) -> u64 {
        self.ebpf
            .map("DROPPED")
            .and_then(|m| PerCpuArray::<_, u64>::try_from(m).ok())
            .and_then(|a| a.get(&0, 0).ok())
            .map(|v| v.iter().sum())
            .unwrap_or(0)
    }

    /// Takes the ring buffer out, for the task that reads it.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>, KernelError> {
        let m = self.ebpf.take_map("EVENTS").ok_or(KernelError::Map {
            map: "EVENTS",
            answer: "missing".into(),
        })?;
        RingBuf::try_from(m).map_err(map_err("EVENTS"))
    }
}

/// aya's error plus the verifier log or errno it carries, on one line where possible.
fn program_error(e: aya::programs::ProgramError) -> String {
    let s = format!("{e:#}");
    if let aya::programs::ProgramError::LoadError {
        io_error,
        verifier_log,
    } = &e
    {
        let log = verifier_log.to_string();
        if log.trim().is_empty() {
            return format!(
                "{io_error} (empty verifier log: refused before verification, as kernels that do not permit this program type do)"
            );
        }
        return format!("{io_error}; verifier log:\n{log}");
    }
    s
}

fn fill_maps(
    ebpf: &mut Ebpf,
    cgroup: &File,
    protected: &[InodeKey],
    exec: &[InodeKey],
    egress: &[EgressRule],
) -> Result<(), KernelError> {
    let mut agent = CgroupArray::try_from(ebpf.map_mut("AGENT").ok_or(KernelError::Map {
        map: "AGENT",
        answer: "missing".into(),
    })?)
    .map_err(map_err("AGENT"))?;
    agent
        .set(0, std::os::fd::AsRawFd::as_raw_fd(cgroup), 0)
        .map_err(map_err("AGENT"))?;
    for (name, keys) in [("PROTECTED", protected), ("EXEC", exec)] {
        let mut map: HashMap<_, InodeKey, u32> =
            HashMap::try_from(ebpf.map_mut(name).ok_or(KernelError::Map {
                map: name,
                answer: "missing".into(),
            })?)
            .map_err(map_err(name))?;
        for key in keys {
            map.insert(key, 1, 0).map_err(map_err(name))?;
        }
    }
    let mut map: Array<_, EgressRule> =
        Array::try_from(ebpf.map_mut("EGRESS").ok_or(KernelError::Map {
            map: "EGRESS",
            answer: "missing".into(),
        })?)
        .map_err(map_err("EGRESS"))?;
    if egress.len() > map.len() as usize {
        return Err(KernelError::Map {
            map: "EGRESS",
            answer: format!("{} rules, the kernel map holds {}", egress.len(), map.len()),
        });
    }
    for (i, r) in egress.iter().enumerate() {
        map.set(i as u32, r, 0).map_err(map_err("EGRESS"))?;
    }
    Ok(())
}

/// Whether this binary carries its kernel programs.
pub fn has_object() -> bool {
    !OBJECT.is_empty()
}

/// For `doctor`: load the object into a throwaway cgroup-free configuration and report which
/// programs this kernel accepts (loaded, not attached, for the LSM one; attached to `cgroup`
/// for the sock_addr ones).
pub fn probe(cgroup_dir: &Path, cgroup_id: u64) -> Result<KernelLayer, KernelError> {
    let spec = KernelSpec {
        cgroup_dir: cgroup_dir.to_owned(),
        cgroup_id,
        protected: Vec::new(),
        exec: Vec::new(),
        exec_enforced: false,
        egress: Vec::new(),
        require: false,
    };
    KernelLayer::load(&spec)
}
