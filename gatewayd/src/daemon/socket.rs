//! The daemon's socket file: a stale one (left by a daemon that died) is replaced, a live
//! one is never taken over; the new one is mode 0660, owned by root and the operators' group.
use std::{
    io,
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::{Path, PathBuf},
};

/// Pending connections the kernel queues before `accept`.
pub const BACKLOG: u32 = 4096;

/// Why the socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// A daemon is answering on the path.
    #[error(
        "{0} is in use by a running daemon (a connection to it succeeded); stop it first or choose another --socket"
    )]
    InUse(PathBuf),
    /// The path exists and is not a socket.
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotSocket(PathBuf),
    /// A file operation on the socket path failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, e.g. `bind`.
        op: &'static str,
        /// The socket path.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The socket path could not be made for lack of rights.
    #[error(
        "{op} {path}: permission denied: the daemon's socket is made by root (the packaged service runs as root): run `gatewayd serve` as root, or name a socket in a directory you can write with --socket"
    )]
    NotAllowed {
        /// What was being done, e.g. `bind`.
        op: &'static str,
        /// The socket path.
        path: PathBuf,
    },
    /// The operators' group name is not in the group database.
    #[error("group `{0}` does not exist")]
    NoGroup(String),
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SocketError + 'a {
    move |source| {
        if source.kind() == io::ErrorKind::PermissionDenied {
            return SocketError::NotAllowed {
                op,
                path: path.to_owned(),
            };
        }
        SocketError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }
}

/// The gid of a group name, or of a number given as text.
pub fn group_id(name: &str) -> Result<u32, SocketError> {
    if let Ok(n) = name.parse() {
        return Ok(n);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => Err(SocketError::NoGroup(name.to_owned())),
    }
}

/// Removes `path` if it is a socket nobody listens on; refuses a live socket or a file of
/// another kind.
pub fn clear_stale(path: &Path) -> Result<(), SocketError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("stat", path)(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotSocket(path.to_owned()));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(SocketError::InUse(path.to_owned())),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path).map_err(io_err("remove the stale socket", path))
        }
        Err(e) => Err(io_err("probe", path)(e)),
    }
}

/// Binds the daemon's socket (replacing a stale one), mode 0660, group `gid`. Must run inside
/// a tokio runtime.
pub fn bind(path: &Path, gid: u32) -> Result<tokio::net::UnixListener, SocketError> {
    clear_stale(path)?;
    let sock = tokio::net::UnixSocket::new_stream().map_err(io_err("socket", path))?;
    sock.bind(path).map_err(io_err("bind", path))?;
    std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_err("chown", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(io_err("chmod", path))?;
    sock.listen(BACKLOG).map_err(io_err("listen", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_is_replaced_live_is_refused_other_files_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock");
        let l = bind(&p, 0).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        assert!(matches!(bind(&p, 0), Err(SocketError::InUse(_))));
        drop(l); // the file stays, nobody listens: stale
        assert!(p.exists());
        let _l = bind(&p, 0).unwrap();
        let f = dir.path().join("file");
        std::fs::write(&f, "keep").unwrap();
        assert!(matches!(bind(&f, 0), Err(SocketError::NotSocket(_))));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep");
    }
}
