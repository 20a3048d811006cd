//! Tier 2 learn mode, in the agent's init ([`crate::fs_learn`]): every mount of the agent's
//! mount namespace but `/proc`, `/sys` and `/dev` is marked for the learn group's events,
//! once the namespace is set up (the hiding mounts, the private `/tmp`, the read-only
//! binds). The mounts are read from the init's own `/proc/self/mountinfo` (its namespace's
//! procfs is mounted by then) into a buffer mapped for the purpose: between fork and exec
//! nothing may allocate.
use std::os::fd::RawFd;

/// The most of `mountinfo` read (4 MiB: some 30,000 mounts); mounts beyond are not marked.
const MOUNTINFO_MAX: usize = 4 << 20;

/// The learn group's descriptor (inherited across the fork), when the session learns.
#[derive(Debug, Clone, Copy, Default)]
pub struct LearnMarks {
    fd: Option<RawFd>,
}

impl LearnMarks {
    /// Marks on the group `fd`.
    pub fn new(fd: RawFd) -> LearnMarks {
        LearnMarks { fd: Some(fd) }
    }

    /// In the forked init, after every mount of its namespace is made: marks each, and
    /// closes the init's copy of the group. An error when `/` could not be marked (then
    /// nothing would be learned); another mount that cannot be marked (one under a hidden
    /// path) is left. Only async-signal-safe syscalls.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        let Some(fd) = self.fd else {
            return Ok(());
        };
        let text = Mapped::read(c"/proc/self/mountinfo")?;
        let mut root_marked = false;
        let mut path = [0u8; libc::PATH_MAX as usize + 1];
        for line in text.bytes().split(|&b| b == b'\n') {
            let Some(field) = line.split(|&b| b == b' ').nth(4) else {
                continue;
            };
            let Some(len) = unescape(field, &mut path) else {
                continue;
            };
            if kernel_fs(&path[..len]) {
                continue;
            }
            // SAFETY: `path` is NUL-terminated by `unescape`; `fd` is the group's descriptor.
            let rc = unsafe {
                libc::fanotify_mark(
                    fd,
                    libc::FAN_MARK_ADD | libc::FAN_MARK_MOUNT,
                    crate::fs_learn::MASK,
                    libc::AT_FDCWD,
                    path.as_ptr().cast(),
                )
            };
            root_marked |= rc == 0 && &path[..len] == b"/";
        }
        drop(text);
        // SAFETY: closing the init's own copy; gatewayd's stays open.
        unsafe { libc::close(fd) };
        if !root_marked {
            return Err(std::io::Error::other("learn mode: `/` could not be marked"));
        }
        Ok(())
    }
}

/// `/proc`, `/sys`, `/dev` and what lies below them.
fn kernel_fs(path: &[u8]) -> bool {
    [&b"/proc"[..], b"/sys", b"/dev"]
        .iter()
        .any(|k| path.starts_with(k) && matches!(path.get(k.len()), None | Some(b'/')))
}

/// A mountinfo field with its octal escapes (`\040`) undone into `out`, NUL-terminated; its
/// length, or `None` when it does not fit.
fn unescape(field: &[u8], out: &mut [u8]) -> Option<usize> {
    let (mut i, mut n) = (0, 0);
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).and_then(|d| {
            d.iter()
                .all(|c| (b'0'..=b'7').contains(c))
                .then(|| d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0')))
        });
        let (byte, step) = match (field[i], octal) {
            (b'\\', Some(c)) => (u8::try_from(c).ok()?, 4),
            (c, _) => (c, 1),
        };
        *out.get_mut(n)? = byte;
        n += 1;
        i += step;
    }
    *out.get_mut(n)? = 0;
    Some(n)
}

/// A file's contents in an anonymous mapping of [`MOUNTINFO_MAX`] bytes, unmapped on drop.
struct Mapped {
    base: *mut u8,
    len: usize,
}

impl Mapped {
    fn read(path: &std::ffi::CStr) -> std::io::Result<Mapped> {
        // SAFETY: an anonymous private mapping, no address hint.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MOUNTINFO_MAX,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mut m = Mapped {
            base: base.cast(),
            len: 0,
        };
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        while m.len < MOUNTINFO_MAX {
            // SAFETY: the destination lies inside the mapping, `MOUNTINFO_MAX - len` long.
            let got = unsafe { libc::read(fd, m.base.add(m.len).cast(), MOUNTINFO_MAX - m.len) };
            if got <= 0 {
                break;
            }
            m.len += got as usize;
        }
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        Ok(m)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the mapping were written by `read`.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `read`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), MOUNTINFO_MAX) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped_and_the_kernel_fs_left_out() {
        let mut out = [0u8; 32];
        let n = unescape(br"/tmp/with\040space", &mut out).unwrap();
        assert_eq!(&out[..=n], b"/tmp/with space\0");
        assert_eq!(
            unescape(b"/a-rather-long-path-for-this", &mut [0u8; 8]),
            None
        );
        assert!(kernel_fs(b"/proc") && kernel_fs(b"/dev/shm") && kernel_fs(b"/sys/fs/cgroup"));
        assert!(!kernel_fs(b"/") && !kernel_fs(b"/devel") && !kernel_fs(b"/process"));
    }

    #[test]
    fn this_process_mountinfo_is_read_whole() {
        let m = Mapped::read(c"/proc/self/mountinfo").unwrap();
        let text = std::fs::read("/proc/self/mountinfo").unwrap();
        assert_eq!(m.bytes(), &text[..]);
    }
}
