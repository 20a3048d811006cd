//! The members of a tar or zip archive that a command extracts ([`shell::Extraction`]),
//! read when the call is decided, so that what `tar -x` or `unzip` writes is checked member
//! by member instead of as its whole directory (which, at a workspace's root, holds the
//! read-only `.git/config`). A plain or gzip-compressed tar archive is read (GNU tar
//! recognises both by their first bytes when extracting), and a zip archive's central
//! directory; another compression, or an archive that is not there yet (`curl -LO … && tar
//! -xzf …`), is not, and the extraction then writes anything below its directory.
//! Names are taken as GNU tar takes them: a leading `/` dropped, `--strip-components`
//! applied; a member whose name holds `..` refuses the archive (GNU tar skips it).
use std::{
    fs::File,
    io::{BufReader, Read, Seek},
    path::{Component, Path, PathBuf},
};

use super::{
    Reason,
    sandbox::SandboxView,
    shellcheck::{check_output_path, check_paths, resolve},
};
use crate::{policy::PathAccess, shell::Extraction};

/// Members read, at most, before the extraction is refused.
const MAX_MEMBERS: usize = 100_000;

/// What one member makes below the extraction's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Made {
    /// A file, a directory or anything else but a link: the path itself.
    Entry,
    /// A symbolic link to this target, as the archive holds it: whatever is written
    /// through the link is written there.
    Symlink(PathBuf),
    /// A hard link to this member of the archive (its name as stripped).
    Hardlink(PathBuf),
}

/// One member: its path below the extraction's directory and what it makes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Member {
    pub(super) path: PathBuf,
    pub(super) made: Made,
}

/// The members of `x`'s archive (its paths already absolute): `Ok(None)` when the archive
/// is not there or is compressed in a way not read here; Err when it cannot be read, holds
/// a member named with `..`, or holds more than [`MAX_MEMBERS`].
pub(super) fn members(x: &Extraction) -> Result<Option<Vec<Member>>, String> {
    let Ok(file) = File::open(&x.archive) else {
        return Ok(None);
    };
    let mut file = BufReader::new(file);
    let mut head = Vec::with_capacity(512);
    let cannot_read = |e: std::io::Error| format!("cannot read `{}`: {e}", x.archive.display());
    file.by_ref()
        .take(512)
        .read_to_end(&mut head)
        .map_err(cannot_read)?;
    file.rewind().map_err(cannot_read)?;
    let read = if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        zip_members(file)
    } else if head.starts_with(&[0x1f, 0x8b]) {
        tar_members(flate2::read::GzDecoder::new(file))
    } else if head.get(257..262) == Some(b"ustar".as_slice()) {
        tar_members(file)
    } else {
        return Ok(None);
    };
    let named = |(name, made): (PathBuf, Made)| -> Result<Option<Member>, String> {
        let Some(path) = stripped(&name, x.strip_components)? else {
            return Ok(None);
        };
        let path = match (x.junk_paths, path.file_name()) {
            (true, Some(last)) => PathBuf::from(last),
            _ => path,
        };
        let made = match made {
            Made::Hardlink(target) => match stripped(&target, x.strip_components)? {
                Some(target) => Made::Hardlink(target),
                None => return Ok(None),
            },
            made => made,
        };
        Ok(Some(Member { path, made }))
    };
    read.and_then(|raw| {
        raw.into_iter()
            .filter_map(|m| named(m).transpose())
            .collect()
    })
    .map(Some)
    .map_err(|e| format!("`{}`: {e}", x.archive.display()))
}

/// Each archive extracted where the command runs (`cwd`), member by member ([`members`]):
/// each member's path a write of itself (as a program's output is), a link's target a
/// write (what is written through the link lands there). An archive not read (not there yet, or compressed in
/// another way) writes anything below its directory.
pub(super) fn check_extractions(
    sb: &SandboxView,
    name: &str,
    extractions: &[Extraction],
    cwd: &Path,
) -> Result<(), (Reason, String)> {
    for x in extractions {
        let x = &Extraction {
            archive: cwd.join(&x.archive),
            into: cwd.join(&x.into),
            strip_components: x.strip_components,
            junk_paths: x.junk_paths,
        };
        let read = members(x).map_err(|m| (Reason::Shell, format!("`{name}`: {m}")))?;
        let Some(members) = read else {
            let real = resolve(sb, &x.into)?;
            sb.check(&x.into.to_string_lossy(), &real, PathAccess::Write)
                .map_err(|m| {
                    let why = format!(
                        "`{name}`: `{}` is not there yet, or is neither a plain or gzip tar archive nor a zip archive, so its members are not known and it may write anything below `{}` (extract it in a call of its own once it is there, or into a directory of its own with `-C DIR`): {m}",
                        x.archive.display(),
                        x.into.display()
                    );
                    (Reason::Sandbox, why)
                })?;
            continue;
        };
        for m in &members {
            let dest = x.into.join(&m.path);
            check_output_path(sb, name, &dest)?;
            let target = match &m.made {
                Made::Entry => continue,
                Made::Symlink(t) => dest.parent().unwrap_or(&x.into).join(t),
                Made::Hardlink(t) => x.into.join(t),
            };
            check_paths(sb, name, &[target], PathAccess::Write)?;
        }
    }
    Ok(())
}

/// Each member of the tar stream `r`: its name as the archive holds it and what it makes.
fn tar_members(r: impl Read) -> Result<Vec<(PathBuf, Made)>, String> {
    let mut archive = tar::Archive::new(r);
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar archive the check can read: {e}"))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("not a tar archive the check can read: {e}"))?;
        if out.len() == MAX_MEMBERS {
            return Err(format!("more than {MAX_MEMBERS} members to check"));
        }
        let name = entry
            .path()
            .map_err(|e| format!("a member's name cannot be read: {e}"))?
            .into_owned();
        let link = || {
            entry
                .link_name()
                .ok()
                .flatten()
                .map(std::borrow::Cow::into_owned)
                .ok_or_else(|| format!("the link `{}` names no target", name.display()))
        };
        let made = match entry.header().entry_type() {
            tar::EntryType::Symlink => Made::Symlink(link()?),
            tar::EntryType::Link => Made::Hardlink(link()?),
            _ => Made::Entry,
        };
        out.push((name, made));
    }
    Ok(out)
}

/// Each member of the zip archive `file`, from its central directory: its name and what it
/// makes (a link's target is its content, read when stored uncompressed, as Info-ZIP's
/// `zip -y` stores it; a compressed one refuses the archive).
fn zip_members(file: BufReader<File>) -> Result<Vec<(PathBuf, Made)>, String> {
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|e| format!("not a zip archive the check can read: {e}"))?;
    if archive.len() > MAX_MEMBERS {
        return Err(format!("more than {MAX_MEMBERS} members to check"));
    }
    let mut out = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        let mut member = archive
            .by_index_raw(i)
            .map_err(|e| format!("not a zip archive the check can read: {e}"))?;
        let name = member
            .name()
            .map(|n| PathBuf::from(n.into_owned()))
            .map_err(|e| format!("a member's name cannot be read: {e}"))?;
        let is_link = member
            .unix_mode()
            .is_some_and(|m| m & 0o170_000 == 0o120_000);
        let made = if !is_link {
            Made::Entry
        } else if member.compression() == zip::CompressionMethod::Stored {
            let mut target = Vec::new();
            member
                .by_ref()
                .take(4096)
                .read_to_end(&mut target)
                .map_err(|e| format!("the link `{}` cannot be read: {e}", name.display()))?;
            Made::Symlink(PathBuf::from(String::from_utf8_lossy(&target).into_owned()))
        } else {
            return Err(format!(
                "the link `{}` is stored compressed, and its target is not read",
                name.display()
            ));
        };
        out.push((name, made));
    }
    Ok(out)
}

/// A member's name as GNU tar extracts it: without a leading `/` or `.`, less `strip`
/// leading components; `None` when nothing is left. Err for a name holding `..`.
fn stripped(name: &Path, strip: usize) -> Result<Option<PathBuf>, String> {
    let mut parts = Vec::new();
    for c in name.components() {
        match c {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                return Err(format!(
                    "the member `{}` is named with `..`, which would reach outside the directory",
                    name.display()
                ));
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok((parts.len() > strip).then(|| parts[strip..].iter().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar archive holding `members` (name, what it is), gzip-compressed with `gz`.
    fn archive(dir: &Path, gz: bool, members: &[(&str, Option<&str>, bool)]) -> PathBuf {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, link, hard) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(0);
            header.set_mode(0o644);
            if let Some(target) = link {
                let kind = if *hard {
                    tar::EntryType::Link
                } else {
                    tar::EntryType::Symlink
                };
                header.set_entry_type(kind);
                builder
                    .append_link(&mut header, name, target)
                    .expect("link");
                continue;
            }
            header.set_entry_type(tar::EntryType::Regular);
            // `append_data` refuses `..`; a raw name keeps what a hostile archive has.
            header.as_gnu_mut().expect("gnu").name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_cksum();
            builder.append(&header, &[][..]).expect("append");
        }
        let bytes = builder.into_inner().expect("tar");
        let path = dir.join(if gz { "a.tgz" } else { "a.tar" });
        let bytes = if gz {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut enc, &bytes).expect("gz");
            enc.finish().expect("gz")
        } else {
            bytes
        };
        std::fs::write(&path, bytes).expect("write");
        path
    }

    fn extraction(archive: PathBuf, strip_components: usize) -> Extraction {
        Extraction {
            archive,
            into: PathBuf::from("/ws"),
            strip_components,
            junk_paths: false,
        }
    }

    #[test]
    fn members_of_plain_and_gzip_archives_as_tar_extracts_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        for gz in [false, true] {
            let a = archive(
                dir.path(),
                gz,
                &[
                    ("app-1.0/bin/app", None, false),
                    ("/abs/x", None, false),
                    ("app-1.0/lib", Some("../../.git/hooks"), false),
                    ("app-1.0/same", Some("app-1.0/bin/app"), true),
                ],
            );
            let got = members(&extraction(a.clone(), 0))
                .expect("read")
                .expect("listed");
            let paths: Vec<&Path> = got.iter().map(|m| m.path.as_path()).collect();
            assert_eq!(
                paths,
                [
                    Path::new("app-1.0/bin/app"),
                    Path::new("abs/x"),
                    Path::new("app-1.0/lib"),
                    Path::new("app-1.0/same")
                ]
            );
            assert_eq!(got[2].made, Made::Symlink("../../.git/hooks".into()));
            assert_eq!(got[3].made, Made::Hardlink("app-1.0/bin/app".into()));
            let got = members(&extraction(a, 1)).expect("read").expect("listed");
            assert_eq!(got[0].path, Path::new("bin/app"));
            assert_eq!(got[1].path, Path::new("x"));
            assert_eq!(got[3].made, Made::Hardlink("bin/app".into()));
        }
    }

    #[test]
    fn members_of_a_zip_archive_from_its_central_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.zip");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&path).expect("create"));
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        w.add_directory("app/", stored).expect("dir");
        w.start_file("app/bin/x", stored).expect("file");
        w.add_symlink("app/hooks", "../.git/hooks", stored)
            .expect("link");
        w.finish().expect("zip");
        let got = members(&extraction(path.clone(), 0))
            .expect("read")
            .expect("listed");
        let paths: Vec<&Path> = got.iter().map(|m| m.path.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("app"),
                Path::new("app/bin/x"),
                Path::new("app/hooks")
            ]
        );
        assert_eq!(got[2].made, Made::Symlink("../.git/hooks".into()));
        let junked = Extraction {
            junk_paths: true,
            ..extraction(path, 0)
        };
        let got = members(&junked).expect("read").expect("listed");
        assert_eq!(got[1].path, Path::new("x"), "unzip -j");
    }

    #[test]
    fn what_is_not_read_and_what_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = extraction(dir.path().join("later.tgz"), 0);
        assert_eq!(members(&missing), Ok(None), "not there yet");
        let xz = dir.path().join("a.tar.xz");
        std::fs::write(&xz, b"\xfd7zXZ\x00 not read here").expect("write");
        assert_eq!(members(&extraction(xz, 0)), Ok(None), "another compression");
        let a = archive(
            dir.path(),
            false,
            &[("ok", None, false), ("a/../../x", None, false)],
        );
        let e = members(&extraction(a, 0)).expect_err("refused");
        assert!(e.contains("`..`"), "{e}");
        let junk = dir.path().join("junk.tgz");
        std::fs::write(&junk, b"\x1f\x8b\x08junk").expect("write");
        assert!(members(&extraction(junk, 0)).is_err(), "corrupt");
    }
}
