//! A small reader for the running kernel's BTF (`/sys/kernel/btf/vmlinux`): just enough to
//! find struct member offsets and hook signatures. Rust eBPF has no CO-RE field relocations,
//! so the programs get these offsets as load-time constants instead. The file is read once
//! per start; [`KernelBtf::to_aya`] hands the same bytes to aya for loading the programs.
use std::path::Path;

/// Why an offset could not be found. Every read of the blob is bounds-checked.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// The BTF file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The blob is not well-formed little-endian BTF; says what is wrong.
    #[error("kernel BTF is malformed: {0}")]
    Malformed(&'static str),
    /// The struct (first) lacks the member (second), or the struct is absent.
    #[error("struct {0} has no member {1} in the kernel's BTF")]
    NoMember(String, String),
    /// No function of this name.
    #[error("function {0} is not in the kernel's BTF")]
    NoFunction(String),
    /// aya's own parser refused the blob.
    #[error("aya cannot parse the kernel's BTF")]
    Aya(#[source] aya::BtfError),
}

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_ENUM64: u32 = 19;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_FUNC: u32 = 12;

/// Parsed type index over a raw BTF blob.
pub struct KernelBtf {
    data: Vec<u8>,
    str_off: usize,
    /// Type id -> byte position of its `struct btf_type`; id 0 (void) has no entry.
    pos: Vec<usize>,
}

impl KernelBtf {
    /// Reads the running kernel's BTF.
    pub fn from_sys_fs() -> Result<Self, BtfError> {
        Self::from_file(Path::new("/sys/kernel/btf/vmlinux"))
    }

    /// Reads BTF from a file (e.g. a saved `vmlinux` BTF).
    pub fn from_file(path: &Path) -> Result<Self, BtfError> {
        let data = std::fs::read(path).map_err(|source| BtfError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(data)
    }

    fn u32_at(data: &[u8], o: usize) -> Result<u32, BtfError> {
        data.get(o..o + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or(BtfError::Malformed("read past the end"))
    }

    /// Indexes a raw BTF blob; refuses one that is not little-endian BTF or is cut short.
    pub fn parse(data: Vec<u8>) -> Result<Self, BtfError> {
        if data.len() < 24 || data[0..2] != [0x9f, 0xeb] {
            return Err(BtfError::Malformed("bad magic (not little-endian BTF)"));
        }
        let hdr_len = Self::u32_at(&data, 4)? as usize;
        let type_off = hdr_len + Self::u32_at(&data, 8)? as usize;
        let type_len = Self::u32_at(&data, 12)? as usize;
        let str_off = hdr_len + Self::u32_at(&data, 16)? as usize;
        let mut pos = vec![0];
        let mut p = type_off;
        while p < type_off + type_len {
            pos.push(p);
            let info = Self::u32_at(&data, p + 4)?;
            let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
            p += 12
                + match kind {
                    1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
                    3 => 12,                      // ARRAY
                    4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
                    6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
                    _ => 0,                       // PTR, FWD, TYPEDEF, CV, FUNC, FLOAT, TYPE_TAG
                };
        }
        Ok(KernelBtf { data, str_off, pos })
    }

    fn u32(&self, o: usize) -> Result<u32, BtfError> {
        Self::u32_at(&self.data, o)
    }

    fn name(&self, off: u32) -> &[u8] {
        let s = self.data.get(self.str_off + off as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    }

    fn kind(&self, id: usize) -> Result<u32, BtfError> {
        let p = *self.pos.get(id).ok_or(BtfError::Malformed("bad type id"))?;
        Ok((self.u32(p + 4)? >> 24) & 0x1f)
    }

    fn find_member(
        &self,
        id: usize,
        member: &str,
        base: u64,
        depth: u32,
    ) -> Result<Option<u64>, BtfError> {
        if depth > 8 {
            return Ok(None);
        }
        let p = *self.pos.get(id).ok_or(BtfError::Malformed("bad type id"))?;
        let info = self.u32(p + 4)?;
        let (kflag, vlen) = (info >> 31 == 1, (info & 0xffff) as usize);
        for i in 0..vlen {
            let m = p + 12 + 12 * i;
            let (mname, mtype, moff) = (self.u32(m)?, self.u32(m + 4)? as usize, self.u32(m + 8)?);
            let byte = base + u64::from(if kflag { moff & 0xff_ffff } else { moff }) / 8;
            if self.name(mname) == member.as_bytes() {
                return Ok(Some(byte));
            }
            // An anonymous struct/union member: its fields belong to the outer struct.
            if mname == 0
                && matches!(self.kind(mtype)?, KIND_STRUCT | KIND_UNION)
                && let Some(o) = self.find_member(mtype, member, byte, depth + 1)?
            {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// Number of parameters of the kernel function `name` (e.g. `bpf_lsm_bpf`).
    pub fn func_param_count(&self, name: &str) -> Result<u32, BtfError> {
        for id in 1..self.pos.len() {
            let p = self.pos[id];
            if self.kind(id)? != KIND_FUNC || self.name(self.u32(p)?) != name.as_bytes() {
                continue;
            }
            let proto = self.u32(p + 8)? as usize;
            if self.kind(proto)? != KIND_FUNC_PROTO {
                return Err(BtfError::Malformed("FUNC does not point at a FUNC_PROTO"));
            }
            let info = self.u32(self.pos[proto] + 4)?;
            return Ok(info & 0xffff);
        }
        Err(BtfError::NoFunction(name.into()))
    }

    /// The same BTF parsed by aya, for loading BPF LSM programs (which attach by BTF id).
    pub fn to_aya(&self) -> Result<aya::Btf, BtfError> {
        aya::Btf::parse(&self.data, aya::Endianness::default()).map_err(BtfError::Aya)
    }

    /// The value of enumerator `value` of `enum <name>` (e.g. `bpf_attach_type`,
    /// `BPF_CGROUP_UNIX_CONNECT`), or `None` when this kernel's enum has no such
    /// enumerator: what `doctor` probes kernel features with.
    pub fn enum_value(&self, name: &str, value: &str) -> Result<Option<i64>, BtfError> {
        for id in 1..self.pos.len() {
            let p = self.pos[id];
            let kind = self.kind(id)?;
            if !matches!(kind, KIND_ENUM | KIND_ENUM64)
                || self.name(self.u32(p)?) != name.as_bytes()
            {
                continue;
            }
            let vlen = (self.u32(p + 4)? & 0xffff) as usize;
            let size = if kind == KIND_ENUM { 8 } else { 12 };
            for i in 0..vlen {
                let e = p + 12 + size * i;
                if self.name(self.u32(e)?) != value.as_bytes() {
                    continue;
                }
                let lo = self.u32(e + 4)?;
                return Ok(Some(if kind == KIND_ENUM {
                    i64::from(lo as i32)
                } else {
                    i64::from(lo) | (i64::from(self.u32(e + 8)?) << 32)
                }));
            }
            // Another enum of this name may follow (a forward declaration has no values).
        }
        Ok(None)
    }

    /// `offsetof(struct <name>, <member>)`, looking through anonymous members.
    pub fn member_offset(&self, name: &str, member: &str) -> Result<u64, BtfError> {
        for id in 1..self.pos.len() {
            if self.kind(id)? != KIND_STRUCT
                || self.name(self.u32(self.pos[id])?) != name.as_bytes()
            {
                continue;
            }
            if let Some(o) = self.find_member(id, member, 0, 0)? {
                return Ok(o);
            }
        }
        Err(BtfError::NoMember(name.into(), member.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_garbage() {
        assert!(KernelBtf::parse(vec![0; 10]).is_err());
        assert!(
            KernelBtf::parse(vec![
                0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ])
            .is_err()
        );
    }

    /// Runs against the real kernel's BTF where there is one (every kernel this project
    /// supports has it; the privileged tests need it anyway).
    #[test]
    fn finds_offsets_in_running_kernel() {
        let Ok(btf) = KernelBtf::from_sys_fs() else {
            panic!("/sys/kernel/btf/vmlinux is required (CONFIG_DEBUG_INFO_BTF)");
        };
        let f_path = btf.member_offset("file", "f_path").unwrap();
        let dentry = btf.member_offset("path", "dentry").unwrap();
        assert_eq!(
            dentry, 8,
            "struct path is {{ vfsmount *mnt; dentry *dentry; }}"
        );
        assert!(f_path > 0);
        assert!(btf.member_offset("inode", "i_ino").is_ok());
        assert!(btf.member_offset("file", "no_such_member").is_err());
        // What the Unix socket programs read (kernel/loader.rs).
        for (s, m) in [
            ("sock", "sk_cgrp_data"),
            ("sock_cgroup_data", "cgroup"),
            ("sock", "sk_peer_pid"),
            ("socket", "sk"),
            ("cgroup", "level"),
            ("cgroup", "ancestors"),
            ("cgroup", "kn"),
            ("kernfs_node", "id"),
            ("pid", "numbers"),
            ("upid", "nr"),
            ("unix_sock", "path"),
            ("unix_sock", "addr"),
            ("unix_address", "len"),
            ("unix_address", "name"),
        ] {
            assert!(btf.member_offset(s, m).is_ok(), "struct {s} has no {m}");
        }
        assert_eq!(btf.member_offset("sockaddr_un", "sun_path").unwrap(), 2);
        assert_eq!(btf.member_offset("unix_sock", "sk").unwrap(), 0);
        assert_eq!(btf.func_param_count("bpf_lsm_file_open").unwrap(), 1);
        assert_eq!(btf.func_param_count("bpf_lsm_task_kill").unwrap(), 4);
        assert_eq!(
            btf.func_param_count("bpf_lsm_unix_stream_connect").unwrap(),
            3
        );
        assert_eq!(btf.func_param_count("bpf_lsm_unix_may_send").unwrap(), 2);
        assert!(matches!(
            btf.func_param_count("no_such_function"),
            Err(BtfError::NoFunction(_))
        ));
        // enum bpf_attach_type has been in every BTF kernel; BPF_CGROUP_INET4_CONNECT is 10.
        assert_eq!(
            btf.enum_value("bpf_attach_type", "BPF_CGROUP_INET4_CONNECT")
                .unwrap(),
            Some(10)
        );
        assert_eq!(
            btf.enum_value("bpf_attach_type", "NO_SUCH_VALUE").unwrap(),
            None
        );
        assert_eq!(btf.enum_value("no_such_enum", "X").unwrap(), None);
        let aya = btf.to_aya().unwrap();
        assert!(
            aya.id_by_type_name_kind("bpf_lsm_file_open", aya_obj::btf::BtfKind::Func)
                .is_ok()
        );
    }
}
