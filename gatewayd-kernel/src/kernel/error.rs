//! Why the kernel layer failed, one variant per failure a caller can act on. aya's errors
//! stay attached as sources, so the kernel's own answer (errno, verifier log) is never lost:
//! print the whole chain with [`chain`].
use std::path::PathBuf;

use aya::{
    maps::MapError,
    pin::PinError,
    programs::{ProgramError, links::LinkError},
};

use super::btf::BtfError;

/// Why the kernel layer could not be set up or driven.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The binary was built with `GATEWAYD_EBPF_STUB=1` and carries no programs.
    #[error("this gatewayd was built without its kernel programs (GATEWAYD_EBPF_STUB=1)")]
    Stub,
    /// The kernel's BTF could not be read or lacks an offset the programs need.
    #[error(transparent)]
    Btf(#[from] BtfError),
    /// aya could not load the embedded eBPF object.
    #[error("loading the eBPF object failed")]
    Object(#[source] aya::EbpfError),
    /// A program's object name is not in the eBPF object (a build mismatch).
    #[error("kernel program {program}: `{object}` is not in the eBPF object")]
    ProgramMissing {
        /// The program's name, e.g. `lsm/file_open`.
        program: &'static str,
        /// The object (function) name looked for.
        object: &'static str,
    },
    /// A recorder (a program that only records) could not be attached from its pin.
    #[error("kernel program {program}: cannot {op} {path}")]
    Recorder {
        /// The program's name, e.g. `raw_tp/sys_exit`.
        program: &'static str,
        /// What failed: `open` the program's pin, `attach` it, `pin` its link.
        op: &'static str,
        /// The pin.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// A program that reads one architecture's registers, on another.
    #[error(
        "kernel program {program}: it reads x86_64's system call registers; not attached on this architecture"
    )]
    NotThisArchitecture {
        /// The program's name, e.g. `raw_tp/sys_exit`.
        program: &'static str,
    },
    /// The LSM hook a program attaches to is not in the kernel's BTF.
    #[error("kernel program {program}: its hook is not in the kernel's BTF")]
    HookNotInBtf {
        /// The program's name.
        program: &'static str,
        /// The BTF lookup's error.
        #[source]
        source: BtfError,
    },
    /// The running kernel's hook has a parameter count no program variant is built for.
    #[error(
        "kernel program {program}: this kernel's `{hook}` hook has {params} parameters, a signature gatewayd does not know"
    )]
    UnknownSignature {
        /// The program's name.
        program: &'static str,
        /// The LSM hook.
        hook: &'static str,
        /// Its parameter count in this kernel.
        params: u32,
    },
    /// The kernel refused to load a program (verifier log in the source).
    #[error(
        "kernel program {program} could not be loaded{}",
        empty_log_note(source)
    )]
    Load {
        /// The program's name.
        program: &'static str,
        /// aya's error, with the verifier log.
        #[source]
        source: ProgramError,
    },
    /// A loaded program could not be attached.
    #[error("kernel program {program} could not be attached")]
    Attach {
        /// The program's name.
        program: &'static str,
        /// aya's error.
        #[source]
        source: ProgramError,
    },
    /// A map is not in the eBPF object (a build mismatch).
    #[error("map {map} is not in the eBPF object")]
    MapMissing {
        /// The map's name.
        map: &'static str,
    },
    /// Reading or writing a map failed.
    #[error("map {map}")]
    Map {
        /// The map's name.
        map: &'static str,
        /// aya's error.
        #[source]
        source: MapError,
    },
    /// A map has no room left for an insert (`E2BIG`, or no free session slot).
    #[error(
        "the kernel map {map} is full: all live sessions together may have at most {capacity} entries in it (docs/KERNEL.md, \"Limits\")"
    )]
    MapFull {
        /// The map's name.
        map: &'static str,
        /// Its stated capacity, shared by all live sessions.
        capacity: u32,
    },
    /// The policy asks for more entries of a kind than one session may have.
    #[error(
        "the policy has {count} {what}; one session may have at most {limit} (docs/KERNEL.md, \"Limits\")"
    )]
    TooMany {
        /// The kind of entry, e.g. `protected paths`.
        what: &'static str,
        /// How many the policy has.
        count: usize,
        /// The per-session limit.
        limit: u32,
    },
    /// The pinned program set records that a program failed at a stage.
    #[error("kernel program {program} is not {stage} in the host's program set: {answer}")]
    NotInSet {
        /// The program's name.
        program: &'static str,
        /// The stage it failed at: `found`, `loaded` or `attached`.
        stage: &'static str,
        /// The kernel's answer, as recorded in the set's `status` map.
        answer: String,
    },
    /// The policy requires the kernel programs (`kernel: "require"`) and one is not attached.
    #[error(
        "kernel program {program}, which the policy requires (kernel: \"require\"), is {answer}"
    )]
    Required {
        /// The program's name.
        program: &'static str,
        /// Its state, e.g. `not loaded: <the kernel's answer>`.
        answer: String,
    },
    /// An attached program's link is not an `FdLink`, so it cannot be pinned.
    #[error("kernel program {program}: its link cannot be pinned")]
    LinkNotPinnable {
        /// The program's name.
        program: &'static str,
        /// aya's error.
        #[source]
        source: LinkError,
    },
    /// Pinning a map or link in bpffs failed.
    #[error("cannot pin {}", path.display())]
    Pin {
        /// The pin's path in bpffs.
        path: PathBuf,
        /// aya's error.
        #[source]
        source: PinError,
    },
    /// bpffs is not mounted at `/sys/fs/bpf` and could not be mounted.
    #[error("cannot mount bpffs at /sys/fs/bpf, where the program set is pinned")]
    NoBpffs(#[source] std::io::Error),
    /// A file operation on the program set's pins (or its lock) failed.
    #[error("program set pins: {op} {}", path.display())]
    Pins {
        /// The operation, e.g. `mkdir`, `rename`, `flock`.
        op: &'static str,
        /// The path it was done on.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A pinned program set is not whole or not made for the current parent cgroup.
    #[error("the program set in {} cannot be adopted: {what}", dir.display())]
    SetIncomplete {
        /// The set's directory in bpffs.
        dir: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A session's cgroup does not lie below gatewayd's parent cgroup.
    #[error("the session cgroup {} is not under gatewayd's parent cgroup {}", cgroup.display(), parent.display())]
    NotUnderParent {
        /// The session's cgroup.
        cgroup: PathBuf,
        /// gatewayd's parent cgroup.
        parent: PathBuf,
    },
    /// A session's cgroup is nested deeper below another session's than the programs follow.
    #[error("the session cgroup {} is nested more than {max} levels below another session's", cgroup.display())]
    NestedTooDeep {
        /// The session's cgroup.
        cgroup: PathBuf,
        /// The most levels of nesting allowed.
        max: u32,
    },
    /// A nested session's cgroup has no live session in the top cgroup that encloses it.
    #[error("the session cgroup {} is not inside a live session's cgroup", cgroup.display())]
    NoEnclosingSession {
        /// The session's cgroup.
        cgroup: PathBuf,
    },
    /// gatewayd's parent cgroup could not be found.
    #[error(transparent)]
    ParentCgroup(#[from] crate::cgroup::CgroupError),
    /// A cgroup directory could not be opened or read.
    #[error("cannot open cgroup {}", path.display())]
    Cgroup {
        /// The cgroup directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `EVENTS` ring buffer could not be registered with the async runtime.
    #[error("cannot watch the EVENTS ring buffer")]
    EventsPoll(#[source] std::io::Error),
    /// The task owning the kernel layer has ended (see [`task`](super::task)).
    #[error("the kernel task has stopped")]
    TaskStopped,
}

impl KernelError {
    /// For `map_err`: program `program` could not be loaded.
    pub(crate) fn load_of(program: &'static str) -> impl Fn(ProgramError) -> KernelError + Copy {
        move |source| KernelError::Load { program, source }
    }

    /// For `map_err`: program `program` could not be attached.
    pub(crate) fn attach_of(program: &'static str) -> impl Fn(ProgramError) -> KernelError + Copy {
        move |source| KernelError::Attach { program, source }
    }

    /// For a program that did not make it: the step it failed at (`found`, `loaded`,
    /// `attached`), as the `session_start` record and `doctor` show it.
    pub fn stage(&self) -> &'static str {
        match self {
            KernelError::ProgramMissing { .. } => "found",
            KernelError::Attach { .. } | KernelError::LinkNotPinnable { .. } => "attached",
            KernelError::NotInSet { stage, .. } => stage,
            _ => "loaded",
        }
    }

    /// The kernel's answer for a program that did not make it: the errno and verifier log
    /// of a refused load (one line when the log is empty), else the chain of causes.
    pub fn answer(&self) -> String {
        match self {
            KernelError::Load {
                source:
                    ProgramError::LoadError {
                        io_error,
                        verifier_log,
                    },
                ..
            } => {
                let log = verifier_log.to_string();
                if log.trim().is_empty() {
                    format!("{io_error}{EMPTY_LOG_NOTE}")
                } else {
                    format!("{io_error}; verifier log:\n{log}")
                }
            }
            KernelError::Load { source, .. } | KernelError::Attach { source, .. } => chain(source),
            KernelError::HookNotInBtf { source, .. } => chain(source),
            KernelError::NotInSet { answer, .. } => answer.clone(),
            other => chain(other),
        }
    }
}

const EMPTY_LOG_NOTE: &str = " (empty verifier log: refused before verification, as kernels that do not permit this program type do)";

/// A note for a load the kernel refused without a verifier log: that is how kernels answer
/// a program type they do not permit (BPF LSM on this project's CI host), not a verifier
/// rejection.
fn empty_log_note(e: &ProgramError) -> &'static str {
    match e {
        ProgramError::LoadError { verifier_log, .. }
            if verifier_log.to_string().trim().is_empty() =>
        {
            EMPTY_LOG_NOTE
        }
        _ => "",
    }
}

/// An error and every source under it, joined with `: ` (what `{:#}` prints for anyhow).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_keeps_the_kernels_answer() {
        let e = KernelError::Cgroup {
            path: "/sys/fs/cgroup/x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        let text = chain(&e);
        assert!(
            text.starts_with("cannot open cgroup /sys/fs/cgroup/x: "),
            "{text}"
        );
        assert!(text.contains("No such file or directory"), "{text}");
    }

    #[test]
    fn an_empty_verifier_log_is_explained_and_the_errno_kept() {
        let e = KernelError::Load {
            program: "lsm/file_open",
            source: ProgramError::LoadError {
                io_error: std::io::Error::from_raw_os_error(libc::EPERM),
                verifier_log: aya_obj::VerifierLog::new(String::new()),
            },
        };
        let text = chain(&e);
        assert!(text.contains("lsm/file_open"), "{text}");
        assert!(text.contains("empty verifier log"), "{text}");
        assert!(text.contains("Operation not permitted"), "{text}");
        assert_eq!(e.stage(), "loaded");
        assert_eq!(
            e.answer(),
            format!("Operation not permitted (os error 1){EMPTY_LOG_NOTE}")
        );
    }
}
