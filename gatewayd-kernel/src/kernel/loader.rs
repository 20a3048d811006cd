//! Loading gatewayd's eBPF object and attaching every program of [`PROGRAMS`]: BPF LSM
//! programs to their hooks (globally), cgroup programs to gatewayd's parent cgroup. This is
//! the slow step (the kernel's BTF is read and parsed, every program verified) that the
//! pinned program set does once per host ([`super::set`]); `doctor` does it once more, unpinned.
use std::{fs::File, os::fd::AsRawFd as _};

use aya::{
    Ebpf, EbpfLoader,
    maps::CgroupArray,
    programs::{
        CgroupAttachMode, CgroupSkb, CgroupSkbAttachType, CgroupSockAddr, Lsm, RawTracePoint,
        links::{FdLink, LinkError},
    },
};
use gateway_common::Config;

use super::{
    KernelError, OBJECT, PieceStatus, btf,
    maps::{map_err, map_mut},
    programs::{Attach, PROGRAMS, Program},
};

/// What to do with the links of attached programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// Leave them with the programs: everything detaches when the [`Loaded`] is dropped.
    Owned,
    /// Take them out (into [`Loaded::links`]) to be pinned.
    Taken,
}

/// A loaded object, every program tried.
pub(crate) struct Loaded {
    /// The loaded object, with its maps and the programs that loaded.
    pub ebpf: Ebpf,
    /// One entry per program of [`PROGRAMS`], in order.
    pub status: Vec<PieceStatus>,
    /// With [`Links::Taken`]: (program name in the object, its link), one per attached program.
    pub links: Vec<(&'static str, FdLink)>,
    /// With [`Links::Taken`]: the programs loaded but left unattached, to be pinned
    /// (the recorders: `super::recorders`).
    pub unattached: Vec<&'static str>,
}

/// Loads the object for the parent cgroup `parent` (an open directory with cgroup id
/// `parent_id`) and tries every program; a program that does not load or attach is recorded
/// in the status, not an error.
pub(crate) fn load(parent: &File, parent_id: u64, links: Links) -> Result<Loaded, KernelError> {
    if OBJECT.is_empty() {
        return Err(KernelError::Stub);
    }
    let kbtf = btf::KernelBtf::from_sys_fs()?;
    let cfg = Config {
        parent_cgroup_id: parent_id,
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
        off_task_cgroups: kbtf.member_offset("task_struct", "cgroups")?,
        off_css_set_dfl_cgrp: kbtf.member_offset("css_set", "dfl_cgrp")?,
        off_dentry_name: kbtf.member_offset("dentry", "d_name")?
            + kbtf.member_offset("qstr", "name")?,
        off_bprm_file: kbtf.member_offset("linux_binprm", "file")?,
        off_inode_mode: kbtf.member_offset("inode", "i_mode")?,
        off_dentry_flags: kbtf.member_offset("dentry", "d_flags")?,
        off_inode_nlink: kbtf.member_offset("inode", "i_nlink")?,
        off_vma_file: kbtf.member_offset("vm_area_struct", "vm_file")?,
        off_sock_cgroup: kbtf.member_offset("sock", "sk_cgrp_data")?
            + kbtf.member_offset("sock_cgroup_data", "cgroup")?,
        off_sock_peer_pid: kbtf.member_offset("sock", "sk_peer_pid")?,
        off_socket_sk: kbtf.member_offset("socket", "sk")?,
        off_cgroup_level: kbtf.member_offset("cgroup", "level")?,
        off_cgroup_ancestors: kbtf.member_offset("cgroup", "ancestors")?,
        off_cgroup_kn: kbtf.member_offset("cgroup", "kn")?,
        off_kn_id: kbtf.member_offset("kernfs_node", "id")?,
        off_pid_nr: kbtf.member_offset("pid", "numbers")? + kbtf.member_offset("upid", "nr")?,
        off_unix_dentry: kbtf.member_offset("unix_sock", "path")?
            + kbtf.member_offset("path", "dentry")?,
        off_unix_addr: kbtf.member_offset("unix_sock", "addr")?,
        off_unix_addr_len: kbtf.member_offset("unix_address", "len")?,
        off_unix_addr_path: kbtf.member_offset("unix_address", "name")?
            + kbtf.member_offset("sockaddr_un", "sun_path")?,
        off_file_flags: kbtf.member_offset("file", "f_flags")?,
        off_file_inode: kbtf.member_offset("file", "f_inode")?,
    };
    // One aya parse of the same bytes, shared by the object load and every BPF LSM
    // program (aya 0.14's `EbpfLoader::new` still parses the file once more itself).
    let aya_btf = kbtf.to_aya()?;
    let mut ebpf = EbpfLoader::new()
        .btf(Some(&aya_btf))
        .override_global("CONFIG", &cfg, true)
        .load(OBJECT)
        .map_err(KernelError::Object)?;
    let mut array =
        CgroupArray::try_from(map_mut(&mut ebpf, "PARENT")?).map_err(map_err("PARENT"))?;
    array
        .set(0, parent.as_raw_fd(), 0)
        .map_err(map_err("PARENT"))?;

    let mut loaded = Loaded {
        ebpf,
        status: Vec::new(),
        links: Vec::new(),
        unattached: Vec::new(),
    };
    for program in &PROGRAMS {
        let result = match program.attach {
            Attach::Lsm { hook, by_params } => {
                loaded.attach_lsm(program, hook, by_params, &kbtf, &aya_btf, links)
            }
            Attach::SockAddr { object } | Attach::SkbIngress { object } => {
                loaded.attach_cgroup(program, object, parent, links)
            }
            Attach::RawTracepoint { object, tracepoint } => {
                loaded.attach_raw_tracepoint(program, object, tracepoint, links)
            }
        };
        loaded.status.push(PieceStatus { program, result });
    }
    Ok(loaded)
}

impl Loaded {
    /// The object's program `object` (of table entry `name`), as its kind.
    pub(crate) fn program<T>(
        &mut self,
        name: &'static str,
        object: &'static str,
    ) -> Result<&mut T, KernelError>
    where
        for<'p> &'p mut T:
            TryFrom<&'p mut aya::programs::Program, Error = aya::programs::ProgramError>,
    {
        self.ebpf
            .program_mut(object)
            .ok_or(KernelError::ProgramMissing {
                program: name,
                object,
            })?
            .try_into()
            .map_err(KernelError::load_of(name))
    }

    fn attach_lsm(
        &mut self,
        program: &'static Program,
        hook: &'static str,
        by_params: &[(u32, &'static str)],
        kbtf: &btf::KernelBtf,
        aya_btf: &aya::Btf,
        links: Links,
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
        let (load, attach) = (KernelError::load_of(name), KernelError::attach_of(name));
        let p: &mut Lsm = self.program(name, object)?;
        p.load(hook, aya_btf).map_err(load)?;
        let id = p.attach().map_err(attach)?;
        if links == Links::Taken {
            let link = p.take_link(id).map_err(attach)?;
            self.links.push((object, link.into()));
        }
        Ok(())
    }

    /// A raw tracepoint program, attached globally (`x86_64` only: it reads that
    /// architecture's system call registers); with [`Links::Taken`] only loaded, for the set
    /// to pin and attach on demand.
    fn attach_raw_tracepoint(
        &mut self,
        program: &'static Program,
        object: &'static str,
        tracepoint: &'static str,
        links: Links,
    ) -> Result<(), KernelError> {
        let name = program.name;
        if !cfg!(target_arch = "x86_64") {
            return Err(KernelError::NotThisArchitecture { program: name });
        }
        let (load, attach) = (KernelError::load_of(name), KernelError::attach_of(name));
        let p: &mut RawTracePoint = self.program(name, object)?;
        p.load().map_err(load)?;
        if links == Links::Taken {
            // Pinned loaded, attached while the set has a session (`recorders`).
            self.unattached.push(object);
            return Ok(());
        }
        p.attach(tracepoint).map_err(attach)?;
        Ok(())
    }

    /// A cgroup program, attached to the parent cgroup. Single: no `BPF_F_ALLOW_OVERRIDE`,
    /// so no cgroup below the parent can replace it.
    fn attach_cgroup(
        &mut self,
        program: &'static Program,
        object: &'static str,
        parent: &File,
        links: Links,
    ) -> Result<(), KernelError> {
        let name = program.name;
        let (load, attach) = (KernelError::load_of(name), KernelError::attach_of(name));
        let p = self
            .ebpf
            .program_mut(object)
            .ok_or(KernelError::ProgramMissing {
                program: name,
                object,
            })?;
        let link: Result<FdLink, LinkError> = if let Attach::SkbIngress { .. } = program.attach {
            let p: &mut CgroupSkb = p.try_into().map_err(load)?;
            p.load().map_err(load)?;
            let id = p
                .attach(
                    parent,
                    CgroupSkbAttachType::Ingress,
                    CgroupAttachMode::Single,
                )
                .map_err(attach)?;
            if links == Links::Owned {
                return Ok(());
            }
            p.take_link(id).map_err(attach)?.try_into()
        } else {
            let p: &mut CgroupSockAddr = p.try_into().map_err(load)?;
            p.load().map_err(load)?;
            let id = p.attach(parent, CgroupAttachMode::Single).map_err(attach)?;
            if links == Links::Owned {
                return Ok(());
            }
            p.take_link(id).map_err(attach)?.try_into()
        };
        let link = link.map_err(|source| KernelError::LinkNotPinnable {
            program: name,
            source,
        })?;
        self.links.push((object, link));
        Ok(())
    }
}
