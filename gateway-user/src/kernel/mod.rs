//! The kernel layer: loads gatewayd's eBPF object, fills its maps from the policy, attaches
//! the programs to the agent's cgroup, and turns kernel denials into audit entries.
//!
//! - [`programs`] — the one table of kernel programs (attach, events, messages, docs)
//! - [`btf`]      — struct member offsets and hook signatures from the running kernel's BTF
//! - [`spec`]     — what to enforce, derived from the policy (protected inodes, egress rules)
//! - [`events`]   — ring-buffer events to audit entries
//! - [`task`]     — the one task that owns the `Ebpf` handle; others send it [`task::Command`]s
//! - [`tier`]     — the enforcement tier reached, decided in one place
//! - [`error`]    — [`KernelError`], with aya's errors as sources
pub mod btf;
pub mod error;
pub mod events;
pub mod programs;
pub mod spec;
pub mod task;
pub mod tier;

use std::{fs::File, path::Path};

use aya::{
    Ebpf, EbpfLoader, include_bytes_aligned,
    maps::{Array, CgroupArray, HashMap, Map, MapData, PerCpuArray, RingBuf},
    programs::{CgroupAttachMode, CgroupSockAddr, Lsm},
};
use gateway_common::{Config, EgressRule, InodeKey, STATE_EGRESS_LOCKDOWN};
use programs::Attach;

pub use error::{KernelError, chain};
pub use programs::{PROGRAMS, Program};
pub use spec::KernelSpec;
pub use tier::Tier;

/// The eBPF object built by `build.rs` (empty when built with `GATEWAYD_EBPF_STUB=1`).
static OBJECT: &[u8] = include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gateway"));

/// One program of [`PROGRAMS`] and whether this kernel took it.
#[derive(Debug)]
pub struct PieceStatus {
    /// The program tried.
    pub program: &'static Program,
    /// `Ok` when loaded and attached; otherwise why not, with the kernel's answer.
    pub result: Result<(), KernelError>,
}

impl PieceStatus {
    /// `attached`, or `not <stage>: <why>` (the `session_start` record, `doctor`).
    pub fn state(&self) -> String {
        match &self.result {
            Ok(()) => "attached".into(),
            Err(e) => format!("not {}: {}", e.stage(), e.answer()),
        }
    }
}

/// Loaded and attached programs. Dropping it detaches everything (nothing is pinned), which
/// is why the agent is killed before gatewayd lets go of it.
pub struct KernelLayer {
    ebpf: Ebpf,
    status: Vec<PieceStatus>,
}

fn map_mut<'a>(ebpf: &'a mut Ebpf, map: &'static str) -> Result<&'a mut Map, KernelError> {
    ebpf.map_mut(map).ok_or(KernelError::MapMissing { map })
}

fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> KernelError {
    move |source| KernelError::Map { map, source }
}

impl KernelLayer {
    /// Loads the object with `spec`'s configuration, fills the maps and tries every program
    /// of [`PROGRAMS`]. With `spec.require`, the first program that cannot load or attach is
    /// the error; otherwise failures are recorded in [`KernelLayer::status`].
    pub fn load(spec: &KernelSpec) -> Result<KernelLayer, KernelError> {
        if OBJECT.is_empty() {
            return Err(KernelError::Stub);
        }
        let kbtf = btf::KernelBtf::from_sys_fs()?;
        let cfg = Config {
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
        // One aya parse of the same bytes, shared by the object load and every BPF LSM
        // program (aya 0.14's `EbpfLoader::new` still parses the file once more itself).
        let aya_btf = kbtf.to_aya()?;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&aya_btf))
            .override_global("CONFIG", &cfg, true)
            .load(OBJECT)
            .map_err(KernelError::Object)?;
        let cgroup = File::open(&spec.cgroup_dir).map_err(|source| KernelError::Cgroup {
            path: spec.cgroup_dir.clone(),
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
        for program in &PROGRAMS {
            let result = match program.attach {
                Attach::Lsm { hook, by_params } => {
                    layer.attach_lsm(program, hook, by_params, &kbtf, &aya_btf)
                }
                Attach::SockAddr { object } => layer.attach_sock(program, object, &cgroup),
            };
            match result {
                Err(e) if spec.require => return Err(e),
                result => layer.status.push(PieceStatus { program, result }),
            }
        }
        Ok(layer)
    }

    fn attach_lsm(
        &mut self,
        program: &'static Program,
        hook: &'static str,
        by_params: &[(u32, &'static str)],
        kbtf: &btf::KernelBtf,
        aya_btf: &aya::Btf,
    ) -> Result<(), KernelError> {
        let name = program.name;
        let params = kbtf
            .func_param_count(&format!("bpf_lsm_{hook}"))
            .map_err(|source| KernelError::HookNotInBtf {
                program: name,
                source,
            })?;
        let object = by_params
            .iter()
            .find(|(n, _)| *n == params)
            .map(|(_, object)| *object)
            .ok_or(KernelError::UnknownSignature {
                program: name,
                hook,
                params,
            })?;
        let load = |source| KernelError::Load {
            program: name,
            source,
        };
        let p: &mut Lsm = self
            .ebpf
            .program_mut(object)
            .ok_or(KernelError::ProgramMissing {
                program: name,
                object,
            })?
            .try_into()
            .map_err(load)?;
        p.load(hook, aya_btf).map_err(load)?;
        p.attach().map_err(|source| KernelError::Attach {
            program: name,
            source,
        })?;
        Ok(())
    }

    fn attach_sock(
        &mut self,
        program: &'static Program,
        object: &'static str,
        cgroup: &File,
    ) -> Result<(), KernelError> {
        let name = program.name;
        let load = |source| KernelError::Load {
            program: name,
            source,
        };
        let p: &mut CgroupSockAddr = self
            .ebpf
            .program_mut(object)
            .ok_or(KernelError::ProgramMissing {
                program: name,
                object,
            })?
            .try_into()
            .map_err(load)?;
        p.load().map_err(load)?;
        // Single: no BPF_F_ALLOW_OVERRIDE, so the agent's sub-cgroups cannot replace it.
        p.attach(cgroup, CgroupAttachMode::Single)
            .map_err(|source| KernelError::Attach {
                program: name,
                source,
            })?;
        Ok(())
    }

    /// What each program did on this kernel, in [`PROGRAMS`] order.
    pub fn status(&self) -> &[PieceStatus] {
        &self.status
    }

    /// Turns all egress of the agent's cgroup off (the Rule of Two tripped) or back on.
    pub fn set_lockdown(&mut self, on: bool) -> Result<(), KernelError> {
        let mut state: Array<_, u32> =
            Array::try_from(map_mut(&mut self.ebpf, "STATE")?).map_err(map_err("STATE"))?;
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
            .map_or(0, |v| v.iter().sum())
    }

    /// Takes the ring buffer out, for the task that reads it.
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>, KernelError> {
        let m = self
            .ebpf
            .take_map("EVENTS")
            .ok_or(KernelError::MapMissing { map: "EVENTS" })?;
        RingBuf::try_from(m).map_err(map_err("EVENTS"))
    }
}

fn fill_maps(
    ebpf: &mut Ebpf,
    cgroup: &File,
    protected: &[InodeKey],
    exec: &[InodeKey],
    egress: &[EgressRule],
) -> Result<(), KernelError> {
    let mut agent = CgroupArray::try_from(map_mut(ebpf, "AGENT")?).map_err(map_err("AGENT"))?;
    agent
        .set(0, std::os::fd::AsRawFd::as_raw_fd(cgroup), 0)
        .map_err(map_err("AGENT"))?;
    for (name, keys) in [("PROTECTED", protected), ("EXEC", exec)] {
        let mut map: HashMap<_, InodeKey, u32> =
            HashMap::try_from(map_mut(ebpf, name)?).map_err(map_err(name))?;
        for key in keys {
            map.insert(key, 1, 0).map_err(map_err(name))?;
        }
    }
    let mut map: Array<_, EgressRule> =
        Array::try_from(map_mut(ebpf, "EGRESS")?).map_err(map_err("EGRESS"))?;
    if egress.len() > map.len() as usize {
        return Err(KernelError::TooManyEgressRules {
            rules: egress.len(),
            capacity: map.len(),
        });
    }
    for (i, r) in egress.iter().enumerate() {
        map.set(i as u32, r, 0).map_err(map_err("EGRESS"))?;
    }
    Ok(())
}

/// For `doctor`: load the object with an empty policy and report which programs this kernel
/// accepts (each loaded and attached to the throwaway cgroup `cgroup_dir`, or the reason not).
pub fn probe(cgroup_dir: &Path) -> Result<KernelLayer, KernelError> {
    let spec = KernelSpec {
        cgroup_dir: cgroup_dir.to_owned(),
        protected: Vec::new(),
        exec: Vec::new(),
        exec_enforced: false,
        egress: Vec::new(),
        require: false,
    };
    KernelLayer::load(&spec)
}
