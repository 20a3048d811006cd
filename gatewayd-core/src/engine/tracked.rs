//! The files git's index tracks, for a command run on what `git ls-files` lists
//! ([`crate::shell::line::Found::tracked_from`]): the repository git finds from where
//! `git ls-files` runs, read with gitoxide's reader of the index (`gix-index`). Only a
//! repository git sees as this module does is read; any other gives `None`, and the check
//! then counts every file below the roots, as for `find`.
use std::{
    collections::HashSet,
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
};

/// Entries of an index read, at most; a larger index is not read.
pub(super) const MAX_ENTRIES: usize = 100_000;

/// What git's index tracks: its work tree (canonical) and the paths of its entries,
/// relative to that work tree.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) work_tree: PathBuf,
    pub(super) paths: Vec<PathBuf>,
}

/// What git's index tracks below one directory, relative to it: the files, and the
/// directories they are in.
#[derive(Debug, Default)]
pub(super) struct Below {
    pub(super) files: HashSet<PathBuf>,
    pub(super) dirs: HashSet<PathBuf>,
}

impl Tracked {
    /// What the index tracks below `root`; `None` when `root` is not in the work tree (or
    /// cannot be resolved).
    pub(super) fn below(&self, root: &Path) -> Option<Below> {
        let real = std::fs::canonicalize(root).ok()?;
        let prefix = real.strip_prefix(&self.work_tree).ok()?;
        let mut below = Below::default();
        for path in &self.paths {
            let Ok(rel) = path.strip_prefix(prefix) else {
                continue;
            };
            for dir in rel.ancestors().skip(1) {
                if dir.as_os_str().is_empty() || !below.dirs.insert(dir.to_path_buf()) {
                    break;
                }
            }
            below.files.insert(rel.to_path_buf());
        }
        Some(below)
    }
}

/// The index of the repository git finds from `cwd`
/// ([`crate::shell::git_repo::work_tree`]); `None` where git could see another work tree,
/// or the index is sparse (it holds directories, not their files), of another hash than
/// SHA-1, larger than [`MAX_ENTRIES`] or cannot be read (a split index is read whole). A
/// repository without an index tracks nothing.
pub(super) fn tracked_files(cwd: &Path) -> Option<Tracked> {
    let work_tree = crate::shell::git_repo::work_tree(cwd)?;
    let git_dir = work_tree.join(".git");
    let index = git_dir.join("index");
    if matches!(std::fs::symlink_metadata(&index), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
    {
        return Some(Tracked {
            work_tree,
            paths: Vec::new(),
        });
    }
    let options = gix_index::decode::Options::default();
    let file = gix_index::File::at(&index, gix_index::hash::Kind::Sha1, false, options).ok()?;
    if file.is_sparse() || file.entries().len() > MAX_ENTRIES {
        return None;
    }
    let paths = file
        .entries()
        .iter()
        .map(|e| PathBuf::from(std::ffi::OsStr::from_bytes(e.path(&file))))
        .collect();
    Some(Tracked { work_tree, paths })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatewayd_testkit::git::git;

    #[test]
    fn the_index_of_the_repository_git_finds() {
        let d = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        git(&top, &["init", "-q"]);
        assert!(
            tracked_files(&top).unwrap().paths.is_empty(),
            "no index yet"
        );
        std::fs::create_dir(top.join("src")).unwrap();
        for f in ["src/a.rs", "README.md", ".env"] {
            std::fs::write(top.join(f), "x").unwrap();
        }
        git(&top, &["add", "src/a.rs", "README.md"]);
        let t = tracked_files(&top.join("src")).unwrap();
        assert_eq!(t.work_tree, top);
        assert_eq!(t.paths, [PathBuf::from("README.md"), "src/a.rs".into()]);
        // A split index is read whole (its shared part and its own).
        git(&top, &["update-index", "--split-index"]);
        std::fs::write(top.join("src/b.rs"), "x").unwrap();
        git(&top, &["add", "src/b.rs"]);
        assert_eq!(
            tracked_files(&top).unwrap().paths,
            [
                PathBuf::from("README.md"),
                "src/a.rs".into(),
                "src/b.rs".into()
            ]
        );
        // Where git could see another work tree, nothing is read.
        git(&top, &["config", "core.worktree", "/"]);
        assert!(tracked_files(&top).is_none());
    }
}
