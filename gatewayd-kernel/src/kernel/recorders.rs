//! The programs that only record ([`super::Program::records_only`]: `raw_tp/sys_exit`) run
//! on every system call's exit of the host while attached: some tens of ns a call on the CI
//! host, for every process. So the set pins them loaded but not attached (`prog-OBJECT`), and they
//! are attached (`link-OBJECT` pinned) while the set has a live session: by the session that
//! finds them detached, under the set lock, and detached when the last session is removed.
use std::path::Path;

use super::{
    KernelError,
    maps::{link_path, prog_path},
    programs::{Attach, PROGRAMS},
};

/// (program name, object, tracepoint) of each recorder of the table.
fn recorders() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    PROGRAMS.iter().filter_map(|p| match p.attach {
        Attach::RawTracepoint { object, tracepoint } => Some((p.name, object, tracepoint)),
        _ => None,
    })
}

/// Attaches each recorder the set in `dir` holds loaded and that is not attached yet (under
/// the set lock). A recorder the set does not hold (it did not load here) is left out.
/// Three `bpf()` calls ([`sys`]): aya's way in (`RawTracePoint::from_pin`) first probes the
/// kernel's features, a millisecond of every session start.
pub(crate) fn attach(dir: &Path) -> Result<(), KernelError> {
    for (name, object, tracepoint) in recorders() {
        let (prog, link) = (prog_path(dir, object), link_path(dir, object));
        if !prog.exists() || link.exists() {
            continue;
        }
        let failed = |op: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| KernelError::Recorder {
                program: name,
                op,
                path,
                source,
            }
        };
        let prog_fd = sys::obj_get(&prog).map_err(failed("open", &prog))?;
        let link_fd =
            sys::raw_tracepoint_open(tracepoint, &prog_fd).map_err(failed("attach", &prog))?;
        sys::obj_pin(&link_fd, &link).map_err(failed("pin", &link))?;
    }
    Ok(())
}

/// The three `bpf()` commands the recorders need, on their own.
mod sys {
    use std::{
        ffi::CString,
        io,
        os::{
            fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
            unix::ffi::OsStrExt as _,
        },
        path::Path,
    };

    const BPF_OBJ_PIN: libc::c_long = 6;
    const BPF_OBJ_GET: libc::c_long = 7;
    const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;

    /// `union bpf_attr` for `BPF_OBJ_PIN` and `BPF_OBJ_GET`.
    #[repr(C)]
    #[derive(Default)]
    struct ObjAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
        path_fd: i32,
        _pad: u32,
    }

    /// `union bpf_attr` for `BPF_RAW_TRACEPOINT_OPEN`.
    #[repr(C)]
    #[derive(Default)]
    struct RawTracepointAttr {
        name: u64,
        prog_fd: u32,
        _pad: u32,
        cookie: u64,
    }

    fn c_path(path: &Path) -> io::Result<CString> {
        CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
    }

    /// `bpf(cmd, attr, size_of(attr))`: the new descriptor for a command that makes one.
    fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
        // SAFETY: `attr` is a `repr(C)` prefix of `union bpf_attr` for `cmd`, valid for
        // reads and writes of its size, which is the size passed; the kernel reads no more,
        // and the pointers inside it point at live, NUL-terminated strings of the caller.
        let r =
            unsafe { libc::syscall(libc::SYS_bpf, cmd, std::ptr::from_mut(attr), size_of::<T>()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
        let fd = i32::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The object pinned at `path`.
    pub(super) fn obj_get(path: &Path) -> io::Result<OwnedFd> {
        let name = c_path(path)?;
        let mut attr = ObjAttr {
            pathname: name.as_ptr() as u64,
            ..ObjAttr::default()
        };
        owned(bpf(BPF_OBJ_GET, &mut attr)?)
    }

    /// Pins `fd` at `path`.
    pub(super) fn obj_pin(fd: &OwnedFd, path: &Path) -> io::Result<()> {
        let name = c_path(path)?;
        let mut attr = ObjAttr {
            pathname: name.as_ptr() as u64,
            bpf_fd: fd.as_raw_fd() as u32,
            ..ObjAttr::default()
        };
        bpf(BPF_OBJ_PIN, &mut attr).map(|_| ())
    }

    /// Attaches the raw tracepoint program `prog` to `tracepoint`: its link.
    pub(super) fn raw_tracepoint_open(tracepoint: &str, prog: &OwnedFd) -> io::Result<OwnedFd> {
        let name =
            CString::new(tracepoint).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut attr = RawTracepointAttr {
            name: name.as_ptr() as u64,
            prog_fd: prog.as_raw_fd() as u32,
            ..RawTracepointAttr::default()
        };
        owned(bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr)?)
    }
}

/// Detaches every recorder of the set in `dir` (its link unpinned; nothing else holds it).
pub(crate) fn detach(dir: &Path) -> Result<(), KernelError> {
    for (_, object, _) in recorders() {
        let link = link_path(dir, object);
        match std::fs::remove_file(&link) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(KernelError::Pins {
                    op: "unpin",
                    path: link,
                    source: e,
                });
            }
            _ => {}
        }
    }
    Ok(())
}
