//! The programs that only record ([`super::Program::records_only`]: `raw_tp/sys_exit`) run
//! on every system call's exit of the host while attached: about 40 ns a call on the CI host,
//! for every process. So the set pins them loaded but not attached (`prog-OBJECT`), and they
//! are attached (`link-OBJECT` pinned) while the set has a live session: by the session that
//! finds them detached, under the set lock, and detached when the last session is removed.
use std::path::{Path, PathBuf};

use aya::programs::{RawTracePoint, links::FdLink};

use super::{
    KernelError,
    programs::{Attach, PROGRAMS},
};

/// Where the set in `dir` pins the loaded program `object`.
pub(crate) fn prog_path(dir: &Path, object: &str) -> PathBuf {
    dir.join(format!("prog-{object}"))
}

/// Where the set in `dir` pins the link of program `object` while it is attached.
pub(crate) fn link_path(dir: &Path, object: &str) -> PathBuf {
    dir.join(format!("link-{object}"))
}

/// (program name, object, tracepoint) of each recorder of the table.
fn recorders() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    PROGRAMS.iter().filter_map(|p| match p.attach {
        Attach::RawTracepoint { object, tracepoint } => Some((p.name, object, tracepoint)),
        _ => None,
    })
}

/// Attaches each recorder the set in `dir` holds loaded and that is not attached yet (under
/// the set lock). A recorder the set does not hold (it did not load here) is left out.
pub(crate) fn attach(dir: &Path) -> Result<(), KernelError> {
    for (name, object, tracepoint) in recorders() {
        let (prog, link) = (prog_path(dir, object), link_path(dir, object));
        if !prog.exists() || link.exists() {
            continue;
        }
        let attached = KernelError::attach_of(name);
        let mut p = RawTracePoint::from_pin(&prog).map_err(KernelError::load_of(name))?;
        let id = p.attach(tracepoint).map_err(attached)?;
        let fd_link: FdLink = p.take_link(id).map_err(attached)?.into();
        fd_link
            .pin(&link)
            .map_err(|source| KernelError::Pin { path: link, source })?;
    }
    Ok(())
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
