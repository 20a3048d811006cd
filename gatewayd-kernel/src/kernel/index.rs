//! The index of a session's protected trees: every file and directory under its protected
//! directories, by kernel identity, listed at session start. With it, the file programs
//! decide with one lookup of the opened inode (`PROTECTED`, under the session) instead of a
//! walk up its dentry parents, and a file under a protected directory is protected under any
//! name, also a hard link made before the session from outside the directory.
//!
//! Each directory is entered in the host-wide `TREE` map (by `on_dir`) *before* it is
//! listed: from then on the kernel marks whatever comes into it (`lsm/d_instantiate`,
//! `lsm/inode_rename`), so nothing made while the index is built is missed.
use std::{
    collections::HashSet,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use gateway_common::InodeKey;

use super::spec::kernel_dev;

/// Why a session's trees are not indexed (its file checks then walk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotIndexed {
    /// The trees hold more inodes than one session may index.
    TooLarge {
        /// The per-session limit ([`gateway_common::MAX_INDEXED`]).
        limit: usize,
    },
    /// A directory could not be listed.
    Unreadable {
        /// The directory.
        path: PathBuf,
        /// What listing it said.
        message: String,
    },
    /// `TREE` is full: `on_dir` refused a directory, or a protected inode found no room.
    Refused,
    /// `PROTECTED` had no room for the index.
    MapFull,
}

impl std::fmt::Display for NotIndexed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotIndexed::TooLarge { limit } => {
                write!(f, "the protected directories hold more than {limit} inodes")
            }
            NotIndexed::Unreadable { path, message } => {
                write!(f, "{} could not be listed: {message}", path.display())
            }
            NotIndexed::Refused => f.write_str("the kernel map TREE is full"),
            NotIndexed::MapFull => f.write_str("the kernel map PROTECTED has no room for it"),
        }
    }
}

fn key(md: &std::fs::Metadata) -> InodeKey {
    InodeKey {
        dev: kernel_dev(md.dev()),
        ino: md.ino(),
    }
}

/// Every inode under the directories among `roots` (the roots included; a root that is not
/// a directory is left out: the caller protects it on its own), each with the inode number
/// of the root it was found under (for the audit record), on the root's filesystem
/// only (a mount point inside a protected directory is not entered, as the dentry walk stops
/// at its filesystem's root). Symbolic links inside are not followed. `on_dir` is called with
/// each directory before it is listed; an `Err` from it stops the index.
pub(crate) fn index_trees(
    roots: &[&Path],
    limit: usize,
    mut on_dir: impl FnMut(InodeKey) -> Result<(), ()>,
) -> Result<Vec<(InodeKey, u64)>, NotIndexed> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for root in roots {
        let Ok(md) = std::fs::metadata(root) else {
            continue;
        };
        if !md.is_dir() {
            continue;
        }
        let dev = md.dev();
        let top = md.ino();
        let mut stack = vec![(root.to_path_buf(), key(&md))];
        while let Some((dir, dir_key)) = stack.pop() {
            if !seen.insert(dir_key) {
                continue;
            }
            out.push((dir_key, top));
            on_dir(dir_key).map_err(|()| NotIndexed::Refused)?;
            let unreadable = |e: std::io::Error| NotIndexed::Unreadable {
                path: dir.clone(),
                message: e.to_string(),
            };
            for entry in std::fs::read_dir(&dir).map_err(unreadable)? {
                let entry = entry.map_err(unreadable)?;
                let path = entry.path();
                let md = std::fs::symlink_metadata(&path).map_err(unreadable)?;
                if md.dev() != dev {
                    continue;
                }
                if md.is_dir() {
                    stack.push((path, key(&md)));
                } else if seen.insert(key(&md)) {
                    out.push((key(&md), top));
                }
                if seen.len() + stack.len() > limit {
                    return Err(NotIndexed::TooLarge { limit });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn ino(p: &Path) -> u64 {
        std::fs::symlink_metadata(p).unwrap().ino()
    }

    #[test]
    fn every_inode_under_a_protected_directory_is_indexed_each_directory_announced_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p");
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::write(p.join("a/b/f"), "x").unwrap();
        std::fs::write(p.join("g"), "x").unwrap();
        std::os::unix::fs::symlink("/etc", p.join("l")).unwrap();
        let lone = dir.path().join("lone");
        std::fs::write(&lone, "x").unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "x").unwrap();
        let mut dirs = Vec::new();
        let got = index_trees(&[&p, &lone], 100, |k| {
            dirs.push(k.ino);
            Ok(())
        })
        .unwrap();
        assert!(got.iter().all(|(_, root)| *root == ino(&p)), "{got:?}");
        let got: BTreeSet<u64> = got.iter().map(|(k, _)| k.ino).collect();
        let want: BTreeSet<u64> = ["", "a", "a/b", "a/b/f", "g", "l"]
            .iter()
            .map(|r| ino(&p.join(r)))
            .collect();
        assert_eq!(
            got, want,
            "the tree, the link itself (not /etc), no lone file"
        );
        assert_eq!(
            dirs,
            vec![ino(&p), ino(&p.join("a")), ino(&p.join("a/b"))],
            "each directory is announced (before it is listed)"
        );
        assert!(!got.contains(&ino(&outside)));
    }

    #[test]
    fn a_tree_over_the_limit_or_a_refused_directory_is_not_indexed() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(i.to_string()), "x").unwrap();
        }
        assert_eq!(
            index_trees(&[dir.path()], 4, |_| Ok(())),
            Err(NotIndexed::TooLarge { limit: 4 })
        );
        assert_eq!(index_trees(&[dir.path()], 6, |_| Ok(())).unwrap().len(), 6);
        assert_eq!(
            index_trees(&[dir.path()], 6, |_| Err(())),
            Err(NotIndexed::Refused)
        );
    }
}
